"""The shared entry of the Python test scripts that run on a tiny checkpoint: `--checkpoint DIR`
(what ctest passes: the fixture's checkpoint), or, run by hand without it, a tiny one made by
tools/make_tiny_llava.py in a scratch folder that is removed afterwards."""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

MAKE_TINY = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))), "tools", "make_tiny_llava.py")


def run_unittests(arch, use_checkpoint):
    """Parse --checkpoint from sys.argv, hand the folder (absolute) to use_checkpoint, run the
    calling module's unittest cases with the remaining arguments; returns the exit code."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--checkpoint")
    args, rest = parser.parse_known_args()
    tmp = None
    if args.checkpoint:
        checkpoint = os.path.abspath(args.checkpoint)
    else:
        tmp = tempfile.mkdtemp(prefix="era-tiny-")
        checkpoint = os.path.join(tmp, "tiny-" + arch)
        subprocess.run([sys.executable, MAKE_TINY, "--arch", arch, "--seed", "0", "--out", checkpoint],
                       check=True)
    use_checkpoint(checkpoint)
    try:
        prog = unittest.main(module="__main__", argv=[sys.argv[0]] + rest, exit=False, verbosity=2)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0 if prog.result.wasSuccessful() else 1
