"""Golden bytes of PyTorch's uint8 antialiased resize (the reference for the C++
ResampleArithmetic::kTorchUint8 in src/image/pil_resize.cpp, tests/image/pil_resize_test.cpp).

    make_torch_resize_refs.py [--out DIR] [--check DIR]

What it records: torch.nn.functional.interpolate(x, size=[H, W], mode="bicubic" or "bilinear",
antialias=True, align_corners=False) on a uint8 NCHW tensor on CPU, which is what
torchvision.transforms.v2.functional.resize does for uint8 tensors (transformers'
LlavaOnevisionVideoProcessor resizes video frames that way). Only torch 2.x takes uint8 there,
so the committed files tests/data/torch_resize/ come from the PyPI route's torch 2.11
(.venv-torch2) on an x86 CPU with AVX2; the Debian route's torch 1.13 cannot make them, and the
C++ test only reads them. The same files come out with ATEN_CPU_CAPABILITY=default (checked).

The source is a synthetic RGB image defined by integer arithmetic (`source_image`), which the C++
test computes again with the same formula (and checks against source.npy). Each case resizes it
to one size with one filter: both axes down, both up, one axis only (Torch skips the other),
and mixed up/down. For every case the script checks that Pillow's Image.resize gives different
bytes (so the goldens tell the two arithmetics apart) and that torchvision's v2 resize gives the
same bytes as interpolate (for BILINEAR torchvision takes the uint8 path only on AVX2/AVX-512
CPUs; elsewhere it resizes in float32 and rounds, which this check then skips).

Writes DIR/source.npy, one DIR/<case>.npy per case (uint8 [H, W, 3]) and DIR/index.json (the
cases, the torch version and CPU capability that made them). Regenerate from the repository root:

    .venv-torch2/bin/python tests/python/make_torch_resize_refs.py --out tests/data/torch_resize

With `--check DIR` nothing is written: the fresh bytes must equal DIR's (exit 1 naming the first
difference), e.g. to confirm another torch version or CPU gives the committed goldens.
"""
import argparse
import json
import os
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_OUT = os.path.join(REPO, "tests", "data", "torch_resize")

SOURCE_W, SOURCE_H = 97, 61
# (name, filter, out_w, out_h)
CASES = [
    ("down_bicubic", "bicubic", 40, 29),
    ("down_bilinear", "bilinear", 40, 29),
    ("up_bicubic", "bicubic", 113, 71),
    ("up_bilinear", "bilinear", 113, 71),
    ("width_only_bicubic", "bicubic", 23, 61),
    ("height_only_bilinear", "bilinear", 97, 160),
    ("wide_short_bicubic", "bicubic", 200, 17),
    ("narrow_tall_bilinear", "bilinear", 11, 140),
]


def source_image(width, height):
    """uint8 [H, W, 3]. All arithmetic is uint32 (wrapping), as in the C++ test:
        h = x*73856093 ^ y*19349663 ^ c*83492791;  h ^= h >> 13;  h *= 0x5bd1e995;  h ^= h >> 15
        v = h & 255                                if (x / 16 + y / 16) % 3 == 0  (noise blocks)
        v = (3x + 2y + 85c + (h & 15)) & 255       otherwise  (ramps with wrap-around edges)
    Noise next to hard edges makes the cubic overshoot and saturate; the ramps exercise rounding."""
    y, x, c = np.meshgrid(np.arange(height, dtype=np.uint32), np.arange(width, dtype=np.uint32),
                          np.arange(3, dtype=np.uint32), indexing="ij")
    h = (x * np.uint32(73856093)) ^ (y * np.uint32(19349663)) ^ (c * np.uint32(83492791))
    h ^= h >> np.uint32(13)
    h *= np.uint32(0x5BD1E995)
    h ^= h >> np.uint32(15)
    noise = h & np.uint32(255)
    ramp = (np.uint32(3) * x + np.uint32(2) * y + np.uint32(85) * c + (h & np.uint32(15))) & np.uint32(255)
    blocks = ((x // np.uint32(16) + y // np.uint32(16)) % np.uint32(3)) == 0
    return np.where(blocks, noise, ramp).astype(np.uint8)


def torch_resize(image, filt, out_w, out_h):
    import torch
    import torch.nn.functional as F
    x = torch.from_numpy(image).permute(2, 0, 1).unsqueeze(0).contiguous()
    y = F.interpolate(x, size=[out_h, out_w], mode=filt, antialias=True, align_corners=False)
    return y[0].permute(1, 2, 0).contiguous().numpy()


def check_against_others(image, filt, out_w, out_h, want, name):
    """torchvision's v2 resize must agree; Pillow must not (else the case cannot tell them apart)."""
    import torch
    from PIL import Image
    try:
        import torchvision.transforms.v2.functional as TF
        from torchvision.transforms import InterpolationMode
    except ImportError:
        TF = None
    # torchvision resizes uint8 natively for BICUBIC, and for BILINEAR only on AVX2/AVX-512 CPUs
    # (elsewhere it goes through float32 and rounds: other bytes).
    native = filt == "bicubic" or torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512")
    if TF is not None and native:
        mode = InterpolationMode.BICUBIC if filt == "bicubic" else InterpolationMode.BILINEAR
        tv = TF.resize(torch.from_numpy(image).permute(2, 0, 1).contiguous(), [out_h, out_w],
                       interpolation=mode, antialias=True).permute(1, 2, 0).numpy()
        if not np.array_equal(tv, want):
            sys.exit(f"{name}: torchvision's v2 resize differs from interpolate")
    resample = Image.Resampling.BICUBIC if filt == "bicubic" else Image.Resampling.BILINEAR
    pil = np.asarray(Image.fromarray(image).resize((out_w, out_h), resample))
    differing = int((pil != want).sum())
    if differing == 0:
        sys.exit(f"{name}: Pillow gives the same bytes; pick another size")
    return differing


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT, help="folder to write (default tests/data/torch_resize)")
    ap.add_argument("--check", metavar="DIR", help="compare with DIR's files instead of writing")
    args = ap.parse_args()

    import torch
    try:
        torch_resize(np.zeros((4, 4, 3), np.uint8), "bicubic", 2, 2)
    except RuntimeError as e:
        sys.exit(f"torch {torch.__version__} has no uint8 antialiased interpolate ({e}); use the PyPI "
                 "route's torch 2.x (.venv-torch2)")

    image = source_image(SOURCE_W, SOURCE_H)
    outputs = {}
    cases = []
    for name, filt, out_w, out_h in CASES:
        want = torch_resize(image, filt, out_w, out_h)
        differing = check_against_others(image, filt, out_w, out_h, want, name)
        outputs[name] = want
        cases.append({"name": name, "filter": filt, "out_w": out_w, "out_h": out_h, "file": f"{name}.npy",
                      "bytes_differing_from_pillow": differing})

    if args.check:
        if not np.array_equal(np.load(os.path.join(args.check, "source.npy")), image):
            sys.exit("source.npy differs")
        for c in cases:
            old = np.load(os.path.join(args.check, c["file"]))
            if old.shape != outputs[c["name"]].shape or not np.array_equal(old, outputs[c["name"]]):
                sys.exit(f"{c['name']}: torch {torch.__version__} gives other bytes than {args.check}")
        print(f"all {len(cases)} cases equal {args.check} (torch {torch.__version__}, "
              f"{torch.backends.cpu.get_cpu_capability()})")
        return 0

    os.makedirs(args.out, exist_ok=True)
    np.save(os.path.join(args.out, "source.npy"), image)
    for c in cases:
        np.save(os.path.join(args.out, c["file"]), outputs[c["name"]])
    index = {
        "generator": "tests/python/make_torch_resize_refs.py",
        "call": "torch.nn.functional.interpolate(uint8 NCHW, size=[out_h, out_w], mode=filter, "
                "antialias=True, align_corners=False)",
        "torch": torch.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "source": {"file": "source.npy", "width": SOURCE_W, "height": SOURCE_H},
        "cases": cases,
    }
    with open(os.path.join(args.out, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
        f.write("\n")
    print(f"wrote {len(cases)} cases to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
