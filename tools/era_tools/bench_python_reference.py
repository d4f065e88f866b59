"""The eager PyTorch timing reference for era_bench: same model, same inputs, Python.

    bench_python_reference.py --bundle BUNDLE --inputs DIR [--warmup 1] [--repeat 3]
                              [--threads N] [--dtype float32] [--device cpu] [--out result.json]

Runs the eager modules of tools/era_tools/llava_model.py (the very classes export_llava.py
scripts into the bundle) with the bundle's own weights (read back from vision.pt / projector.pt /
decoder.pt, so random bundles from make_random_bundle.py work too) on what `era_bench
--dump-inputs DIR` wrote: the preprocessed pixels, the prompt ids and, per configuration (method
and budget), the visual tokens the C++ decoder saw (kept indices, LAR biases). Per configuration
it times, like the C++ Stats:

  vision_ms            vision tower + projector over all crops
  prefill_ms           the decoder over the whole prompt into a fresh KV cache, last logits,
                       greedy pick of the first token
  decode_ms_per_token  one cached decode step (embed, decoder, argmax), mean over max_new_tokens-1

The visual rows are the projected features at the kept indices (NeXT newline: -1 -> the learned
image_newline), with key_log_bias = log(b_k): the same shapes and the same attention maths as the
C++ run. (A merging method's rows are cluster averages in C++; the representative row is taken
here: the values do not change the cost.) The reduction itself is not rerun in Python. Output:
JSON {"torch", "threads", "rows": [{"label", "vision_ms", "prefill_ms", "decode_ms_per_token"}]},
each timing as {"median", "min", "max"}.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import numpy as np
import torch

from .hf_checkpoint import TextConfig, VisionConfig
from .llava_model import LlamaDecoder, Projector, VisionTower, _assign
from . import torch_versions

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bundle", required=True)
    p.add_argument("--inputs", required=True, help="folder written by era_bench --dump-inputs")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0 = default)")
    p.add_argument("--dtype", choices=list(DTYPES), help="default: the bundle's")
    p.add_argument("--device", default="cpu")
    p.add_argument("--out", help="result JSON (default: stdout)")
    return p.parse_args(argv)


def load_modules(bundle, dtype, device):
    """Eager VisionTower / Projector / LlamaDecoder with the scripted modules' weights."""
    with open(os.path.join(bundle, "manifest.json"), encoding="utf-8") as f:
        m = json.load(f)
    v, t = m["vision"], m["text"]
    vcfg = VisionConfig(hidden_size=v["hidden_size"],
                        intermediate_size=v.get("intermediate_size", 4 * v["hidden_size"]),
                        num_layers=v["num_layers"], num_heads=v["num_heads"], num_channels=3,
                        image_size=v["image_size"], patch_size=v["patch_size"],
                        layer_norm_eps=1e-5, hidden_act="quick_gelu",
                        feature_layer=v["feature_layer"], select_strategy=v["select_strategy"],
                        feature_layers=v.get("feature_layers"))
    tcfg = TextConfig(hidden_size=t["hidden_size"], intermediate_size=t["intermediate_size"],
                      num_layers=t["num_layers"], num_heads=t["num_heads"],
                      num_kv_heads=t["num_kv_heads"], head_dim=t["head_dim"],
                      vocab_size=t["vocab_size"],
                      max_position_embeddings=t["max_position_embeddings"],
                      rms_norm_eps=t["rms_norm_eps"], rope_theta=t["rope_theta"],
                      tie_word_embeddings=False)
    dtype = dtype or DTYPES[m["dtype"]]
    files = m["files"]

    def weights(key):
        scripted = torch_versions.load(os.path.join(bundle, files[key]), map_location="cpu")
        return {k: p for k, p in scripted.named_parameters()}

    attention = m["exported_with"].get("attention", "math")
    vision = _assign(VisionTower(vcfg, attention=attention, device="meta", dtype=dtype),
                     weights("vision"), dtype, "vision")
    proj_w = weights("projector")
    projector = _assign(Projector(v["hidden_size"], t["hidden_size"],
                                  bias="linear_1.bias" in proj_w,
                                  image_newline="image_newline" in proj_w, device="meta",
                                  dtype=dtype), proj_w, dtype, "projector")
    decoder = _assign(LlamaDecoder(tcfg, attention=attention, device="meta", dtype=dtype),
                      weights("decoder"), dtype, "decoder")
    return [mod.to(device) for mod in (vision, projector, decoder)] + [dtype]


def spread(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def sequence(row, inputs, features, projector, decoder, device):
    """(embeds [1,T,D], positions [1,T], key_log_bias [1,T]) of one configuration's prompt."""
    ids, image_id = inputs["token_ids"], inputs["image_token_id"]
    text = decoder.embed(torch.tensor([ids], device=device))[0]
    offsets = np.cumsum([0] + inputs["crops_per_image"]) * features.shape[1]
    flat = features.reshape(-1, features.shape[-1])
    parts, bias, image = [], [], 0
    for i, tok in enumerate(ids):
        if tok != image_id:
            parts.append(text[i:i + 1])
            bias.append(0.0)
            continue
        red = row["images"][image]
        n = (row["visual_tokens"] if len(row["images"]) == 1 else len(red["kept"])) or 0
        kept = red["kept"] or list(range(n))  # "full" may not list them: all, in order
        rows = []
        for k in kept:
            rows.append(projector.image_newline.view(1, -1) if k < 0
                        else flat[offsets[image] + k:offsets[image] + k + 1])
        parts.append(torch.cat(rows, 0))
        b = red["bias"] or [1.0] * len(kept)
        bias.extend(math.log(max(x, 1e-30)) for x in b)
        image += 1
    embeds = torch.cat(parts, 0).unsqueeze(0)
    T = embeds.shape[1]
    return (embeds, torch.arange(T, device=device).unsqueeze(0),
            torch.tensor([bias], dtype=torch.float32, device=device))


def time_row(row, inputs, pixels, modules, max_new, warmup, repeat, device):
    vision, projector, decoder, dtype = modules
    out = {"label": row["label"], "vision_ms": [], "prefill_ms": [], "decode_ms_per_token": []}
    scales = decoder.unit_scales().to(device)
    for it in range(warmup + repeat):
        sync(device)
        t0 = time.perf_counter()
        feats = projector(vision(pixels)[0])
        sync(device)
        vision_ms = (time.perf_counter() - t0) * 1e3
        embeds, positions, bias = sequence(row, inputs, feats, projector, decoder, device)
        T = embeds.shape[1]
        if T != row["prompt_tokens"]:
            raise SystemExit(f"bench_python_reference: {row['label']}: rebuilt {T} prompt tokens, "
                             f"the C++ run had {row['prompt_tokens']}")
        k_cache, v_cache = decoder.new_cache(1, T + max(max_new - 1, 0))
        sync(device)
        t0 = time.perf_counter()
        logits = decoder(embeds, positions, 0, bias, k_cache, v_cache, scales, 0, True)
        nxt = int(logits[0, -1].argmax())
        prefill_ms = (time.perf_counter() - t0) * 1e3
        steps = []
        zero = torch.zeros(1, 1, device=device)
        for s in range(max_new - 1):
            t0 = time.perf_counter()
            emb = decoder.embed(torch.tensor([[nxt]], device=device))
            logits = decoder(emb, torch.tensor([[T + s]], device=device), T + s, zero, k_cache,
                             v_cache, scales, 0, True)
            nxt = int(logits[0, -1].argmax())
            steps.append((time.perf_counter() - t0) * 1e3)
        if it >= warmup:
            out["vision_ms"].append(vision_ms)
            out["prefill_ms"].append(prefill_ms)
            out["decode_ms_per_token"].append(sum(steps) / len(steps) if steps else 0.0)
        print(f"bench_python_reference: {row['label']}: run {it + 1}/{warmup + repeat} "
              f"prefill {prefill_ms:.1f} ms ({T} tokens)", file=sys.stderr)
    for key in ("vision_ms", "prefill_ms", "decode_ms_per_token"):
        out[key] = spread(out[key])
    return out


def main(argv=None):
    args = parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    with open(os.path.join(args.inputs, "inputs.json"), encoding="utf-8") as f:
        inputs = json.load(f)
    pixels = torch.from_numpy(np.load(os.path.join(args.inputs, "pixel_values.npy"))).to(device)
    with torch.inference_mode():
        modules = load_modules(args.bundle, DTYPES.get(args.dtype), device)
        rows = [time_row(r, inputs, pixels, modules, inputs["max_new_tokens"], args.warmup,
                         max(1, args.repeat), device) for r in inputs["rows"]]
    result = {"torch": torch.__version__, "threads": torch.get_num_threads(), "rows": rows}
    text = json.dumps(result, indent=1)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
