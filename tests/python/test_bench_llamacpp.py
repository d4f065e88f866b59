#!/usr/bin/env python3
"""tools/bench_llamacpp.py without llama.cpp: its argument errors (one line, exit 2, the flag
named), the per-process peak RSS it reports (a child that holds 300 MiB reads as at least that,
one that holds nothing reads well below), a child killed by a signal named by it, the build
folder per set of extra CMake arguments, and the side-by-side table with its ratios (and with a
failed engine: its cells and its reason, the others' numbers kept).

    test_bench_llamacpp.py [unittest options]
"""
import io
import os
import subprocess
import sys
import unittest
from contextlib import redirect_stderr

from era_tools import bench_llamacpp as bl

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ArgumentsTest(unittest.TestCase):
    def error_of(self, *argv):
        err = io.StringIO()
        with redirect_stderr(err):
            code = bl.main(list(argv))
        return code, err.getvalue()

    def test_a_folder_that_is_not_llama_cpp_is_refused(self):
        code, err = self.error_of("--llama-cpp", REPO, "--era-bench", sys.executable)
        self.assertEqual(code, 2)
        self.assertIn("--llama-cpp", err)
        self.assertIn("not a llama.cpp source tree", err)
        self.assertEqual(err.count("\n"), 1, err)

    def test_bad_prompts_and_counts_are_refused(self):
        for argv, needle in ((["--prompts", "600,abc"], "--prompts"), (["--prompts", "8"], "at least 32"),
                             (["--rounds", "0"], "--rounds 0"), (["--threads", "-1"], "--threads -1"),
                             (["--llama-cmake-args=-DX='unclosed"], "--llama-cmake-args")):
            code, err = self.error_of("--llama-cpp", REPO, *argv)
            self.assertEqual(code, 2, argv)
            self.assertIn(needle, err, argv)

    def test_a_missing_era_bench_is_named(self):
        code, err = self.error_of("--llama-cpp", REPO, "--era-bench", "/nonexistent/era_bench")
        self.assertEqual(code, 2)
        self.assertIn("/nonexistent/era_bench", err)


class PeakRssTest(unittest.TestCase):
    def test_each_child_reports_its_own_peak(self):
        big = [sys.executable, "-c", "b = bytearray(300 << 20); b[::4096] = b'x' * len(b[::4096])"]
        small = [sys.executable, "-c", "pass"]
        _, rss_big = bl.measured(big, "big child")
        _, rss_small = bl.measured(small, "small child")
        self.assertGreaterEqual(rss_big, 300 << 20)
        self.assertLess(rss_small, 200 << 20)  # not the earlier child's maximum

    def test_a_failing_child_is_a_bench_error_with_its_output(self):
        with self.assertRaises(bl.BenchError) as ctx:
            bl.measured([sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"], "the child")
        self.assertIn("the child failed (exit 3)", str(ctx.exception))
        self.assertIn("boom", str(ctx.exception))


class ChildFailureTest(unittest.TestCase):
    def test_a_signal_is_named_and_sigill_points_at_the_cmake_arguments(self):
        with self.assertRaises(bl.BenchError) as ctx:
            bl.measured([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGILL)"],
                        "llama-bench x.gguf")
        self.assertIn("llama-bench x.gguf failed (killed by SIGILL", str(ctx.exception))
        self.assertIn("--llama-cmake-args", str(ctx.exception))
        self.assertEqual(bl.exit_reason(-9), "killed by SIGKILL")
        self.assertEqual(bl.exit_reason(3), "exit 3")

    def test_each_set_of_cmake_arguments_gets_its_own_build(self):
        plain = bl.build_folder("/w", [])
        a = bl.build_folder("/w", ["-DCMAKE_C_FLAGS=-mno-amx-tile"])
        b = bl.build_folder("/w", ["-DCMAKE_C_FLAGS=-mno-amx-int8"])
        self.assertEqual(plain, "/w/llama.cpp-build")
        self.assertTrue(a.startswith("/w/llama.cpp-build-"))
        self.assertEqual(len({plain, a, b}), 3)
        self.assertEqual(a, bl.build_folder("/w", ["-DCMAKE_C_FLAGS=-mno-amx-tile"]))
        args = bl.parse_args(["--llama-cpp", "x", "--llama-cmake-args=-DA=1 '-DB=x y'"])
        self.assertEqual(args.llama_cmake, ["-DA=1", "-DB=x y"])


class TableTest(unittest.TestCase):
    def test_medians_and_ratios(self):
        args = bl.parse_args(["--llama-cpp", "x", "--rounds", "3", "--layers", "8", "--threads", "2"])

        def run(p600, p160, dec, rss):
            return {"prefill": {600: p600, 160: p160}, "decode_ms": dec, "rss": rss}
        runs = {"era-bf16": [run(100, 110, 250, 4 << 30), run(90, 100, 260, 4 << 30), run(80, 120, 240, 4 << 30)],
                "llama-bf16": [run(50, 60, 500, 3 << 30)] * 3,
                "era-int8": [run(120, 130, 200, 2 << 30)] * 3,
                "llama-q8_0": [run(60, 65, 100, 2 << 30)] * 3}
        text = bl.table(args, runs, "abc (build 1)")
        self.assertIn("| era       | bf16", text)
        self.assertIn("90.0", text)    # era bf16 prefill @600: median of 100, 90, 80
        self.assertIn("250.0", text)   # its decode median
        self.assertIn("4.00", text)    # GiB
        self.assertIn("era / llama.cpp, bf16: prefill @600 1.80x, prefill @160 1.83x, decode 2.00x", text)
        self.assertIn("era / llama.cpp, int8 vs Q8_0: prefill @600 2.00x, prefill @160 2.00x, decode 0.50x", text)
        self.assertIn("2 threads", text)

    def test_a_failed_engine_keeps_the_others_numbers(self):
        args = bl.parse_args(["--llama-cpp", "x", "--rounds", "2"])
        ok = {"prefill": {600: 50, 160: 60}, "decode_ms": 100, "rss": 2 << 30}
        runs = {"era-bf16": [ok, ok], "llama-bf16": [ok, ok], "era-int8": [ok, ok],
                "llama-q8_0": [{"error": "llama-bench q8.gguf failed (killed by SIGILL: ...)\ntail"},
                               {"error": "llama-bench q8.gguf failed (killed by SIGILL: ...)"}]}
        text = bl.table(args, runs, "abc")
        q8 = [line for line in text.splitlines() if "Q8_0" in line and line.startswith("|")][0]
        self.assertEqual(q8.count("failed"), 4, q8)  # two prefill cells, decode, RSS
        self.assertIn("era / llama.cpp, bf16: prefill @600 1.00x", text)
        self.assertIn("int8 vs Q8_0: no ratio", text)
        self.assertIn("failed: llama-q8_0, round 1: llama-bench q8.gguf failed (killed by SIGILL", text)
        self.assertNotIn("tail", text)  # one line per failure


if __name__ == "__main__":
    unittest.main()
