#!/usr/bin/env python3
"""Fixture for the C++ LLaVA-NeXT anyres tests: images and Pillow references of their crops.

Writes into --out:
  files/<case>.png          a synthetic RGB test image
  refs/<case>.crop<i>.npy   uint8 [336, 336, 3]: crop 0 the base image, then the tiles row-major
  manifest.json             {"pinpoints": [[h, w], ...], "tile": 336, "patches_per_side": 24,
                             "cases": [{name, file, height, width, best [h, w], rows, cols,
                                        fit [h, w], unpad {top, bottom, left, right}, tokens,
                                        crops [...]}]}

The anyres steps are written here from the description of HF's LlavaNextImageProcessor (PIL path)
and modeling_llava_next (reference/llava.md A.6), independently of the C++ code: pinpoints read as
(height, width), select_best_resolution with Python floats and int(), the aspect fit with
math.ceil, Pillow BICUBIC, a black canvas with the paste offset floored, tiles row-major, and the
base as the whole image squashed to 336 x 336. The token count uses HF's int(round(x, 7)) unpad.
"""
import argparse
import json
import math
import os
import shutil

import numpy as np
from PIL import Image

from references import pil_reference
from references.synthetic_image import synth

PINPOINTS = [[336, 672], [672, 336], [672, 672], [1008, 336], [336, 1008]]  # (height, width)
TILE = 336
PATCHES = 24  # 336 / 14

# (height, width) of the test images: the llava.md token table, the unpad int/round disagreements,
# extreme aspect ratios, tiny images (the 2-tile tie) and sizes that need no resize.
SIZES = [(336, 336), (300, 400), (480, 640), (640, 480), (899, 1024), (427, 640), (720, 1280), (300, 1200),
         (55, 176), (88, 99), (205, 656), (333, 1000), (1000, 333), (700, 700), (672, 672), (336, 1008),
         (20, 900), (900, 20), (250, 200), (1, 1), (2, 3), (8, 2000), (1013, 337)]


def select_best_resolution(height, width, candidates):
    best, max_eff, min_waste = None, 0, float("inf")
    for ch, cw in candidates:
        scale = min(cw / width, ch / height)
        eff = min(int(width * scale) * int(height * scale), width * height)
        waste = cw * ch - eff
        if eff > max_eff or (eff == max_eff and waste < min_waste):
            best, max_eff, min_waste = (ch, cw), eff, waste
    return best


def fit_size(height, width, target_h, target_w):
    sw, sh = target_w / width, target_h / height
    if sw < sh:
        return min(math.ceil(height * sw), target_h), target_w
    return target_h, min(math.ceil(width * sh), target_w)


def anyres_crops(img, candidates=PINPOINTS, tile=TILE):
    """PIL RGB image -> (best, fit, list of uint8 HWC crops: base then tiles row-major)."""
    width, height = img.size
    th, tw = select_best_resolution(height, width, candidates)
    nh, nw = fit_size(height, width, th, tw)
    resized = img if (nw, nh) == img.size else img.resize((nw, nh), resample=Image.BICUBIC)
    canvas = Image.new("RGB", (tw, th), (0, 0, 0))
    canvas.paste(resized, ((tw - nw) // 2, (th - nh) // 2))
    arr = np.asarray(canvas, np.uint8)
    tiles = [arr[y:y + tile, x:x + tile] for y in range(0, th, tile) for x in range(0, tw, tile)]
    base = img if img.size == (tile, tile) else img.resize((tile, tile), resample=Image.BICUBIC)
    return (th, tw), (nh, nw), [np.asarray(base, np.uint8)] + tiles


def unpad(height, width, rows, cols, p=PATCHES):
    """HF unpad_image applied to the row and column ids of a (rows*p) x (cols*p) grid."""
    h, w = rows * p, cols * p
    row_ids, col_ids = np.arange(h), np.arange(w)
    if width / height > w / h:
        new_h = int(round(height * (w / width), 7))
        pad = (h - new_h) // 2
        row_ids = row_ids[pad:h - pad]
        top, left = (int(row_ids[0]) if len(row_ids) else pad), 0
    else:
        new_w = int(round(width * (h / height), 7))
        pad = (w - new_w) // 2
        col_ids = col_ids[pad:w - pad]
        top, left = 0, (int(col_ids[0]) if len(col_ids) else pad)
    return {"top": top, "bottom": top + len(row_ids), "left": left, "right": left + len(col_ids)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out = os.path.abspath(args.out)
    for sub in ("files", "refs"):
        shutil.rmtree(os.path.join(out, sub), ignore_errors=True)
        os.makedirs(os.path.join(out, sub))

    manifest = {"pinpoints": PINPOINTS, "tile": TILE, "patches_per_side": PATCHES, "cases": []}
    for k, (h, w) in enumerate(SIZES):
        name = f"anyres_{h}x{w}"
        rel = os.path.join("files", name + ".png")
        Image.fromarray(synth(w, h, 3, seed=500 + k)).save(os.path.join(out, rel))
        img = pil_reference.load_rgb(os.path.join(out, rel))
        best, fit, crops = anyres_crops(img)
        rows, cols = best[0] // TILE, best[1] // TILE
        box = unpad(h, w, rows, cols)
        tokens = PATCHES * PATCHES + (box["bottom"] - box["top"]) * (box["right"] - box["left"] + 1)
        crop_files = []
        for i, c in enumerate(crops):
            assert c.shape == (TILE, TILE, 3), (name, i, c.shape)
            crel = os.path.join("refs", f"{name}.crop{i}.npy")
            np.save(os.path.join(out, crel), np.ascontiguousarray(c))
            crop_files.append(crel)
        manifest["cases"].append({
            "name": name, "file": rel, "height": h, "width": w, "best": list(best), "rows": rows, "cols": cols,
            "fit": list(fit), "unpad": box, "tokens": tokens, "crops": crop_files,
        })

    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print(f"make_anyres_refs: {len(manifest['cases'])} images -> {out}")


if __name__ == "__main__":
    main()
