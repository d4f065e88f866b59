#!/usr/bin/env python3
"""Tests of tools/make_random_bundle.py: a preset and a --config file each give a bundle the
exporter's loader accepts, with exactly the declared shapes (manifest and the TorchScript
modules' parameters), a real-size vocabulary past the tokenizer, and clean errors.

    test_random_bundle.py [--scratch DIR] [unittest options]

Only the small presets are built here (7B needs ~14 GB); the real presets' configurations are
checked without building them.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = os.path.join(REPO, "tools")

from era_tools import int8_weights
from era_tools import make_random_bundle as mrb
from era_tools import torch_versions
from references.fixture_files import read_json

MAKE = os.path.join(TOOLS, "make_random_bundle.py")
SCRATCH = None  # set in main()


def make(*args):
    return subprocess.run([sys.executable, MAKE, *args], capture_output=True, text=True,
                          timeout=600)


def params(bundle, name):
    m = torch_versions.load(os.path.join(bundle, name))
    return {k: list(p.shape) for k, p in m.named_parameters()}


class RandomBundleTest(unittest.TestCase):
    def check_shapes(self, bundle, spec, vocab):
        m = read_json(os.path.join(bundle, "manifest.json"))
        t, v = m["text"], m["vision"]
        self.assertEqual(t["hidden_size"], spec["text_hidden"])
        self.assertEqual(t["intermediate_size"], spec["text_intermediate"])
        self.assertEqual(t["num_layers"], spec["text_layers"])
        self.assertEqual(t["num_heads"], spec["text_heads"])
        self.assertEqual(t["head_dim"], spec["text_hidden"] // spec["text_heads"])
        self.assertEqual(v["hidden_size"], spec["vision_hidden"])
        self.assertEqual(v["intermediate_size"], spec["vision_intermediate"])
        self.assertEqual(v["layers_run"], spec["vision_layers"] - 1)  # feature layer -2
        self.assertEqual(t["vocab_size"], vocab)
        D, F = spec["text_hidden"], spec["text_intermediate"]
        dec = params(bundle, "decoder.pt")
        self.assertEqual(dec["embed_tokens.weight"], [vocab, D])
        self.assertEqual(dec["lm_head.weight"], [vocab, D])
        self.assertEqual(dec[f"layers.{spec['text_layers'] - 1}.mlp.down_proj.weight"], [D, F])
        self.assertNotIn(f"layers.{spec['text_layers']}.mlp.down_proj.weight", dec)
        vis = params(bundle, "vision.pt")
        C = spec["vision_hidden"]
        self.assertEqual(vis["encoder.layers.0.mlp.fc1.weight"], [spec["vision_intermediate"], C])
        self.assertIn(f"encoder.layers.{v['layers_run'] - 1}.mlp.fc1.weight", vis)
        self.assertNotIn(f"encoder.layers.{v['layers_run']}.mlp.fc1.weight", vis)
        self.assertEqual(params(bundle, "projector.pt")["linear_1.weight"], [D, C])
        return m

    def test_tiny_preset_is_a_bundle_of_the_declared_shapes(self):
        out = os.path.join(SCRATCH, "tiny")
        r = make("--preset", "tiny", "--dtype", "float32", "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("decoder.pt   max abs diff", r.stdout)  # the export's own check ran
        m = self.check_shapes(out, mrb.PRESETS["tiny"], 1024)  # 1000 pieces + 2, padded to 64
        self.assertEqual(m["arch"], "llava-1.5")
        self.assertEqual(m["model_name"], "random-tiny")
        # seeded: the same preset and seed give the same weights
        out2 = os.path.join(SCRATCH, "tiny-again")
        self.assertEqual(make("--preset", "tiny", "--dtype", "float32", "--out", out2,
                              "--no-check").returncode, 0)
        a = torch_versions.load(os.path.join(out, "decoder.pt")).state_dict()
        b = torch_versions.load(os.path.join(out2, "decoder.pt")).state_dict()
        self.assertTrue(all(torch.equal(a[k], b[k]) for k in a))
        # rows past the tokenizer are the mean row: greedy decoding never picks them
        lm = a["lm_head.weight"]
        self.assertTrue(torch.allclose(lm[1000:], lm[1000:1001].expand(lm.shape[0] - 1000, -1)))

    def test_hf_weights_alone_writes_the_folder_era_opens_directly(self):
        """--hf-weights without --out: the checkpoint as an HF folder (config, processor,
        tokenizer, one safetensors file under transformers 5's names), no bundle; neither flag:
        refused."""
        hf = os.path.join(SCRATCH, "tiny-hf-only")
        r = make("--preset", "tiny", "--dtype", "float32", "--hf-weights", hf)
        self.assertEqual(r.returncode, 0, r.stderr)
        for name in ("config.json", "preprocessor_config.json", "tokenizer.model", "model.safetensors"):
            self.assertTrue(os.path.isfile(os.path.join(hf, name)), name)
        self.assertFalse(os.path.exists(os.path.join(hf, "manifest.json")))
        from era_tools.safetensors_io import load_file
        names = set(load_file(os.path.join(hf, "model.safetensors"))[0])
        for prefix in ("model.vision_tower.vision_model.", "model.multi_modal_projector.",
                       "model.language_model."):
            self.assertTrue(any(n.startswith(prefix) for n in names), prefix)
        r = make("--preset", "tiny", "--dtype", "float32")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--out is required (or --hf-weights alone)", r.stderr)

    def test_text_model_and_int8_bundle_hold_the_same_weights(self):
        """--text-model writes the bundle's own language model for another engine (llama.cpp's
        converter); --int8 decoder with the same seed quantises those same weights."""
        out, hf = os.path.join(SCRATCH, "tiny-text"), os.path.join(SCRATCH, "tiny-text-hf")
        r = make("--preset", "tiny", "--dtype", "float32", "--out", out, "--text-model", hf, "--no-check")
        self.assertEqual(r.returncode, 0, r.stderr)
        from era_tools.safetensors_io import load_file
        hf_weights, _ = load_file(os.path.join(hf, "model.safetensors"))
        dec = torch_versions.load(os.path.join(out, "decoder.pt")).state_dict()
        self.assertEqual(len(hf_weights), len(dec))
        for name, t in hf_weights.items():
            mine = name if name.startswith("lm_head.") else name[len("model."):]
            self.assertTrue(torch.equal(dec[mine], t), name)
        cfg = read_json(os.path.join(hf, "config.json"))
        self.assertEqual(cfg["architectures"], ["LlamaForCausalLM"])
        m = read_json(os.path.join(out, "manifest.json"))
        self.assertEqual((cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]),
                         (m["text"]["hidden_size"], m["text"]["num_layers"], m["text"]["vocab_size"]))
        self.assertTrue(os.path.isfile(os.path.join(hf, "tokenizer.model")))

        q = os.path.join(SCRATCH, "tiny-int8")
        r = make("--preset", "tiny", "--dtype", "float32", "--out", q, "--int8", "decoder")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("linear layers stored as int8", r.stdout)
        mq = read_json(os.path.join(q, "manifest.json"))
        self.assertEqual(mq["quantization"]["int8"], "decoder")
        self.assertEqual(mq["quantization"]["int8_scheme"], "weight-only")
        self.assertNotIn("quantization", m)
        qdec = torch_versions.load(os.path.join(q, "decoder.pt")).state_dict()
        # weight-only: each int8 row times its scale is the float row within half a step
        w, qw = dec["layers.0.self_attn.q_proj.weight"], qdec["layers.0.self_attn.q_proj.weight"]
        scales = qdec["layers.0.self_attn.q_proj.scales"]
        self.assertEqual(qw.dtype, torch.int8)
        self.assertEqual(qw.abs().amax(dim=1).tolist(), [127] * qw.shape[0])  # absmax rows reach 127
        err = (qw.float() * scales[:, None] - w).abs()
        self.assertTrue(bool((err <= scales[:, None] * 0.5 + 1e-7).all()))
        self.assertTrue(torch.equal(qdec["embed_tokens.weight"], dec["embed_tokens.weight"]))
        # the vision tower stays float with --int8 decoder
        self.assertEqual(params(q, "vision.pt"), params(out, "vision.pt"))
        # --int8 all: the vision tower's and the projector's linears too, weight-only (the export's
        # own TorchScript-vs-eager check runs: no --no-check); embeddings and norms stay float
        a = os.path.join(SCRATCH, "tiny-int8-all")
        r = make("--preset", "tiny", "--dtype", "float32", "--out", a, "--int8", "all")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(read_json(os.path.join(a, "manifest.json"))["quantization"]["int8"], "all")
        for part in ("vision.pt", "projector.pt", "decoder.pt"):
            state = torch_versions.load(os.path.join(a, part)).state_dict()
            int8 = [k for k, t in state.items() if t.dtype == torch.int8]
            self.assertTrue(int8, part)
            self.assertTrue(all(k.endswith(".weight") and k[:-len("weight")] + "scales" in state for k in int8), part)
        vision = torch_versions.load(os.path.join(a, "vision.pt")).state_dict()
        self.assertTrue(all(t.dtype == torch.float32 for k, t in vision.items() if "embed" in k or "norm" in k))
        if not int8_weights.int8_available("dynamic"):
            return
        d = os.path.join(SCRATCH, "tiny-int8-dynamic")
        r = make("--preset", "tiny", "--dtype", "float32", "--out", d, "--int8", "decoder",
                 "--int8-scheme", "dynamic", "--no-check")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(read_json(os.path.join(d, "manifest.json"))["quantization"]["int8_scheme"], "dynamic")
        ddec = torch_versions.load(os.path.join(d, "decoder.pt"))
        self.assertNotIn("layers.0.self_attn.q_proj.weight", ddec.state_dict())  # packed by LibTorch
        self.assertTrue(any(hasattr(sub, "_packed") for sub in ddec.modules()))

    def test_config_file_with_real_vocab_and_next_arch(self):
        config = mrb.preset_config("tiny-next", "float16", 1000)
        config["text_config"].update(hidden_size=96, num_attention_heads=3, num_key_value_heads=3,
                                     intermediate_size=160, num_hidden_layers=1)
        config["vocab_size"] = config["text_config"]["vocab_size"] = 2048
        path = os.path.join(SCRATCH, "config.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(config, f)
        out = os.path.join(SCRATCH, "from-config")
        r = make("--config", path, "--dtype", "float16", "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        spec = dict(mrb.PRESETS["tiny-next"], text_hidden=96, text_heads=3, text_intermediate=160,
                    text_layers=1)
        m = self.check_shapes(out, spec, 2048)
        self.assertEqual(m["arch"], "llava-next")
        self.assertEqual(m["dtype"], "float16")
        proj = torch_versions.load(os.path.join(out, "projector.pt"))
        newline = dict(proj.named_parameters())["image_newline"]
        self.assertEqual(list(newline.shape), [96])
        self.assertEqual(newline.dtype, torch.float16)

    def test_real_presets_declare_the_published_geometry(self):
        c = mrb.preset_config("llava-1.5-7b", "float16", 1000)
        t, v = c["text_config"], c["vision_config"]
        self.assertEqual((t["hidden_size"], t["intermediate_size"], t["num_hidden_layers"],
                          t["num_attention_heads"], t["vocab_size"]), (4096, 11008, 32, 32, 32064))
        self.assertEqual((v["hidden_size"], v["intermediate_size"], v["num_hidden_layers"],
                          v["image_size"], v["patch_size"]), (1024, 4096, 24, 336, 14))
        t13 = mrb.preset_config("llava-1.5-13b", "float16", 1000)["text_config"]
        self.assertEqual((t13["hidden_size"], t13["num_hidden_layers"]), (5120, 40))
        self.assertEqual(mrb.preset_config("llava-next-7b", "float16", 1000)["model_type"],
                         "llava_next")

    def test_tiny_onevision_preset_is_a_onevision_bundle(self):
        out = os.path.join(SCRATCH, "tiny-onevision")
        r = make("--preset", "tiny-onevision", "--dtype", "float32", "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        m = read_json(os.path.join(out, "manifest.json"))
        spec = mrb.ONEVISION_PRESETS["tiny-onevision"]
        self.assertEqual((m["arch"], m["files"]["tokenizer"], m["vision"]["has_cls"]),
                         ("llava-onevision", "tokenizer.json", False))
        self.assertEqual((m["vision"]["tokens_per_crop"], m["vision"]["layers_run"]), (729, spec["vision_layers"]))
        self.assertEqual((m["text"]["num_kv_heads"], m["tokens"]["bos_id"]), (2, -1))
        self.assertEqual(m["image"]["vision_aspect_ratio"], "anyres_max_9")
        self.assertEqual(m["prompt"]["template"], "qwen_1_5")
        self.assertTrue(os.path.isfile(os.path.join(out, "tokenizer.json")))
        dec = params(out, "decoder.pt")
        D = spec["text_hidden"]
        self.assertEqual(dec["layers.0.self_attn.k_proj.bias"], [2 * D // spec["text_heads"]])  # GQA, biases
        sd = torch_versions.load(os.path.join(out, "decoder.pt")).state_dict()
        self.assertTrue(torch.equal(sd["lm_head.weight"], sd["embed_tokens.weight"]))  # tied, as 0.5B

    def test_onevision_presets_declare_the_published_geometry(self):
        """The weightless folders of the real presets load as llava-hf's OneVision checkpoints
        with their published shapes (no weights drawn)."""
        import tempfile
        from era_tools.hf_checkpoint import load_checkpoint
        want = {"llava-onevision-0.5b": (896, 24, 14, 2, 151936, 4864),
                "llava-onevision-7b": (3584, 28, 28, 4, 152064, 18944)}
        for preset, (hidden, layers, heads, kv, vocab, mlp) in want.items():
            with tempfile.TemporaryDirectory() as folder:
                mrb.onevision_folder(folder, preset, "bfloat16")
                ckpt = load_checkpoint(folder, load_weights=False)
            t, v = ckpt.config.text, ckpt.config.vision
            self.assertEqual((t.hidden_size, t.num_layers, t.num_heads, t.num_kv_heads, t.vocab_size,
                              t.intermediate_size), (hidden, layers, heads, kv, vocab, mlp), preset)
            self.assertEqual((v.hidden_size, v.intermediate_size, v.num_layers, v.image_size,
                              v.patch_size, v.tokens_per_crop), (1152, 4304, 26, 384, 14, 729), preset)
            self.assertEqual(t.tie_word_embeddings, preset.endswith("0.5b"), preset)  # 0.5B ties, 7B does not

    def test_bad_config_is_a_clean_error(self):
        path = os.path.join(SCRATCH, "not-llava.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"model_type": "bert"}, f)
        r = make("--config", path, "--out", os.path.join(SCRATCH, "never"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("make_random_bundle: error:", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(SCRATCH, "never", "manifest.json")))


def main():
    global SCRATCH
    p = argparse.ArgumentParser()
    p.add_argument("--scratch")
    args, rest = p.parse_known_args()
    SCRATCH = args.scratch or tempfile.mkdtemp(prefix="era-random-bundle-")
    shutil.rmtree(SCRATCH, ignore_errors=True)
    os.makedirs(SCRATCH)
    unittest.main(argv=[sys.argv[0]] + rest)


if __name__ == "__main__":
    main()
