"""Write a tiny, seeded, random-weight Qwen2.5-VL checkpoint, made by transformers itself.

The folder is what `Qwen2_5_VLForConditionalGeneration.save_pretrained` and
`Qwen2_5_VLProcessor.save_pretrained` write, with Qwen/Qwen2.5-VL-*-Instruct's geometry and narrow
widths:
  - vision: patch 14, temporal patch 2, 2x2 spatial merge, window 112 px (4x4 merge units),
    the released full-attention pattern (every 8th of 32 blocks) shrunk to the depth (depth 4:
    blocks 1 and 3), tokens_per_second 2, hidden 32, 2 heads;
  - merger: RMSNorm, Linear(4C, 4C) -> GELU -> Linear(4C, D);
  - decoder: Qwen2 with multimodal RoPE (mrope_section [2, 3, 3] for head_dim 16), GQA (4 query,
    2 key/value heads), q/k/v biases, rope_theta 1e6, tied embeddings (as 3B; --untied-embeddings
    for 7B's);
  - processor: Qwen2VLImageProcessor / Qwen2VLVideoProcessor (transformers' defaults: min / max
    pixels 56*56 / 28*28*1280 for images), the committed Qwen2-style byte-level tokenizer
    (era_tools/data/qwen2_tokenizer: <|vision_start|>, <|vision_end|>, <|image_pad|>,
    <|video_pad|>, <|im_start|>, <|im_end|> are among its added tokens) and a Qwen2.5-VL chat
    template.

    make_tiny_llava.py --arch qwen2.5-vl --out DIR [--seed 0] [--untied-embeddings]

Needs transformers (the PyPI route's .venv-torch2). Same seed -> same weights.
"""
import os
import sys

TOKENIZER_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "qwen2_tokenizer")

# Qwen2.5-VL-Instruct's chat template, in substance: the default system message, every image /
# video as <|vision_start|><|image_pad|><|vision_end|> (<|video_pad|>) where it appears in the
# message, then the text; "\n" after every <|im_end|>.
QWEN_VL_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' %}{{ '<|vision_start|><|image_pad|><|vision_end|>' }}"
    "{% elif content['type'] == 'video' %}{{ '<|vision_start|><|video_pad|><|vision_end|>' }}"
    "{% elif content['type'] == 'text' %}{{ content['text'] }}{% endif %}"
    "{% endfor %}{% endif %}{{ '<|im_end|>\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")

# The tiny widths (the real geometry is fixed above).
TINY_VISION = {"depth": 4, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2,
               "fullatt_block_indexes": [1, 3]}
TINY_TEXT = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
             "num_attention_heads": 4, "num_key_value_heads": 2, "mrope_section": [2, 3, 3]}


def fullatt_pattern(depth, every=8):
    """The released checkpoints' full-attention blocks (7, 15, 23, 31 of 32: the last of every
    group of 8), shrunk: the last of every group of depth // 4 (at least 1) blocks."""
    step = max(1, min(every, depth // 4 or 1))
    return [i for i in range(depth) if i % step == step - 1]


def build(seed=0, tied=True, vision=None, text=None, dtype="float32", std_text=0.08,
          std_vision=0.05, tokens_per_second=2):
    """(model, processor, tokenizer) at the tiny widths (overridable with the `vision` / `text`
    dicts), random weights drawn wider than transformers' 0.02 init so attention and greedy
    decoding are not degenerate."""
    import torch
    import transformers as tf
    tok = tf.AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    ids = {t: tok.convert_tokens_to_ids(t) for t in
           ("<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>",
            "<|endoftext|>", "<|im_end|>")}
    vocab = -(-len(tok) // 64) * 64  # padded as Qwen2's 151936 (> 151665 tokens)
    v = dict(TINY_VISION, **(vision or {}))
    t = dict(TINY_TEXT, **(text or {}))
    mrope = t.pop("mrope_section")
    vision_cfg = dict(v, hidden_act="silu", in_channels=3, patch_size=14, spatial_merge_size=2,
                      temporal_patch_size=2, window_size=112, tokens_per_second=tokens_per_second)
    vision_cfg.setdefault("out_hidden_size", t["hidden_size"])
    text_cfg = dict(t, hidden_act="silu", max_position_embeddings=32768, rms_norm_eps=1e-6,
                    vocab_size=vocab, use_sliding_window=False, tie_word_embeddings=tied,
                    rope_parameters={"rope_type": "default", "rope_theta": 1000000.0,
                                     "mrope_section": list(mrope)},
                    bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"])
    config = tf.Qwen2_5_VLConfig(text_config=text_cfg, vision_config=vision_cfg,
                                 image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
                                 vision_start_token_id=ids["<|vision_start|>"],
                                 vision_end_token_id=ids["<|vision_end|>"], tie_word_embeddings=tied)
    torch.manual_seed(seed)
    model = tf.Qwen2_5_VLForConditionalGeneration(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.normal_(0.0, std_text if "language_model" in name or "lm_head" in name else std_vision)
            elif "norm" in name or "ln_q" in name:
                p.normal_(1.0, 0.1)
            else:  # biases
                p.normal_(0.0, 0.02)
    model = model.to({"float32": torch.float32, "float16": torch.float16,
                      "bfloat16": torch.bfloat16}[dtype])
    processor = tf.Qwen2_5_VLProcessor(image_processor=tf.Qwen2VLImageProcessor(),
                                       video_processor=tf.Qwen2VLVideoProcessor(), tokenizer=tok,
                                       chat_template=QWEN_VL_CHAT_TEMPLATE)
    return model, processor, tok


def add_args(p):
    """(The shared --untied-embeddings flag is added by make_tiny_onevision.add_args.)"""


def make(args):
    try:
        import transformers  # noqa: F401  (only whether it is there)
    except ImportError as e:
        print("make_tiny_llava: --arch qwen2.5-vl is made by transformers itself, which this Python "
              f"lacks ({e}); use the PyPI route's .venv-torch2/bin/python", file=sys.stderr)
        return 2
    model, processor, tok = build(seed=args.seed, tied=not args.untied_embeddings, dtype=args.dtype)
    os.makedirs(args.out, exist_ok=True)
    model.save_pretrained(args.out)
    processor.save_pretrained(args.out)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"make_tiny_llava: wrote {args.out} (qwen2.5-vl, {n_params} parameters, {len(tok)} tokens, "
          f"vocab {model.config.text_config.vocab_size}, image token {model.config.image_token_id}, "
          f"video token {model.config.video_token_id})")
    return 0
