#!/usr/bin/env python3
"""A bundle exported by the *other* route's torch, run by this build's era_infer.

    test_cross_load.py --era-infer BIN --other-python PY --checkpoint DIR --scratch DIR

The checkpoint is exported with this interpreter (the route's own torch, --attention math: the
reference) and with PY (the other route's torch: --attention math, and sdpa where PY's torch has
it). Every math bundle must give era_infer the same 8 greedy tokens and, with ERA's LAR bias on,
the same prompt logits (--dump-prompt) as the reference; an sdpa bundle must do the same on a
LibTorch >= 2.1 and be refused up front (exit 2, the manifest field and the fix named) on an
older one. This build's LibTorch is this interpreter's torch: the routes pair them.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import unittest

import numpy as np
import torch

from era_tools.torch_versions import parse_version

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ARGS = None
LOGITS_TOL = 1e-4  # relative to the logits' magnitude: same kernels, another torch's rounding


def torch_version_of(python):
    return subprocess.run([python, "-c", "import torch; print(torch.__version__)"],
                          capture_output=True, text=True, check=True).stdout.strip()


def export(python, attention, out):
    r = subprocess.run([python, os.path.join(REPO, "tools", "export_llava.py"), "--checkpoint",
                        ARGS.checkpoint, "--out", out, "--attention", attention],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{python} export ({attention}) failed:\n{r.stdout}{r.stderr}"
    return out


def infer(bundle, dump):
    """-> (CompletedProcess, greedy tokens or None, prompt logits or None)."""
    r = subprocess.run([ARGS.era_infer, "-m", bundle, "--image",
                        os.path.join(REPO, "tests", "data", "sample.png"), "-p",
                        "What is in the picture?", "-n", "8", "--ignore-eos", "--json",
                        "--method", "era", "--tokens", "64", "--dump-prompt", dump],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        return r, None, None
    return r, json.loads(r.stdout)["tokens"], np.load(os.path.join(dump, "prompt_logits.npy"))


class CrossLoadTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        shutil.rmtree(ARGS.scratch, ignore_errors=True)
        os.makedirs(ARGS.scratch)
        cls.here = torch.__version__
        cls.other = torch_version_of(ARGS.other_python)
        print(f"this route: torch / LibTorch {cls.here}; other route: torch {cls.other}")
        ref = export(sys.executable, "math", os.path.join(ARGS.scratch, "own-math"))
        r, cls.ref_tokens, cls.ref_logits = infer(ref, os.path.join(ARGS.scratch, "own-dump"))
        assert r.returncode == 0, r.stderr
        # not vacuous: LAR biased some keys (the bias is part of what must match)
        with open(os.path.join(ARGS.scratch, "own-dump", "prompt.json")) as f:
            assert json.load(f)["biased_keys"] > 0

    def check_same_answer(self, attention):
        name = f"other-{attention}"
        bundle = export(ARGS.other_python, attention, os.path.join(ARGS.scratch, name))
        r, tokens, logits = infer(bundle, os.path.join(ARGS.scratch, name + "-dump"))
        if logits is not None:
            print(f"{name}: tokens {tokens} (own math: {self.ref_tokens}), prompt logits max abs "
                  f"diff {float(np.abs(logits - self.ref_logits).max()):.3g}")
        return bundle, r, tokens, logits

    def test_other_routes_math_bundle_runs_here(self):
        _, r, tokens, logits = self.check_same_answer("math")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(tokens, self.ref_tokens)
        scale = max(1.0, float(np.abs(self.ref_logits).max()))
        self.assertLessEqual(float(np.abs(logits - self.ref_logits).max()), LOGITS_TOL * scale)

    def test_other_routes_sdpa_bundle(self):
        if parse_version(self.other) < (2, 1):
            self.skipTest(f"the other route's torch {self.other} cannot export sdpa")
        bundle, r, tokens, logits = self.check_same_answer("sdpa")
        if parse_version(self.here) >= (2, 1):
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(tokens, self.ref_tokens)
            scale = max(1.0, float(np.abs(self.ref_logits).max()))
            self.assertLessEqual(float(np.abs(logits - self.ref_logits).max()), LOGITS_TOL * scale)
        else:
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(f"bundle {bundle}: exported with torch {self.other} (manifest "
                          f"exported_with.torch) with --attention sdpa", r.stderr)
            self.assertIn("re-export it with --attention math", r.stderr)
            self.assertNotIn("Unknown builtin op", r.stderr)


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--era-infer", required=True)
    p.add_argument("--other-python", required=True)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--scratch", required=True)
    ARGS, rest = p.parse_known_args()
    prog = unittest.main(argv=[sys.argv[0]] + rest, exit=False, verbosity=2)
    return 0 if prog.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
