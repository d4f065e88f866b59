"""Write a tiny, seeded, random-weight LLaVA-OneVision checkpoint, made by transformers itself.

The folder is what `LlavaOnevisionForConditionalGeneration.save_pretrained` and
`LlavaOnevisionProcessor.save_pretrained` write for llava-hf/llava-onevision-qwen2-0.5b-ov-hf,
with that checkpoint's geometry and settings and narrow widths:
  - vision: SigLIP, 384 px, patch 14 (27x27 = 729 tokens per tile, no CLS token), gelu-tanh MLP,
    the last layer's features ("full" select strategy, feature layer -1);
  - projector: two linear layers with GELU, biases;
  - decoder: Qwen2 with grouped-query attention (4 query heads, 2 key/value heads), q/k/v biases,
    rope_theta 1e6, tied input/output embeddings (as 0.5B; --untied-embeddings for 7B's);
  - images: anyres_max_9 over the 36 real pinpoints (384..2304 px), image_newline;
  - the Qwen2-style byte-level BPE tokenizer of era_tools/data/qwen2_tokenizer with <image> and
    <video>, llava-hf's OneVision chat template, and the image and video processors.

    make_tiny_llava.py --arch llava-onevision --out DIR [--seed 0]

Needs transformers (the PyPI route's .venv-torch2). Same seed -> same weights.
"""
import json
import os
import sys

TOKENIZER_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "qwen2_tokenizer")

# llava-hf/llava-onevision-qwen2-*-ov-hf's chat template: the role, then every image and video
# placeholder of the message, then each text part after a newline; no newline after <|im_end|>.
ONEVISION_CHAT_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + ' '}}"
    "{# Render all images first #}{% for content in message['content'] | selectattr('type', 'equalto', 'image') %}"
    "{{ '<image>' }}{% endfor %}"
    "{# Render all video then #}{% for content in message['content'] | selectattr('type', 'equalto', 'video') %}"
    "{{ '<video>' }}{% endfor %}"
    "{# Render all text next #}{% if message['role'] != 'assistant' %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}{{ '\n' + content['text'] }}"
    "{% endfor %}{% else %}{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{% generation %}{{ '\n' + content['text'] }}{% endgeneration %}{% endfor %}{% endif %}"
    "{{'<|im_end|>'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")

# The real checkpoints' pinpoints: every (h, w) multiple of 384 with both sides in 1..6 tiles.
PINPOINTS = [[384 * h, 384 * w] for h in range(1, 7) for w in range(1, 7)]


def add_args(p):
    """The OneVision widths (the shared flags of make_tiny_llava.py keep their meaning)."""
    p.add_argument("--untied-embeddings", action="store_true",
                   help="separate lm_head (as the 7B checkpoints); default tied (as 0.5B)")


def make(args):
    try:
        import torch
        from transformers import (AutoTokenizer, LlavaOnevisionConfig, LlavaOnevisionForConditionalGeneration,
                                  LlavaOnevisionImageProcessor, LlavaOnevisionProcessor,
                                  LlavaOnevisionVideoProcessor)
    except ImportError as e:
        print("make_tiny_llava: --arch llava-onevision is made by transformers itself, which this Python "
              f"lacks ({e}); use the PyPI route's .venv-torch2/bin/python", file=sys.stderr)
        return 2
    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    image_token = tokenizer.convert_tokens_to_ids("<image>")
    video_token = tokenizer.convert_tokens_to_ids("<video>")
    vocab = -(-len(tokenizer) // 64) * 64  # padded as Qwen2's 151936 (> 151665 tokens)
    kv_heads = args.text_kv_heads if args.text_kv_heads != args.text_heads else max(1, args.text_heads // 2)
    text = dict(model_type="qwen2", hidden_size=args.text_hidden, intermediate_size=args.text_intermediate,
                num_hidden_layers=args.text_layers, num_attention_heads=args.text_heads,
                num_key_value_heads=kv_heads, hidden_act="silu", max_position_embeddings=32768,
                rms_norm_eps=1e-6, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
                tie_word_embeddings=not args.untied_embeddings, vocab_size=vocab,
                bos_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>"),
                eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"), use_sliding_window=False,
                initializer_range=0.08)
    vision = dict(model_type="siglip_vision_model", hidden_size=args.vision_hidden,
                  intermediate_size=args.vision_intermediate, num_hidden_layers=args.vision_layers,
                  num_attention_heads=args.vision_heads, image_size=384, patch_size=14,
                  hidden_act="gelu_pytorch_tanh", layer_norm_eps=1e-6, vision_use_head=False)
    config = LlavaOnevisionConfig(text_config=text, vision_config=vision, image_token_index=image_token,
                                  video_token_index=video_token, projector_hidden_act="gelu",
                                  vision_feature_select_strategy="full", vision_feature_layer=-1,
                                  vision_aspect_ratio="anyres_max_9", image_grid_pinpoints=PINPOINTS,
                                  multimodal_projector_bias=True, tie_word_embeddings=not args.untied_embeddings)
    torch.manual_seed(args.seed)
    model = LlavaOnevisionForConditionalGeneration(config).eval()
    with torch.no_grad():  # wider than transformers' 0.02 init, so attention is not uniform
        for name, p in model.named_parameters():
            if p.dim() >= 2 and "norm" not in name:
                p.normal_(0.0, 0.08 if "language_model" in name else 0.05)
            elif "image_newline" in name:
                p.normal_(0.0, 0.5)
    dtype = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[args.dtype]
    model = model.to(dtype)
    image_processor = LlavaOnevisionImageProcessor(image_grid_pinpoints=PINPOINTS)
    video_processor = LlavaOnevisionVideoProcessor()
    processor = LlavaOnevisionProcessor(image_processor=image_processor, tokenizer=tokenizer,
                                        video_processor=video_processor, num_image_tokens=729,
                                        vision_feature_select_strategy="full",
                                        chat_template=ONEVISION_CHAT_TEMPLATE)
    os.makedirs(args.out, exist_ok=True)
    model.save_pretrained(args.out)
    processor.save_pretrained(args.out)
    with open(os.path.join(args.out, "config.json")) as f:
        saved = json.load(f)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"make_tiny_llava: wrote {args.out} (llava-onevision, {n_params} parameters, {len(tokenizer)} tokens, "
          f"vocab {vocab}, image token {image_token}, video token {video_token}, "
          f"{saved['architectures'][0]})")
    return 0
