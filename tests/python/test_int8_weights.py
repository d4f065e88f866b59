#!/usr/bin/env python3
"""tools/era_tools/int8_weights.py, scripted as the exporter scripts it: the weight-only
Int8Linear stores each row as int8 with its absmax scale (within half a step of the float row),
calls era::int8_linear with the runtime's switches, and Python's era::int8_linear (era_ops.py) is
the reference formula the C++ kernel is held to: (x @ q^T) * scales + bias in float32 (the GEMM in
float32 from upcast_min_rows rows, else in x's dtype), rounded once to x's dtype.

    test_int8_weights.py [unittest options]
"""
import contextlib
import io
import unittest

import torch
import torch.nn.functional as F

from era_tools import int8_weights as iw
from era_tools import llava_model as lm

BF16 = torch.bfloat16


def scripted(bias, dtype=torch.float32, scheme="weight-only"):
    torch.manual_seed(0)
    linear = lm.Linear(64, 24, bias=bias, dtype=dtype)
    with torch.no_grad():
        if bias:
            linear.bias.normal_()
    holder = torch.nn.Sequential(linear)
    iw.quantize_module(holder, scheme)
    return linear, torch.jit.script(holder[0])


class Int8WeightsTest(unittest.TestCase):
    def test_rows_are_int8_within_half_a_step_of_the_float_weight(self):
        w = torch.randn(16, 40)
        w[3] *= 100  # an outlier row widens only its own step
        q, scales = iw.quantize_rows(w)
        self.assertEqual(q.dtype, torch.int8)
        self.assertEqual(q.abs().amax(dim=1).tolist(), [127] * 16)
        self.assertTrue(bool(((q.float() * scales[:, None] - w).abs() <= scales[:, None] / 2 + 1e-7).all()))
        self.assertGreater(float(scales[3]), 50 * float(scales[2]))

    def test_weight_only_linear_calls_era_int8_linear_with_the_reference_formula(self):
        for bias in (False, True):
            linear, m = scripted(bias)
            self.assertIn("ops.era.int8_linear(", m.code)
            self.assertEqual(m.gemv_max_rows, iw.GEMV_MAX_ROWS)
            self.assertEqual(m.cpu_upcast_min_rows, 0)
            x = torch.randn(3, 64)
            want = F.linear(x.double(), m.weight.double() * m.scales.double()[:, None],
                            None if m.bias is None else m.bias.double())
            self.assertTrue(torch.allclose(m(x).double(), want, rtol=1e-5, atol=1e-5), f"bias={bias}")
            # and the quantised product is near the float one (the weights' rounding only)
            full = F.linear(x, linear.weight, linear.bias)
            self.assertLess(float((m(x) - full).abs().max()), 0.05 * float(full.abs().max()))

    def test_the_gemm_runs_in_float32_from_upcast_min_rows(self):
        _, m = scripted(True, dtype=BF16)
        self.assertEqual(m.bias.dtype, BF16)
        x = torch.randn(6, 64, dtype=BF16)
        float32 = (F.linear(x.float(), m.weight.float()) * m.scales + m.bias.float()).to(BF16)
        m.cpu_upcast_min_rows = 6
        self.assertTrue(torch.equal(m(x), float32))
        m.cpu_upcast_min_rows = 7  # 6 rows: the GEMM in bf16, then scaled in float32
        native = (F.linear(x, m.weight.to(BF16)).float() * m.scales + m.bias.float()).to(BF16)
        self.assertTrue(torch.equal(m(x), native))

    def test_dynamic_scheme_packs_for_libtorch(self):
        if not iw.int8_available("dynamic"):
            self.skipTest("no quantisation engine in this torch")
        _, m = scripted(True, scheme="dynamic")
        self.assertTrue(hasattr(m, "_packed"))
        self.assertIn("quantized.linear_dynamic", m.code)
        with self.assertRaises(ValueError):
            iw.quantize_module(torch.nn.Sequential(lm.Linear(4, 4)), "int4")

    @unittest.skipIf(torch.cuda.is_available(), "a GPU is here: the check would run on it")
    def test_the_cuda_check_refuses_a_machine_without_a_gpu(self):
        from era_tools import check_int8_cuda
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            self.assertEqual(check_int8_cuda.main(["--layers", "0"]), 2)
        self.assertIn("check_int8_cuda: error: no CUDA device", err.getvalue())

    def test_the_cuda_check_builds_every_source_its_operators_need(self):
        # The check compiles its own operator library from OP_SOURCES on the GPU machine; a
        # source left out (a file whose header one of them includes) links, then fails to load
        # there with an undefined symbol. The closure of their era includes is the list.
        import os
        import re
        from era_tools import check_int8_cuda as c
        src = os.path.join(c.ROOT, "src")
        needed, todo = set(), list(c.OP_SOURCES)
        while todo:
            path = todo.pop()
            if path in needed:
                continue
            needed.add(path)
            with open(os.path.join(c.ROOT, path)) as f:
                for header in re.findall(r'^#include "([^"]+)\.h"', f.read(), re.M):
                    for ext in (".cpp", ".cu"):
                        if os.path.exists(os.path.join(src, header + ext)):
                            todo.append("src/" + header + ext)
        self.assertEqual(sorted(needed), sorted(c.OP_SOURCES))


if __name__ == "__main__":
    unittest.main()
