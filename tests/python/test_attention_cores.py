#!/usr/bin/env python3
"""The decoder's two exportable attention cores against each other and the eager reference:
scripted `sdpa` (F.scaled_dot_product_attention over LAR's augmented key dimension,
Q~ = [Q, 1], K~ = [K, sqrt(d) log b], V~ = [V, 0]) == scripted `math` == the explicit formula
(`ExplicitLlamaDecoder`), for every exported decoder entry point: prefill, a decode step,
forward_with_attention and run_range, with and without a LAR bias, on both LAR paths.
float32 at rounding-noise tolerance; bfloat16 against float32 at a bfloat16 tolerance.

    test_attention_cores.py [--checkpoint DIR] [unittest options]

On torch < 2.1 (Debian's 1.13) there is no sdpa: its tests are skipped with the reason printed;
on torch >= 2.1 none is skipped (test_sdpa_is_available_where_it_should_be makes sure).
"""
import math
import os
import subprocess
import sys
import tempfile
import unittest

import torch

from era_tools import llava_model as lm
from era_tools import torch_versions
from era_tools.hf_checkpoint import load_checkpoint
from references.checkpoint_main import run_unittests

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECKPOINT = None  # set in main()
T0, T1 = 9, 3      # prefill length, then a decode step, then a chunk of T1 tokens
F32_TOL = 2e-5     # absolute, logits of magnitude ~1: rounding noise only
BF16_TOL = 0.03    # relative to the float32 logits' magnitude; measured <= 0.009 (bfloat16: 8 bits)
NO_SDPA = (f"attention 'sdpa' needs torch >= 2.1 (scaled_dot_product_attention with scale=); "
           f"this is torch {torch.__version__}")


def max_abs(a, b):
    return float((a.float() - b.float()).abs().max())


class AttentionCoresTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        ckpt = load_checkpoint(CHECKPOINT)
        cls.cfg = ckpt.config.text
        cls.explicit = lm.build_decoder(ckpt, torch.float32, "explicit")
        cls.scripted = {}
        for mode in ("math", "sdpa") if lm.sdpa_available() else ("math",):
            for dtype in (torch.float32, torch.bfloat16):
                cls.scripted[mode, dtype] = torch_versions.script(
                    lm.build_decoder(load_checkpoint(CHECKPOINT), dtype, mode))

    def inputs(self, with_bias):
        g = torch.Generator().manual_seed(7)
        T = T0 + 1 + T1
        embeds = torch.randn(1, T, self.cfg.hidden_size, generator=g) * 0.5
        bias = torch.rand(1, T, generator=g) * math.log(6.0) if with_bias else torch.zeros(1, T)
        bias[:, :2] = 0.0  # text keys carry no bias
        scales = torch.rand(self.cfg.num_layers, generator=g) * 2.0 if with_bias else None
        return embeds, torch.arange(T).unsqueeze(0), bias, scales

    def run_entry_points(self, dec, dtype, embeds, pos, bias, scales, lar_path):
        """-> {name: tensor} from every decoder entry point, each on a fresh cache:
        prefill (T0 tokens, all logits), decode (one token, last_only), forward_with_attention
        (the last T1 tokens after the cache: last logits + every layer's last-query logits),
        run_range (layer 0 with attention, then layers 1.. , then logits) over the whole
        sequence."""
        c = self.cfg
        sc = torch.ones(c.num_layers) if scales is None else scales
        T = embeds.shape[1]
        shape = (c.num_layers, 1, c.num_kv_heads, T + 2, c.cache_head_dim)
        x = embeds.to(dtype)
        out = {}
        with torch.no_grad():
            kc, vc = torch.zeros(shape, dtype=dtype), torch.zeros(shape, dtype=dtype)
            out["prefill"] = dec(x[:, :T0], pos[:, :T0], 0, bias[:, :T0], kc, vc, sc, lar_path,
                                 False)
            out["decode"] = dec(x[:, T0:T0 + 1], pos[:, T0:T0 + 1], T0, bias[:, T0:T0 + 1], kc,
                                vc, sc, lar_path, True)
            out["fwa_logits"], out["fwa_attn"] = dec.forward_with_attention(
                x[:, T0 + 1:], pos[:, T0 + 1:], T0 + 1, bias[:, T0 + 1:], kc, vc, sc, lar_path)
            out["cache_k"], out["cache_v"] = kc, vc
            kc, vc = torch.zeros(shape, dtype=dtype), torch.zeros(shape, dtype=dtype)
            low, out["range_attn"] = dec.run_range(x, pos, 0, bias, kc, vc, sc, lar_path, 0, 1,
                                                   True)
            high, _ = dec.run_range(low, pos, 0, bias, kc, vc, sc, lar_path, 1, c.num_layers,
                                    False)
            out["range_logits"] = dec.logits(high, False)
        return out

    def reference(self, embeds, pos, bias, scales):
        """The explicit float32 formula, arranged like run_entry_points' outputs."""
        with torch.no_grad():
            logits, attn = self.explicit.forward_explicit(embeds, pos, bias, scales,
                                                          return_attn=True)
        return {"prefill": logits[:, :T0], "decode": logits[:, T0:T0 + 1],
                "fwa_logits": logits[:, -1:], "fwa_attn": attn, "range_attn": None,
                "range_logits": logits}

    def check_against_reference(self, got, ref, tol, label):
        for name, want in ref.items():
            if want is None:
                continue
            scale = max(1.0, float(want.abs().max()))
            self.assertLessEqual(max_abs(got[name], want), tol * scale, f"{label}: {name}")

    def check_mode(self, mode):
        """scripted `mode` in float32 == the explicit formula and (for sdpa) == scripted math;
        in bfloat16 == the float32 reference at a bfloat16 tolerance."""
        for with_bias in (False, True):
            embeds, pos, bias, scales = self.inputs(with_bias)
            ref = self.reference(embeds, pos, bias, scales)
            for lar_path in (lm.LAR_AUGMENTED, lm.LAR_MASK):
                label = f"{mode} bias={with_bias} lar_path={lar_path}"
                with self.subTest(label):
                    f32 = self.run_entry_points(self.scripted[mode, torch.float32], torch.float32,
                                                embeds, pos, bias, scales, lar_path)
                    self.check_against_reference(f32, ref, F32_TOL, label + " float32")
                    # run_range's layer-0 attention == forward_with_attention's layer 0 over the
                    # same keys (the full sequence: the last query's row)
                    self.assertLessEqual(max_abs(f32["range_attn"][0], ref["fwa_attn"][0]),
                                         F32_TOL * max(1.0, float(ref["fwa_attn"].abs().max())))
                    if mode != "math":
                        math32 = self.run_entry_points(self.scripted["math", torch.float32],
                                                       torch.float32, embeds, pos, bias, scales,
                                                       lar_path)
                        for name, t in math32.items():
                            self.assertLessEqual(max_abs(f32[name], t), F32_TOL, f"{label}: {name}")
                    bf16 = self.run_entry_points(self.scripted[mode, torch.bfloat16],
                                                 torch.bfloat16, embeds, pos, bias, scales,
                                                 lar_path)
                    self.assertEqual(bf16["prefill"].dtype, torch.float32)  # logits are float32
                    self.assertEqual(bf16["cache_k"].dtype, torch.bfloat16)
                    self.check_against_reference(bf16, ref, BF16_TOL, label + " bfloat16")

    def test_math_matches_eager(self):
        self.check_mode("math")

    def test_sdpa_matches_math_and_eager(self):
        if not lm.sdpa_available():
            self.skipTest(NO_SDPA)
        self.check_mode("sdpa")

    def test_bias_changes_the_answer(self):
        """Not vacuous: the LAR bias moves the logits far beyond the tolerances above."""
        a = self.reference(*self.inputs(False))["range_logits"]
        b = self.reference(*self.inputs(True))["range_logits"]
        self.assertGreater(max_abs(a, b), 100 * F32_TOL)

    def test_sdpa_is_available_where_it_should_be(self):
        """On torch >= 2.1 sdpa must be usable (so its tests above cannot skip) and `auto`
        picks it; below, `sdpa` is refused with the reason."""
        if torch_versions.parse_version(torch.__version__) >= (2, 1):
            self.assertTrue(lm.sdpa_available())
            self.assertEqual(lm.resolve_attention("auto"), "sdpa")
            self.assertIn(("sdpa", torch.float32), self.scripted)
        else:
            self.assertEqual(lm.resolve_attention("auto"), "math")
            with self.assertRaisesRegex(ValueError, r"needs torch >= 2\.1"):
                lm.resolve_attention("sdpa")

    def test_scripted_sdpa_calls_the_fused_op(self):
        """The scripted sdpa decoder really calls aten::scaled_dot_product_attention (what makes
        its bundle need LibTorch >= 2.1) and the math one does not."""
        if not lm.sdpa_available():
            self.skipTest(NO_SDPA)
        for mode, calls in (("sdpa", True), ("math", False)):
            # named_modules, not .layers[0]: indexing a scripted ModuleList gives back the
            # Python module on torch 2.x
            core = dict(self.scripted[mode, torch.float32].named_modules())["layers.0.self_attn.core"]
            code = core.code + core.forward_bias.code
            self.assertEqual("scaled_dot_product_attention" in code, calls, mode)


class ExportAttentionTest(unittest.TestCase):
    """The exporter CLI with each --attention the running torch has: the manifest records it,
    the export's own reload check passes, TorchScript's deprecation warnings stay quiet, and the
    vision tower's attention core is the mode's."""

    def test_export_each_attention(self):
        modes = ["math", "sdpa"] if lm.sdpa_available() else ["math"]
        for mode in modes:
            with self.subTest(mode), tempfile.TemporaryDirectory() as tmp:
                out = os.path.join(tmp, "bundle")
                env = dict(os.environ, PYTHONWARNINGS="default")  # show what a user could see
                r = subprocess.run([sys.executable, os.path.join(REPO, "tools", "export_llava.py"),
                                    "--checkpoint", CHECKPOINT, "--out", out, "--attention", mode],
                                   capture_output=True, text=True, timeout=300, env=env)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                self.assertIn(f"attention {mode}", r.stdout)
                self.assertNotIn("is deprecated", r.stderr)
                self.assertNotIn("Warning", r.stderr)
                # the vision tower's layers take the same core: fused SDPA or softmax(QK^T) V
                vision = torch.jit.load(os.path.join(out, "vision.pt"))
                core = dict(vision.named_modules())["encoder.layers.0.self_attn.core"]
                self.assertEqual("scaled_dot_product_attention" in core.code, mode == "sdpa", mode)
        if not lm.sdpa_available():
            self.skipTest(f"math exported; {NO_SDPA}")


def use_checkpoint(path):
    global CHECKPOINT
    CHECKPOINT = path
    print(f"torch {torch.__version__}")


def main():
    return run_unittests("llava-1.5", use_checkpoint)


if __name__ == "__main__":
    sys.exit(main())
