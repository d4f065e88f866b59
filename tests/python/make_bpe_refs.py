"""Fixture: ids from Hugging Face `tokenizers` for a large string set (the reference for the C++
byte-level BPE, tests/text/test_byte_level_bpe.cpp).

    make_bpe_refs.py --tokenizer DIR --out FILE [--check-committed FILE]

Strings: hand-picked edge cases (Unicode, CJK, emoji sequences, combining marks, every kind of
whitespace run, digits, contractions in any case, added and special tokens, ChatML prompts made by
the checkpoint's own chat template) and several hundred seeded random strings drawn from a pool
that mixes all of those. Each case records the ids of `encode(text, add_special_tokens=False)`
and the text of `decode(ids)` with and without special tokens skipped.

Without `tokenizers` (Debian's route has none) the committed golden file tests/data/bpe_cases.json
(this script's output for tools/era_tools/data/qwen2_tokenizer) is copied instead, saying so.
With `--check-committed FILE`, the fresh cases must equal that file's (exit 1 naming the first
difference): the committed goldens cannot drift from the library.
"""
import argparse
import json
import os
import random
import shutil
import sys

EDGE_CASES = [
    "", " ", "  ", "\n", "\n\n", " \n", "\r\n", "\t", "\t\t x", "a  b", "a   b  ", "   leading",
    "trailing   ", "Hello world", "Hello, world!", "hello\nworld", "line one\r\nline two\r\n",
    "I'm here, you're there, it's fine, we've seen, they'll go, he'd say",
    "I'M HERE, YOU'RE THERE, IT'S, WE'VE, THEY'LL, HE'D", "'s 'S 'ſ 'st",
    "1234567890", "3.14159", "2026-11-25", "x = 10_000 + 0x7fff", "١٢٣ ٤٥٦ Arabic-Indic digits",
    "½ ² ③ Ⅻ number-likes", "café naïve Zürich résumé", "cafe\u0301 (decomposed) vs caf\u00e9",
    "Å Å Å (A+ring, Å, angstrom sign)", "한국어 문장", "这是一张图片。", "東京は大きな都市です。",
    "Привет, мир!", "العربية نص", "עברית", "ไทย ภาษา", "हिन्दी भाषा",
    "😀", "👍🏽", "👨‍👩‍👧", "❤️", "🇩🇪🇫🇷", "emoji😀inside", "🤖 robot 🤖🤖",
    "tabs\tand\vvertical\ftabs", "nel\x85line", "nbsp\u00a0here", "ideographic\u3000space",
    "zero\u200bwidth", "line\u2028sep\u2029para", "  \n  \n", "a\n\n\nb", "\n   \n",
    "punctuation!!! ??? ... ---", "(brackets) [square] {curly} <angle>", "path/to/file.txt",
    "def f(x):\n    return x * 2\n", "    indented\n\tand tabbed", "https://example.com/a?b=c&d=e",
    "<image>", "<image>\nDescribe.", "Text<image>text", "two <image> images <image>",
    "<video>\nWhat happens?", "<|im_start|>user\nhi<|im_end|>\n", "<|endoftext|>",
    "<|im_start|><|im_end|>", "<|vision_start|><|image_pad|><|vision_end|>", "<tool_call>x</tool_call>",
    "<|im_start", "im_end|>", "< image >", "<imag>", "<<image>>", "<|im_start|>assistant\n",
    "Mixed 中文 and English and 日本語 and 😀.", "ALLCAPS WORD", "camelCaseWord snake_case_word",
    "a" * 200, " " * 37, "\n" * 9, "ab" * 50, "1" * 25,
]

POOL = (list("abcdefghijklmnopqrstuvwxyz") * 3 + list("ABCDEFGHIJKLMNOPQRSTUVWXYZ") +
        list("0123456789") * 2 + [" "] * 12 + ["\n", "\n", "\t", "\r", "\v", "\f", "\x85", "\u00a0", "\u3000"] +
        list(".,;:!?'\"-()[]{}<>/\\@#$%^&*_+=~`|") + list("'s'S'll'RE'd") +
        list("éèàüöñçøåß") + ["e\u0301", "a\u0308", "\u0301"] +
        list("中文图片视频东京日本語한국어") + ["😀", "👍🏽", "👨‍👩‍👧", "❤️", "🇩🇪", "\u200b"] +
        list("Приветмир") + list("العربية") + list("½²③") +
        ["<image>", "<video>", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<tool_call>",
         " the", " image", "ing", "tion", "123", " is", "What"])


def random_strings(count, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        n = rng.randint(1, 40)
        out.append("".join(rng.choice(POOL) for _ in range(n)))
    return out


def chat_prompts(tokenizer_dir):
    from transformers import AutoTokenizer
    hf = AutoTokenizer.from_pretrained(tokenizer_dir)
    conversations = [
        [{"role": "user", "content": "<image>\nWhat is shown in this image?"}],
        [{"role": "system", "content": "You describe pictures."},
         {"role": "user", "content": "<image>\nDescribe it."},
         {"role": "assistant", "content": "A cat on a mat."},
         {"role": "user", "content": "And the colours? 颜色呢？"}],
        [{"role": "user", "content": "<video>\nWhat happens in the video?"}],
        [{"role": "user", "content": "<image>\n<image>\nCompare the two images.  Mind the  spaces."}],
    ]
    return [hf.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in conversations]


OPTION_TEXTS = ["[MARK]", "a [MARK] b", "a  [MARK]  b", "a\t[MARK]\n b", "x[MARK]y", "x [MARK]y", "[MARK]_x",
                "_[MARK]", "é[MARK]", "[MARK] [MARK]", "  [MARK]", "[MARK]  ", "caf\u00e9 cafe\u0301 [mark]",
                "cafe\u0301", "café", "<image>[MARK]<image>"]
OPTION_TOKENS = [dict(content="[MARK]", lstrip=True), dict(content="[MARK]", rstrip=True),
                 dict(content="[MARK]", lstrip=True, rstrip=True), dict(content="[MARK]", single_word=True),
                 dict(content="[MARK]", special=True), dict(content="caf\u00e9", normalized=True),
                 dict(content="caf\u00e9", normalized=False)]


def option_cases(tokenizer_dir):
    """Each added-token option on its own: the library's ids for texts that exercise it."""
    from tokenizers import AddedToken, Tokenizer
    out = []
    for options in OPTION_TOKENS:
        tok = Tokenizer.from_file(os.path.join(tokenizer_dir, "tokenizer.json"))
        options = dict(options)
        content = options.pop("content")
        special = options.pop("special", False)
        options.setdefault("normalized", False)
        if special:
            tok.add_special_tokens([AddedToken(content, **options)])
        else:
            tok.add_tokens([AddedToken(content, **options)])
        token = json.loads(tok.to_str())["added_tokens"][-1]
        out.append({"token": token, "cases": [{"text": t, "ids": tok.encode(t, add_special_tokens=False).ids}
                                              for t in OPTION_TEXTS]})
    return out


def make_cases(tokenizer_dir, seed):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(tokenizer_dir, "tokenizer.json"))
    texts = EDGE_CASES + chat_prompts(tokenizer_dir) + random_strings(600, seed)
    cases = []
    for text in texts:
        ids = tok.encode(text, add_special_tokens=False).ids
        cases.append({"text": text, "ids": ids,
                      "decoded": tok.decode(ids, skip_special_tokens=False),
                      "decoded_skip_special": tok.decode(ids, skip_special_tokens=True)})
    return cases


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizer", required=True, help="folder with tokenizer.json")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--committed", help="golden file to copy where `tokenizers` is missing")
    ap.add_argument("--check-committed", help="fail unless the fresh cases equal this file's")
    args = ap.parse_args()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    try:
        import tokenizers  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        if not args.committed:
            print("make_bpe_refs: `tokenizers` is not installed and no --committed file", file=sys.stderr)
            return 2
        shutil.copyfile(args.committed, args.out)
        print(f"make_bpe_refs: no `tokenizers` here; copied the committed goldens {args.committed}")
        return 0
    cases = make_cases(args.tokenizer, args.seed)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"tokenizer": "tools/era_tools/data/qwen2_tokenizer", "cases": cases,
                   "option_cases": option_cases(args.tokenizer)}, f, ensure_ascii=True, indent=0)
    print(f"make_bpe_refs: {len(cases)} cases -> {args.out}")
    if args.check_committed:
        with open(args.check_committed, encoding="utf-8") as f:
            committed_doc = json.load(f)
        committed = committed_doc["cases"]
        if committed_doc.get("option_cases") != option_cases(args.tokenizer):
            print(f"make_bpe_refs: the option_cases of {args.check_committed} differ from the library's: "
                  "regenerate it with this script", file=sys.stderr)
            return 1
        if len(committed) != len(cases):
            print(f"make_bpe_refs: {args.check_committed} has {len(committed)} cases, the library gives "
                  f"{len(cases)}: regenerate it with this script", file=sys.stderr)
            return 1
        for i, (a, b) in enumerate(zip(committed, cases)):
            if a != b:
                print(f"make_bpe_refs: case {i} ({b['text']!r}) differs from {args.check_committed}: "
                      f"committed {a['ids']}, tokenizers {b['ids']}", file=sys.stderr)
                return 1
        print(f"make_bpe_refs: {args.check_committed} equals the library's output")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
