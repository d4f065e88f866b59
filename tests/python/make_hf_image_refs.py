#!/usr/bin/env python3
"""Fixture for HfPreprocess (tests/family/hf_preprocess_test.cpp): transformers' own image
processors against era's C++ preprocessing, bit for bit.

For every case below, transformers writes the processor (`save_pretrained`: the
preprocessor_config.json a checkpoint ships) and a config.json; era's exporter reads them back
(hf_checkpoint.load_config / load_preprocessor, export_llava.image_manifest: the manifest "image"
section the C++ side will get), and transformers' processor, loaded from the same file, gives the
pixel_values of each test image. Processors run on transformers' PIL backend (`<Class>Pil`: what
AutoImageProcessor picks without torchvision, `backend="pil"` with it); era reproduces that one.

Writes into --out:
  index.json                 [{"name", "processor", "expect_mode", "image": manifest image section,
                               "vision_image_size", "images": [{"width", "height", "rgb", "pixels"}]}]
  <case>/config.json, <case>/preprocessor_config.json
  <case>/<w>x<h>.rgb.npy     the test image, uint8 [H, W, 3] (what the processor was given)
  <case>/<w>x<h>.pixels.npy  transformers' pixel_values for it, float32 [crops, 3, S, S]
"""
import argparse
import json
import os
import shutil

import numpy as np
import transformers as tf
from PIL import Image

from era_tools.export_llava import image_manifest
from era_tools.hf_checkpoint import load_config, load_preprocessor
from references.synthetic_image import synth

# Real geometry (CLIP ViT-L/14 at 336 px), tiny widths: only the configs' shapes matter here.
VISION = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
          "num_attention_heads": 2, "image_size": 336, "patch_size": 14}
TEXT = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
        "num_attention_heads": 4, "vocab_size": 1024}
# LLaVA-OneVision's tower: SigLIP at 384 px, patch 14; Qwen2 text.
SIGLIP = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
          "num_attention_heads": 2, "image_size": 384, "patch_size": 14}
# (width, height): landscape, portrait, odd ratio, tiny, square.
IMAGES = [(640, 480), (480, 640), (333, 500), (7, 5), (336, 336), (500, 500)]
# The OneVision case also gets a wide and a tall image that pick large pinpoints (many 384 tiles).
LARGE_IMAGES = [(1500, 900), (700, 2100)]

# name -> (processor class, its settings, the mode era must choose)
CROP = {"crop_size": {"height": 336, "width": 336}}
CASES = {
    # llava-hf/llava-1.5-*-hf: CLIPImageProcessor, shortest edge 336, bicubic
    "clip_crop": ("CLIPImageProcessor", dict(CROP, size={"shortest_edge": 336}), "crop"),
    "clip_crop_bilinear": ("CLIPImageProcessor",
                           dict(CROP, size={"shortest_edge": 336}, resample=2), "crop"),
    "clip_crop_edge400": ("CLIPImageProcessor", dict(CROP, size={"shortest_edge": 400}), "crop"),
    "clip_crop_edge300": ("CLIPImageProcessor", dict(CROP, size={"shortest_edge": 300}), "crop"),
    # LlavaImageProcessor: do_pad is LLaVA's expand2square; without it, CLIP's crop
    "llava_pad": ("LlavaImageProcessor", dict(CROP, size={"shortest_edge": 336}, do_pad=True),
                  "pad"),
    "llava_pad_bilinear": ("LlavaImageProcessor",
                           dict(CROP, size={"shortest_edge": 336}, do_pad=True, resample=2), "pad"),
    "llava_pad_edge400_lanczos": ("LlavaImageProcessor",
                                  dict(CROP, size={"shortest_edge": 400}, do_pad=True,
                                       resample=1), "pad"),
    "llava_nopad": ("LlavaImageProcessor", dict(CROP, size={"shortest_edge": 336}, do_pad=False),
                    "crop"),
    # llava-hf/llava-v1.6-*-hf: LlavaNextImageProcessor
    "next": ("LlavaNextImageProcessor", dict(CROP, size={"shortest_edge": 336}), "anyres"),
    "next_bilinear": ("LlavaNextImageProcessor",
                      dict(CROP, size={"shortest_edge": 336}, resample=2), "anyres"),
    "next_edge400": ("LlavaNextImageProcessor", dict(CROP, size={"shortest_edge": 400}), "anyres"),
    "next_edge300_box": ("LlavaNextImageProcessor",
                         dict(CROP, size={"shortest_edge": 300}, resample=4), "anyres"),
    # llava-hf/llava-onevision-qwen2-*-ov-hf: LlavaOnevisionImageProcessor (mean/std 0.5 there;
    # transformers' class default is CLIP's), anyres over the 36 pinpoints at 384
    "onevision": ("LlavaOnevisionImageProcessor",
                  {"image_mean": [0.5] * 3, "image_std": [0.5] * 3}, "anyres"),
    "onevision_clip_mean_bilinear": ("LlavaOnevisionImageProcessor", {"resample": 2}, "anyres"),
}


def write_config(folder, is_next, is_onevision=False):
    if is_onevision:
        tf.LlavaOnevisionConfig(vision_config=tf.SiglipVisionConfig(**SIGLIP).to_dict(),
                                text_config=tf.Qwen2Config(**TEXT, num_key_value_heads=2).to_dict(),
                                image_token_index=TEXT["vocab_size"] - 2,
                                video_token_index=TEXT["vocab_size"] - 1).save_pretrained(folder)
        return
    vision = tf.CLIPVisionConfig(**VISION)
    text = tf.LlamaConfig(**TEXT)
    cls = tf.LlavaNextConfig if is_next else tf.LlavaConfig
    cls(vision_config=vision.to_dict(), text_config=text.to_dict(),
        image_token_index=TEXT["vocab_size"] - 1).save_pretrained(folder)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out = os.path.abspath(args.out)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    index = []
    for name, (ptype, settings, expect_mode) in CASES.items():
        folder = os.path.join(out, name)
        os.makedirs(folder)
        is_next = ptype == "LlavaNextImageProcessor"
        write_config(folder, is_next, ptype == "LlavaOnevisionImageProcessor")
        getattr(tf, ptype + "Pil")(**settings).save_pretrained(folder)
        processor = getattr(tf, ptype + "Pil").from_pretrained(folder)
        cfg = load_config(folder)
        pre = load_preprocessor(folder, cfg.vision, cfg)
        entry = {"name": name, "processor": ptype, "expect_mode": expect_mode,
                 "image": image_manifest(cfg, pre), "vision_image_size": cfg.vision.image_size,
                 "images": []}
        for k, (w, h) in enumerate(IMAGES + (LARGE_IMAGES if name == "onevision" else [])):
            rgb = synth(w, h, 3, seed=300 + k)
            pixels = processor(images=Image.fromarray(rgb, "RGB"), return_tensors="np")
            pixels = np.asarray(pixels["pixel_values"][0], dtype=np.float32)
            if pixels.ndim == 3:  # LLaVA-1.5: one crop per image
                pixels = pixels[None]
            stem = f"{w}x{h}"
            np.save(os.path.join(folder, stem + ".rgb.npy"), rgb)
            np.save(os.path.join(folder, stem + ".pixels.npy"), np.ascontiguousarray(pixels))
            entry["images"].append({"width": w, "height": h, "rgb": f"{name}/{stem}.rgb.npy",
                                    "pixels": f"{name}/{stem}.pixels.npy"})
        index.append(entry)
    with open(os.path.join(out, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
    print(f"make_hf_image_refs: {len(index)} processors x {len(IMAGES)} images "
          f"(transformers {tf.__version__}) -> {out}")


if __name__ == "__main__":
    main()
