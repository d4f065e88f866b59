#!/usr/bin/env python3
"""The exporter's reading of preprocessor_config.json (era_tools.hf_checkpoint.parse_preprocessor):
which mode each transformers image processor implies, the settings it honours (resample,
size.shortest_edge != crop_size), and every setting it refuses, by name. Plain unittest, no
checkpoint and no transformers needed (the files are written as llava-hf ships them).
"""
import json
import os
import shutil
import tempfile
import unittest
from types import SimpleNamespace

from era_tools.export_llava import image_manifest, parse_args
from era_tools.hf_checkpoint import (CheckpointError, NEXT_DEFAULT_PINPOINTS, load_preprocessor,
                                     with_image_mode)

MEAN = [0.48145466, 0.4578275, 0.40821073]
STD = [0.26862954, 0.26130258, 0.27577711]
# llava-hf/llava-1.5-7b-hf's preprocessor_config.json
CLIP = {"crop_size": {"height": 336, "width": 336}, "do_center_crop": True,
        "do_convert_rgb": True, "do_normalize": True, "do_rescale": True, "do_resize": True,
        "image_mean": MEAN, "image_processor_type": "CLIPImageProcessor", "image_std": STD,
        "processor_class": "LlavaProcessor", "resample": 3,
        "rescale_factor": 0.00392156862745098, "size": {"shortest_edge": 336}}
# llava-hf/llava-v1.6-vicuna-7b-hf's
NEXT = dict(CLIP, image_processor_type="LlavaNextImageProcessor", do_pad=True,
            processor_class="LlavaNextProcessor", aspect_ratio_setting="anyres",
            image_grid_pinpoints=[list(p) for p in NEXT_DEFAULT_PINPOINTS])

VISION = SimpleNamespace(image_size=336)
CFG15 = SimpleNamespace(arch="llava-1.5", is_next=False, grid_pinpoints=None)
CFG_NEXT = SimpleNamespace(arch="llava-next", is_next=True, grid_pinpoints=[list(p) for p in NEXT_DEFAULT_PINPOINTS])


class PreprocessorTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="era_preproc_")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def load(self, pc, cfg=CFG15):
        with open(os.path.join(self.tmp, "preprocessor_config.json"), "w") as f:
            json.dump(pc, f)
        return load_preprocessor(self.tmp, VISION, cfg)

    def refused(self, pc, pattern, cfg=CFG15):
        with self.assertRaisesRegex(CheckpointError, pattern) as e:
            self.load(pc, cfg)
        self.assertIn("preprocessor_config.json", str(e.exception))

    # ---- the mode each processor implies -------------------------------------------------------
    def test_modes_follow_transformers_classes(self):
        self.assertEqual(self.load(CLIP).mode, "crop")
        self.assertEqual(self.load(dict(CLIP, image_processor_type="CLIPImageProcessorFast")).mode,
                         "crop")
        llava = dict(CLIP, image_processor_type="LlavaImageProcessor")
        self.assertEqual(self.load(dict(llava, do_pad=True)).mode, "pad")
        self.assertEqual(self.load(dict(llava, do_pad=False)).mode, "crop")
        self.assertEqual(self.load(llava).mode, "crop")  # LlavaImageProcessor's default: no pad
        # CLIP's do_pad pads a batch to its largest image after the crop: nothing to do
        self.assertEqual(self.load(dict(CLIP, do_pad=True)).mode, "crop")
        self.assertEqual(self.load(NEXT, CFG_NEXT).mode, "anyres")
        self.assertEqual(self.load(dict(NEXT, do_pad=False), CFG_NEXT).mode, "anyres")

    def test_no_preprocessor_file_is_llava_pad(self):
        pre = load_preprocessor(self.tmp, VISION, CFG15)
        self.assertEqual((pre.mode, pre.crop_size, pre.shortest_edge, pre.resample),
                         ("pad", 336, 336, "bicubic"))
        self.assertEqual(load_preprocessor(self.tmp, VISION, CFG_NEXT).mode, "anyres")

    def test_export_flag_overrides_the_checkpoint(self):
        pre = self.load(CLIP)
        self.assertEqual(with_image_mode(pre, "pad", CFG15).mode, "pad")
        self.assertEqual(with_image_mode(pre, None, CFG15).mode, "crop")
        self.assertEqual(parse_args(["--checkpoint", "c", "--out", "o"]).image_mode, None)
        self.assertEqual(parse_args(["--checkpoint", "c", "--out", "o", "--image-mode", "pad"])
                         .image_mode, "pad")
        with self.assertRaisesRegex(CheckpointError, "--image-mode.*LLaVA-1.5 only"):
            with_image_mode(self.load(NEXT, CFG_NEXT), "pad", CFG_NEXT)
        with self.assertRaisesRegex(CheckpointError, "--image-mode 'square'"):
            with_image_mode(pre, "square", CFG15)

    # ---- honoured settings ---------------------------------------------------------------------
    def test_resample_and_shortest_edge_reach_the_manifest(self):
        names = {1: "lanczos", 2: "bilinear", 3: "bicubic", 4: "box", 5: "hamming"}
        for rid, name in names.items():
            self.assertEqual(self.load(dict(CLIP, resample=rid)).resample, name)
        pre = self.load(dict(CLIP, size={"shortest_edge": 400}, resample=2))
        im = image_manifest(CFG15, pre)
        self.assertEqual((im["aspect_ratio"], im["size"], im["shortest_edge"], im["resample"]),
                         ("crop", 336, 400, "bilinear"))
        self.assertEqual(self.load(dict(CLIP, size=300)).shortest_edge, 300)  # an int: the edge
        self.assertEqual(self.load(dict(CLIP, crop_size=336)).crop_size, 336)
        nxt = self.load(dict(NEXT, size={"shortest_edge": 224}, resample=2), CFG_NEXT)
        im = image_manifest(CFG_NEXT, nxt)
        self.assertEqual((im["aspect_ratio"], im["shortest_edge"], im["resample"],
                          im["grid_pinpoints"]),
                         ("anyres", 224, "bilinear", CFG_NEXT.grid_pinpoints))

    # ---- refused settings, each named ----------------------------------------------------------
    def test_refusals_name_the_setting(self):
        cases = [
            (dict(CLIP, resample=0), r"resample 0 \(nearest\) is not supported"),
            (dict(CLIP, resample=7), r"unknown resample 7"),
            (dict(CLIP, do_resize=False), r"do_resize False"),
            (dict(CLIP, do_center_crop=False), r"do_center_crop False"),
            (dict(CLIP, do_rescale=False), r"do_rescale False"),
            (dict(CLIP, rescale_factor=1 / 127.5), r"rescale_factor"),
            (dict(CLIP, do_normalize=False), r"do_normalize False"),
            (dict(CLIP, do_convert_rgb=False), r"do_convert_rgb False"),
            (dict(CLIP, crop_size={"height": 336, "width": 300}), r"crop_size .* not square"),
            (dict(CLIP, crop_size={"height": 224, "width": 224}), r"crop_size 224 differs"),
            (dict(CLIP, size={"height": 336, "width": 336}), r"size .*height.*width"),
            (dict(CLIP, size={"shortest_edge": 336, "longest_edge": 600}), r"longest_edge"),
            (dict(CLIP, size={"shortest_edge": 0}), r"size.shortest_edge must be a positive"),
            (dict(CLIP, do_pad="yes"), r"do_pad must be"),
            (dict(CLIP, image_mean=[0.5, 0.5]), r"image_mean"),
            (dict(CLIP, image_std=[0.5, 0.0, 0.5]), r"image_std"),
            (dict(CLIP, crop_pct=0.9), r"setting\(s\) crop_pct not supported"),
            (dict(CLIP, pad_size={"height": 400, "width": 400}), r"pad_size"),
            (dict(CLIP, data_format="channels_last"), r"data_format"),
            (dict(CLIP, use_square_size=True), r"use_square_size"),
            (dict(CLIP, image_processor_type="SiglipImageProcessor"),
             r"image_processor_type 'SiglipImageProcessor' is not supported"),
            (dict(CLIP, image_processor_type="LlavaNextImageProcessor"), r"does not fit"),
        ]
        for pc, pattern in cases:
            with self.subTest(pattern=pattern):
                self.refused(pc, pattern)

    def test_next_refusals(self):
        self.refused(dict(NEXT, image_processor_type="CLIPImageProcessor"), "does not fit",
                     CFG_NEXT)
        self.refused(dict(NEXT, image_grid_pinpoints=[[336, 672]]), "differ from config.json",
                     CFG_NEXT)
        self.refused(dict(NEXT, size={"height": 336, "width": 336}), "size", CFG_NEXT)
        self.refused(dict(NEXT, resample=0), "resample 0", CFG_NEXT)
        # a 1.5 processor key that NeXT's does not have is unknown there too
        self.refused(dict(CLIP, image_grid_pinpoints=CFG_NEXT.grid_pinpoints), "image_grid_pinpoints")


if __name__ == "__main__":
    unittest.main()
