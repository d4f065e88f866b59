"""The tiny LLaVA-OneVision checkpoint (make_tiny_llava.py --arch llava-onevision) is a real one:
transformers loads the folder with its Auto classes, its processor makes pixel values for images
of several sizes and for a video, the prompt from its chat template carries the placeholders,
and the model runs on them (a placeholder count that did not match the features would raise).
The geometry is the released checkpoints': 384 px SigLIP tiles of 27x27 tokens, anyres_max_9 over
36 pinpoints, Qwen2 with grouped-query attention, q/k/v biases, rope_theta 1e6, tied embeddings.

    test_tiny_onevision.py --scratch DIR
"""
import argparse
import hashlib
import os
import subprocess
import sys
import unittest

import numpy as np

ARGS = None
TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "make_tiny_llava.py")


def make(out, *extra):
    subprocess.run([sys.executable, TOOL, "--arch", "llava-onevision", "--out", out, *extra], check=True,
                   stdout=subprocess.DEVNULL)
    return out


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class TinyOneVision(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import torch
        from transformers import AutoModelForImageTextToText, AutoProcessor
        cls.dir = make(os.path.join(ARGS.scratch, "tiny-ov"))
        cls.model = AutoModelForImageTextToText.from_pretrained(cls.dir).eval()
        cls.processor = AutoProcessor.from_pretrained(cls.dir)
        cls.torch = torch

    def prompt(self, *parts):
        content = [{"type": p} if p in ("image", "video") else {"type": "text", "text": p} for p in parts]
        return self.processor.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True)

    def test_config_has_the_released_geometry(self):
        c = self.model.config
        self.assertEqual(type(self.model).__name__, "LlavaOnevisionForConditionalGeneration")
        self.assertEqual((c.vision_config.image_size, c.vision_config.patch_size), (384, 14))
        self.assertEqual(c.vision_config.hidden_act, "gelu_pytorch_tanh")
        self.assertEqual((c.vision_feature_layer, c.vision_feature_select_strategy), (-1, "full"))
        self.assertEqual(c.vision_aspect_ratio, "anyres_max_9")
        self.assertEqual(len(c.image_grid_pinpoints), 36)
        t = c.text_config
        self.assertEqual(t.model_type, "qwen2")
        self.assertLess(t.num_key_value_heads, t.num_attention_heads)
        self.assertEqual(t.rope_parameters["rope_theta"], 1e6)
        self.assertTrue(c.tie_word_embeddings)
        attn = self.model.model.language_model.layers[0].self_attn
        self.assertIsNotNone(attn.q_proj.bias)
        self.assertIsNotNone(attn.k_proj.bias)
        self.assertIsNotNone(attn.v_proj.bias)
        self.assertIsNone(attn.o_proj.bias)
        self.assertEqual(self.model.model.image_newline.shape, (t.hidden_size,))

    def test_prompt_comes_from_the_chat_template(self):
        self.assertEqual(self.prompt("image", "What is shown?"),
                         "<|im_start|>user <image>\nWhat is shown?<|im_end|><|im_start|>assistant\n")

    def test_images_of_several_sizes_run_through_the_model(self):
        from PIL import Image
        rng = np.random.default_rng(0)
        for (h, w) in [(384, 384), (480, 640), (300, 1200), (1500, 900), (100, 100)]:
            image = Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
            inputs = self.processor(images=image, text=self.prompt("image", "Describe."), return_tensors="pt")
            tiles = inputs["pixel_values"].shape[1]
            self.assertEqual(tuple(inputs["pixel_values"].shape[2:]), (3, 384, 384))
            self.assertGreaterEqual(tiles, 2)  # the base image and at least one tile
            n_image = int((inputs["input_ids"] == self.model.config.image_token_index).sum())
            self.assertGreater(n_image, 729)
            with self.torch.no_grad():
                out = self.model(**inputs)
            self.assertTrue(self.torch.isfinite(out.logits).all())
            self.assertEqual(out.logits.shape[1], inputs["input_ids"].shape[1])

    def test_a_video_runs_through_the_model(self):
        video = np.random.default_rng(1).integers(0, 256, (8, 240, 320, 3), dtype=np.uint8)
        inputs = self.processor(videos=[video], text=self.prompt("video", "What happens?"), return_tensors="pt")
        self.assertEqual(tuple(inputs["pixel_values_videos"].shape), (1, 8, 3, 384, 384))
        n_video = int((inputs["input_ids"] == self.model.config.video_token_index).sum())
        # 27x27 per frame pooled 2x2 (ceil) to 14x14, and one newline after the frames.
        self.assertEqual(n_video, 8 * 14 * 14 + 1)
        with self.torch.no_grad():
            out = self.model(**inputs)
        self.assertTrue(self.torch.isfinite(out.logits).all())

    def test_same_seed_same_weights_other_seed_other_weights(self):
        a = make(os.path.join(ARGS.scratch, "seed0"))
        b = make(os.path.join(ARGS.scratch, "seed1"), "--seed", "1")
        weights = "model.safetensors"
        self.assertEqual(digest(os.path.join(a, weights)), digest(os.path.join(self.dir, weights)))
        self.assertNotEqual(digest(os.path.join(a, weights)), digest(os.path.join(b, weights)))

    def test_untied_embeddings_give_a_separate_lm_head(self):
        from transformers import AutoModelForImageTextToText
        d = make(os.path.join(ARGS.scratch, "untied"), "--untied-embeddings")
        m = AutoModelForImageTextToText.from_pretrained(d)
        self.assertFalse(m.config.tie_word_embeddings)
        self.assertNotEqual(m.lm_head.weight.data_ptr(), m.model.language_model.embed_tokens.weight.data_ptr())


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--scratch", required=True)
    ARGS, rest = p.parse_known_args()
    os.makedirs(ARGS.scratch, exist_ok=True)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
