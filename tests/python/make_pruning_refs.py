#!/usr/bin/env python3
"""Eager-reference fixture for in-decoder pruning (FastV, DART; baselines.md §2, §6).

    make_pruning_refs.py --checkpoint DIR --image PNG --out DIR

Builds the LLaVA-1.5 prompt sequence as make_logit_refs.py does (Pillow preprocessing, original
LLaVA prompt tokenisation, the 576 projected rows spliced in, positions 0..L-1), then for each
case selects the kept image tokens from the explicit (no-cache) decoder's layer K-1 signals with an
independent numpy implementation of the method, and runs the official code's "mask
implementation": nothing is removed, positions stay the original ones, and from layer K on the
dropped image tokens are hidden from every query's keys (forward_explicit_masked). The C++ pruned
KV-cache path (shortened sequence, gapped positions, per-layer cache lengths) must match it.

Writes into --out, per case NAME (fastv_k1_b64, dart_k1_b64, dart_k1_b61_exact):
  NAME.json         {"method", "layer", "budget", "exact_budget", "image_start", "image_length",
                     "kept" (sequence positions of the kept image tokens), "greedy" (8 ids)}
  NAME_logits.npy   [9, V] float32: the last prompt position's logits, then the logits after
                    each of the first 8 greedy tokens (full recompute each step, same mask)
"""
import argparse
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

from era_tools.hf_checkpoint import load_checkpoint
from references import pil_reference, prompt_reference
from references.eager_llava import build_eager_modules, splice_image

QUESTION = "What is shown in this image?"
STEPS = 8
CASES = [("fastv", 1, 64, False), ("dart", 1, 64, False), ("dart", 1, 61, True)]


def top(values, k, descending):
    """Indices of the k largest / smallest values, first index on ties."""
    order = np.argsort(-values if descending else values, kind="stable")
    return [int(i) for i in order[:k]]


def fastv_keep(last_logits, start, n, budget):
    """last_logits [H,T]: softmax over every key, head mean, top `budget` image tokens."""
    probs = torch.softmax(last_logits.double(), dim=-1).mean(0).numpy()
    return sorted(start + i for i in top(probs[start:start + n], budget, True))


def dart_keep(keys, normed, start, n, text_after, budget, p_img, p_txt, exact):
    """keys [T,H*d] post-RoPE, normed [T,D]: pivots by key L1 norm, each claims the least
    cosine-similar remaining image tokens (pivots in ascending position order)."""
    l1 = keys.double().abs().sum(-1).numpy()
    img_piv = [start + i for i in top(l1[start:start + n], min(p_img, budget) if exact else p_img,
                                      True)]
    txt_piv = [text_after[i] for i in top(l1[text_after], p_txt, True)]
    pivots = sorted(img_piv + txt_piv)
    if exact:
        picks = max(0, budget - len(img_piv))
        share = [picks // len(pivots) + (1 if i < picks % len(pivots) else 0)
                 for i in range(len(pivots))]
    else:
        share = [budget // (p_img + p_txt)] * len(pivots)
    pool = [p for p in range(start, start + n) if p not in img_piv]
    keep = list(img_piv)
    h = normed.double()
    for piv, k in zip(pivots, share):
        sims = F.cosine_similarity(h[piv][None], h[pool], dim=-1).numpy()
        chosen = [pool[i] for i in top(sims, k, False)]
        keep += chosen
        pool = [p for p in pool if p not in chosen]
    return sorted(keep)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--image", required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    ckpt = load_checkpoint(args.checkpoint)
    cfg, pre = ckpt.config, ckpt.preprocessor
    vision, projector, decoder = build_eager_modules(ckpt)
    os.makedirs(args.out, exist_ok=True)

    pixels = pil_reference.preprocess_pad(pil_reference.load_rgb(args.image),
                                          size=cfg.vision.image_size, mean=pre.mean, std=pre.std)
    sp = prompt_reference.load_sp(ckpt.tokenizer_path)
    prompt = prompt_reference.vicuna_v1_prompt(QUESTION)
    ids = prompt_reference.tokenizer_image_token(sp, prompt, cfg.image_token_id, bos_id=ckpt.bos_id)
    with torch.no_grad():
        projected = projector(vision(torch.from_numpy(pixels[None]))[0])
        embeds, start = splice_image(decoder, ids, cfg.image_token_id, projected)
        L, n = embeds.shape[1], projected.shape[1]
        positions = torch.arange(L).unsqueeze(0)
        bias = torch.zeros(1, L)
        text_after = list(range(start + n, L))

        for method, layer, budget, exact in CASES:
            hidden, keys, last = decoder.explicit_signals(embeds, positions, bias, layer - 1)
            if method == "fastv":
                kept = fastv_keep(last[0], start, n, budget)
            else:
                flat = keys[0].transpose(0, 1).reshape(L, -1)  # [T, H*d], heads concatenated
                kept = dart_keep(flat, decoder.norm(hidden)[0], start, n, text_after, budget, 4, 4,
                                 exact)
            key_kept = torch.ones(1, L, dtype=torch.bool)
            key_kept[0, start:start + n] = False
            key_kept[0, kept] = True

            seq, rows, tokens = embeds, [], []
            for step in range(STEPS + 1):
                T = seq.shape[1]
                mask = torch.cat([key_kept, torch.ones(1, T - L, dtype=torch.bool)], dim=1)
                logits = decoder.forward_explicit_masked(seq, torch.arange(T).unsqueeze(0),
                                                         torch.zeros(1, T), layer, mask)[0, -1]
                rows.append(logits.numpy())
                if step == STEPS:
                    break
                tokens.append(int(np.argmax(rows[-1])))
                seq = torch.cat([seq, decoder.embed(torch.tensor([[tokens[-1]]]))], dim=1)

            name = f"{method}_k{layer}_b{budget}" + ("_exact" if exact else "")
            np.save(os.path.join(args.out, name + "_logits.npy"),
                    np.ascontiguousarray(np.stack(rows).astype(np.float32)))
            with open(os.path.join(args.out, name + ".json"), "w", encoding="utf-8") as f:
                json.dump({"method": method, "layer": layer, "budget": budget,
                           "exact_budget": exact, "image_start": start, "image_length": n,
                           "kept": kept, "greedy": tokens}, f)
            print(f"make_pruning_refs: {name}: {len(kept)} of {n} image tokens kept, "
                  f"greedy {tokens}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
