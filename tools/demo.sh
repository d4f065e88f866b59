#!/usr/bin/env bash
# The demo: install + build era_infer (only it: the test suite is tools/test.sh's), make a small
# random-weight LLaVA-1.5 checkpoint in the Hugging Face layout, and ask era_infer about the bundled
# sample image with ERA keeping 64 of 576 visual tokens (with stats), the folder opened as it is
# (no export). Arguments, if any, replace `--method era --tokens 64`.
# The weights are random, so the answer is gibberish: this shows the machinery, not a model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh --target era_infer
MODEL=models/tiny-llava-1.5
# (Re)make the model when missing, older than the Python tools that make it, or an era bundle of
# an earlier demo.
if [ ! -f "$MODEL/config.json" ] || [ -f "$MODEL/manifest.json" ] || [ -n "$(find tools -name '*.py' -newer "$MODEL/config.json")" ]; then
  rm -rf "$MODEL" models/demo-checkpoint
  /usr/bin/python3 tools/make_tiny_llava.py --arch llava-1.5 --seed 0 --out "$MODEL"
fi
args=("$@")
[ $# -gt 0 ] || args=(--method era --tokens 64)
./build/era_infer -m "$MODEL" --image tests/data/sample.png -p "What is in this picture?" -n 24 --stats "${args[@]}"
