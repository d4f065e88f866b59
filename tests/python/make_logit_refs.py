#!/usr/bin/env python3
"""Eager-reference fixture for the C++ model parity tests.

    make_logit_refs.py --checkpoint DIR --image PNG --out DIR [--seed 0]

Runs the checkpoint through the eager float32 modules of era_tools.llava_model
(references.eager_llava), with the decoder in its "explicit" mode (no KV cache, plain width-d
keys, softmax(QK^T/sqrt(d) + log_b + causal) V recomputed from scratch), i.e. independently of the
cache / augmented-key path the bundle uses.

Inputs are built with the other Python references: Pillow preprocessing (pil_reference, LLaVA
"pad" path) and original-LLaVA prompt tokenisation (prompt_reference, vicuna_v1). The 576
projected image rows replace the single image placeholder in place; positions are 0..L-1.

Writes into --out (all float32, C order, numpy.save):
  pixel_values.npy    [1,3,S,S]   preprocessed image
  input_ids.json      {"prompt", "ids" (with one placeholder), "image_token_id"}
  vision_features.npy [N,C]       vision tower output (CLS dropped)
  attn_logits.npy     [H,N]       CLS-row attention logits of the feature layer
  attn_probs.npy      [H,N]       CLS-row probabilities (softmax incl. CLS, CLS dropped)
  mean_logits.npy     [H,N]       CLS-free "mean" readout of the same layer: attention logits
                                  averaged over the N patch query rows, CLS key column dropped
  mean_probs.npy      [H,N]       the same for probabilities (each row's softmax over all N+1
                                  keys, CLS column dropped, then averaged over the N rows)
  projected.npy       [N,D]       projector output
  logits.npy          [L,V]       decoder logits at every position, zero LAR bias
  log_bias.npy        [L]         0 on text positions, U[0, log 6) on the N image positions (seeded)
  logits_biased.npy   [L,V]       decoder logits with that bias (in every layer)
  logits_biased_early.npy [L,V]   decoder logits with that bias in layer 0 only (per-layer LAR
                                  scales [1, 0, 0, ...])
  greedy.json         {"tokens": 32 greedy ids, "top2_margins": logit gap top1 - top2 per step}:
                      zero bias, argmax (first index on ties) of the last position, full
                      recompute each step, EOS does not stop, no vocabulary mask
"""
import argparse
import math
import os
import sys
import time

import numpy as np
import torch

from era_tools.hf_checkpoint import CheckpointError, load_checkpoint
from era_tools.safetensors_io import WeightsFileError
from references import pil_reference, prompt_reference
from references.eager_llava import build_eager_modules, splice_image
from references.fixture_files import save, write_json

QUESTION = "What is shown in this image?"
GREEDY_STEPS = 32


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--image", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=0, help="seed of the random image-token log-bias")
    args = p.parse_args(argv)
    start = time.time()
    torch.manual_seed(0)  # nothing below is random in torch; fixed anyway

    try:
        ckpt = load_checkpoint(args.checkpoint)
    except (CheckpointError, WeightsFileError) as e:
        print(f"make_logit_refs: error: {e}", file=sys.stderr)
        return 2
    cfg, pre = ckpt.config, ckpt.preprocessor
    vision, projector, decoder = build_eager_modules(ckpt)
    os.makedirs(args.out, exist_ok=True)

    # ---- image
    pixels = pil_reference.preprocess_pad(pil_reference.load_rgb(args.image),
                                          size=cfg.vision.image_size, mean=pre.mean, std=pre.std)
    pixels = pixels[None]  # [1,3,S,S]
    save(args.out, "pixel_values.npy", pixels)

    # ---- prompt
    sp = prompt_reference.load_sp(ckpt.tokenizer_path)
    prompt = prompt_reference.vicuna_v1_prompt(QUESTION)
    ids = prompt_reference.tokenizer_image_token(sp, prompt, cfg.image_token_id, bos_id=ckpt.bos_id)
    if ids.count(cfg.image_token_id) != 1:
        print(f"make_logit_refs: error: expected one image placeholder in {ids}", file=sys.stderr)
        return 2
    write_json(args.out, "input_ids.json",
               {"prompt": prompt, "ids": ids, "image_token_id": cfg.image_token_id})

    with torch.no_grad():
        feats, attn_logits, attn_probs, mean_logits, mean_probs = vision(
            torch.from_numpy(pixels))[:5]
        projected = projector(feats)
        save(args.out, "vision_features.npy", feats[0])
        save(args.out, "attn_logits.npy", attn_logits[0])
        save(args.out, "attn_probs.npy", attn_probs[0])
        save(args.out, "mean_logits.npy", mean_logits[0])
        save(args.out, "mean_probs.npy", mean_probs[0])
        save(args.out, "projected.npy", projected[0])

        # ---- splice: text before, N image rows, text after
        embeds, p_img = splice_image(decoder, ids, cfg.image_token_id, projected)
        L, N = embeds.shape[1], projected.shape[1]
        positions = torch.arange(L).unsqueeze(0)

        zero_bias = torch.zeros(1, L)
        logits = decoder(embeds, positions, zero_bias)[0]
        save(args.out, "logits.npy", logits)

        rng = np.random.default_rng(args.seed)
        log_bias = np.zeros(L, dtype=np.float32)
        log_bias[p_img:p_img + N] = rng.uniform(0.0, math.log(6.0), N).astype(np.float32)
        save(args.out, "log_bias.npy", log_bias)
        biased = decoder(embeds, positions, torch.from_numpy(log_bias)[None])[0]
        save(args.out, "logits_biased.npy", biased)
        early = torch.zeros(cfg.text.num_layers)
        early[0] = 1.0  # LAR in the first layer only (the paper's early-only schedule)
        biased_early = decoder(embeds, positions, torch.from_numpy(log_bias)[None], early)[0]
        save(args.out, "logits_biased_early.npy", biased_early)

        # ---- greedy, no cache: every step recomputes the whole sequence
        tokens, margins = [], []
        seq, last = embeds, logits[-1].numpy()
        for step in range(GREEDY_STEPS):
            next_id = int(np.argmax(last))  # numpy argmax: first index on ties
            tokens.append(next_id)
            top2 = np.sort(last)[-2:]
            margins.append(float(top2[1] - top2[0]))  # how robust this step is to rounding
            if step + 1 == GREEDY_STEPS:
                break
            seq = torch.cat([seq, decoder.embed(torch.tensor([[next_id]]))], dim=1)
            T = seq.shape[1]
            last = decoder(seq, torch.arange(T).unsqueeze(0), torch.zeros(1, T))[0, -1].numpy()
        write_json(args.out, "greedy.json", {"tokens": tokens, "top2_margins": margins})

    print(f"make_logit_refs: wrote {args.out}: L={L} (image rows {p_img}..{p_img + N - 1}), "
          f"V={logits.shape[1]}, greedy {tokens[:8]}... ({len(set(tokens))} distinct, smallest "
          f"top-2 margin {min(margins):.2g}) in {time.time() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
