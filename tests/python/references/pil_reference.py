"""Reference LLaVA-1.5 image preprocessing with Pillow, numerically as HF's CLIPImageProcessor.

This is the independent reference the C++ preprocessing is tested against (and what the eager
reference model is fed). It follows the original LLaVA "pad" path:
  Image.open(path).convert("RGB") -> expand2square(mean colour) -> PIL bicubic resize to 336
  -> rescale float64(x) * (1/255) cast to float32 -> (x - mean_f32) / std_f32 in float32 -> CHW.
"""
import numpy as np
from PIL import Image

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


def load_rgb(path):
    """What LLaVA's evaluation does: no EXIF transpose, alpha dropped, palette/grey expanded."""
    with Image.open(path) as im:
        return im.convert("RGB")


def pad_color(mean=CLIP_MEAN):
    return tuple(int(m * 255) for m in mean)


def expand2square(img, color):
    w, h = img.size
    if w == h:
        return img
    s = max(w, h)
    canvas = Image.new(img.mode, (s, s), color)
    canvas.paste(img, ((s - w) // 2, (s - h) // 2))
    return canvas


def resize_bicubic(img, w, h):
    if img.size == (w, h):
        return img.copy()
    return img.resize((w, h), resample=Image.BICUBIC)


def normalize(img, mean=CLIP_MEAN, std=CLIP_STD):
    """uint8 HWC RGB image -> float32 CHW, HF-PIL numerics."""
    x = np.asarray(img, dtype=np.uint8).astype(np.float64) * (1.0 / 255.0)
    x = x.astype(np.float32)
    x = (x - np.asarray(mean, dtype=np.float32)) / np.asarray(std, dtype=np.float32)
    return np.ascontiguousarray(x.transpose(2, 0, 1).astype(np.float32))


def preprocess_pad(img, size=336, mean=CLIP_MEAN, std=CLIP_STD):
    """LLaVA-1.5 'pad' path on an RGB PIL image -> float32 [3, size, size]."""
    sq = expand2square(img, pad_color(mean))
    return normalize(resize_bicubic(sq, size, size), mean, std)
