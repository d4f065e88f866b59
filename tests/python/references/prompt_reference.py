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


# ---- multi-turn conversations: LLaVA's conversation.py get_prompt, per separator style ----------
# (role, message) pairs with message None for the turn the model answers next. Written from LLaVA's
# algorithm (roles, seps, lstrip) rather than from era's C++ layout, so the two can disagree.
def llava_conversation_prompt(style, system, messages):
    if style == "vicuna_v1":  # SeparatorStyle.TWO, roles USER / ASSISTANT, sep " ", sep2 "</s>"
        seps = [" ", "</s>"]
        ret = system + seps[0]
        for i, (role, message) in enumerate(messages):
            ret += (role + ": " + message + seps[i % 2]) if message else (role + ":")
        return ret
    if style == "mistral_instruct":  # SeparatorStyle.LLAMA_2, sep "<s>", sep2 "</s>"
        def wrap_sys(msg):
            return f"<<SYS>>\n{msg}\n<</SYS>>\n\n" if len(msg) > 0 else msg

        ret = ""
        for i, (role, message) in enumerate(messages):
            if message:
                if i == 0:
                    message = wrap_sys(system) + message
                if i % 2 == 0:
                    ret += "<s>" + f"[INST] {message} [/INST]"
                else:
                    ret += " " + message + " " + "</s>"
        return ret.lstrip("<s>")
    if style == "chatml_direct":  # SeparatorStyle.MPT, sep "<|im_end|>"
        ret = "<|im_start|>system\n" + system + "<|im_end|>"
        for role, message in messages:
            ret += (role + message + "<|im_end|>") if message else role
        return ret
    if style == "chatml":  # the llava-hf 34b chat template with add_generation_prompt
        ret = f"<|im_start|>system\n{system}<|im_end|>\n" if system else ""
        for role, message in messages:
            if message:
                ret += role + message + "<|im_end|>\n"
        return ret + "<|im_start|>assistant\n"
    raise ValueError(style)


CONVERSATION_ROLES = {"vicuna_v1": ("USER", "ASSISTANT"), "mistral_instruct": ("user", "assistant"),
                      "chatml_direct": ("<|im_start|>user\n", "<|im_start|>assistant\n"),
                      "chatml": ("<|im_start|>user\n", "<|im_start|>assistant\n")}


def tokenizer_image_token_with_specials(sp, prompt, image_token_id, specials):
    """tokenizer_image_token where `specials` ({text: id}, e.g. "</s>" -> EOS) are single ids, as
    HF's slow LLaMA tokenizer splits special tokens out of the text before SentencePiece."""
    out = [sp.bos_id()]
    pieces = [prompt]
    for text in specials:  # split on each special in turn, keeping it as its own element
        split = []
        for p in pieces:
            if isinstance(p, int):
                split.append(p)
                continue
            parts = p.split(text)
            for k, part in enumerate(parts):
                if k:
                    split.append(specials[text])
                split.append(part)
        pieces = split
    for p in pieces:
        if isinstance(p, int):
            out.append(p)
        elif p:
            out.extend(tokenizer_image_token(sp, p, image_token_id, sp.bos_id())[1:])
    return out
