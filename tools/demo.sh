#!/usr/bin/env bash
# The demo: install + build era_infer (only it: the test suite is tools/test.sh's), make a small
# random-weight LLaVA-1.5 checkpoint in the HF layout, export it to a bundle, and ask era_infer about the bundled sample image with ERA keeping 64 of
# 576 visual tokens (with stats). Arguments, if any, replace `--method era --tokens 64`.
# The weights are random, so the answer is gibberish: this shows the machinery, not a model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh --target era_infer
CKPT=models/demo-checkpoint/tiny-llava-1.5
BUNDLE=models/tiny-llava-1.5
# (Re)make the model when missing or older than the Python tools that make it.
if [ ! -f "$BUNDLE/manifest.json" ] || [ -n "$(find tools -name '*.py' -newer "$BUNDLE/manifest.json")" ]; then
  /usr/bin/python3 tools/make_tiny_llava.py --arch llava-1.5 --seed 0 --out "$CKPT"
  /usr/bin/python3 tools/export_llava.py --checkpoint "$CKPT" --out "$BUNDLE"
fi
args=("$@")
[ $# -gt 0 ] || args=(--method era --tokens 64)
./build/era_infer -m "$BUNDLE" --image tests/data/sample.png -p "What is in this picture?" -n 24 --stats "${args[@]}"
