#!/usr/bin/env bash
# The headline CPU benchmark (not a test): era_bench on a random-weight model of medium size
# (real CLIP ViT-L/14-336 tower and projector input, a 2048-wide 4-layer LLaMA decoder with the
# 32064-token vocabulary; tools/make_random_bundle.py --preset medium), full vs ERA at 64 and 128
# tokens, with the eager PyTorch reference on the same inputs for the C++/Python ratio.
#
#   bash tools/bench.sh [era_bench flags]                 e.g. --repeat 5 --threads 2
#   PRESET=medium-next TOKENS=160 bash tools/bench.sh     LLaVA-NeXT: 2880 -> 160 visual tokens
#   PYTHON_REF=0 NEW_TOKENS=8 bash tools/bench.sh         without the Python reference, 8 new tokens
#
# The model is made once under models/random-$PRESET (float32: CPU LibTorch has no fast fp16).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/era_bench ] || bash tools/setup.sh
PRESET=${PRESET:-medium}
TOKENS=${TOKENS:-64,128}
METHODS=${METHODS:-full,era}
BUNDLE=models/random-$PRESET
IMAGE=${IMAGE:-tests/data/sample.png}
NEW_TOKENS=${NEW_TOKENS:-16}
if [ ! -f "$BUNDLE/manifest.json" ] || [ -n "$(find tools -name '*.py' -newer "$BUNDLE/manifest.json")" ]; then
  /usr/bin/python3 tools/make_random_bundle.py --preset "$PRESET" --dtype float32 --out "$BUNDLE"
fi
PY=()
if [ "${PYTHON_REF:-1}" != 0 ]; then PY=(--python-reference tools/bench_python_reference.py); fi
mkdir -p build/bench
./build/era_bench -m "$BUNDLE" --image "$IMAGE" --methods "$METHODS" --tokens "$TOKENS" \
  --warmup 1 --repeat 3 -n "$NEW_TOKENS" --json "build/bench/$PRESET.json" "${PY[@]}" "$@"
echo "(JSON: build/bench/$PRESET.json)"
