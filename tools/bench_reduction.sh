#!/usr/bin/env bash
# Benchmark (not a test): DEP+BTR time against the unreduced prefill, 576 -> {32,64,128,192},
# on a medium-width random model (8 decoder layers, WIDTH wide: 1024 by default).
# Usage: bash tools/bench_reduction.sh [more era_bench flags]; WIDTH=2048 bash tools/bench_reduction.sh
# era_bench's table gives the reduce and prefill medians per budget against the unreduced run.
# The reduction costs O(K N D), the prefill O(layers N D^2): the ratio shrinks with width and depth.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/era_bench ] || bash tools/setup.sh
WIDTH=${WIDTH:-1024}
CKPT=models/bench-checkpoint/medium-llava-1.5-w$WIDTH
BUNDLE=models/medium-llava-1.5-w$WIDTH
# (Re)make the model when missing or older than the Python tools that make it.
if [ ! -f "$BUNDLE/manifest.json" ] || [ -n "$(find tools -name '*.py' -newer "$BUNDLE/manifest.json")" ]; then
  /usr/bin/python3 tools/make_tiny_llava.py --arch llava-1.5 --seed 0 --out "$CKPT" \
    --vision-hidden 256 --vision-intermediate 1024 --vision-heads 16 --vision-layers 8 \
    --text-hidden "$WIDTH" --text-intermediate $((WIDTH * 11 / 4)) --text-layers 8 --text-heads $((WIDTH / 128))
  /usr/bin/python3 tools/export_llava.py --checkpoint "$CKPT" --out "$BUNDLE"
fi
./build/era_bench -m "$BUNDLE" --image tests/data/sample.png --methods full,era --tokens 32,64,128,192 -n 1 "$@"
