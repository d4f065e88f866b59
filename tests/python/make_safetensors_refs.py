"""Fixture: `.safetensors` weights and their values, the reference for era's own reader
(src/model/safetensors.h, tests/model/test_safetensors.cpp).

    make_safetensors_refs.py --out DIR

Writes DIR/single/model.safetensors (every dtype era reads: F64 F32 F16 BF16 I64 I32 I16 I8 U8
BOOL; scalars, empty and odd shapes; metadata) and DIR/sharded/ (a LLaMA-shaped model split over
several shards with model.safetensors.index.json), and DIR/values.json: each tensor's dtype, shape
and values (as float64 or int), per folder.

The writer is the reference implementation where it is installed: the `safetensors` package for
the single file and transformers' `save_pretrained(max_shard_size=...)` for the sharded folder (the
PyPI route). Debian's route has neither and uses tools/era_tools/safetensors_io.py with an index
laid out as transformers writes it, saying so. values.json comes from the tensors as made, not as
read back, so a writer fault shows too.
"""
import argparse
import json
import os
import shutil
import sys

import torch

from era_tools.safetensors_io import save_file as era_save_file


def single_tensors():
    g = torch.Generator().manual_seed(0)
    return {
        "f64": torch.randn(3, 2, generator=g, dtype=torch.float64),
        "f32": torch.randn(2, 3, 4, generator=g),
        "f16": torch.randn(5, generator=g).to(torch.float16),
        "bf16": torch.randn(7, 3, generator=g).to(torch.bfloat16),
        "i64": torch.tensor([-(2 ** 40), 0, 2 ** 40 + 3]),
        "i32": torch.tensor([[-7, 8], [9, -10]], dtype=torch.int32),
        "i16": torch.tensor([-300, 301], dtype=torch.int16),
        "i8": torch.tensor([-128, 0, 127], dtype=torch.int8),
        "u8": torch.tensor([0, 7, 255], dtype=torch.uint8),
        "bool": torch.tensor([True, False, True]),
        "scalar": torch.tensor(2.5),
        "empty": torch.zeros(0, 3),
        "odd.name/with.dots": torch.arange(3, dtype=torch.float32),  # HF names are dotted paths
    }


def values(tensors):
    out = {}
    for name, t in tensors.items():
        flat = t.reshape(-1)
        v = flat.to(torch.float64).tolist() if t.is_floating_point() else flat.to(torch.int64).tolist()
        out[name] = {"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape), "values": v}
    return out


def write_single(folder, tensors):
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "model.safetensors")
    try:
        from safetensors.torch import save_file
    except ImportError:
        print("make_safetensors_refs: no `safetensors` package here; writing with era_tools.safetensors_io")
        era_save_file(tensors, path, metadata={"format": "pt"})
        return "era_tools"
    save_file(tensors, path, metadata={"format": "pt"})
    return "safetensors"


def write_sharded(folder):
    """A tiny LLaMA saved in shards of ~20 kB: -> (writer, {name: tensor})."""
    try:
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError:
        LlamaConfig = None
    if LlamaConfig is not None:
        torch.manual_seed(0)
        config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=3,
                             num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False)
        model = LlamaForCausalLM(config)
        model.save_pretrained(folder, max_shard_size="20KB", safe_serialization=True)
        return "transformers", {k: v.detach().clone() for k, v in model.state_dict().items()}
    print("make_safetensors_refs: no transformers here; sharding with era_tools.safetensors_io")
    g = torch.Generator().manual_seed(1)
    tensors = {"model.embed_tokens.weight": torch.randn(64, 32, generator=g), "lm_head.weight": torch.randn(64, 32, generator=g)}
    for i in range(3):
        tensors[f"model.layers.{i}.self_attn.q_proj.weight"] = torch.randn(32, 32, generator=g)
        tensors[f"model.layers.{i}.input_layernorm.weight"] = torch.ones(32)
    os.makedirs(folder, exist_ok=True)
    names = sorted(tensors)
    shards = [names[0::3], names[1::3], names[2::3]]
    weight_map, total = {}, 0
    for i, shard in enumerate(shards):
        file = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        era_save_file({n: tensors[n] for n in shard}, os.path.join(folder, file), metadata={"format": "pt"})
        for n in shard:
            weight_map[n] = file
            total += tensors[n].numel() * tensors[n].element_size()
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    return "era_tools", tensors


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    tensors = single_tensors()
    single_writer = write_single(os.path.join(args.out, "single"), tensors)
    sharded_writer, sharded = write_sharded(os.path.join(args.out, "sharded"))
    shard_files = [f for f in os.listdir(os.path.join(args.out, "sharded")) if f.endswith(".safetensors")]
    if len(shard_files) < 2:
        sys.exit(f"make_safetensors_refs: expected several shards, got {shard_files}")
    refs = {"single": {"writer": single_writer, "tensors": values(tensors)},
            "sharded": {"writer": sharded_writer, "tensors": values(sharded)}}
    with open(os.path.join(args.out, "values.json"), "w") as f:
        json.dump(refs, f)
    print(f"make_safetensors_refs: {args.out} (single by {single_writer}, {len(shard_files)} shards by {sharded_writer})")


if __name__ == "__main__":
    main()
