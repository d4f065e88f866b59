#!/usr/bin/env python3
"""The exported modules' float32 compute for bfloat16 models on the CPU (llava_model.Linear, the
decoder's attention cores, the CLIP and Qwen vision attention, the tower's LayerNorm), scripted as the exporter scripts
them: with `cpu_upcast_min_rows` set (what era's runtime does on a CPU without bf16 arithmetic),
a call with at least that many rows computes in float32 and rounds once to bfloat16, exactly
the float32 formula; a call with fewer rows (a decode step) and the exported default (0) run the
model dtype's kernels unchanged; float32 models are never touched.

    test_cpu_upcast.py [unittest options]
"""
import math
import types
import unittest

import torch
import torch.nn.functional as F

from era_tools import llava_model as lm
from era_tools import qwen_vl_model as qm

BF16 = torch.bfloat16
ROWS = 8  # the runtime's threshold (src/model/cpu_matmul.cpp kUpcastMinRows)


def casts(fn):
    """How many dtype casts fn() runs (LibTorch's profiler, the same in torch 1.13 and 2.x). The
    widened path is told apart by its casts: its result equals what the bf16 kernel returns (both
    accumulate in float32 and round once), so the values cannot tell."""
    with torch.autograd.profiler.profile() as prof:
        fn()
    return sum(1 for e in prof.function_events if e.name == "aten::to")


def scripted_linear(bias, dtype=BF16):
    torch.manual_seed(0)
    m = lm.Linear(64, 48, bias=bias, dtype=dtype)
    if bias:
        with torch.no_grad():
            m.bias.normal_()
    return torch.jit.script(m)


class LinearTest(unittest.TestCase):
    def test_state_dict_keys_are_nn_linear_ones(self):
        self.assertEqual(sorted(lm.Linear(4, 3).state_dict()), ["bias", "weight"])
        self.assertEqual(sorted(lm.Linear(4, 3, bias=False).state_dict()), ["weight"])

    def test_many_rows_compute_in_float32_and_round_once(self):
        for bias in (True, False):
            m = scripted_linear(bias)
            # the call the C++ runtime serves with its kept-buffer widening
            # (src/kernels/cpu_widened_linear.h); Python defines it with the formula (era_ops.py)
            self.assertIn("ops.era.widened_linear(", m.code)
            m.cpu_upcast_min_rows = ROWS
            x = torch.randn(2, 5, 64, dtype=BF16)  # 10 rows >= 8
            b = m.bias.float() if bias else None
            want = F.linear(x.float(), m.weight.float(), b).to(BF16)
            got = m(x)
            self.assertEqual(got.dtype, BF16)
            self.assertTrue(torch.equal(got, want), f"bias={bias}")
            self.assertTrue(casts(lambda: m(x)), f"bias={bias}: no float32 widening ran")

    def test_few_rows_go_to_era_gemv_when_the_runtime_asks(self):
        # gemv_max_rows (0 as exported) hands calls of that many rows or fewer to era::gemv, the
        # C++ runtime's decode kernel; Python defines it as F.linear (era_tools/era_ops.py)
        m = scripted_linear(True)
        self.assertEqual(m.gemv_max_rows, 0)
        self.assertIn("ops.era.gemv(", m.code)
        def gemv_calls(x):
            with torch.autograd.profiler.profile() as prof:
                out = m(x)
            return out, sum(1 for e in prof.function_events if e.name == "era::gemv")

        x1, x5 = torch.randn(1, 64, dtype=BF16), torch.randn(5, 64, dtype=BF16)
        self.assertEqual(gemv_calls(x1)[1], 0, "exported default: never")
        m.gemv_max_rows = 4
        got, n = gemv_calls(x1)
        self.assertEqual(n, 1)
        self.assertTrue(torch.equal(got, F.linear(x1, m.weight, m.bias)))
        self.assertEqual(gemv_calls(x5)[1], 0, "5 rows > 4: LibTorch's product")
        self.assertEqual(gemv_calls(torch.randn(0, 64, dtype=BF16))[1], 0, "no rows")

    def test_era_ops_define_once_and_survive_a_second_registration(self):
        # a second import under another module name (or a host with era's C++ library loaded)
        # finds the operator defined and defines nothing
        self.assertIsNotNone(lm.era_ops._LIBRARY)
        self.assertIsNone(lm.era_ops._register())
        # Python's era::gemv is F.linear itself (bit for bit; a row sum would differ from the
        # BLAS's summation order on some CPUs), and not a copy of the input or the weight
        w, x = torch.randn(3, 8), torch.randn(1, 8)
        self.assertTrue(torch.equal(torch.ops.era.gemv(x, w, None), F.linear(x, w, None)))
        self.assertTrue(torch.allclose(torch.ops.era.gemv(torch.ones(1, 8), w, None), w.sum(1, keepdim=True).T,
                                       atol=1e-5))

    def test_a_weight_packed_for_onednn_goes_through_era_onednn_linear(self):
        # onednn_packed (False as exported) is what era's runtime sets where it replaced the
        # weight by oneDNN's packed copy (src/kernels/onednn_linear.h); every call then runs
        # era::onednn_linear, which Python defines with torch.ops.mkldnn._linear_pointwise
        m = scripted_linear(True)
        self.assertFalse(m.onednn_packed)
        self.assertIn("ops.era.onednn_linear(", m.code)
        w = torch.randn(48, 64, dtype=BF16)
        self.assertTrue(torch.equal(torch.ops.era.onednn_linear(torch.ones(2, 64, dtype=BF16), w, None),
                                    F.linear(torch.ones(2, 64, dtype=BF16), w)))
        if not hasattr(torch.ops.mkldnn, "_reorder_linear_weight"):
            return  # torch 1.13: no packed weights (the runtime never packs there)
        x = torch.randn(3, 577, 64, dtype=BF16)
        want = F.linear(x.float(), m.weight.float(), m.bias.float())
        plain = m(x)
        m.weight = torch.ops.mkldnn._reorder_linear_weight(m.weight, None)
        m.onednn_packed = True
        def calls(x):
            with torch.autograd.profiler.profile() as prof:
                out = m(x)
            return out, sum(1 for e in prof.function_events if e.name == "era::onednn_linear")
        got, n = calls(x)
        self.assertEqual(n, 1)
        self.assertEqual(got.dtype, BF16)
        self.assertEqual(list(got.shape), [3, 577, 48])
        # float32 sums rounded once to bf16, as the plain linear's
        bound = want.abs() * 2 ** -8 + 1e-3
        self.assertTrue(bool(((got.float() - want).abs() <= bound).all()))
        self.assertTrue(bool(((plain.float() - want).abs() <= bound).all()))

    def test_a_large_weight_is_widened_in_pieces_with_the_same_result(self):
        torch.manual_seed(6)
        m = lm.Linear(1024, 5000, dtype=BF16)  # 5.1 M elements: 3 pieces of 2048 rows
        with torch.no_grad():
            m.bias.normal_()
        m = torch.jit.script(m)
        m.cpu_upcast_min_rows = ROWS
        x = torch.randn(9, 1024, dtype=BF16)
        want = F.linear(x.float(), m.weight.float(), m.bias.float())
        got = m(x)
        self.assertEqual(list(got.shape), [9, 5000])
        # each output is the same float32 dot product, rounded once to bf16
        self.assertLess(float((got.float() - want).abs().max()), float(want.abs().max()) * 2 ** -7)
        self.assertGreaterEqual(casts(lambda: m(x)), 3)  # one widening per piece

    def test_few_rows_and_the_exported_default_run_the_model_dtype(self):
        m = scripted_linear(True)
        x = torch.randn(1, 1, 64, dtype=BF16)
        self.assertEqual(m.cpu_upcast_min_rows, 0)
        self.assertFalse(casts(lambda: m(torch.randn(16, 64, dtype=BF16))))  # exported: off
        m.cpu_upcast_min_rows = ROWS
        self.assertTrue(torch.equal(m(x), F.linear(x, m.weight, m.bias)))  # one row: decode
        self.assertFalse(casts(lambda: m(x)))
        self.assertFalse(casts(lambda: m(torch.randn(ROWS - 1, 64, dtype=BF16))))
        self.assertTrue(casts(lambda: m(torch.randn(ROWS, 64, dtype=BF16))))

    def test_float32_models_are_untouched(self):
        m = scripted_linear(True, dtype=torch.float32)
        m.cpu_upcast_min_rows = ROWS
        x = torch.randn(16, 64)
        self.assertTrue(torch.equal(m(x), F.linear(x, m.weight, m.bias)))
        self.assertFalse(casts(lambda: m(x)))


class LayerNormTest(unittest.TestCase):
    """The vision tower's LayerNorm: nn.LayerNorm's keys and kernel unless the runtime sets
    float32_on_cpu (LibTorch 1.13, whose bf16 norm rounds between its steps), then the float32
    norm rounded once."""

    def norm(self, dtype=BF16):
        torch.manual_seed(3)
        m = lm.LayerNorm(64, eps=1e-5, dtype=dtype)
        with torch.no_grad():
            m.weight.normal_()
            m.bias.normal_()
        return torch.jit.script(m)

    def test_state_dict_keys_are_nn_layer_norm_ones(self):
        self.assertEqual(sorted(lm.LayerNorm(4).state_dict()), ["bias", "weight"])

    def test_float32_on_cpu_normalises_in_float32_and_rounds_once(self):
        m = self.norm()
        x = torch.randn(5, 64, dtype=BF16) * 3 + 0.5
        self.assertFalse(m.float32_on_cpu)  # exported: LibTorch's kernel
        self.assertTrue(torch.equal(m(x), F.layer_norm(x, (64,), m.weight, m.bias, 1e-5)))
        self.assertFalse(casts(lambda: m(x)))
        m.float32_on_cpu = True
        want = F.layer_norm(x.float(), (64,), m.weight.float(), m.bias.float(), 1e-5).to(BF16)
        self.assertTrue(torch.equal(m(x), want))
        self.assertTrue(casts(lambda: m(x)))

    def test_float32_models_are_untouched(self):
        m = self.norm(torch.float32)
        m.float32_on_cpu = True
        x = torch.randn(5, 64)
        self.assertTrue(torch.equal(m(x), F.layer_norm(x, (64,), m.weight, m.bias, 1e-5)))
        self.assertFalse(casts(lambda: m(x)))


def reference_attention(q, k, v, scale, causal):
    """float32 softmax(q k^T scale + causal) v, as the upcast path computes it."""
    s = torch.matmul(q.float(), k.float().transpose(-1, -2)) * scale
    if causal:
        tq, tk = q.shape[2], k.shape[2]
        s = s.masked_fill(lm.hidden_keys(tq, tk, tk - tq, q.device), float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1), v.float())


class AttentionCoreTest(unittest.TestCase):
    def cores(self):
        out = [("math", torch.jit.script(lm.MathAttention(0.125)))]
        if lm.sdpa_available():
            out.append(("sdpa", torch.jit.script(lm.SdpaAttention(0.125))))
        return out

    def test_prefill_upcast_matches_float32_at_bfloat16_rounding(self):
        torch.manual_seed(1)
        q, k, v = (torch.randn(1, 4, 12, 64, dtype=BF16) for _ in range(3))
        want = reference_attention(q, k, v, 0.125, causal=True)
        for name, core in self.cores():
            native_casts = casts(lambda: core(q, k, v, 0))
            core.cpu_upcast_min_rows = ROWS
            got = core(q, k, v, 0)
            self.assertEqual(got.dtype, BF16, name)
            self.assertGreater(casts(lambda: core(q, k, v, 0)), native_casts, name)
            # the math core rounds its scores and probabilities to bf16 as the bf16 model does,
            # sdpa keeps them in float32: both within bf16 rounding of the float32 formula
            self.assertLess(float((got.float() - want).abs().max()), 0.02, name)

    def test_math_cores_widen_through_era_widened_attention(self):
        """The math cores hand widened calls to era::widened_attention (the C++ runtime's per-head
        kernel, src/kernels/cpu_widened_attention.h; Python defines it with the formula in
        era_ops.py): HF's eager bf16 numerics with float32 products, the causal rule with the
        chunk's offset, and the tower's unmasked form."""
        core = torch.jit.script(lm.MathAttention(0.125))
        vision = torch.jit.script(lm.VisionMathCore(0.125))
        for m in (core, vision):
            self.assertIn("ops.era.widened_attention(", m.code)
        core.cpu_upcast_min_rows = ROWS
        torch.manual_seed(7)
        scale = 1 / math.sqrt(40)
        for tq, tk in ((12, 12), (9, 20)):  # a prefill, and a later chunk (offset 11)
            q = torch.randn(1, 2, tq, 40, dtype=BF16)
            k, v = (torch.randn(1, 2, tk, 40, dtype=BF16) for _ in range(2))
            core.scale = scale
            s = (torch.matmul(q.float(), k.float().transpose(-1, -2)).to(BF16) * scale).float()
            s = s.masked_fill(lm.hidden_keys(tq, tk, tk - tq, q.device), float("-inf"))
            want = torch.matmul(torch.softmax(s, dim=-1).to(BF16).float(), v.float()).to(BF16)
            self.assertTrue(torch.equal(core(q, k, v, tk - tq), want), (tq, tk))
        q, k, v = (torch.randn(1, 2, 15, 64, dtype=BF16) for _ in range(3))
        self.assertTrue(torch.equal(vision(q, k, v, True), torch.ops.era.widened_attention(q, k, v, 0.125, 0, False)))

    def test_decode_step_is_unchanged(self):
        torch.manual_seed(2)
        q = torch.randn(1, 4, 1, 64, dtype=BF16)
        k, v = (torch.randn(1, 4, 12, 64, dtype=BF16) for _ in range(2))
        for name, core in self.cores():
            before, native_casts = core(q, k, v, 11), casts(lambda: core(q, k, v, 11))
            core.cpu_upcast_min_rows = ROWS
            self.assertTrue(torch.equal(core(q, k, v, 11), before), name)
            self.assertEqual(casts(lambda: core(q, k, v, 11)), native_casts, name)

    def test_eager_decode_is_the_math_cores_step_and_only_a_step(self):
        """eager_decode (set by the runtime where the CPU multiplies bf16 natively): a one-token
        step that sees every key takes MathAttention's composition, bit for bit; prefill, a chunk
        with hidden keys, and the exported default keep the fused kernel."""
        if not lm.sdpa_available():
            self.skipTest("no SDPA core in this torch")
        sdpa = torch.jit.script(lm.SdpaAttention(0.125))
        math_core = torch.jit.script(lm.MathAttention(0.125))
        self.assertFalse(sdpa.eager_decode)  # exported off
        torch.manual_seed(4)
        q = torch.randn(1, 4, 1, 72, dtype=BF16)
        k, v = (torch.randn(1, 4, 30, 72, dtype=BF16) for _ in range(2))
        fused = sdpa(q, k, v, 29)
        self.assertTrue(torch.equal(fused, F.scaled_dot_product_attention(q, k, v, scale=0.125)))
        sdpa.eager_decode = True
        eager = sdpa(q, k, v, 29)
        self.assertTrue(torch.equal(eager, math_core(q, k, v, 29)))
        want = reference_attention(q, k, v, 0.125, causal=False)
        self.assertLess(float((eager.float() - want).abs().max()), 0.02)
        # a prefill and a later chunk with hidden keys are not decode steps
        qp = torch.randn(1, 4, 30, 72, dtype=BF16)
        self.assertTrue(torch.equal(sdpa(qp, k, v, 0),
                                    F.scaled_dot_product_attention(qp, k, v, is_causal=True, scale=0.125)))
        self.assertTrue(torch.equal(sdpa(q, k, v, 10), lm.SdpaAttention(0.125).attend(q, k, v, 10)))

    def test_decode_kernel_runs_a_step_through_the_operator_and_only_a_step(self):
        """decode_kernel (set by the runtime for a bf16 model on a CPU with AVX2), both decoder
        cores: a one-token step that sees every key is era::widened_attention's (here its Python
        definition), within a bf16 unit of MathAttention's step; prefill and a chunk with hidden
        keys keep each core's own path; exported off."""
        torch.manual_seed(6)
        q = torch.randn(1, 4, 1, 72, dtype=BF16)
        k, v = (torch.randn(1, 4, 30, 72, dtype=BF16) for _ in range(2))
        qp = torch.randn(1, 4, 30, 72, dtype=BF16)
        want = torch.ops.era.widened_attention(q, k, v, 0.125, 29, False)
        math_step = torch.jit.script(lm.MathAttention(0.125))(q, k, v, 29)
        cores = [("math", lm.MathAttention)]
        if lm.sdpa_available():
            cores.append(("sdpa", lm.SdpaAttention))
        for name, cls in cores:
            core = torch.jit.script(cls(0.125))
            self.assertFalse(core.decode_kernel, name)  # exported off
            prefill, chunk = core(qp, k, v, 0), core(q, k, v, 10)
            core.decode_kernel = True
            got = core(q, k, v, 29)
            self.assertTrue(torch.equal(got, want), name)
            self.assertLess(float((got.float() - math_step.float()).abs().max()), 0.02, name)
            self.assertTrue(torch.equal(core(qp, k, v, 0), prefill), name)
            self.assertTrue(torch.equal(core(q, k, v, 10), chunk), name)

    def test_vision_cores_run_the_per_head_kernel_when_asked(self):
        """per_head_kernel (set by the runtime where the CPU multiplies bf16 natively without AMX): both
        vision cores hand the unwidened call to era::widened_attention; off (as exported) they
        keep their own composition."""
        torch.manual_seed(5)
        q, k, v = (torch.randn(1, 2, 15, 64, dtype=BF16) for _ in range(3))
        want = torch.ops.era.widened_attention(q, k, v, 0.125, 0, False)
        cores = [("math", torch.jit.script(lm.VisionMathCore(0.125)))]
        if lm.sdpa_available():
            cores.append(("sdpa", torch.jit.script(lm.VisionSdpaCore(0.125))))
        for name, core in cores:
            self.assertFalse(core.per_head_kernel, name)  # exported off
            own = core(q, k, v, False)
            core.per_head_kernel = True
            got = core(q, k, v, False)
            self.assertTrue(torch.equal(got, want), name)
            self.assertLess(float((got.float() - own.float()).abs().max()), 0.05, name)
        if lm.sdpa_available():  # the sdpa core's own composition is the fused kernel
            core = torch.jit.script(lm.VisionSdpaCore(0.125))
            self.assertTrue(torch.equal(core(q, k, v, False), F.scaled_dot_product_attention(q, k, v, scale=0.125)))

    def test_lar_bias_path_upcasts_too(self):
        # eager: forward_bias is compiled only as part of the decoder that calls it
        torch.manual_seed(3)
        q, k, v = (torch.randn(1, 2, 10, 32, dtype=BF16) for _ in range(3))
        bias = torch.log(torch.rand(1, 10) + 0.5)
        cores = [("math", lm.MathAttention(0.125))]
        if lm.sdpa_available():
            cores.append(("sdpa", lm.SdpaAttention(0.125)))
        for name, core in cores:
            native = core.forward_bias(q, k, v, bias, 0)
            core.cpu_upcast_min_rows = ROWS
            got = core.forward_bias(q, k, v, bias, 0)
            self.assertEqual(got.dtype, BF16, name)
            self.assertLess(float((got.float() - native.float()).abs().max()), 0.05, name)


class VisionAttentionTest(unittest.TestCase):
    @torch.no_grad()
    def test_clip_attention_upcast_keeps_outputs_and_saliency(self):
        cfg = types.SimpleNamespace(hidden_size=64, num_heads=4, has_cls=True)
        torch.manual_seed(4)
        m = torch.jit.script(lm.CLIPAttention(cfg, dtype=BF16))
        x = torch.randn(1, 17, 64, dtype=BF16)
        native = m(x, True)
        for name, mod in m.named_modules():
            if hasattr(mod, "cpu_upcast_min_rows"):
                mod.cpu_upcast_min_rows = ROWS
        up = m(x, True)
        scale = float(native[0].float().abs().max())
        self.assertLess(float((up[0].float() - native[0].float()).abs().max()), 0.03 * scale)
        for a, b in zip(native[1:], up[1:]):  # float32 saliency: from the same bf16 q / k
            self.assertTrue(torch.equal(a, b))

    @torch.no_grad()
    def test_clip_sdpa_core_equals_the_math_core(self):
        """The fused vision core (attention 'sdpa') gives the math core's output (float32:
        rounding noise; bf16: within bf16 rounding; widened: likewise), and the float32
        saliency maps ERA reads are the very same tensors whichever core runs."""
        if not lm.sdpa_available():
            with self.assertRaisesRegex(ValueError, r"needs torch >= 2\.1"):
                lm.make_vision_core("sdpa", 0.125)
            self.skipTest(f"torch {torch.__version__} has no scaled_dot_product_attention(scale=)")
        cfg = types.SimpleNamespace(hidden_size=64, num_heads=4, has_cls=True)
        for dtype, tol in ((torch.float32, 1e-5), (BF16, 0.03)):
            torch.manual_seed(6)
            math_attn = lm.CLIPAttention(cfg, attention="math", dtype=dtype)
            sdpa_attn = lm.CLIPAttention(cfg, attention="sdpa", dtype=dtype)
            sdpa_attn.load_state_dict(math_attn.state_dict())
            m, f = torch.jit.script(math_attn), torch.jit.script(sdpa_attn)
            self.assertIn("scaled_dot_product_attention", f.core.code)
            self.assertNotIn("scaled_dot_product_attention", m.core.code)
            x = torch.randn(1, 17, 64, dtype=dtype)
            for rows in (0, ROWS):  # native, then widened to float32
                m.cpu_upcast_min_rows = f.cpu_upcast_min_rows = rows
                a, b = m(x, True), f(x, True)
                scale = float(a[0].float().abs().max())
                err = float((a[0].float() - b[0].float()).abs().max())
                self.assertLess(err, tol * scale, (dtype, rows))
                for sa, sb in zip(a[1:], b[1:]):
                    self.assertTrue(torch.equal(sa, sb), (dtype, rows))
        # not vacuous: another input moves the output far beyond the tolerances above
        self.assertGreater(float((m(x * 2, False)[0].float() - a[0].float()).abs().max()), 0.1 * scale)

    @torch.no_grad()
    def test_qwen_vision_attention_has_the_switch(self):
        cfg = types.SimpleNamespace(hidden_size=64, num_heads=4)
        m = torch.jit.script(qm.QwenVisionAttention(cfg, dtype=BF16))
        self.assertEqual(m.cpu_upcast_min_rows, 0)
        torch.manual_seed(5)
        x = torch.randn(16, 64, dtype=BF16)
        cos, sin = torch.ones(16, 16), torch.zeros(16, 16)
        native = m(x, cos, sin, [0, 16], False)[0]
        m.cpu_upcast_min_rows = ROWS
        m.qkv.cpu_upcast_min_rows = ROWS
        m.proj.cpu_upcast_min_rows = ROWS
        up = m(x, cos, sin, [0, 16], False)[0]
        self.assertEqual(up.dtype, BF16)
        scale = float(native.float().abs().max())
        self.assertLess(float((up.float() - native.float()).abs().max()), 0.03 * scale)


if __name__ == "__main__":
    unittest.main()
