#!/usr/bin/env bash
# The README's "Using a real checkpoint" steps, as written there: every ```sh block of that
# section runs (the download block, fenced as ```sh download, is skipped: no network here), with
# the placeholders a reader replaces (checkpoint folder, photo, build folder,
# the Python of this route) swapped for the test's own.
#   test_readme_steps.sh SOURCE_DIR BUILD_DIR PYTHON CHECKPOINT IMAGE SCRATCH
set -euo pipefail
src=$1 build=$2 python=$3 checkpoint=$4 image=$5 scratch=$6
rm -rf "$scratch"
mkdir -p "$scratch"
"$python" - "$src/README.md" "$scratch/steps.sh" "$build" "$python" "$checkpoint" "$image" "$scratch" <<'PY'
import pathlib, re, sys
readme, out, build, python, checkpoint, image, scratch = sys.argv[1:]
text = pathlib.Path(readme).read_text()
section = re.search(r"^## Using a real checkpoint\n(.*?)^##", text, re.S | re.M)
if not section:
    sys.exit("README.md: no '## Using a real checkpoint' section")
fences = re.findall(r"```sh([^\n]*)\n(.*?)```", section.group(1), re.S)
blocks = [code for tag, code in fences if tag.strip() != "download" and not re.search(r"\b(hf|huggingface-cli) download\b", code)]
if len(fences) - len(blocks) != 1:
    sys.exit(f"README.md: expected one download block (```sh download), found {len(fences) - len(blocks)}")
if len(blocks) < 2:
    sys.exit(f"README.md: expected the ask and the export commands, found {len(blocks)} sh blocks")
lines = []
for block in blocks:
    for line in block.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        line = (line.replace("/usr/bin/python3", python).replace("~/hf/llava-1.5-7b-hf", checkpoint)
                .replace("models/llava-1.5-7b", scratch + "/bundle").replace("./build/", build + "/")
                .replace("photo.jpg", image))
        lines.append(line)
pathlib.Path(out).write_text("set -euxo pipefail\n" + "\n".join(lines) + "\n")
PY
cd "$src"
bash "$scratch/steps.sh"
echo "README steps OK"
