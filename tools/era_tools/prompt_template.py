"""The vicuna_v1 conversation template's constants, as original LLaVA's evaluation uses them.

export_llava writes them into the bundle manifest ("prompt": system text, image placeholder); the
test-side prompt reference (tests/python/references/prompt_reference.py) builds prompts and token
ids with the same constants.
"""

VICUNA_V1_SYSTEM = ("A chat between a curious user and an artificial intelligence assistant. "
                    "The assistant gives helpful, detailed, and polite answers to the user's questions.")
IMAGE_PLACEHOLDER = "<image>"
