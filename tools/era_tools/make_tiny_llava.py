"""Write a tiny, seeded, random-weight LLaVA-1.5 or LLaVA-NeXT checkpoint in the llava-hf layout.

The folder looks like `llava-hf/llava-1.5-7b-hf` (--arch llava-1.5) or
`llava-hf/llava-v1.6-vicuna-7b-hf` (--arch llava-next): same file set, same tensor names, same
config fields, with the real image geometry (336 px, patch 14, 576 tokens per crop, feature layer
-2; for NeXT the real anyres grid pinpoints) but narrow widths, so every test can load, export and
run it in seconds. The weights are random but scaled so the model gives non-degenerate logits and
attention (see `init_std`). NeXT adds the `image_newline` [text hidden] parameter
(`model.image_newline` in the transformers-4.52 layout) and LlavaNextImageProcessor's
preprocessor_config.json.

    make_tiny_llava.py --arch llava-1.5|llava-next --out DIR [--seed 0] [--tokenizer-model FILE]
    make_tiny_llava.py --arch llava-onevision|qwen2.5-vl --out DIR [--seed 0]   (by transformers:
        make_tiny_onevision.py, make_tiny_qwen_vl.py)

The tokenizer is a 1000-piece LLaMA-style SentencePiece BPE model trained with `spm_train` on
tools/era_tools/data/spm_corpus.txt (or a copy of --tokenizer-model). Same seed -> byte-identical
folder.
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

import torch

from . import families, make_tiny_onevision
from .checkpoint_base import clip_layer_shapes
from .hf_checkpoint import load_checkpoint
from .safetensors_io import save_file

# The tokenizer's training text: package data (era_tools/data/), found next to this module.
CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "spm_corpus.txt")

# LLaMA-like SentencePiece settings (byte fallback, split digits, dummy prefix, no normalisation).
SPM_FLAGS = ["--model_type=bpe", "--vocab_size=1000", "--byte_fallback=true",
             "--split_digits=true", "--add_dummy_prefix=true",
             "--remove_extra_whitespaces=false", "--normalization_rule_name=identity",
             "--unk_id=0", "--bos_id=1", "--eos_id=2", "--pad_id=-1",
             "--character_coverage=1.0", "--num_threads=1", "--minloglevel=2"]

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", required=True,
                   choices=list(families.ARCHES),
                   help="llava-onevision, qwen2.5-vl: made by transformers itself "
                        "(make_tiny_onevision.py, make_tiny_qwen_vl.py)")
    p.add_argument("--out", required=True, help="output checkpoint folder")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tokenizer-model", help="copy this tokenizer.model instead of training one")
    p.add_argument("--vision-hidden", type=int, default=64)
    p.add_argument("--vision-intermediate", type=int, default=128)
    p.add_argument("--vision-heads", type=int, default=4)
    p.add_argument("--vision-layers", type=int, default=4)
    p.add_argument("--text-hidden", type=int, default=128)
    p.add_argument("--text-intermediate", type=int, default=256)
    p.add_argument("--text-layers", type=int, default=2)
    p.add_argument("--text-heads", type=int, default=4)
    p.add_argument("--text-kv-heads", type=int, default=None, help="default: --text-heads")
    p.add_argument("--max-position-embeddings", type=int, default=None,
                   help="default: 2048 (llava-1.5), 4096 (llava-next: a NeXT image alone is up "
                        "to 2928 tokens)")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="float32",
                   help="dtype the weights are stored in")
    p.add_argument("--layout", choices=["llava-hf", "transformers-4.52"], default="llava-hf",
                   help="tensor-name layout (llava-hf = as llava-hf/llava-1.5-7b-hf)")
    make_tiny_onevision.add_args(p)
    args = p.parse_args(argv)
    if args.text_kv_heads is None:
        args.text_kv_heads = args.text_heads
    if args.max_position_embeddings is None:
        args.max_position_embeddings = families.get(args.arch).TINY_MAX_POSITIONS
    if args.text_hidden % args.text_heads or args.text_heads % args.text_kv_heads:
        p.error("--text-hidden must divide by --text-heads, which must divide by --text-kv-heads")
    if (args.text_hidden // args.text_heads) % 2:
        p.error("text head_dim must be even (RoPE)")
    if args.vision_hidden % args.vision_heads:
        p.error("--vision-hidden must divide by --vision-heads")
    if args.vision_layers < 2:
        p.error("--vision-layers must be >= 2 (the feature layer is -2)")
    return args


# ------------------------------------------------------------------------------------------------
# tokenizer

def train_tokenizer(dest, user_defined=()):
    """Train with the spm_train binary in a scratch folder. Relative paths are used on purpose:
    spm_train records --input / --model_prefix in the model, so absolute paths would make the file
    depend on where the repository lives. `user_defined`: pieces the model itself keeps whole
    (SentencePiece user-defined symbols, ids right after <unk> <s> </s>), as Yi's tokenizer.model
    holds <|im_start|> / <|im_end|>."""
    with tempfile.TemporaryDirectory(prefix="era-spm-") as tmp:
        shutil.copyfile(CORPUS, os.path.join(tmp, "spm_corpus.txt"))
        flags = ["--input=spm_corpus.txt", "--model_prefix=tokenizer"] + SPM_FLAGS
        if user_defined:
            flags.append("--user_defined_symbols=" + ",".join(user_defined))
        spm_train = shutil.which("spm_train")
        if spm_train:
            subprocess.run([spm_train] + flags, cwd=tmp, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        else:  # same library through the Python binding
            import sentencepiece as spm
            cwd = os.getcwd()
            os.chdir(tmp)
            try:
                spm.SentencePieceTrainer.train(" ".join(flags))
            finally:
                os.chdir(cwd)
        shutil.copyfile(os.path.join(tmp, "tokenizer.model"), dest)


# ------------------------------------------------------------------------------------------------
# config files

def make_config(args, tok_vocab):
    image_token, pad_token = tok_vocab, tok_vocab + 1
    vocab = int(math.ceil((tok_vocab + 2) / 64.0)) * 64  # llava-hf pads 32002 -> 32064 likewise
    text = {
        "_name_or_path": "era/tiny-vicuna", "architectures": ["LlamaForCausalLM"],
        "model_type": "llama", "hidden_size": args.text_hidden,
        "intermediate_size": args.text_intermediate, "num_hidden_layers": args.text_layers,
        "num_attention_heads": args.text_heads, "num_key_value_heads": args.text_kv_heads,
        "hidden_act": "silu", "max_position_embeddings": args.max_position_embeddings,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "rope_scaling": None,
        "attention_bias": False, "tie_word_embeddings": False, "vocab_size": vocab,
        "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": pad_token, "torch_dtype": args.dtype,
    }
    vision = {
        "model_type": "clip_vision_model", "hidden_size": args.vision_hidden,
        "intermediate_size": args.vision_intermediate, "num_hidden_layers": args.vision_layers,
        "num_attention_heads": args.vision_heads, "num_channels": 3, "image_size": 336,
        "patch_size": 14, "hidden_act": "quick_gelu", "layer_norm_eps": 1e-5,
        "projection_dim": args.vision_hidden, "vocab_size": 32000,
    }
    # the family's config.json around them (llava-1.5, llava-next)
    return families.get(args.arch).tiny_config(text, vision, image_token, pad_token, vocab,
                                               args.dtype)


def tokenizer_files(image_token, pad_token, processor_class="LlavaProcessor"):
    def added(content, special=True):
        return {"content": content, "lstrip": False, "normalized": False, "rstrip": False,
                "single_word": False, "special": special}
    tokenizer_config = {
        "add_bos_token": True, "add_eos_token": False,
        "added_tokens_decoder": {"0": added("<unk>"), "1": added("<s>"), "2": added("</s>"),
                                 str(image_token): added("<image>"),
                                 str(pad_token): added("<pad>")},
        "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>",
        "clean_up_tokenization_spaces": False, "legacy": True, "model_max_length": 1000000000,
        "padding_side": "left", "processor_class": processor_class, "sp_model_kwargs": {},
        "tokenizer_class": "LlamaTokenizer", "use_default_system_prompt": False,
    }
    special_tokens_map = {
        "bos_token": {"content": "<s>", "lstrip": False, "normalized": False, "rstrip": False,
                      "single_word": False},
        "eos_token": {"content": "</s>", "lstrip": False, "normalized": False, "rstrip": False,
                      "single_word": False},
        "unk_token": {"content": "<unk>", "lstrip": False, "normalized": False, "rstrip": False,
                      "single_word": False},
        "pad_token": {"content": "<pad>", "lstrip": False, "normalized": False, "rstrip": False,
                      "single_word": False},
    }
    return {
        "tokenizer_config.json": tokenizer_config,
        "special_tokens_map.json": special_tokens_map,
        "added_tokens.json": {"<image>": image_token, "<pad>": pad_token},
    }


# ------------------------------------------------------------------------------------------------
# weights

def tensor_shapes(config):
    """Every tensor of a llava-hf 1.5 / v1.6 checkpoint (old layout), name -> shape, including the
    ones LLaVA never uses (last vision layer, post_layernorm) so the loader is tested on real file
    sets. v1.6 (model_type llava_next) adds the top-level `image_newline` [text hidden]."""
    v, t = config["vision_config"], config["text_config"]
    C, I, P, G = v["hidden_size"], v["intermediate_size"], v["patch_size"], 336 // 14
    shapes = {
        "vision_tower.vision_model.embeddings.class_embedding": [C],
        "vision_tower.vision_model.embeddings.patch_embedding.weight": [C, 3, P, P],
        "vision_tower.vision_model.embeddings.position_embedding.weight": [G * G + 1, C],
        "vision_tower.vision_model.pre_layrnorm.weight": [C],
        "vision_tower.vision_model.pre_layrnorm.bias": [C],
        "vision_tower.vision_model.post_layernorm.weight": [C],
        "vision_tower.vision_model.post_layernorm.bias": [C],
    }
    for i in range(v["num_hidden_layers"]):
        shapes.update(clip_layer_shapes(f"vision_tower.vision_model.encoder.layers.{i}.", C, I))
    D, V, FF = t["hidden_size"], t["vocab_size"], t["intermediate_size"]
    hd = D // t["num_attention_heads"]
    q_out, kv_out = t["num_attention_heads"] * hd, t["num_key_value_heads"] * hd
    shapes.update({
        "multi_modal_projector.linear_1.weight": [D, C], "multi_modal_projector.linear_1.bias": [D],
        "multi_modal_projector.linear_2.weight": [D, D], "multi_modal_projector.linear_2.bias": [D],
        "language_model.model.embed_tokens.weight": [V, D],
        "language_model.model.norm.weight": [D], "language_model.lm_head.weight": [V, D],
    })
    if config["model_type"] == "llava_next":
        shapes["image_newline"] = [D]
    for i in range(t["num_hidden_layers"]):
        p = f"language_model.model.layers.{i}."
        shapes.update({
            p + "self_attn.q_proj.weight": [q_out, D], p + "self_attn.k_proj.weight": [kv_out, D],
            p + "self_attn.v_proj.weight": [kv_out, D], p + "self_attn.o_proj.weight": [D, q_out],
            p + "mlp.gate_proj.weight": [FF, D], p + "mlp.up_proj.weight": [FF, D],
            p + "mlp.down_proj.weight": [D, FF], p + "input_layernorm.weight": [D],
            p + "post_attention_layernorm.weight": [D],
        })
    return shapes


def init_std(name):
    """(mean, std) per tensor. Chosen so the random model is not degenerate: q/k get a larger
    std so attention rows are far from uniform (the CLS saliency map and the LAR bias then
    matter), norms are 1 + noise and biases non-zero so a dropped weight or bias shows in parity
    tests, and token embeddings are large so greedy decoding does not collapse."""
    if name.endswith(("layernorm.weight", "layer_norm1.weight", "layer_norm2.weight",
                      "pre_layrnorm.weight", "post_layernorm.weight", "norm.weight")):
        return 1.0, 0.1
    if name.endswith(".bias"):
        return 0.0, 0.02
    if "vision_tower" in name and ("q_proj" in name or "k_proj" in name):
        return 0.0, 0.1
    if "language_model" in name and ("q_proj" in name or "k_proj" in name):
        return 0.0, 0.08
    if name.endswith("class_embedding"):
        return 0.0, 0.1
    if name == "image_newline":
        # HF initialises it as randn * 1/sqrt(D); 0.1 keeps it of the projected rows' magnitude,
        # so a missing / misplaced newline shows in the logits.
        return 0.0, 0.1
    if name.endswith("position_embedding.weight"):
        return 0.0, 0.02
    if name.endswith("embed_tokens.weight"):
        # Large on purpose: with LLaMA-like small embeddings the two random layers' output is
        # dominated by the (constant) image context and greedy decoding repeats one token
        # forever, which would make the 32-step greedy parity test blind to KV-cache bugs. With
        # std 1 the current token steers the next one (32 distinct tokens on the fixture).
        return 0.0, 1.0
    return 0.0, 0.05


def make_weights(config, seed, dtype, tok_vocab):
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for name, shape in sorted(tensor_shapes(config).items()):  # fixed order -> deterministic
        mean, std = init_std(name)
        t = torch.randn(shape, generator=gen) * std + mean
        if name.endswith(("embed_tokens.weight", "lm_head.weight")):
            # Rows past the tokenizer (<image>, <pad>, vocab padding) are the mean row plus small
            # noise, as HF's resize_token_embeddings made them for llava-hf: their logits stay
            # near the average, so greedy decoding practically never emits them.
            t[tok_vocab:] = t[:tok_vocab].mean(0) + torch.randn(
                shape[0] - tok_vocab, shape[1], generator=gen) * (0.1 * std)
        out[name] = t.to(dtype)
    return out


def to_new_layout(name):
    """llava-hf names -> transformers >= 4.52 names."""
    if name == "image_newline":
        return "model.image_newline"
    for old, new in (("language_model.model.", "model.language_model."),
                     ("language_model.lm_head.", "lm_head."),
                     ("vision_tower.", "model.vision_tower."),
                     ("multi_modal_projector.", "model.multi_modal_projector.")):
        if name.startswith(old):
            return new + name[len(old):]
    return name


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, sort_keys=False)
        f.write("\n")


def main(argv=None):
    args = parse_args(argv)
    family = families.get(args.arch)
    if family.make_tiny is not None:  # llava-onevision, qwen2.5-vl: made by transformers itself
        return family.make_tiny(args)
    os.makedirs(args.out, exist_ok=True)

    tok_path = os.path.join(args.out, "tokenizer.model")
    if args.tokenizer_model:
        shutil.copyfile(args.tokenizer_model, tok_path)
    else:
        train_tokenizer(tok_path)
    import sentencepiece as spm
    tok_vocab = spm.SentencePieceProcessor(model_file=tok_path).get_piece_size()

    config = make_config(args, tok_vocab)
    image_token, pad_token = config["image_token_index"], config["pad_token_id"]
    write_json(os.path.join(args.out, "config.json"), config)
    for name, obj in tokenizer_files(image_token, pad_token, family.PROCESSOR_CLASS).items():
        write_json(os.path.join(args.out, name), obj)
    write_json(os.path.join(args.out, "preprocessor_config.json"), family.TINY_PREPROCESSOR)
    write_json(os.path.join(args.out, "generation_config.json"),
               {"_from_model_config": True, "bos_token_id": 1, "eos_token_id": 2,
                "pad_token_id": pad_token,
                "transformers_version": family.TRANSFORMERS_VERSION})

    weights = make_weights(config, args.seed, DTYPES[args.dtype], tok_vocab)
    if args.layout == "transformers-4.52":
        weights = {to_new_layout(k): v for k, v in weights.items()}
    save_file(weights, os.path.join(args.out, "model.safetensors"), metadata={"format": "pt"})

    # Round-trip through the loader the exporter uses, so a broken fixture fails here.
    ckpt = load_checkpoint(args.out)
    n_params = sum(t.numel() for t in weights.values())
    print(f"make_tiny_llava: wrote {args.out} ({n_params} parameters, tokenizer {tok_vocab} "
          f"pieces, vocab {config['vocab_size']}, image token {image_token}, "
          f"arch {ckpt.config.arch}, layout {ckpt.layout})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
