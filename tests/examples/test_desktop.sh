#!/usr/bin/env bash
# The desktop example in a virtual X server: it must open its window, stream an answer, write
# its window picture (--screenshot) and show that same picture on screen, which a real X
# screenshot of the root window (ImageMagick `import`, or xwd) must contain.
# Exit 77 (ctest: skipped) only when xvfb-run is not installed.
#   test_desktop.sh ERA_DESKTOP BUNDLE IMAGE SCRATCH
set -euo pipefail
app=$1 bundle=$2 image=$3 scratch=$4
if ! command -v xvfb-run > /dev/null; then
  echo "xvfb-run not installed (tools/setup.sh installs xvfb): skipping"
  exit 77
fi
rm -rf "$scratch"
mkdir -p "$scratch"
# --help needs no window: usage on stdout, exit 0.
"$app" --help > "$scratch/help.out" || { echo "FAIL: era_desktop --help exited $?"; exit 1; }
grep -q "^usage: era_desktop --model BUNDLE --image FILE" "$scratch/help.out" || { echo "FAIL: --help"; cat "$scratch/help.out"; exit 1; }
"$app" --version > "$scratch/version.out" || { echo "FAIL: era_desktop --version exited $?"; exit 1; }
grep -qE "^era_desktop [0-9]+\.[0-9]+\.[0-9]+$" "$scratch/version.out" || { echo "FAIL: --version"; cat "$scratch/version.out"; exit 1; }
export ERA_APP=$app ERA_BUNDLE=$bundle ERA_IMAGE=$image ERA_SCRATCH=$scratch

xvfb-run -a -s "-screen 0 1280x800x24" bash -c '
  set -euo pipefail
  "$ERA_APP" --model "$ERA_BUNDLE" --image "$ERA_IMAGE" --question "What is in the picture?" \
             --method era --tokens 64 --max-new-tokens 24 --screenshot "$ERA_SCRATCH/app.png" --hold-ms 8000 \
             > "$ERA_SCRATCH/app.out" 2> "$ERA_SCRATCH/app.err" &
  pid=$!
  for _ in $(seq 1 600); do  # the app writes its PNG once the answer is complete
    [ -s "$ERA_SCRATCH/app.png" ] && break
    kill -0 "$pid" 2> /dev/null || break
    sleep 0.2
  done
  sleep 2  # let the window finish painting
  if command -v import > /dev/null; then
    import -display "$DISPLAY" -window root "$ERA_SCRATCH/x11.png"
  elif command -v xwd > /dev/null && command -v convert > /dev/null; then
    xwd -display "$DISPLAY" -root -silent | convert xwd:- "$ERA_SCRATCH/x11.png"
  fi
  wait "$pid"
' || { echo "FAIL: era_desktop under xvfb-run"; cat "$scratch/app.out" "$scratch/app.err"; exit 1; }
cat "$scratch/app.out" "$scratch/app.err"

/usr/bin/python3 - "$scratch/app.png" "$scratch/x11.png" <<'PY'
import os, sys
import numpy as np
from PIL import Image

app_path, x11_path = sys.argv[1], sys.argv[2]
app = np.asarray(Image.open(app_path).convert("RGB"))
h, w, _ = app.shape
colours = len(np.unique(app.reshape(-1, 3), axis=0))
print(f"app.png: {w}x{h}, {colours} colours")
assert h >= 336 and w >= 600, "the window picture is too small"
assert colours > 200, "the window picture is nearly blank"
# The answer column (right of the picture) has drawn text, not only background.
text_area = app[:, 360:]
assert (np.abs(text_area.astype(int) - text_area[0, 0]).sum(axis=2) > 60).mean() > 0.005, "no text drawn"

if not os.path.exists(x11_path):
    sys.exit("no X screenshot tool (install imagemagick or x11-apps)")
root = np.asarray(Image.open(x11_path).convert("RGB"))
print(f"x11.png: {root.shape[1]}x{root.shape[0]}")
# Find the window picture on the screen: anchor on the app picture's rarest colour.
flat = app.reshape(-1, 3)
keys = flat[:, 0].astype(np.int64) << 16 | flat[:, 1].astype(np.int64) << 8 | flat[:, 2]
values, counts = np.unique(keys, return_counts=True)
best = 0.0
for key in values[np.argsort(counts)][:5]:
    dy, dx = divmod(int(np.flatnonzero(keys == key)[0]), w)
    rk = root[..., 0].astype(np.int64) << 16 | root[..., 1].astype(np.int64) << 8 | root[..., 2]
    for y, x in list(zip(*np.nonzero(rk == key)))[:200]:
        oy, ox = y - dy, x - dx
        if oy < 0 or ox < 0 or oy + h > root.shape[0] or ox + w > root.shape[1]:
            continue
        best = max(best, float((root[oy:oy + h, ox:ox + w] == app).all(axis=2).mean()))
print(f"best match of the window picture on screen: {best:.4f}")
assert best > 0.99, "the X screenshot does not show the window picture"
print("desktop OK")
PY
