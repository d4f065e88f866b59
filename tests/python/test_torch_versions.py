#!/usr/bin/env python3
"""The exporter's torch version gate (era_tools.torch_versions) with faked version strings, the
CLI's refusal at startup, the C++ loader's matching list, and the deliberate silencing of
TorchScript's deprecation warnings (only those).

    test_torch_versions.py [unittest options]
"""
import os
import re
import subprocess
import sys
import tempfile
import unittest
import warnings

import torch

from era_tools import torch_versions as tv

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SUPPORTED = "1.13.x or 2.11.x"

# Runs a command module's main() with torch.__version__ replaced, as a user with that torch would.
FAKE_RUN = ("import sys, torch; torch.__version__ = sys.argv[1]; "
            "from era_tools.{module} import main; raise SystemExit(main(sys.argv[2:]))")


class GateTest(unittest.TestCase):
    def test_parse_version(self):
        cases = {"1.13.0a0": (1, 13), "1.13.1": (1, 13), "2.11.0+cu130": (2, 11), "2.1": (2, 1),
                 "10.2.0.dev20260101": (10, 2), "garbage": None, "": None, "2": None}
        for text, want in cases.items():
            self.assertEqual(tv.parse_version(text), want, text)

    def test_table_versions_pass(self):
        for version in ("1.13.0a0", "1.13.1", "2.11.0", "2.11.0+cu130", "2.11.1+cpu"):
            tv.check_export_torch(version)  # no exception

    def test_other_versions_are_refused_naming_the_good_ones(self):
        for version in ("1.12.1", "2.0.1", "2.1.0", "2.10.0", "2.12.1", "2.14.1", "2.15.0+cu130",
                        "3.0.0", "garbage"):
            with self.subTest(version):
                with self.assertRaises(tv.UnsupportedTorch) as cm:
                    tv.check_export_torch(version)
                self.assertIn(f"torch {version} cannot export", str(cm.exception))
                self.assertIn(SUPPORTED, str(cm.exception))

    def test_the_running_torch_is_in_the_table(self):
        """Both CI routes (Debian's 1.13, the PyPI pin 2.11) must be able to export."""
        tv.check_export_torch()

    def test_cpp_loader_lists_the_same_versions(self):
        """src/model/export_compat.cpp's tested exporters == EXPORT_TORCH (one decision, two
        languages)."""
        with open(os.path.join(REPO, "src", "model", "export_compat.cpp"), encoding="utf-8") as f:
            src = f.read()
        m = re.search(r"kTestedExporters\{\{(.*?)\}\};", src, re.S)
        self.assertIsNotNone(m, "kTestedExporters not found in export_compat.cpp")
        cpp = {(int(a), int(b)) for a, b in re.findall(r"\{(\d+),\s*(\d+)\}", m.group(1))}
        self.assertEqual(cpp, set(tv.EXPORT_TORCH))


class CliGateTest(unittest.TestCase):
    def run_faked(self, module, version, *args):
        return subprocess.run([sys.executable, "-c", FAKE_RUN.format(module=module), version,
                               *args], capture_output=True, text=True, timeout=120)

    def test_exporter_refuses_at_startup(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "bundle")
            # a missing checkpoint: the torch error must come first (nothing is read)
            r = self.run_faked("export_llava", "2.15.0", "--checkpoint",
                               os.path.join(tmp, "missing"), "--out", out)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertTrue(r.stderr.startswith("export_llava: error: torch 2.15.0 cannot export"),
                            r.stderr)
            self.assertIn(SUPPORTED, r.stderr)
            self.assertNotIn("Traceback", r.stderr)
            self.assertEqual(os.listdir(tmp), [])

    def test_random_bundle_refuses_at_startup(self):
        with tempfile.TemporaryDirectory() as tmp:
            r = self.run_faked("make_random_bundle", "2.10.0", "--preset", "tiny", "--out",
                               os.path.join(tmp, "b"))
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertTrue(r.stderr.startswith("make_random_bundle: error: torch 2.10.0"),
                            r.stderr)
            self.assertIn(SUPPORTED, r.stderr)
            self.assertEqual(os.listdir(tmp), [])

    def test_help_needs_no_supported_torch(self):
        r = self.run_faked("export_llava", "2.15.0", "--help")
        self.assertEqual(r.returncode, 0, r.stderr)


class DeprecationWarningsTest(unittest.TestCase):
    def test_only_the_deprecation_messages_are_silenced(self):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            with tv.quiet_deprecation():
                for api in ("script", "save", "load"):
                    for category in (DeprecationWarning, FutureWarning):
                        warnings.warn(f"`torch.jit.{api}` is deprecated. Please switch to "
                                      f"`torch.export`.", category)
                warnings.warn("`torch.jit.script` is not supported in Python 3.14+ and may "
                              "break.", DeprecationWarning)
                warnings.warn("`torch.jit.trace` is deprecated.", DeprecationWarning)
                warnings.warn("something else", UserWarning)
            warnings.warn("`torch.jit.load` is deprecated.", DeprecationWarning)  # outside
        self.assertEqual([str(w.message)[:40] for w in seen],
                         ["`torch.jit.script` is not supported in P", "`torch.jit.trace` is deprecated.",
                          "something else", "`torch.jit.load` is deprecated."])

    def test_real_torchscript_calls_are_quiet(self):
        """The wrappers around this torch's own script / save / load emit no deprecation
        warning (on 2.11 the bare calls do: checked too, so a torch that stops warning or
        changes the text shows up here)."""
        m = torch.nn.Linear(2, 2)
        with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            path = os.path.join(tmp, "m.pt")
            tv.save(tv.script(m), path)
            tv.load(path)
            quiet = [str(w.message) for w in seen]
            torch.jit.load(path)
            bare = [str(w.message) for w in seen[len(quiet):]]
        self.assertEqual([q for q in quiet if "deprecated" in q], [])
        if tv.parse_version(torch.__version__) >= (2, 11):
            self.assertTrue(any("`torch.jit.load` is deprecated" in b for b in bare), bare)


if __name__ == "__main__":
    print(f"torch {torch.__version__}")
    unittest.main(verbosity=2)
