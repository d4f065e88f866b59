#!/usr/bin/env bash
# Benchmark (not a test): DEP+BTR time against the unreduced prefill, 576 -> {32,64,128,192},
# on a medium-width random model (text 1024 wide, 8 layers). Usage: bash tools/bench_reduction.sh
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/era_bench_reduction ] || bash tools/setup.sh
CKPT=models/bench-checkpoint/medium-llava-1.5
BUNDLE=models/medium-llava-1.5
# (Re)make the model when missing or older than the Python tools that make it.
if [ ! -f "$BUNDLE/manifest.json" ] || [ -n "$(find tools -name '*.py' -newer "$BUNDLE/manifest.json")" ]; then
  /usr/bin/python3 tools/make_tiny_llava.py --arch llava-1.5 --seed 0 --out "$CKPT" \
    --vision-hidden 256 --vision-intermediate 1024 --vision-heads 16 --vision-layers 8 \
    --text-hidden 1024 --text-intermediate 2816 --text-layers 8 --text-heads 8
  /usr/bin/python3 tools/export_llava.py --checkpoint "$CKPT" --out "$BUNDLE"
fi
./build/era_bench_reduction -m "$BUNDLE" --image tests/data/sample.png "$@"
