#!/usr/bin/env python3
"""Fixture for the C++ image tests: test images, bad files and Pillow references.

Writes into --out:
  files/      encoded test images (PNG of many sizes and modes, JPEG, BMP, WebP, TIFF, PPM, GIF)
  bad/        files the loader must refuse (missing, empty, truncated, not an image, huge header...)
  refs/       .npy references:
                <case>.rgb.npy          Pillow-decoded RGB uint8 [H,W,3] (Image.open().convert("RGB"))
                <case>.pad<S>.npy       pil_reference.preprocess_pad(...) float32 [3,S,S]
                resize_<i>.src.npy      a synthetic uint8 image [H,W,C] (C = 3 or 1)
                resize_<i>.ref.npy      Pillow's resize of it with the case's filter (bicubic,
                                        bilinear, box, hamming, lanczos)
                llava15_<i>.npy         pil_reference.preprocess_llava15 of a decoded image in
                                        one mode ("pad" / "crop"), shortest edge, crop and filter
  npy/        arrays saved by numpy for the .npy reader/writer tests
  manifest.json listing every case (paths relative to --out).

The references come from tests/python/references/pil_reference.py (the project's Python
reference); this script only generates inputs (references/synthetic_image.py) and calls it.
Deterministic: numpy seeded noise + gradients + edges.
"""
import argparse
import io
import json
import os
import shutil
import struct
import zlib

import numpy as np
from PIL import Image

from references import pil_reference
from references.synthetic_image import synth


class Fixture:
    def __init__(self, out):
        self.out = out
        self.manifest = {"decode": [], "resize": [], "llava15": [], "errors": [], "npy": []}

    def rel(self, *parts):
        return os.path.join(*parts)

    def path(self, rel):
        return os.path.join(self.out, rel)

    def save_npy(self, rel, arr):
        np.save(self.path(rel), np.ascontiguousarray(arr))
        return rel

    # ---- decode + preprocess cases --------------------------------------------------------------
    def decode_case(self, name, image, ext, sizes=(336,), tolerance=0, **save_kw):
        rel = self.rel("files", f"{name}.{ext}")
        image.save(self.path(rel), **save_kw)
        self.add_decode(name, rel, sizes, tolerance)

    def raw_png_case(self, name, data):
        rel = self.rel("files", f"{name}.png")
        with open(self.path(rel), "wb") as f:
            f.write(data)
        self.add_decode(name, rel)

    def add_decode(self, name, rel, sizes=(336,), tolerance=0):
        rgb = pil_reference.load_rgb(self.path(rel))
        with Image.open(self.path(rel)) as im:
            fmt, mode = im.format, im.mode
        entry = {
            "name": name, "file": rel, "format": fmt, "mode": mode,
            "width": rgb.size[0], "height": rgb.size[1],
            # Largest per-pixel difference allowed between OpenCV's and Pillow's decode (0: bit-exact).
            "decode_tolerance": tolerance,
            "rgb": self.save_npy(self.rel("refs", f"{name}.rgb.npy"), np.asarray(rgb, np.uint8)),
            "preprocess": [],
        }
        for s in sizes:
            ref = pil_reference.preprocess_pad(rgb, size=s)
            entry["preprocess"].append({"size": s, "ref": self.save_npy(self.rel("refs", f"{name}.pad{s}.npy"), ref)})
        self.manifest["decode"].append(entry)

    # ---- resize-only cases ----------------------------------------------------------------------
    def resize_case(self, src_wh, dst_wh, channels=3, seed=0, resample="bicubic"):
        i = len(self.manifest["resize"])
        arr = synth(src_wh[0], src_wh[1], channels, seed=1000 + i + seed)
        im = Image.fromarray(arr[..., 0] if channels == 1 else arr, "L" if channels == 1 else "RGB")
        out = pil_reference.resize(im, *dst_wh, resample)
        ref = np.asarray(out, np.uint8)
        if channels == 1:
            ref = ref[..., None]
        self.manifest["resize"].append({
            "name": f"{src_wh[0]}x{src_wh[1]}_to_{dst_wh[0]}x{dst_wh[1]}_c{channels}_{resample}",
            "filter": resample,
            "src": self.save_npy(self.rel("refs", f"resize_{i}.src.npy"), arr),
            "ref": self.save_npy(self.rel("refs", f"resize_{i}.ref.npy"), ref),
            "out_w": dst_wh[0], "out_h": dst_wh[1], "channels": channels,
        })

    # ---- LLaVA-1.5 preprocessing in both modes, any filter / shortest edge ---------------------
    def llava15_case(self, decoded, mode, size, shortest_edge, resample):
        """`decoded`: a decode case's entry (its Pillow-decoded RGB is the input)."""
        i = len(self.manifest["llava15"])
        rgb = Image.fromarray(np.load(self.path(decoded["rgb"])), "RGB")
        ref = pil_reference.preprocess_llava15(rgb, size=size, shortest_edge=shortest_edge,
                                               mode=mode, resample=resample)
        self.manifest["llava15"].append({
            "name": f"{decoded['name']}_{mode}_{shortest_edge}to{size}_{resample}",
            "rgb": decoded["rgb"], "mode": mode, "size": size, "shortest_edge": shortest_edge,
            "filter": resample, "ref": self.save_npy(self.rel("refs", f"llava15_{i}.npy"), ref)})

    def error_case(self, name, rel, what):
        self.manifest["errors"].append({"name": name, "file": rel, "what": what})


def gif_with_offset_frame(data, screen, offset):
    """The GIF `data` with a larger logical screen and its first frame moved to `offset` (Pillow
    always writes frame 0 at 0,0 filling the screen)."""
    out = bytearray(data)
    out[6:10] = struct.pack("<HH", *screen)
    pos = 13 + (3 * (2 << (out[10] & 7)) if out[10] & 0x80 else 0)
    while out[pos] == 0x21:  # skip extensions to the image descriptor
        pos += 2
        while out[pos]:
            pos += out[pos] + 1
        pos += 1
    assert out[pos] == 0x2C, "no image descriptor"
    out[pos + 1:pos + 5] = struct.pack("<HH", *offset)
    return bytes(out)


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def raw_png(w, h, bit_depth, color_type, rows):
    """A PNG written by hand (Pillow cannot write 16-bit colour or 2/4-bit grey)."""
    ihdr = struct.pack(">IIBBBBB", w, h, bit_depth, color_type, 0, 0, 0)
    raw = b"".join(b"\x00" + r for r in rows)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", zlib.compress(raw)) +
            png_chunk(b"IEND", b""))


def huge_png(w, h):
    """A valid-looking PNG whose IHDR declares w x h; the IDAT holds almost nothing."""
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\x00" * 64)
    return b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", idat) + png_chunk(b"IEND", b"")


def patch_jpeg_size(data, w, h):
    """Rewrite the SOF frame size of a baseline JPEG."""
    i = 2
    while i < len(data):
        assert data[i] == 0xFF
        code = data[i + 1]
        length = struct.unpack(">H", data[i + 2:i + 4])[0]
        if 0xC0 <= code <= 0xCF and code not in (0xC4, 0xC8, 0xCC):
            return data[:i + 5] + struct.pack(">HH", h, w) + data[i + 9:]
        i += 2 + length
    raise ValueError("no SOF")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    for sub in ("files", "bad", "refs", "npy"):
        shutil.rmtree(os.path.join(out, sub), ignore_errors=True)
        os.makedirs(os.path.join(out, sub))
    fx = Fixture(out)

    # --- PNG RGB over many sizes and aspect ratios (w, h) ---
    sizes = [(1, 1), (1, 500), (500, 1), (2, 3), (3, 2), (17, 290), (100, 100), (336, 336), (337, 335),
             (335, 337), (336, 200), (200, 336), (640, 480), (480, 640), (1000, 333), (1280, 720)]
    for k, (w, h) in enumerate(sizes):
        extra = (224,) if (w, h) in [(640, 480), (17, 290), (336, 200)] else ()
        fx.decode_case(f"rgb_{w}x{h}", Image.fromarray(synth(w, h, 3, seed=k)), "png", sizes=(336,) + extra)

    # --- other PNG modes ---
    fx.decode_case("grey_L_321x240", Image.fromarray(synth(321, 240, 1, seed=50)[..., 0], "L"), "png")
    fx.decode_case("rgba_300x401", Image.fromarray(synth(300, 401, 4, seed=51), "RGBA"), "png")
    la = Image.fromarray(synth(150, 90, 2, seed=52), "LA")
    fx.decode_case("la_150x90", la, "png")
    base = Image.fromarray(synth(257, 199, 3, seed=53))
    pal = base.convert("P", palette=Image.ADAPTIVE, colors=64)
    fx.decode_case("palette_257x199", pal, "png")
    fx.decode_case("palette_trns_190x260", base.resize((190, 260)).convert("P", palette=Image.ADAPTIVE, colors=16),
                   "png", transparency=3)
    fx.decode_case("bilevel_1_133x77", Image.fromarray(synth(133, 77, 1, seed=54)[..., 0], "L").convert("1"), "png")
    # 16-bit and sub-byte PNGs. 16-bit grey opens as mode "I" and convert("RGB") saturates at 255,
    # so the values straddle 255; 16-bit colour keeps the high byte.
    rng = np.random.default_rng(56)
    g16 = rng.integers(0, 600, (45, 70)).astype(">u2")
    g16[:, ::7] = rng.integers(0, 65536, (45, 10))
    fx.raw_png_case("grey16_70x45", raw_png(70, 45, 16, 0, [r.tobytes() for r in g16]))
    rgb16 = rng.integers(0, 65536, (33, 51, 3)).astype(">u2")
    fx.raw_png_case("rgb16_51x33", raw_png(51, 33, 16, 2, [r.tobytes() for r in rgb16]))
    la16 = rng.integers(0, 65536, (21, 40, 2)).astype(">u2")
    fx.raw_png_case("la16_40x21", raw_png(40, 21, 16, 4, [r.tobytes() for r in la16]))
    rgba16 = rng.integers(0, 65536, (19, 23, 4)).astype(">u2")
    fx.raw_png_case("rgba16_23x19", raw_png(23, 19, 16, 6, [r.tobytes() for r in rgba16]))
    for bits in (2, 4):
        vals = rng.integers(0, 1 << bits, (30, 41)).astype(np.uint8)
        rows = [np.packbits(np.unpackbits(r[:, None], axis=1)[:, 8 - bits:].reshape(-1)).tobytes() for r in vals]
        fx.raw_png_case(f"grey{bits}bit_41x30", raw_png(41, 30, bits, 0, rows))
    # A PNG whose name says JPEG: formats are detected from the bytes, not the extension.
    fx.decode_case("png_named_jpg", Image.fromarray(synth(120, 80, 3, seed=55)), "jpg", format="PNG")

    # --- JPEG (Pillow and OpenCV both use Debian's libjpeg-turbo) ---
    photo = Image.fromarray(synth(640, 480, 3, seed=60))
    fx.decode_case("jpeg_q90_420_640x480", photo, "jpg", quality=90)
    fx.decode_case("jpeg_q95_444_333x517", Image.fromarray(synth(333, 517, 3, seed=61)), "jpg", quality=95,
                   subsampling=0)
    fx.decode_case("jpeg_q75_422_17x290", Image.fromarray(synth(17, 290, 3, seed=62)), "jpg", quality=75,
                   subsampling=1)
    fx.decode_case("jpeg_progressive_401x301", Image.fromarray(synth(401, 301, 3, seed=63)), "jpg", quality=85,
                   progressive=True)
    fx.decode_case("jpeg_grey_250x190", Image.fromarray(synth(250, 190, 1, seed=64)[..., 0], "L"), "jpg", quality=90)
    # CMYK JPEG: Pillow's CMYK->RGB rounds as x*(255-k)/255, OpenCV's as (x*k)>>8: off by <= 1.
    fx.decode_case("jpeg_cmyk_150x110", Image.fromarray(synth(150, 110, 3, seed=66)).convert("CMYK"), "jpg",
                   tolerance=1, quality=95)
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 CW": must be ignored, as Image.open does
    fx.decode_case("jpeg_exif_rot6_320x240", Image.fromarray(synth(320, 240, 3, seed=65)), "jpg", quality=90,
                   exif=exif.tobytes())

    # --- other containers ---
    fx.decode_case("bmp_rgb_203x151", Image.fromarray(synth(203, 151, 3, seed=70)), "bmp")
    fx.decode_case("bmp_palette_97x64", Image.fromarray(synth(97, 64, 3, seed=71)).convert(
        "P", palette=Image.ADAPTIVE, colors=200), "bmp")
    fx.decode_case("webp_lossless_211x173", Image.fromarray(synth(211, 173, 3, seed=72)), "webp", lossless=True)
    fx.decode_case("webp_lossy_211x173", Image.fromarray(synth(211, 173, 3, seed=73)), "webp", quality=80)
    fx.decode_case("tiff_rgb_150x100", Image.fromarray(synth(150, 100, 3, seed=74)), "tif")
    fx.decode_case("ppm_rgb_64x48", Image.fromarray(synth(64, 48, 3, seed=75)), "ppm")
    fx.decode_case("gif_120x90", Image.fromarray(synth(120, 90, 3, seed=76)).convert(
        "P", palette=Image.ADAPTIVE, colors=32), "gif")
    # GIF in the shapes real files come in (era decodes them with giflib; Pillow is the reference):
    # interlaced or not, a transparent index, animated (the first frame counts), a 2-colour table,
    # and a first frame smaller than the screen at an offset (the rest takes index 0's colour, or
    # the transparent index's).
    gif_p = Image.fromarray(synth(73, 41, 3, seed=77)).convert("P", palette=Image.ADAPTIVE, colors=64)
    fx.decode_case("gif_interlaced_73x41", gif_p, "gif", interlace=True)
    fx.decode_case("gif_progressive_off_73x41", gif_p, "gif", interlace=False)
    fx.decode_case("gif_transparent_73x41", gif_p, "gif", transparency=5)
    fx.decode_case("gif_two_colours_50x30", Image.fromarray(synth(50, 30, 3, seed=78)).convert("1").convert("P"), "gif")
    frame2 = Image.fromarray(synth(73, 41, 3, seed=79)).convert("P", palette=Image.ADAPTIVE, colors=64)
    rel = fx.rel("files", "gif_animated_73x41.gif")
    gif_p.save(fx.path(rel), save_all=True, append_images=[frame2], duration=100, loop=0)
    fx.add_decode("gif_animated_73x41", rel)
    for name, extra in (("gif_offset_frame", {}), ("gif_offset_frame_transparent", {"transparency": 7})):
        buf = io.BytesIO()
        gif_p.save(buf, "GIF", **extra)
        rel = fx.rel("files", name + ".gif")
        with open(fx.path(rel), "wb") as f:
            f.write(gif_with_offset_frame(buf.getvalue(), screen=(90, 60), offset=(11, 7)))
        fx.add_decode(name, rel)

    # --- resize-only cases: C++ resize of Pillow-decoded pixels vs Pillow's resize ---
    for src, dst in [((640, 480), (336, 336)), ((480, 640), (336, 336)), ((1000, 333), (336, 112)),
                     ((17, 290), (336, 336)), ((1, 1), (336, 336)), ((1, 500), (7, 3)), ((500, 1), (336, 1)),
                     ((1, 500), (1, 336)), ((2, 3), (5, 7)), ((336, 336), (336, 336)), ((337, 335), (336, 336)),
                     ((100, 100), (336, 336)), ((1280, 720), (336, 189)), ((1280, 720), (1024, 576)),
                     ((2000, 1500), (336, 252)), ((3000, 40), (3, 2)), ((300, 200), (299, 201)),
                     ((300, 200), (600, 400)), ((336, 336), (224, 224)), ((64, 64), (1000, 17)),
                     ((100, 500), (336, 336)), ((1000, 1000), (336, 336))]:
        fx.resize_case(src, dst, 3)
    for src, dst in [((640, 480), (336, 336)), ((13, 7), (336, 336)), ((333, 777), (100, 1000))]:
        fx.resize_case(src, dst, 1)
    # The other Pillow filters a preprocessor_config.json's `resample` can name: down, up, odd.
    for resample in ("bilinear", "box", "hamming", "lanczos"):
        for src, dst in [((640, 480), (336, 336)), ((17, 290), (336, 336)), ((1280, 720), (336, 189)),
                         ((300, 200), (299, 201)), ((7, 5), (336, 240)), ((3000, 40), (3, 2))]:
            fx.resize_case(src, dst, 3, resample=resample)
        fx.resize_case((333, 777), (100, 1000), 1, resample=resample)

    # --- LLaVA-1.5: "pad" and "crop", a shortest edge above / below the crop, every filter ---
    decoded = {c["name"]: c for c in fx.manifest["decode"]}
    for name in ("rgb_640x480", "rgb_480x640", "rgb_1000x333", "rgb_2x3", "rgb_100x100", "rgb_337x335"):
        for mode in ("pad", "crop"):
            for size, edge in ((336, 336), (224, 256), (224, 200)):
                fx.llava15_case(decoded[name], mode, size, edge, "bicubic")
        for resample in ("bilinear", "box", "hamming", "lanczos"):
            fx.llava15_case(decoded[name], "crop", 224, 256, resample)

    # --- normalisation of every possible byte value, per channel ---
    allv = np.stack([np.arange(256, dtype=np.uint8).reshape(16, 16),
                     np.arange(255, -1, -1, dtype=np.uint8).reshape(16, 16),
                     ((np.arange(256) * 37) % 256).astype(np.uint8).reshape(16, 16)], axis=-1)
    fx.manifest["normalize"] = {
        "src": fx.save_npy("refs/normalize.src.npy", allv),
        "ref": fx.save_npy("refs/normalize.ref.npy", pil_reference.normalize(Image.fromarray(allv, "RGB"))),
    }

    # --- files the loader must refuse ---
    fx.error_case("missing", "bad/does_not_exist.png", "no such file")
    open(fx.path("bad/empty.jpg"), "wb").close()
    fx.error_case("empty", "bad/empty.jpg", "empty")
    buf = io.BytesIO()
    photo.save(buf, "JPEG", quality=90)
    jpeg = buf.getvalue()
    with open(fx.path("bad/truncated.jpg"), "wb") as f:
        f.write(jpeg[: len(jpeg) * 6 // 10])
    fx.error_case("truncated_jpeg", "bad/truncated.jpg", "truncated")
    with open(fx.path("bad/truncated_header.jpg"), "wb") as f:
        f.write(jpeg[:100])
    fx.error_case("truncated_jpeg_header", "bad/truncated_header.jpg", "truncated")
    buf = io.BytesIO()
    photo.save(buf, "PNG")
    png = buf.getvalue()
    with open(fx.path("bad/truncated.png"), "wb") as f:
        f.write(png[: len(png) // 2])
    fx.error_case("truncated_png", "bad/truncated.png", "truncated")
    # Flip bytes inside the image data: libpng's CRC check must catch it.
    corrupt = bytearray(png)
    idat = png.index(b"IDAT")
    for k in range(idat + 100, idat + 140):
        corrupt[k] ^= 0x5A
    with open(fx.path("bad/corrupt_idat.png"), "wb") as f:
        f.write(bytes(corrupt))
    fx.error_case("corrupt_png_data", "bad/corrupt_idat.png", "cannot decode")
    buf = io.BytesIO()
    photo.save(buf, "WEBP", quality=80)
    with open(fx.path("bad/truncated.webp"), "wb") as f:
        f.write(buf.getvalue()[: len(buf.getvalue()) // 2])
    fx.error_case("truncated_webp", "bad/truncated.webp", "truncated")
    buf = io.BytesIO()
    photo.save(buf, "BMP")
    with open(fx.path("bad/truncated.bmp"), "wb") as f:
        f.write(buf.getvalue()[: len(buf.getvalue()) // 2])
    fx.error_case("truncated_bmp", "bad/truncated.bmp", "truncated")
    with open(fx.path("bad/not_an_image.jpg"), "w") as f:
        f.write("This is a text file, not a JPEG.\n" * 20)
    fx.error_case("text_named_jpg", "bad/not_an_image.jpg", "not a supported image")
    buf = io.BytesIO()
    gif_p.save(buf, "GIF")
    with open(fx.path("bad/truncated.gif"), "wb") as f:
        f.write(buf.getvalue()[: len(buf.getvalue()) // 2])
    fx.error_case("truncated_gif", "bad/truncated.gif", "GIF")
    with open(fx.path("bad/garbage_after_signature.png"), "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    fx.error_case("garbage_png", "bad/garbage_after_signature.png", "corrupt PNG")
    os.makedirs(fx.path("bad/a_directory.png"))
    fx.error_case("directory", "bad/a_directory.png", "directory")
    with open(fx.path("bad/huge_header.png"), "wb") as f:
        f.write(huge_png(50000, 50000))
    fx.error_case("huge_png_header", "bad/huge_header.png", "over the limit")
    with open(fx.path("bad/huge_header.jpg"), "wb") as f:
        f.write(patch_jpeg_size(jpeg, 60000, 50000))
    fx.error_case("huge_jpeg_header", "bad/huge_header.jpg", "over the limit")

    # --- .npy files written by numpy ---
    arrays = {
        "f32_2x3x4": (np.arange(24, dtype=np.float32).reshape(2, 3, 4) * 0.5 - 3.25, (1, 0)),
        "f64_5": (np.linspace(-1.0, 1.0, 5), (1, 0)),
        "i64_scalar": (np.array(-1234567890123, dtype=np.int64), (1, 0)),
        "i32_3x0": (np.zeros((3, 0), np.int32), (1, 0)),
        "u8_4x5x3": ((np.arange(60) * 7 % 256).astype(np.uint8).reshape(4, 5, 3), (1, 0)),
        "i32_v2_7x2": (np.arange(-7, 7, dtype=np.int32).reshape(7, 2), (2, 0)),
    }
    for name, (arr, version) in arrays.items():
        rel = fx.rel("npy", f"{name}.npy")
        with open(fx.path(rel), "wb") as f:
            np.lib.format.write_array(f, arr, version=version)
        fx.manifest["npy"].append({
            "file": rel, "dtype": str(arr.dtype), "shape": list(arr.shape), "version": version[0],
            "sum": float(arr.astype(np.float64).sum()),
            "first": float(arr.reshape(-1)[0]) if arr.size else 0.0,
        })

    with open(fx.path("manifest.json"), "w") as f:
        json.dump(fx.manifest, f, indent=1)
    print(f"make_image_refs: {len(fx.manifest['decode'])} decode, {len(fx.manifest['resize'])} resize, {len(fx.manifest['llava15'])} llava15, "
          f"{len(fx.manifest['errors'])} error, {len(fx.manifest['npy'])} npy cases -> {out}")


if __name__ == "__main__":
    main()
