#!/usr/bin/env bash
# The whole test suite: install + build, then ctest (Python fixtures make the tiny checkpoint,
# the bundle and the Pillow / sentencepiece / eager-PyTorch references first).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"
