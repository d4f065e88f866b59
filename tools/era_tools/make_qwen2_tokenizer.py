"""Train a small Qwen2-style byte-level BPE tokenizer and save it in the Hugging Face layout.

Qwen2's real tokenizer (151k pieces) cannot be downloaded here, so the tiny Qwen2-based
checkpoints (LLaVA-OneVision, Qwen2.5-VL) get one of the same construction: NFC normaliser,
Qwen2's split pattern (Isolated) followed by the byte-level pre-tokenizer without its own regex,
a BPE model over the 256 byte-level symbols, the byte-level decoder, and Qwen2's added tokens
(<|endoftext|>, <|im_start|>, <|im_end|>, the vision tokens, and LLaVA's <image> / <video>),
trained by the `tokenizers` library on tools/era_tools/data/spm_corpus.txt plus a multilingual
sample, and saved through transformers' Qwen2TokenizerFast (tokenizer.json, tokenizer_config.json,
vocab.json, merges.txt, as a real checkpoint has them).

    make_qwen2_tokenizer.py --out DIR [--vocab-size 3000]

The committed copy in tools/era_tools/data/qwen2_tokenizer/ is this tool's output; the Debian
route (which has no `tokenizers`) copies it into its tiny checkpoints.
"""
import argparse
import os
import sys

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "spm_corpus.txt")

# Qwen2's pre-tokenizer split pattern, as its tokenizer.json spells it.
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")

# (content, special): Qwen2.5's added tokens in their order, then LLaVA-OneVision's two.
ADDED_TOKENS = [("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
                ("<|object_ref_start|>", True), ("<|object_ref_end|>", True), ("<|box_start|>", True),
                ("<|box_end|>", True), ("<|quad_start|>", True), ("<|quad_end|>", True),
                ("<|vision_start|>", True), ("<|vision_end|>", True), ("<|vision_pad|>", True),
                ("<|image_pad|>", True), ("<|video_pad|>", True), ("<tool_call>", False),
                ("</tool_call>", False), ("<|fim_prefix|>", False), ("<|fim_middle|>", False),
                ("<|fim_suffix|>", False), ("<|fim_pad|>", False), ("<|repo_name|>", False),
                ("<|file_sep|>", False), ("<image>", True), ("<video>", True)]

# Qwen2's chat template (ChatML with the default system message).
CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")

# Text beyond the English corpus, so that merges exist for CJK, accents, digits and code.
EXTRA = [
    "这是一张图片。图片中有一只猫坐在窗台上，阳光照在它的身上。",
    "请描述这张图片的内容。视频中的人在做什么？",
    "日本語の文章も少し入れておきます。東京は大きな都市です。",
    "한국어 문장도 있습니다. 서울은 큰 도시입니다.",
    "Привет, мир! Это пример текста на русском языке.",
    "Ça coûte 12,50 € à Zürich; naïve café, résumé, São Paulo.",
    "def main(argv):\n    return 0  # exit code\n\tif x >= 10: print(x)\n",
    "1234567890 3.14159 2026-11-25 12:00:00 0x7fff",
    "Emoji: 😀 👍🏽 👨‍👩‍👧 ❤️ 🇩🇪",
    "العربية نص قصير. עברית טקסט קצר.",
]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--vocab-size", type=int, default=3000)
    return p.parse_args(argv)


def build(vocab_size):
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
    with open(CORPUS, encoding="utf-8") as f:
        lines = f.read().splitlines()
    tok.train_from_iterator(lines + EXTRA * 20, trainer=trainer)
    return tok


def main(argv=None):
    args = parse_args(argv)
    try:
        from tokenizers import AddedToken
        from transformers import Qwen2TokenizerFast
    except ImportError as e:
        print(f"make_qwen2_tokenizer: needs the `tokenizers` and `transformers` packages "
              f"(the PyPI route's .venv-torch2): {e}", file=sys.stderr)
        return 2
    tok = build(args.vocab_size)
    tok.add_tokens([AddedToken(t, special=s, normalized=False) for t, s in ADDED_TOKENS])
    fast = Qwen2TokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                              unk_token=None, bos_token=None, errors="replace",
                              clean_up_tokenization_spaces=False, model_max_length=32768)
    fast.chat_template = CHAT_TEMPLATE
    os.makedirs(args.out, exist_ok=True)
    fast.save_pretrained(args.out)
    print(f"make_qwen2_tokenizer: {len(fast)} tokens -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
