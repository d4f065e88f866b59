#!/usr/bin/env python3
"""Tests of the LLaVA-NeXT (v1.6, anyres) Python side: the tiny NeXT checkpoint, its export
(manifest fields, image_newline in projector.pt), both name layouts, LLaVA-1.5 exports left
unchanged, and the anyres reference (references.anyres_reference: preprocessing, packing, token
counts) that make_next_refs.py writes the C++ fixtures with.

    test_next_export.py [--checkpoint DIR] [unittest options]

DIR is a checkpoint from `tools/make_tiny_llava.py --arch llava-next` (one is generated in a temp
folder when --checkpoint is not given). Exits non-zero on failure.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import torch
from PIL import Image

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = os.path.join(REPO, "tools")

from era_tools.hf_checkpoint import (NEXT_DEFAULT_PINPOINTS, CheckpointError, load_checkpoint,
                                     load_config)
from era_tools import torch_versions
from era_tools.make_tiny_llava import to_new_layout
from era_tools.safetensors_io import load_file, save_file
from references import anyres_reference as ar
from references import pil_reference
from references.checkpoint_main import run_unittests
from references.fixture_files import dump_json, read_json

CHECKPOINT = None  # set in main()
EXPORTER = os.path.join(TOOLS, "export_llava.py")
MAKE_TINY = os.path.join(TOOLS, "make_tiny_llava.py")
MAKE_REFS = os.path.join(REPO, "tests", "python", "make_next_refs.py")
SAMPLE = os.path.join(REPO, "tests", "data", "sample.png")
PINPOINTS = [(336, 672), (672, 336), (672, 672), (1008, 336), (336, 1008)]
TILE, P = 336, 24
# (height, width) -> tokens, /work/shared/reference/llava.md A.6
TOKENS = {(336, 336): 1176, (480, 640): 2340, (899, 1024): 2634, (700, 700): 2928}
MORE_TOKENS = {(300, 400): 1368, (427, 640): 2144, (1080, 1920): 1948, (300, 1200): 1890}


def export(ckpt, out, *extra):
    return subprocess.run([sys.executable, EXPORTER, "--checkpoint", ckpt, "--out", out, *extra],
                          capture_output=True, text=True, timeout=300)


def checkpoint_newline():
    tensors, _ = load_file(os.path.join(CHECKPOINT, "model.safetensors"))
    name = "image_newline" if "image_newline" in tensors else "model.image_newline"
    return tensors[name].float()


def random_image(height, width, seed=0):
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8), "RGB")


class Tmp(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="era-next-")
        self.addCleanup(shutil.rmtree, self.tmp)


# ================================================================================================

class NextCheckpointTest(Tmp):
    def test_config_is_llava_v16_shaped(self):
        cfg = read_json(os.path.join(CHECKPOINT, "config.json"))
        self.assertEqual(cfg["architectures"], ["LlavaNextForConditionalGeneration"])
        self.assertEqual(cfg["model_type"], "llava_next")
        self.assertEqual(cfg["image_grid_pinpoints"], [list(p) for p in PINPOINTS])
        self.assertEqual((cfg["vision_feature_layer"], cfg["vision_feature_select_strategy"],
                          cfg["use_image_newline_parameter"]), (-2, "default", True))
        self.assertIn("text_config", cfg)
        self.assertEqual(cfg["vision_config"]["image_size"], 336)
        pre = read_json(os.path.join(CHECKPOINT, "preprocessor_config.json"))
        self.assertEqual(pre["image_processor_type"], "LlavaNextImageProcessor")
        self.assertEqual(pre["image_grid_pinpoints"], cfg["image_grid_pinpoints"])
        self.assertEqual((pre["size"], pre["crop_size"], pre["resample"], pre["do_pad"]),
                         ({"shortest_edge": 336}, {"height": 336, "width": 336}, 3, True))
        c = load_checkpoint(CHECKPOINT)
        self.assertEqual((c.config.arch, c.config.grid_pinpoints),
                         ("llava-next", [list(p) for p in PINPOINTS]))
        self.assertEqual(list(c.projector["image_newline"].shape), [c.config.text.hidden_size])
        self.assertGreaterEqual(c.config.text.max_position_embeddings, 2928 + 100)

    def test_config_checks(self):
        base = read_json(os.path.join(CHECKPOINT, "config.json"))

        def cfg_with(**changes):
            folder = tempfile.mkdtemp(dir=self.tmp)
            cfg = dict(base, **changes)
            cfg = {k: v for k, v in cfg.items() if v is not None}
            dump_json(os.path.join(folder, "config.json"), cfg)
            return folder

        self.assertEqual(load_config(cfg_with(image_grid_pinpoints=None)).grid_pinpoints,
                         NEXT_DEFAULT_PINPOINTS)
        with self.assertRaisesRegex(CheckpointError, "image_grid_pinpoints.*multiples"):
            load_config(cfg_with(image_grid_pinpoints=[[336, 600]]))
        with self.assertRaisesRegex(CheckpointError, "image_grid_pinpoints"):
            load_config(cfg_with(image_grid_pinpoints=[]))
        with self.assertRaisesRegex(CheckpointError, "not a LLaVA"):
            load_config(cfg_with(architectures=["LlavaForConditionalGeneration"]))
        self.assertEqual(load_config(cfg_with(model_type="llava", image_grid_pinpoints=None,
                                              architectures=None)).arch, "llava-1.5")

    def test_preprocessor_must_agree(self):
        ck = os.path.join(self.tmp, "ck")
        shutil.copytree(CHECKPOINT, ck)
        path = os.path.join(ck, "preprocessor_config.json")
        pre = read_json(path)
        reordered = list(reversed(pre["image_grid_pinpoints"]))
        dump_json(path, dict(pre, image_grid_pinpoints=reordered))
        with self.assertRaisesRegex(CheckpointError, "differ from config.json"):
            load_checkpoint(ck, load_weights=False)
        # a base size other than the tile size is honoured (HF squashes the base image to it and
        # resizes + centre-crops every crop), not refused
        dump_json(path, dict(pre, size={"shortest_edge": 224}))
        self.assertEqual(load_checkpoint(ck, load_weights=False).preprocessor.shortest_edge, 224)
        dump_json(path, dict(pre, size={"height": 336, "width": 336}))
        with self.assertRaisesRegex(CheckpointError, "size"):
            load_checkpoint(ck, load_weights=False)


class NextExportTest(Tmp):
    def test_export_manifest_and_newline(self):
        out = os.path.join(self.tmp, "bundle")
        r = export(CHECKPOINT, out, "--name", "tiny-next")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        m = read_json(os.path.join(out, "manifest.json"))
        self.assertEqual((m["format"], m["format_version"], m["arch"], m["model_name"]),
                         ("era-bundle", 1, "llava-next", "tiny-next"))
        self.assertEqual(m["exported_with"]["decoder_api"], 2)
        im = m["image"]
        self.assertEqual(set(im), {"aspect_ratio", "size", "shortest_edge", "resample", "mean",
                                   "std", "pad_color", "grid_pinpoints"})
        self.assertEqual(im["aspect_ratio"], "anyres")
        cfg = read_json(os.path.join(CHECKPOINT, "config.json"))
        self.assertEqual(im["grid_pinpoints"], cfg["image_grid_pinpoints"])  # (h, w), same order
        self.assertEqual((im["size"], im["resample"], im["pad_color"]),
                         (336, "bicubic", [122, 116, 104]))
        self.assertEqual(len(im["mean"]), 3)
        self.assertEqual(m["vision"]["num_patches"], 576)
        D = m["text"]["hidden_size"]
        self.assertEqual(m["projector"]["out_features"], D)

        proj = torch_versions.load(os.path.join(out, "projector.pt"))
        params = dict(proj.named_parameters())
        self.assertIn("image_newline", params)
        self.assertEqual((list(params["image_newline"].shape), params["image_newline"].dtype),
                         ([D], torch.float32))
        self.assertTrue(torch.equal(proj.image_newline, checkpoint_newline()))  # attr() access
        self.assertTrue(torch.equal(params["image_newline"], checkpoint_newline()))
        feats = torch.randn(3, 576, m["projector"]["in_features"])
        self.assertEqual(list(proj(feats).shape), [3, 576, D])

        # the vision tower takes the base crop and the tiles as one batch
        vis = torch_versions.load(os.path.join(out, "vision.pt"))
        outs = vis(torch.randn(5, 3, 336, 336, generator=torch.Generator().manual_seed(0)))
        self.assertEqual(len(outs), 7)
        self.assertEqual(list(outs[0].shape), [5, 576, m["vision"]["hidden_size"]])
        one = vis(torch.randn(5, 3, 336, 336, generator=torch.Generator().manual_seed(0))[2:3])
        self.assertLessEqual(float((outs[0][2:3] - one[0]).abs().max()), 1e-4)

    def test_export_bfloat16_newline_dtype(self):
        out = os.path.join(self.tmp, "bundle")
        r = export(CHECKPOINT, out, "--dtype", "bfloat16")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        proj = torch_versions.load(os.path.join(out, "projector.pt"))
        nl = dict(proj.named_parameters())["image_newline"]
        self.assertEqual(nl.dtype, torch.bfloat16)
        self.assertTrue(torch.equal(nl, checkpoint_newline().to(torch.bfloat16)))

    def test_new_layout_names_load(self):
        ck = os.path.join(self.tmp, "ck")
        shutil.copytree(CHECKPOINT, ck)
        path = os.path.join(ck, "model.safetensors")
        tensors, meta = load_file(path)
        renamed = {to_new_layout(k): v.clone() for k, v in tensors.items()}
        self.assertIn("model.image_newline", renamed)
        self.assertNotIn("image_newline", renamed)
        save_file(renamed, path, meta)
        old, new = load_checkpoint(CHECKPOINT), load_checkpoint(ck)
        self.assertEqual(new.layout, "transformers>=4.52")
        for part in ("vision", "projector", "text"):
            a, b = getattr(old, part), getattr(new, part)
            self.assertEqual(set(a), set(b), part)
            self.assertTrue(all(torch.equal(a[k], b[k]) for k in a), part)
        out = os.path.join(self.tmp, "bundle")
        r = export(ck, out)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        proj = torch_versions.load(os.path.join(out, "projector.pt"))
        self.assertTrue(torch.equal(proj.image_newline, checkpoint_newline()))

        # a NeXT checkpoint without image_newline is refused, the tensor named in its layout
        del renamed["model.image_newline"]
        save_file(renamed, path, meta)
        r = export(ck, os.path.join(self.tmp, "b2"))
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("model.image_newline", r.stderr)
        self.assertNotIn("Traceback", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "b2")))

    def test_missing_newline_old_layout(self):
        ck = os.path.join(self.tmp, "ck")
        shutil.copytree(CHECKPOINT, ck)
        path = os.path.join(ck, "model.safetensors")
        tensors, meta = load_file(path)
        del tensors["image_newline"]
        save_file({k: v.clone() for k, v in tensors.items()}, path, meta)
        r = export(ck, os.path.join(self.tmp, "b"))
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("missing 1 tensor(s): image_newline", r.stderr)

    def test_llava15_still_exports_without_newline(self):
        ck = os.path.join(self.tmp, "tiny-15")
        subprocess.run([sys.executable, MAKE_TINY, "--arch", "llava-1.5", "--seed", "0",
                        "--out", ck, "--tokenizer-model",
                        os.path.join(CHECKPOINT, "tokenizer.model")],
                       check=True, capture_output=True)
        tensors, _ = load_file(os.path.join(ck, "model.safetensors"))
        self.assertFalse(any("image_newline" in k for k in tensors))
        self.assertEqual(load_checkpoint(ck, load_weights=False).config.arch, "llava-1.5")
        out = os.path.join(self.tmp, "bundle")
        r = export(ck, out)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        m = read_json(os.path.join(out, "manifest.json"))
        self.assertEqual(m["arch"], "llava-1.5")
        self.assertEqual(set(m["image"]), {"aspect_ratio", "size", "shortest_edge", "resample",
                                           "mean", "std", "pad_color"})
        # llava-hf's CLIPImageProcessor: crop mode
        self.assertEqual((m["image"]["aspect_ratio"], m["image"]["size"], m["image"]["pad_color"]),
                         ("crop", 336, [122, 116, 104]))
        proj = torch_versions.load(os.path.join(out, "projector.pt"))
        self.assertEqual(sorted(dict(proj.named_parameters())),
                         ["linear_1.bias", "linear_1.weight", "linear_2.bias", "linear_2.weight"])
        self.assertFalse(hasattr(proj, "image_newline"))


# ================================================================================================

class AnyresReferenceTest(unittest.TestCase):
    def test_token_counts(self):
        """The packing of fake projected features (crop count from the real preprocessing)."""
        D = 8
        newline = torch.full((D,), -1.0)
        for (h, w), tokens in list(TOKENS.items()) + list(MORE_TOKENS.items()):
            with self.subTest(hw=(h, w)):
                pixels, best = ar.preprocess_anyres(random_image(h, w), PINPOINTS, TILE)
                feats = torch.randn(pixels.shape[0], P * P, D)
                packed = ar.pack_image_features(feats, (h, w), PINPOINTS, TILE, P, newline)
                self.assertEqual(packed.shape[0], tokens)
                self.assertEqual(ar.token_count((h, w), PINPOINTS, TILE, P), tokens)
                rows, cols = best[0] // TILE, best[1] // TILE
                box = ar.unpad_box((h, w), rows * P, cols * P)
                kept_r, kept_c = box["bottom"] - box["top"], box["right"] - box["left"]
                self.assertEqual(int((packed == -1.0).all(1).sum()), kept_r)  # one per row
                self.assertEqual(tokens, P * P + kept_r * (kept_c + 1))

    def test_select_best_resolution(self):
        # HF reads the pairs as (height, width): a small square takes 1 row x 2 columns
        self.assertEqual(ar.select_best_resolution((336, 336), PINPOINTS), (336, 672))
        self.assertEqual(ar.select_best_resolution((480, 640), PINPOINTS), (672, 672))
        self.assertEqual(ar.select_best_resolution((300, 1200), PINPOINTS), (336, 1008))
        self.assertEqual(ar.select_best_resolution((1200, 300), PINPOINTS), (1008, 336))
        self.assertEqual(ar.patch_output_size((480, 640), (672, 672)), (504, 672))
        self.assertEqual(ar.patch_output_size((899, 1024), (672, 672)), (590, 672))

    def test_unpad_rounding(self):
        # sizes where int(x) and int(round(x, 7)) disagree (llava.md A.6) must follow round(x, 7)
        for h, w in ((55, 176), (88, 99), (205, 656)):
            best = ar.select_best_resolution((h, w), PINPOINTS)
            gh, gw = best[0] // TILE * P, best[1] // TILE * P
            box = ar.unpad_box((h, w), gh, gw)
            if w / h > gw / gh:
                new = int(round(h * (gw / w), 7))
                self.assertNotEqual(new, int(h * (gw / w)))
                self.assertEqual(box["top"], (gh - new) // 2)
            else:
                new = int(round(w * (gh / h), 7))
                self.assertNotEqual(new, int(w * (gh / h)))
                self.assertEqual(box["left"], (gw - new) // 2)

    def test_packing_layout(self):
        """pack_image_features (view/permute/unpad/flatten, as HF) against index arithmetic:
        grid token (r, c) is tile (r // p, c // p), patch (r % p) * p + c % p."""
        D = 3
        for h, w in ((480, 640), (300, 1200), (1200, 300), (336, 336), (899, 1024), (55, 176),
                     (205, 656), (88, 99)):
            with self.subTest(hw=(h, w)):
                rows, cols = ar.grid_shape((h, w), PINPOINTS, TILE)
                n = 1 + rows * cols
                # feature = (crop, patch index, channel) coded in the values
                feats = (torch.arange(n)[:, None, None] * 1e6 +
                         torch.arange(P * P)[None, :, None] * 10 +
                         torch.arange(D)[None, None, :]).double()
                newline = torch.full((D,), -7.0, dtype=torch.double)
                packed = ar.pack_image_features(feats, (h, w), PINPOINTS, TILE, P, newline)
                box = ar.unpad_box((h, w), rows * P, cols * P)
                expect = [feats[0, i] for i in range(P * P)]
                for r in range(box["top"], box["bottom"]):
                    for c in range(box["left"], box["right"]):
                        tile = 1 + (r // P) * cols + (c // P)
                        expect.append(feats[tile, (r % P) * P + c % P])
                    expect.append(newline)
                self.assertTrue(torch.equal(packed, torch.stack(expect)))

    def test_preprocessing(self):
        """Crops against an independent construction: PIL paste on a black canvas, PIL crops."""
        for h, w in ((480, 640), (300, 1200), (333, 250)):
            with self.subTest(hw=(h, w)):
                img = random_image(h, w, seed=h)
                pixels, best = ar.preprocess_anyres(img, PINPOINTS, TILE)
                bh, bw = best
                nh, nw = ar.patch_output_size((h, w), best)
                self.assertTrue(nh == bh or nw == bw)
                canvas = Image.new("RGB", (bw, bh), (0, 0, 0))
                canvas.paste(img.resize((nw, nh), Image.BICUBIC), ((bw - nw) // 2, (bh - nh) // 2))
                crops = [img.resize((TILE, TILE), Image.BICUBIC)]
                for y in range(0, bh, TILE):
                    for x in range(0, bw, TILE):
                        crops.append(canvas.crop((x, y, x + TILE, y + TILE)))
                expect = np.stack([pil_reference.normalize(c) for c in crops])
                self.assertEqual(pixels.shape, expect.shape)
                self.assertEqual(pixels.dtype, np.float32)
                self.assertTrue(np.array_equal(pixels, expect))
        # 480x640: the canvas has 84 black rows on top, normalised black = -mean/std
        pixels, _ = ar.preprocess_anyres(random_image(480, 640), PINPOINTS, TILE)
        black = (-np.asarray(pil_reference.CLIP_MEAN, np.float32)
                 / np.asarray(pil_reference.CLIP_STD, np.float32))
        self.assertTrue(np.allclose(pixels[1, :, :84, :], black[:, None, None]))
        self.assertFalse(np.allclose(pixels[1, :, 84, :], black[:, None]))


class NextRefsTest(Tmp):
    def test_make_next_refs(self):
        out = os.path.join(self.tmp, "refs")
        r = subprocess.run([sys.executable, MAKE_REFS, "--checkpoint", CHECKPOINT, "--image",
                            SAMPLE, "--out", out], capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        info = read_json(os.path.join(out, "info.json"))
        self.assertEqual((info["original"], info["best"], info["rows"], info["cols"],
                          info["tokens"]), ([480, 640], [672, 672], 2, 2, 2340))
        self.assertEqual(info["unpad"], {"top": 6, "bottom": 42, "left": 0, "right": 48})
        pixels = np.load(os.path.join(out, "pixel_values.npy"))
        projected = np.load(os.path.join(out, "projected.npy"))
        packed = np.load(os.path.join(out, "packed.npy"))
        logits = np.load(os.path.join(out, "logits.npy"))
        ids = read_json(os.path.join(out, "input_ids.json"))["ids"]
        self.assertEqual(pixels.shape, (5, 3, 336, 336))
        self.assertEqual(packed.shape[0], 2340)
        self.assertTrue(np.array_equal(packed[:576], projected[0]))
        newline = checkpoint_newline().numpy()
        for k in range(36):  # the newline closes every one of the 36 kept rows of 48 tokens
            self.assertTrue(np.array_equal(packed[576 + 49 * k + 48], newline))
        # first kept grid token: grid row 6, column 0 = tile 0, patch row 6
        self.assertTrue(np.array_equal(packed[576], projected[1, 6 * 24]))
        vocab = read_json(os.path.join(CHECKPOINT, "config.json"))["text_config"]["vocab_size"]
        self.assertEqual(logits.shape, (len(ids) - 1 + 2340, vocab))
        self.assertTrue(np.isfinite(logits).all())
        self.assertEqual(info["seq_len"], logits.shape[0])


def use_checkpoint(path):
    global CHECKPOINT
    CHECKPOINT = path


def main():
    return run_unittests("llava-next", use_checkpoint)


if __name__ == "__main__":
    sys.exit(main())
