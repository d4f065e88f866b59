"""Reference prompt building and tokenisation, as original LLaVA's evaluation does it.

vicuna_v1 template (separator style TWO) and `tokenizer_image_token`: split the prompt on
"<image>", encode every chunk with SentencePiece (dummy prefix on, BOS on each chunk), keep the
first BOS only, and put the image placeholder id between chunks.
"""
import sentencepiece as spm

from era_tools.prompt_template import IMAGE_PLACEHOLDER, VICUNA_V1_SYSTEM  # noqa: F401 (re-exported)


def vicuna_v1_prompt(question, system=VICUNA_V1_SYSTEM, with_image=True):
    """'{system} USER: <image>\\n{question} ASSISTANT:' (the image goes first in the user turn)."""
    user = (IMAGE_PLACEHOLDER + "\n" + question) if with_image and IMAGE_PLACEHOLDER not in question else question
    return f"{system} USER: {user} ASSISTANT:"


def tokenizer_image_token(sp, prompt, image_token_id, bos_id=1):
    chunks = [[bos_id] + sp.encode(c) for c in prompt.split(IMAGE_PLACEHOLDER)]
    out = [bos_id]
    for i, ids in enumerate(chunks):
        if i > 0:
            out.append(image_token_id)
        out.extend(ids[1:])
    return out


def load_sp(path):
    return spm.SentencePieceProcessor(model_file=str(path))
