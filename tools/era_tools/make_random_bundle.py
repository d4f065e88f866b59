"""Make a random-weight era bundle at real model sizes, straight from a configuration.

    make_random_bundle.py --preset llava-1.5-7b|llava-1.5-13b|llava-next-7b|medium|medium-next|tiny
                                   |llava-onevision-0.5b|llava-onevision-7b|tiny-onevision
                                   |qwen2.5-vl-3b|qwen2.5-vl-7b|tiny-qwen2.5-vl
                          --out BUNDLE [--dtype float16] [--seed 0] [--no-check] [--hf-weights DIR]
    make_random_bundle.py --config config.json --out BUNDLE ...   (an HF LLaVA config.json)
    make_random_bundle.py --preset ... --hf-weights DIR           (the HF folder alone, no bundle)

For benchmarks (era_bench): speed and memory depend on the shapes, not on the weights, so a bundle
with the real geometry of LLaVA-1.5-7B needs no 14 GB download. No checkpoint file is written: the
configuration folder (config.json, tokenizer, preprocessor config) is made as
tools/make_tiny_llava.py makes it, random tensors are drawn per part straight into the target dtype
(make_tiny_llava's init_std, so the model is not degenerate) and handed to the same export path as
tools/export_llava.py (export_checkpoint: TorchScript modules + manifest + numerical check).

Memory: the weights are held once, in --dtype (7B in float16: ~14 GB). The export's numerical
check runs float16 models in float32 on a CPU-only machine (2x the weights): pass --no-check for
7B / 13B there. `medium` (real CLIP ViT-L/14-336 vision tower and projector input, a 2048-wide
4-layer decoder with LLaMA's 32064-token vocabulary) runs on a laptop; `tiny` is the test size.
The tokenizer is make_tiny_llava's 1000-piece model (token ids past it are never generated: their
embedding and output rows are the mean row, as HF's resize_token_embeddings makes them).

The LLaVA-OneVision presets have llava-hf/llava-onevision-qwen2-0.5b-ov-hf's and -7b-ov-hf's
shapes (SigLIP so400m, 26 layers at 384 px; Qwen2-0.5B: 896 wide, 24 layers, 14 query and 2
key/value heads, tied embeddings; Qwen2-7B: 3584 wide, 28 layers, 28 / 4 heads, untied; the real
vocabulary sizes) with the committed Qwen2-style tokenizer (tools/era_tools/data/qwen2_tokenizer,
the same rule for ids past it) and LlavaOnevisionImageProcessor's settings; they need no
transformers either.

The Qwen2.5-VL presets (qwen2.5-vl-3b, qwen2.5-vl-7b, tiny-qwen2.5-vl) have
Qwen/Qwen2.5-VL-3B-Instruct's and -7B-Instruct's config.json (vision: 32 blocks, 1280 wide, 16
heads, full attention in blocks 7/15/23/31, 112 px windows, merger to the text width; 3B text:
2048 wide, 36 layers, 16 / 2 heads, tied, vocab 151936; 7B text: 3584 wide, 28 layers, 28 / 4
heads, untied, vocab 152064; rope_theta 1e6, mrope_section [16, 24, 24]), the released
preprocessor config, and the committed Qwen2-style tokenizer; no transformers needed.
"""
import argparse
import json
import os
import sys
import tempfile

import torch

from . import make_tiny_llava as tiny
from .export_llava import DTYPES, CheckFailed, ExportError, export_checkpoint
from .torch_versions import UnsupportedTorch, check_export_torch
from . import families
from .hf_checkpoint import (CheckpointError, checkpoint_name, expected_shapes, load_checkpoint,
                            load_config)

CLIP_L_336 = {"vision_hidden": 1024, "vision_intermediate": 4096, "vision_heads": 16,
              "vision_layers": 24}
VICUNA_7B = {"text_hidden": 4096, "text_intermediate": 11008, "text_layers": 32, "text_heads": 32}
VICUNA_13B = {"text_hidden": 5120, "text_intermediate": 13824, "text_layers": 40,
              "text_heads": 40}
LLAMA_VOCAB = 32064  # llava-hf's 32000 pieces + <image> + <pad>, padded to a multiple of 64
TINY = {"vision_hidden": 64, "vision_intermediate": 128, "vision_heads": 4, "vision_layers": 4,
        "text_hidden": 128, "text_intermediate": 256, "text_layers": 2, "text_heads": 4}
PRESETS = {
    "llava-1.5-7b": dict(arch="llava-1.5", vocab=LLAMA_VOCAB, max_pos=4096, **CLIP_L_336,
                         **VICUNA_7B),
    "llava-1.5-13b": dict(arch="llava-1.5", vocab=LLAMA_VOCAB, max_pos=4096, **CLIP_L_336,
                          **VICUNA_13B),
    "llava-next-7b": dict(arch="llava-next", vocab=LLAMA_VOCAB, max_pos=4096, **CLIP_L_336,
                          **VICUNA_7B),
    "medium": dict(arch="llava-1.5", vocab=LLAMA_VOCAB, max_pos=4096, **CLIP_L_336,
                   text_hidden=2048, text_intermediate=5632, text_layers=4, text_heads=16),
    "medium-next": dict(arch="llava-next", vocab=LLAMA_VOCAB, max_pos=4096, **CLIP_L_336,
                        text_hidden=2048, text_intermediate=5632, text_layers=4, text_heads=16),
    "tiny": dict(arch="llava-1.5", vocab=None, max_pos=2048, **TINY),
    "tiny-next": dict(arch="llava-next", vocab=None, max_pos=4096, **TINY),
}
SIGLIP_SO400M = {"vision_hidden": 1152, "vision_intermediate": 4304, "vision_heads": 16,
                 "vision_layers": 26}
ONEVISION_PRESETS = {
    "llava-onevision-0.5b": dict(vocab=151936, tied=True, kv_heads=2, **SIGLIP_SO400M,
                                 text_hidden=896, text_intermediate=4864, text_layers=24,
                                 text_heads=14),
    "llava-onevision-7b": dict(vocab=152064, tied=False, kv_heads=4, **SIGLIP_SO400M,
                               text_hidden=3584, text_intermediate=18944, text_layers=28,
                               text_heads=28),
    "tiny-onevision": dict(vocab=None, tied=True, kv_heads=2, vision_hidden=64,
                           vision_intermediate=128, vision_heads=4, vision_layers=4,
                           text_hidden=128, text_intermediate=256, text_layers=2, text_heads=4),
}
# Qwen/Qwen2.5-VL-3B-Instruct's and -7B-Instruct's config.json (the vision tower is the same
# 32-block, 1280-wide ViT in both; the merger projects to the text width).
QWEN_VL_VISION = {"depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16,
                  "fullatt_block_indexes": [7, 15, 23, 31]}
QWEN_VL_PRESETS = {
    "qwen2.5-vl-3b": dict(vocab=151936, tied=True, max_pos=128000, mrope=[16, 24, 24],
                          vision=QWEN_VL_VISION,
                          text={"hidden_size": 2048, "num_hidden_layers": 36,
                                "num_attention_heads": 16, "num_key_value_heads": 2,
                                "intermediate_size": 11008}),
    "qwen2.5-vl-7b": dict(vocab=152064, tied=False, max_pos=128000, mrope=[16, 24, 24],
                          vision=QWEN_VL_VISION,
                          text={"hidden_size": 3584, "num_hidden_layers": 28,
                                "num_attention_heads": 28, "num_key_value_heads": 4,
                                "intermediate_size": 18944}),
    "tiny-qwen2.5-vl": dict(vocab=None, tied=True, max_pos=32768, mrope=[2, 3, 3],
                            vision={"depth": 4, "hidden_size": 32, "intermediate_size": 64,
                                    "num_heads": 2, "fullatt_block_indexes": [1, 3]},
                            text={"hidden_size": 64, "num_hidden_layers": 2,
                                  "num_attention_heads": 4, "num_key_value_heads": 2,
                                  "intermediate_size": 128}),
}
QWEN2_TOKENIZER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "qwen2_tokenizer")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--preset", choices=sorted(PRESETS) + sorted(ONEVISION_PRESETS)
                     + sorted(QWEN_VL_PRESETS))
    src.add_argument("--config", help="an HF LLaVA-1.5 / LLaVA-NeXT config.json")
    p.add_argument("--out", help="bundle folder to create (may be left out with --hf-weights: the HF "
                                 "folder alone, which era opens directly for LLaVA-1.5 / NeXT)")
    p.add_argument("--dtype", choices=list(DTYPES), default="float16")
    p.add_argument("--attention", choices=["auto", "math", "sdpa"], default="auto")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--int8-scheme", choices=["weight-only", "dynamic"], default="weight-only",
                   help="export_llava.py --int8-scheme")
    p.add_argument("--int8", choices=["decoder", "all"], default=None,
                   help="int8 Linear weights (export_llava.py --int8): the same random model as "
                        "without it, for speed and accuracy comparisons")
    p.add_argument("--text-model", metavar="DIR",
                   help="also write the language model (LLaMA presets / configs) as a Hugging Face "
                        "LlamaForCausalLM folder (config.json, model.safetensors, tokenizer.model): "
                        "the same weights for another engine, e.g. llama.cpp's convert_hf_to_gguf.py")
    p.add_argument("--hf-weights", metavar="DIR",
                   help="also write the checkpoint as a Hugging Face folder: its config, processor "
                        "and tokenizer files and one model.safetensors with every part under "
                        "transformers 5's names (model.language_model.*, model.vision_tower.*, "
                        "model.multi_modal_projector.*, model.visual.*, lm_head.*; a tied head left "
                        "out, as transformers saves it), for era's native models (--hf-weights)")
    p.add_argument("--name", help="model_name in the manifest (default: random-<preset>)")
    p.add_argument("--no-check", action="store_true",
                   help="skip the export's TorchScript-vs-eager check (needs 2x the weights' "
                        "memory for float16 on CPU)")
    args = p.parse_args(argv)
    if args.out is None and args.hf_weights is None:
        p.error("--out is required (or --hf-weights alone)")
    return args


def preset_config(preset, dtype, tok_vocab):
    """An HF config.json dict for a preset, made by make_tiny_llava's make_config."""
    spec = dict(PRESETS[preset])
    arch, vocab, max_pos = spec.pop("arch"), spec.pop("vocab"), spec.pop("max_pos")
    ns = argparse.Namespace(arch=arch, dtype=dtype, max_position_embeddings=max_pos,
                            text_kv_heads=spec["text_heads"], **spec)
    config = tiny.make_config(ns, tok_vocab)
    if vocab:  # the real embedding / LM-head size (its FLOPs and memory are part of the model)
        config["vocab_size"] = config["text_config"]["vocab_size"] = vocab
    return config


def onevision_folder(folder, preset, dtype):
    """A weightless LLaVA-OneVision checkpoint folder: config.json as llava-hf writes it, the
    committed Qwen2-style tokenizer, LlavaOnevisionImageProcessor's preprocessor config."""
    import shutil
    spec = ONEVISION_PRESETS[preset]
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(QWEN2_TOKENIZER, name), os.path.join(folder, name))
    with open(os.path.join(QWEN2_TOKENIZER, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    ids = {t["content"]: t["id"] for t in tok["added_tokens"]}
    tok_vocab = max(list(tok["model"]["vocab"].values()) + list(ids.values())) + 1
    vocab = spec["vocab"] or -(-tok_vocab // 64) * 64
    from .make_tiny_onevision import PINPOINTS
    text = {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"],
            "hidden_size": spec["text_hidden"], "intermediate_size": spec["text_intermediate"],
            "num_hidden_layers": spec["text_layers"], "num_attention_heads": spec["text_heads"],
            "num_key_value_heads": spec["kv_heads"], "hidden_act": "silu",
            "max_position_embeddings": 32768, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
            "tie_word_embeddings": spec["tied"], "use_sliding_window": False,
            "vocab_size": vocab, "bos_token_id": ids["<|endoftext|>"], "eos_token_id": ids["<|im_end|>"],
            "torch_dtype": dtype}
    vision = {"model_type": "siglip_vision_model", "hidden_size": spec["vision_hidden"],
              "intermediate_size": spec["vision_intermediate"],
              "num_hidden_layers": spec["vision_layers"], "num_attention_heads": spec["vision_heads"],
              "image_size": 384, "patch_size": 14, "hidden_act": "gelu_pytorch_tanh",
              "layer_norm_eps": 1e-6, "vision_use_head": False}
    config = {"architectures": ["LlavaOnevisionForConditionalGeneration"], "model_type": "llava_onevision",
              "image_token_index": ids["<image>"], "video_token_index": ids["<video>"],
              "projector_hidden_act": "gelu", "vision_feature_layer": -1,
              "vision_feature_select_strategy": "full", "vision_aspect_ratio": "anyres_max_9",
              "image_grid_pinpoints": PINPOINTS, "multimodal_projector_bias": True,
              "tie_word_embeddings": spec["tied"], "text_config": text, "vision_config": vision,
              "torch_dtype": dtype}
    tiny.write_json(os.path.join(folder, "config.json"), config)
    tiny.write_json(os.path.join(folder, "preprocessor_config.json"), {
        "image_processor_type": "LlavaOnevisionImageProcessor", "do_resize": True,
        "size": {"height": 384, "width": 384}, "resample": 3, "do_rescale": True,
        "rescale_factor": 1 / 255, "do_normalize": True, "image_mean": [0.5] * 3,
        "image_std": [0.5] * 3, "do_convert_rgb": True, "do_pad": True,
        "image_grid_pinpoints": PINPOINTS})


def qwen_vl_folder(folder, preset, dtype):
    """A weightless Qwen2.5-VL checkpoint folder: config.json in the released checkpoints'
    layout (text fields at the top level, rope_scaling {"type": "mrope"}), the committed
    Qwen2-style tokenizer (its own ids for <|image_pad|> etc.), the released
    preprocessor_config.json (min_pixels 3136, max_pixels 12845056) and transformers' video
    processor defaults."""
    import shutil
    spec = QWEN_VL_PRESETS[preset]
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copyfile(os.path.join(QWEN2_TOKENIZER, name), os.path.join(folder, name))
    from .make_tiny_qwen_vl import QWEN_VL_CHAT_TEMPLATE
    with open(os.path.join(folder, "chat_template.jinja"), "w", encoding="utf-8") as f:
        f.write(QWEN_VL_CHAT_TEMPLATE)
    with open(os.path.join(QWEN2_TOKENIZER, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    ids = {t["content"]: t["id"] for t in tok["added_tokens"]}
    tok_vocab = max(list(tok["model"]["vocab"].values()) + list(ids.values())) + 1
    vocab = spec["vocab"] or -(-tok_vocab // 64) * 64
    text = spec["text"]
    vision = dict(spec["vision"], hidden_act="silu", in_chans=3, patch_size=14,
                  spatial_patch_size=14, spatial_merge_size=2, temporal_patch_size=2,
                  window_size=112, tokens_per_second=2, out_hidden_size=text["hidden_size"])
    config = {"architectures": ["Qwen2_5_VLForConditionalGeneration"], "model_type": "qwen2_5_vl",
              **text, "hidden_act": "silu", "max_position_embeddings": spec["max_pos"],
              "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
              "rope_scaling": {"type": "mrope", "mrope_section": spec["mrope"]},
              "sliding_window": 32768, "use_sliding_window": False, "max_window_layers": 70,
              "tie_word_embeddings": spec["tied"], "vocab_size": vocab,
              "bos_token_id": ids["<|endoftext|>"], "eos_token_id": ids["<|im_end|>"],
              "image_token_id": ids["<|image_pad|>"], "video_token_id": ids["<|video_pad|>"],
              "vision_start_token_id": ids["<|vision_start|>"],
              "vision_end_token_id": ids["<|vision_end|>"], "vision_config": vision,
              "torch_dtype": dtype}
    tiny.write_json(os.path.join(folder, "config.json"), config)
    tiny.write_json(os.path.join(folder, "preprocessor_config.json"), {
        "image_processor_type": "Qwen2VLImageProcessor", "processor_class": "Qwen2_5_VLProcessor",
        "do_resize": True, "do_rescale": True, "do_normalize": True, "do_convert_rgb": True,
        "rescale_factor": 1 / 255, "resample": 3, "image_mean": [0.48145466, 0.4578275, 0.40821073],
        "image_std": [0.26862954, 0.26130258, 0.27577711], "min_pixels": 3136,
        "max_pixels": 12845056, "patch_size": 14, "temporal_patch_size": 2, "merge_size": 2})
    tiny.write_json(os.path.join(folder, "generation_config.json"),
                    {"eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]],
                     "pad_token_id": ids["<|endoftext|>"]})


def write_config_folder(folder, config):
    """config.json + tokenizer + preprocessor config: a checkpoint folder without weights."""
    tiny.write_json(os.path.join(folder, "config.json"), config)
    cfg = load_config(folder)  # validates (CheckpointError naming the field)
    family = families.get(cfg.arch)
    for name, obj in tiny.tokenizer_files(cfg.image_token_id, cfg.pad_token_id,
                                          family.PROCESSOR_CLASS).items():
        tiny.write_json(os.path.join(folder, name), obj)
    tiny.write_json(os.path.join(folder, "preprocessor_config.json"), family.TINY_PREPROCESSOR)


def random_tensor(name, shape, dtype, gen, rows_per_chunk=4096, mean_std=None):
    """randn * std + mean (make_tiny_llava.init_std of the llava-hf name, or mean_std), drawn in
    float32 chunks of rows straight into a `dtype` tensor, so only the final tensor is ever
    whole."""
    mean, std = mean_std or tiny.init_std(name)
    t = torch.empty(shape, dtype=dtype)
    flat = t.view(shape[0], -1) if len(shape) > 1 else t.view(1, -1)
    for i in range(0, flat.shape[0], rows_per_chunk):
        j = min(i + rows_per_chunk, flat.shape[0])
        flat[i:j] = torch.randn(j - i, flat.shape[1], generator=gen) * std + mean
    return t


def fill_random_weights(ckpt, dtype, seed):
    """Give the weightless checkpoint random tensors of the shapes its config implies."""
    gen = torch.Generator().manual_seed(seed)
    family = families.get(ckpt.config.arch)
    n = 0
    for part, shapes in expected_shapes(ckpt.config).items():
        tensors = {}
        for canon, shape in sorted(shapes.items()):  # fixed order -> deterministic
            if part == "text" and canon == "lm_head.weight" and ckpt.config.text.tie_word_embeddings:
                tensors[canon] = tensors["embed_tokens.weight"]  # tied (0.5B): one tensor, as loaded
                continue
            mean_std = family.random_init(canon)  # e.g. Qwen2.5-VL's vision RMSNorms
            t = random_tensor(checkpoint_name(part, canon, "llava-hf"), shape, dtype, gen,
                              mean_std=mean_std)
            if canon in ("embed_tokens.weight", "lm_head.weight"):
                # rows past the tokenizer: the mean row, so greedy decoding never emits them
                t[ckpt.tokenizer_vocab_size:] = t[:ckpt.tokenizer_vocab_size].float().mean(0).to(dtype)
            tensors[canon] = t
            n += t.numel()
        setattr(ckpt, part, tensors)
    return n


def make_bundle(args):
    with tempfile.TemporaryDirectory(prefix="era-random-config-") as folder:
        if args.preset in ONEVISION_PRESETS:
            onevision_folder(folder, args.preset, args.dtype)
            return export_random(args, folder)
        if args.preset in QWEN_VL_PRESETS:
            qwen_vl_folder(folder, args.preset, args.dtype)
            return export_random(args, folder)
        tok_path = os.path.join(folder, "tokenizer.model")
        tiny.train_tokenizer(tok_path)
        import sentencepiece as spm
        tok_vocab = spm.SentencePieceProcessor(model_file=tok_path).get_piece_size()
        if args.preset:
            config = preset_config(args.preset, args.dtype, tok_vocab)
        else:
            try:
                with open(args.config, "r", encoding="utf-8") as f:
                    config = json.load(f)
            except (OSError, ValueError) as e:
                raise ExportError(f"{args.config}: cannot read the config: {e}") from None
            if not isinstance(config, dict):
                raise ExportError(f"{args.config}: not a JSON object")
        try:
            write_config_folder(folder, config)
        except CheckpointError as e:  # name the user's file, not the scratch copy
            where = args.config or f"preset {args.preset}"
            raise ExportError(str(e).replace(os.path.join(folder, "config.json"), where)) from None
        return export_random(args, folder)


def write_text_model(ckpt, folder, out):
    """The checkpoint's language model as an HF LlamaForCausalLM folder (before the export takes
    the tensors): text_config as config.json, the weights under LlamaForCausalLM's names, the
    sentencepiece tokenizer."""
    import shutil
    from .safetensors_io import save_file
    if not families.get(ckpt.config.arch).LLAMA_TEXT_MODEL:
        raise ExportError(f"--text-model: {ckpt.config.arch} has no LLaMA language model")
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        text = dict(json.load(f)["text_config"])
    text.update(architectures=["LlamaForCausalLM"], model_type="llama")
    os.makedirs(out, exist_ok=True)
    tiny.write_json(os.path.join(out, "config.json"), text)
    tensors = {(c if c.startswith("lm_head.") else "model." + c): t for c, t in ckpt.text.items()}
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    shutil.copyfile(os.path.join(folder, "tokenizer.model"), os.path.join(out, "tokenizer.model"))
    tiny.write_json(os.path.join(out, "tokenizer_config.json"),
                    {"tokenizer_class": "LlamaTokenizer", "add_bos_token": True, "add_eos_token": False})
    print(f"make_random_bundle: wrote the language model to {out} ({len(tensors)} tensors)")


def write_hf_weights(ckpt, folder, out):
    """The checkpoint as an HF folder era's native models read (src/model/native_decoder.h,
    src/family/llava_native_vision.h): the side files of `folder` as they are (config.json, the
    processor and tokenizer files) and model.safetensors with every part under transformers 5's
    names, spelled by the family's own checkpoint_name where it has one."""
    import shutil
    from .safetensors_io import save_file
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(folder):
        if os.path.isfile(os.path.join(folder, name)) and not name.endswith(".safetensors"):
            shutil.copyfile(os.path.join(folder, name), os.path.join(out, name))
    import inspect
    spell = getattr(families.get(ckpt.config.arch), "checkpoint_name", checkpoint_name)
    layout = inspect.signature(spell).parameters["layout"].default  # the family's newest layout
    layout = "transformers>=4.52" if layout is inspect.Parameter.empty else layout
    name_of = lambda part, canon: spell(part, canon, layout)  # noqa: E731
    tied = bool(ckpt.config.text.tie_word_embeddings)
    tensors = {}
    for part in ("vision", "projector", "text"):
        for canon, t in getattr(ckpt, part).items():
            if part == "text" and canon.startswith("lm_head.") and tied:
                continue
            tensors[name_of(part, canon)] = t
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    print(f"make_random_bundle: wrote the checkpoint as an HF folder to {out} ({len(tensors)} tensors"
          f"{', head tied' if tied else ''})")


def export_random(args, folder):
    """Random weights for the weightless checkpoint in `folder`, exported to args.out."""
    ckpt = load_checkpoint(folder, load_weights=False)  # validates the config
    n = fill_random_weights(ckpt, DTYPES[args.dtype], args.seed)
    print(f"make_random_bundle: {n / 1e9:.3f} B random parameters ({ckpt.config.arch}, "
          f"text {ckpt.config.text.hidden_size} x {ckpt.config.text.num_layers} layers, "
          f"vision {ckpt.config.vision.hidden_size} x {ckpt.config.vision.layers_run} layers)")
    if args.text_model:
        write_text_model(ckpt, folder, args.text_model)
    if args.hf_weights:
        write_hf_weights(ckpt, folder, args.hf_weights)
    if args.out is None:
        return 0
    name = args.name or f"random-{args.preset or os.path.basename(args.config)}"
    return export_checkpoint(ckpt, args.out, args.dtype, args.attention, name,
                             check=not args.no_check, int8=args.int8, int8_scheme=args.int8_scheme)


def main(argv=None):
    args = parse_args(argv)
    try:
        check_export_torch()  # before drawing gigabytes of random weights
        return make_bundle(args)
    except (ExportError, CheckpointError, UnsupportedTorch) as e:
        print(f"make_random_bundle: error: {e}", file=sys.stderr)
        return 2
    except CheckFailed as e:
        print(f"make_random_bundle: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
