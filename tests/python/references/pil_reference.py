"""Reference LLaVA-1.5 image preprocessing with Pillow, numerically as HF's CLIPImageProcessor.

This is the independent reference the C++ preprocessing is tested against (and what the eager
reference model is fed). It follows the original LLaVA "pad" path:
  Image.open(path).convert("RGB") -> expand2square(mean colour) -> PIL bicubic resize to 336
  -> rescale float64(x) * (1/255) cast to float32 -> (x - mean_f32) / std_f32 in float32 -> CHW.
preprocess_llava15 is the general form: "pad" or "crop" (no expand2square), then the CLIP
processor's resize of the shortest edge (any Pillow filter) and centre crop, written from the
torchvision / CLIP definitions with Pillow alone (no transformers).
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


FILTERS = {"box": Image.BOX, "bilinear": Image.BILINEAR, "hamming": Image.HAMMING,
           "bicubic": Image.BICUBIC, "lanczos": Image.LANCZOS}


def resize(img, w, h, resample="bicubic"):
    if img.size == (w, h):
        return img.copy()
    return img.resize((w, h), resample=FILTERS[resample])


def resize_bicubic(img, w, h):
    return resize(img, w, h, "bicubic")


def resize_shortest_edge(img, edge, resample="bicubic"):
    """torchvision's Resize(int): the short side becomes `edge`, the long side keeps the aspect
    ratio, truncated (int(edge * long / short)); a square's width counts as the short side."""
    w, h = img.size
    if w <= h:
        return resize(img, edge, int(edge * h / w), resample)
    return resize(img, int(edge * w / h), edge, resample)


def center_crop(img, size):
    """torchvision's CenterCrop on a PIL image: offsets floor((dim - size) / 2) (rounded as
    int(round((dim - size) / 2.0)) in torchvision, floor in HF; HF's is what era follows); a side
    shorter than `size` is padded with black, the image at ceil((size - dim) / 2)."""
    w, h = img.size
    canvas = Image.new("RGB", (max(w, size), max(h, size)), (0, 0, 0))
    pad_x, pad_y = -(-(max(w, size) - w) // 2), -(-(max(h, size) - h) // 2)
    canvas.paste(img, (pad_x, pad_y))
    left = (w - size) // 2 + pad_x
    top = (h - size) // 2 + pad_y
    return canvas.crop((left, top, left + size, top + size))


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


def llava15_crop(img, size=336, shortest_edge=None, mode="pad", resample="bicubic",
                 mean=CLIP_MEAN):
    """The uint8 size x size RGB image LLaVA-1.5 sees: "pad" expands to a square in the mean
    colour first (LLaVA's eval), "crop" does not (CLIPImageProcessor); then the shortest edge is
    resized to `shortest_edge` (default `size`) and the centre `size` x `size` cropped."""
    if mode == "pad":
        img = expand2square(img, pad_color(mean))
    elif mode != "crop":
        raise ValueError(f"mode {mode!r}")
    return center_crop(resize_shortest_edge(img, shortest_edge or size, resample), size)


def preprocess_llava15(img, size=336, shortest_edge=None, mode="pad", resample="bicubic",
                       mean=CLIP_MEAN, std=CLIP_STD):
    """llava15_crop, normalised: float32 [3, size, size]."""
    return normalize(llava15_crop(img, size, shortest_edge, mode, resample, mean), mean, std)

