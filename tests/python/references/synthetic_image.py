"""Seeded synthetic test images (the image and anyres fixtures' inputs)."""
import numpy as np


def synth(w, h, channels=3, seed=0):
    """Gradients + noise + saturated blocks and isolated pixels (exercises rounding and clipping)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    img = np.empty((h, w, channels), np.float64)
    for c in range(channels):
        fx, fy = rng.uniform(0.3, 4.0, 2)
        img[..., c] = 127.5 + 110.0 * np.sin(2 * np.pi * (fx * x / max(w, 2) + fy * y / max(h, 2)) + 1.7 * c)
    img += rng.normal(0.0, 18.0, img.shape)
    # Hard-edged saturated rectangles.
    for _ in range(max(1, (w * h) // 4000) if w * h > 16 else 1):
        x0, x1 = sorted(rng.integers(0, w + 1, 2))
        y0, y1 = sorted(rng.integers(0, h + 1, 2))
        img[y0:y1 + 1, x0:x1 + 1, :] = rng.choice([0.0, 255.0], size=channels)
    # Salt and pepper.
    mask = rng.random((h, w)) < 0.01
    img[mask] = rng.choice([0.0, 255.0], size=(int(mask.sum()), channels))
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)
