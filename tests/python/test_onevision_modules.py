"""era's LLaVA-OneVision modules (SigLIP tower, projector with image_newline, Qwen2 decoder with
q/k/v biases and LAR) against transformers' own LlavaOnevisionForConditionalGeneration, on a tiny
random-weight checkpoint saved by transformers (make_tiny_llava.py --arch llava-onevision), read
through era's checkpoint loader:
  - the config as era reads it (SigLIP, no CLS, 729 tokens per tile, Qwen2, pinpoints, processor,
    byte-level tokenizer);
  - vision features = hidden_states[vision_feature_layer], fp32, on images and video frames;
  - the CLS-free saliency readout = transformers' eager attention probabilities of that layer
    averaged over the query rows (so DEP ranks on exactly what the tower attended);
  - projector output and image_newline;
  - decoder logits at every position, scripted (math, and sdpa where torch has it, through the
    LAR KV cache) and the explicit formula, against transformers' Qwen2 on the same embeddings;
  - LAR on Qwen2: log b added to the logits of the recycled keys equals transformers' decoder with
    that bias as an additive 4D mask.

    test_onevision_modules.py [--checkpoint DIR]   (without it: a tiny one in a temp folder)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import torch

from references.checkpoint_main import run_unittests

CHECKPOINT = None  # set in main()
REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def rel_err(a, b, what=None):
    """max |a - b| / max |b|; printed as a measurement when `what` names it."""
    err = float((a.double() - b.double()).abs().max() / b.double().abs().max().clamp_min(1e-12))
    if what:
        print(f"[ measured ] {what}: max relative error {err:.2e}", file=sys.stderr)
    return err


class OneVisionModules(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        from transformers import LlavaOnevisionForConditionalGeneration

        from era_tools import llava_model as lm
        from era_tools.hf_checkpoint import load_checkpoint
        cls.dir = CHECKPOINT
        cls.hf = LlavaOnevisionForConditionalGeneration.from_pretrained(
            cls.dir, attn_implementation="eager").eval()
        cls.ckpt = load_checkpoint(cls.dir)
        cls.lm = lm
        cls.vision = lm.build_vision(cls.ckpt)
        cls.projector = lm.build_projector(cls.ckpt)

    def test_config_as_era_reads_it(self):
        cfg = self.ckpt.config
        self.assertEqual(cfg.arch, "llava-onevision")
        self.assertFalse(cfg.vision.has_cls)
        self.assertEqual((cfg.vision.image_size, cfg.vision.patch_size), (384, 14))
        self.assertEqual(cfg.vision.tokens_per_crop, 729)
        self.assertEqual(cfg.vision.feature_indices, [cfg.vision.num_layers])  # -1: the last layer
        self.assertEqual(cfg.text.model_type, "qwen2")
        self.assertTrue(cfg.text.qkv_bias)
        self.assertEqual(cfg.text.rope_theta, 1e6)
        self.assertEqual(cfg.grid_pinpoints, self.hf.config.image_grid_pinpoints)
        self.assertEqual(cfg.image_token_id, self.hf.config.image_token_index)
        self.assertEqual(self.ckpt.preprocessor.mode, "anyres")  # NeXT's tiling, at 384
        from transformers import AutoImageProcessor
        ip = AutoImageProcessor.from_pretrained(self.dir)
        self.assertEqual(self.ckpt.preprocessor.mean, [float(x) for x in ip.image_mean])
        self.assertEqual(self.ckpt.preprocessor.std, [float(x) for x in ip.image_std])
        self.assertEqual(self.ckpt.bos_id, -1)
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained(self.dir)
        self.assertEqual(self.ckpt.eos_id, tok.eos_token_id)
        self.assertEqual(self.ckpt.added_tokens["<|im_end|>"], tok.convert_tokens_to_ids("<|im_end|>"))
        self.assertEqual(self.ckpt.tokenizer_vocab_size, len(tok))

    def hf_layer_outputs(self, pixels):
        with torch.no_grad():
            out = self.hf.model.vision_tower(pixels, output_hidden_states=True, output_attentions=True)
        layer = self.hf.config.vision_feature_layer
        return out.hidden_states[layer], out.attentions[layer]

    def test_vision_features_and_cls_free_saliency(self):
        g = torch.Generator().manual_seed(0)
        pixels = torch.rand(3, 3, 384, 384, generator=g) * 2 - 1
        with torch.no_grad():
            feats, cls_l, cls_p, mean_l, mean_p, cls_feat, mean_keys = self.vision(pixels)
        want, attn = self.hf_layer_outputs(pixels)
        self.assertEqual(tuple(feats.shape), (3, 729, self.ckpt.config.vision.hidden_size))
        self.assertLessEqual(rel_err(feats, want, "vision features vs hidden_states[-1]"), 1e-5)
        # No CLS token: the CLS outputs are empty, the mean readout carries the saliency.
        self.assertEqual(cls_l.shape[-1], 0)
        self.assertEqual(cls_feat.numel(), 0)
        self.assertLessEqual(rel_err(mean_p, attn.mean(dim=2), "mean readout vs eager attention"), 1e-5)
        self.assertTrue(torch.allclose(mean_p.sum(-1), torch.ones_like(mean_p.sum(-1)), atol=1e-5))
        self.assertEqual(tuple(mean_keys.shape[1:]), (729, self.ckpt.config.vision.head_dim))

    def test_scripted_tower_matches_eager(self):
        scripted = torch.jit.script(self.vision)
        pixels = torch.rand(1, 3, 384, 384, generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            a, b = scripted(pixels), self.vision(pixels)
        for x, y in zip(a, b):
            self.assertTrue(torch.equal(x, y))

    def test_projector_and_image_newline(self):
        feats = torch.randn(2, 729, self.ckpt.config.vision.feature_width, generator=torch.Generator().manual_seed(2))
        with torch.no_grad():
            ours = self.projector(feats)
            want = self.hf.model.multi_modal_projector(feats)
        self.assertLessEqual(rel_err(ours, want, "projector"), 1e-6)
        self.assertTrue(torch.equal(self.projector.image_newline, self.hf.model.image_newline.detach()))

    def hf_logits(self, embeds, mask=None):
        with torch.no_grad():
            h = self.hf.model.language_model(inputs_embeds=embeds, attention_mask=mask).last_hidden_state
            return self.hf.lm_head(h).float()

    def embeds(self, T, seed):
        g = torch.Generator().manual_seed(seed)
        ids = torch.randint(0, self.ckpt.config.text.vocab_size, (1, T), generator=g)
        with torch.no_grad():
            return self.hf.model.language_model.embed_tokens(ids)

    def test_decoder_logits_every_position(self):
        T = 40
        embeds = self.embeds(T, 3)
        positions = torch.arange(T).unsqueeze(0)
        want = self.hf_logits(embeds)
        explicit = self.lm.build_decoder(self.ckpt, attention="explicit")
        with torch.no_grad():
            got = explicit(embeds, positions, torch.zeros(1, T))
        self.assertLessEqual(rel_err(got, want, "explicit decoder logits"), 1e-5)
        modes = ["math", "sdpa"] if self.lm.sdpa_available() else ["math"]
        for mode in modes:
            with self.subTest(mode=mode):
                dec = torch.jit.script(self.lm.build_decoder(self.ckpt, attention=mode))
                k, v = self.lm.build_decoder(self.ckpt, attention="explicit").new_cache(1, T + 8)
                with torch.no_grad():
                    got = dec(embeds, positions, 0, torch.zeros(1, T), k, v, torch.ones(dec.num_layers), 0, False)
                self.assertLessEqual(rel_err(got, want, f"scripted {mode} decoder logits"), 1e-5)

    def test_lar_bias_is_an_additive_mask_on_qwen2(self):
        """log b on keys 5..24 (recycled tokens), in every layer: transformers with the bias as a
        4D float mask (causal included) gives the same logits; without it they differ."""
        T = 32
        embeds = self.embeds(T, 4)
        positions = torch.arange(T).unsqueeze(0)
        log_b = torch.zeros(1, T)
        log_b[0, 5:25] = torch.log(torch.arange(1, 21, dtype=torch.float32))
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        mask = torch.where(causal, log_b[0][None, :].expand(T, T), torch.tensor(torch.finfo(torch.float32).min))
        want = self.hf_logits(embeds, mask[None, None])
        for lar_path in (0, 1):
            with self.subTest(lar_path=lar_path):
                dec = torch.jit.script(self.lm.build_decoder(self.ckpt, attention="math"))
                k, v = self.lm.build_decoder(self.ckpt, attention="explicit").new_cache(1, T)
                with torch.no_grad():
                    got = dec(embeds, positions, 0, log_b, k, v, torch.ones(dec.num_layers), lar_path, False)
                self.assertLessEqual(rel_err(got, want, f"LAR path {lar_path} vs transformers + log b mask"), 1e-5)
        self.assertGreater(rel_err(self.hf_logits(embeds), want, "transformers without the mask"), 1e-3)

    def test_export_writes_a_onevision_bundle(self):
        out = os.path.join(tempfile.mkdtemp(prefix="era-ov-export-"), "bundle")
        self.addCleanup(shutil.rmtree, os.path.dirname(out), True)
        r = subprocess.run([sys.executable, os.path.join(REPO, "tools", "export_llava.py"), "--checkpoint", self.dir,
                            "--out", out], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(out, "manifest.json"), encoding="utf-8") as f:
            m = json.load(f)
        self.assertEqual((m["arch"], m["files"]["tokenizer"], m["vision"]["has_cls"], m["tokens"]["bos_id"]),
                         ("llava-onevision", "tokenizer.json", False, -1))
        self.assertEqual((m["image"]["vision_aspect_ratio"], m["prompt"]["template"]), ("anyres_max_9", "qwen_1_5"))
        self.assertIn("<|im_end|>", [t["content"] for t in m["tokens"]["added_tokens"]])
        self.assertTrue(os.path.isfile(os.path.join(out, "tokenizer.json")))
        # video: the video processor's own settings (CLIP statistics, not the image processor's
        # 0.5), torch's resize arithmetic, 2x2 pooling, and the <video> placeholder's id
        with open(os.path.join(self.dir, "config.json"), encoding="utf-8") as f:
            video_token = json.load(f)["video_token_index"]
        self.assertEqual(m["video"], {"size": 384, "resample": "bicubic", "resize_arithmetic": "torch",
                                      "mean": [0.48145466, 0.4578275, 0.40821073],
                                      "std": [0.26862954, 0.26130258, 0.27577711], "pool_stride": 2})
        self.assertEqual((m["tokens"]["video_token_id"], m["prompt"]["video_placeholder"]), (video_token, "<video>"))


def use_checkpoint(path):
    global CHECKPOINT
    CHECKPOINT = path


if __name__ == "__main__":
    sys.exit(run_unittests("llava-onevision", use_checkpoint))
