#!/usr/bin/env python3
"""Eager-reference fixture for the C++ LLaVA-NeXT (anyres) parity tests.

    make_next_refs.py --checkpoint DIR --image PNG --out DIR

DIR is a LLaVA-NeXT checkpoint (model_type llava_next, e.g. `make_tiny_llava.py --arch
llava-next`). The visual sequence is built as HF's LlavaNext builds it, independently of the C++
code: Pillow anyres preprocessing (references.anyres_reference: select_best_resolution with the
pinpoints read as (height, width), aspect-preserving bicubic resize with ceil fit, black pad,
336 px tiles row-major, the image squashed to 336 px as the base crop first), the eager float32
CLIP tower on all 1+tiles crops as one batch, the projector, then pack_image_features (base
tokens; tile grid view/permute to (D, rows*24, cols*24), unpad with int(round(x, 7)), one
image_newline per grid row, flattened row-major).

The prompt is original-LLaVA vicuna_v1 ("What is shown in this image?"); the packed rows replace
the single image placeholder, positions are 0..L-1, and the decoder runs in "explicit" mode (no
cache, plain softmax(QK^T/sqrt(d) + causal) V, zero LAR bias).

Writes into --out (float32, C order, numpy.save):
  pixel_values.npy  [1+tiles,3,S,S]  preprocessed crops: base, then the tiles row-major
  projected.npy     [1+tiles,N,D]    projector output per crop (before packing)
  packed.npy        [T,D]            the packed visual embeddings (what replaces <image>)
  input_ids.json    {"prompt", "ids" (one placeholder), "image_token_id"}
  logits.npy        [L,V]            decoder logits at every position, L = len(ids) - 1 + T
  info.json         {"original": [h,w], "best": [h,w], "rows", "cols", "patches_per_side",
                     "tokens": T, "unpad": {"top","bottom","left","right"} (rows [top,bottom)
                     and columns [left,right) of the (rows*p) x (cols*p) token grid that survive),
                     "grid": [kept rows, kept cols], "image_pos" (index of the placeholder in
                     ids), "seq_len": L, "pinpoints"}
"""
import argparse
import os
import sys
import time

import torch

from era_tools.hf_checkpoint import CheckpointError, load_checkpoint
from era_tools.safetensors_io import WeightsFileError
from references import anyres_reference, pil_reference, prompt_reference
from references.eager_llava import build_eager_modules, splice_image
from references.fixture_files import save, write_json

QUESTION = "What is shown in this image?"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--image", required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    start = time.time()

    try:
        ckpt = load_checkpoint(args.checkpoint)
    except (CheckpointError, WeightsFileError) as e:
        print(f"make_next_refs: error: {e}", file=sys.stderr)
        return 2
    cfg, pre = ckpt.config, ckpt.preprocessor
    if cfg.arch != "llava-next":
        print(f"make_next_refs: error: {args.checkpoint}: not a LLaVA-NeXT checkpoint "
              f"(arch {cfg.arch})", file=sys.stderr)
        return 2
    tile, p_side = cfg.vision.image_size, cfg.vision.grid
    pinpoints = [tuple(x) for x in cfg.grid_pinpoints]
    vision, projector, decoder = build_eager_modules(ckpt)
    image_newline = projector.image_newline.detach().float()
    os.makedirs(args.out, exist_ok=True)

    # ---- image: anyres crops
    img = pil_reference.load_rgb(args.image)
    original = (img.size[1], img.size[0])  # (height, width)
    pixels, best = anyres_reference.preprocess_anyres(img, pinpoints, tile, pre.mean, pre.std)
    rows, cols = best[0] // tile, best[1] // tile
    assert pixels.shape == (1 + rows * cols, 3, tile, tile), pixels.shape
    save(args.out, "pixel_values.npy", pixels)

    # ---- prompt
    sp = prompt_reference.load_sp(ckpt.tokenizer_path)
    prompt = prompt_reference.vicuna_v1_prompt(QUESTION)
    ids = prompt_reference.tokenizer_image_token(sp, prompt, cfg.image_token_id, bos_id=ckpt.bos_id)
    if ids.count(cfg.image_token_id) != 1:
        print(f"make_next_refs: error: expected one image placeholder in {ids}", file=sys.stderr)
        return 2
    write_json(args.out, "input_ids.json",
               {"prompt": prompt, "ids": ids, "image_token_id": cfg.image_token_id})

    with torch.no_grad():
        feats = vision(torch.from_numpy(pixels))[0]  # [1+tiles, N, C]: all crops, one batch
        projected = projector(feats)                 # [1+tiles, N, D]
        save(args.out, "projected.npy", projected)
        packed = anyres_reference.pack_image_features(projected, original, pinpoints, tile,
                                                      p_side, image_newline)
        save(args.out, "packed.npy", packed)
        T = packed.shape[0]
        box = anyres_reference.unpad_box(original, rows * p_side, cols * p_side)
        kept = (box["bottom"] - box["top"], box["right"] - box["left"])
        expect = anyres_reference.token_count(original, pinpoints, tile, p_side)
        if T != expect or T != p_side * p_side + kept[0] * (kept[1] + 1):
            print(f"make_next_refs: error: packed {T} tokens, the count formula gives {expect}",
                  file=sys.stderr)
            return 1

        # ---- splice: text before, T visual rows, text after
        embeds, p_img = splice_image(decoder, ids, cfg.image_token_id, packed[None])
        L = embeds.shape[1]
        if L > cfg.text.max_position_embeddings:
            print(f"make_next_refs: warning: sequence {L} exceeds max_position_embeddings "
                  f"{cfg.text.max_position_embeddings}", file=sys.stderr)
        logits = decoder(embeds, torch.arange(L).unsqueeze(0), torch.zeros(1, L))[0]
        save(args.out, "logits.npy", logits)

    write_json(args.out, "info.json", {
        "original": list(original), "best": list(best), "rows": rows, "cols": cols,
        "patches_per_side": p_side, "tokens": T, "unpad": box, "grid": list(kept),
        "image_pos": p_img, "seq_len": L, "pinpoints": [list(x) for x in pinpoints]})
    print(f"make_next_refs: wrote {args.out}: image {original[0]}x{original[1]} (HxW) -> best "
          f"{best[0]}x{best[1]}, {rows}x{cols} tiles, grid {kept[0]}x{kept[1]} after unpad, "
          f"{T} visual tokens, L={L}, V={logits.shape[1]} in {time.time() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
