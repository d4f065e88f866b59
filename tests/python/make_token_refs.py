"""Fixture: token ids from Python sentencepiece for a prompt corpus (the reference for tests/text).

Every prompt goes through references.prompt_reference (LLaVA's tokenizer_image_token with the
vicuna_v1 template); decode cases record what sentencepiece's own decode gives.
"""
import argparse
import json

from references import prompt_reference as pr

IMAGE_TOKEN_ID = 1000

# Raw prompts (already containing their placeholders): spaces and newlines around <image>,
# unicode, digits, repeated and leading/trailing whitespace, several images, no image.
RAW_PROMPTS = [
    "USER: <image>\nWhat is shown in this image? ASSISTANT:",
    "<image>\nDescribe the picture.",
    "<image>",
    "Text before <image> text after",
    "Text before<image>text after",
    "  two leading spaces <image>  two trailing spaces  ",
    "<image>\n\n\nMany newlines\n\n",
    "First <image> second <image>\nCompare the two images.",
    "<image><image> adjacent placeholders",
    "No image at all, just a question?",
    "Numbers 12345 and 3.14159 and 2026-11-21.",
    "Unicode: café, naïve, Zürich, 東京, 😀 emoji, ½ fraction, — dash.",
    "Tabs\tand\ttabs <image>\tafter",
    "Quotes \"double\" and 'single' and `back`.",
    "",
    " ",
    "\n",
    "<image>\nIs there a cat in the image?\nAnswer the question using a single word or phrase.",
]

QUESTIONS = [
    "What is shown in this image?",
    "What color is the car?\nAnswer the question using a single word or phrase.",
    "How many people are there?",
    "Describe this image in detail. Mention  double  spaces.",
    "¿Qué hay en la imagen?",
]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    sp = pr.load_sp(args.tokenizer)
    cases = []
    for p in RAW_PROMPTS:
        cases.append({"kind": "raw", "prompt": p, "ids": pr.tokenizer_image_token(sp, p, IMAGE_TOKEN_ID)})
    for q in QUESTIONS:
        full = pr.vicuna_v1_prompt(q)
        cases.append({"kind": "question", "question": q, "num_images": 1, "prompt": full,
                      "ids": pr.tokenizer_image_token(sp, full, IMAGE_TOKEN_ID)})
    # Conversations: two finished exchanges (an image in the first) and a new question, in every
    # style; ids only where the tiny tokenizer has the style's markers as text (not ChatML).
    conversations = []
    history = [("<image>\nWhat is in the picture?", "A red square."), ("And the border?", "It is blue.")]
    question = "What colour would they make together?"
    systems = {"vicuna_v1": pr.VICUNA_V1_SYSTEM, "mistral_instruct": "", "chatml_direct": "Answer the questions.",
               "chatml": ""}
    for style, (user, assistant) in pr.CONVERSATION_ROLES.items():
        messages = []
        for u, a in history:
            messages += [(user, u), (assistant, a)]
        messages += [(user, question), (assistant, None)]
        prompt = pr.llava_conversation_prompt(style, systems[style], messages)
        case = {"style": style, "history": [list(t) for t in history], "question": question, "num_images": 1,
                "prompt": prompt}
        if not style.startswith("chatml"):
            case["ids"] = pr.tokenizer_image_token_with_specials(
                sp, prompt, IMAGE_TOKEN_ID, {"</s>": sp.eos_id(), "<s>": sp.bos_id()})
        conversations.append(case)
    decodes = []
    for p in RAW_PROMPTS + QUESTIONS:
        ids = sp.encode(p.replace("<image>", ""))
        decodes.append({"ids": ids, "text": sp.decode(ids)})
    # Special tokens in the middle of a generation are skipped when decoding.
    mixed = [sp.bos_id()] + sp.encode("hello world") + [sp.eos_id(), IMAGE_TOKEN_ID, IMAGE_TOKEN_ID + 1] + sp.encode("again")
    decodes.append({"ids": mixed, "text": sp.decode([i for i in mixed if 2 < i < sp.get_piece_size()])})

    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"image_token_id": IMAGE_TOKEN_ID, "bos_id": sp.bos_id(), "eos_id": sp.eos_id(),
                   "system": pr.VICUNA_V1_SYSTEM, "cases": cases, "decodes": decodes,
                   "conversations": conversations}, f, ensure_ascii=False, indent=1)
    print(f"wrote {len(cases)} encode cases and {len(decodes)} decode cases to {args.out}")


if __name__ == "__main__":
    main()
