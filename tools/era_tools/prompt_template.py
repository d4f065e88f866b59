"""The conversation templates era's bundles can name (manifest `prompt.template`), and how the
exporter picks one for a checkpoint.

The C++ side (src/text/prompt.h) formats every template; this module only knows the names, their
default system text, the special tokens each needs, and the choice:

  vicuna_v1         LLaVA conv_vicuna_v1: all LLaVA-1.5 and llava-v1.6-vicuna evaluation; the
                    llava-hf chat templates of those checkpoints give the same text
  mistral_instruct  LLaVA conv_mistral_instruct ("[INST] {user} [/INST]"): llava-v1.6-mistral's
                    evaluation; llava-v1.6-mistral-7b-hf's chat template gives the same text
  chatml_direct     LLaVA conv_chatml_direct (system "Answer the questions.", no newline after
                    <|im_end|>): llava-v1.6-34b's evaluation, the paper's numbers
  chatml            the llava-hf 34b chat template (no system unless given, "\\n" after every
                    <|im_end|>): what a user of transformers' apply_chat_template gets
  qwen_1_5          LLaVA conv_qwen_1_5: chatml with the system "You are a helpful assistant.";
                    LLaVA-OneVision / LLaVA-Video evaluation (lmms-eval)

Default ("auto"): the LLaVA evaluation template of the checkpoint's family, found from its chat
template text (or, without one, from text_config.model_type / the ChatML tokens in its
vocabulary). `--template chatml` reproduces transformers' chat-template prompts for a 34B.
tests/python/references/prompt_reference.py builds prompts with the same constants.
"""

VICUNA_V1_SYSTEM = ("A chat between a curious user and an artificial intelligence assistant. "
                    "The assistant gives helpful, detailed, and polite answers to the user's questions.")
CHATML_DIRECT_SYSTEM = "Answer the questions."
QWEN_SYSTEM = "You are a helpful assistant."
IMAGE_PLACEHOLDER = "<image>"
IM_START, IM_END = "<|im_start|>", "<|im_end|>"

# name -> (default system text, tokens that must be single ids, the token an answer ends with
# besides eos or None)
TEMPLATES = {
    "vicuna_v1": (VICUNA_V1_SYSTEM, (), None),
    "mistral_instruct": ("", (), None),
    "chatml_direct": (CHATML_DIRECT_SYSTEM, (IM_START, IM_END), IM_END),
    "chatml": ("", (IM_START, IM_END), IM_END),
    "qwen_1_5": (QWEN_SYSTEM, (IM_START, IM_END), IM_END),
}


class TemplateError(ValueError):
    """The checkpoint cannot be prompted with the requested template (message names why)."""


def family_of_chat_template(text):
    """'chatml' | 'mistral' | 'vicuna' | None from a chat template's text."""
    if not text:
        return None
    if IM_START in text:
        return "chatml"
    if "[INST]" in text:
        return "mistral"
    if "USER" in text or "ASSISTANT" in text:
        return "vicuna"
    return None


# The chat-template family a text model's checkpoints use when they carry no chat template and
# no ChatML tokens (text_config.model_type -> family; the rest are vicuna).
FAMILY_OF_TEXT_MODEL = {"mistral": "mistral"}


def default_template(chat_template, text_model_type, special_tokens):
    """The LLaVA evaluation template for a checkpoint whose family has none of its own (the
    families' DEFAULT_TEMPLATE: LLaVA-OneVision / LLaVA-Video are evaluated with LLaVA's
    conv_qwen_1_5, Qwen2.5-VL with its ChatML). special_tokens: the pieces that are one id each
    (added tokens and SentencePiece pieces)."""
    family = family_of_chat_template(chat_template)
    if family is None:
        if IM_START in special_tokens:
            family = "chatml"
        else:
            family = FAMILY_OF_TEXT_MODEL.get(text_model_type, "vicuna")
    return {"chatml": "chatml_direct", "mistral": "mistral_instruct", "vicuna": "vicuna_v1"}[family]


def prompt_section(name):
    """The manifest's "prompt" object for template `name`."""
    if name not in TEMPLATES:
        raise TemplateError(f"unknown template {name!r} (one of {', '.join(TEMPLATES)})")
    section = {"template": name, "system": TEMPLATES[name][0], "image_placeholder": IMAGE_PLACEHOLDER}
    if name == "vicuna_v1":
        section.update({"user_role": "USER", "assistant_role": "ASSISTANT", "sep": " "})
    return section
