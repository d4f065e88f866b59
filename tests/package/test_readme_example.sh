#!/usr/bin/env bash
# The embedding example of docs/library.md ("Embedding era in a C++ application"), exactly as written there: its CMakeLists.txt and main.cpp blocks
# (each after an "<!-- embed:FILE -->" marker) are built against an installed era and run.
#   test_readme_example.sh BUILD_DIR SOURCE_DIR SCRATCH BUNDLE IMAGE
set -euo pipefail
build=$1 src=$2 scratch=$3 bundle=$4 image=$5
# Outside projects are compiled with the compiler era was built with: a library built by clang
# with sanitizers (tools/sanitize.sh) needs clang's sanitizer runtime in its users too.
cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
cxx=${cxx:-c++}
rm -rf "$scratch"
mkdir -p "$scratch/app"
cmake --install "$build" --prefix "$scratch/prefix" > "$scratch/install.log"

/usr/bin/python3 - "$src/docs/library.md" "$scratch/app" <<'PY'
import pathlib, re, sys
readme, out = pathlib.Path(sys.argv[1]).read_text(), pathlib.Path(sys.argv[2])
blocks = re.findall(r"<!-- embed:(\S+) -->\s*```[a-z]*\n(.*?)```", readme, re.S)
names = [name for name, _ in blocks]
if sorted(names) != ["CMakeLists.txt", "main.cpp"]:
    sys.exit(f"docs/library.md: expected embed blocks CMakeLists.txt and main.cpp, found {names}")
for name, code in blocks:
    (out / name).write_text(code)
PY

cmake -S "$scratch/app" -B "$scratch/app-build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$scratch/prefix" \
      > "$scratch/configure.log" 2>&1 || { cat "$scratch/configure.log"; exit 1; }
cmake --build "$scratch/app-build" -j2 > "$scratch/build.log" 2>&1 || { cat "$scratch/build.log"; exit 1; }
"$scratch/app-build/ask" "$bundle" "$image" > "$scratch/run.out"
cat "$scratch/run.out"
# Streamed text, then the summary: ERA kept the 64 tokens the example asks for.
grep -q "^\[64 visual tokens, era [0-9]*\.[0-9]*\.[0-9]*\]$" "$scratch/run.out"
# Its error path: a missing image is reported through era::Error, exit 1, no crash.
set +e
"$scratch/app-build/ask" "$bundle" /no/such/image.png > "$scratch/bad.out" 2> "$scratch/bad.err"
rc=$?
set -e
cat "$scratch/bad.err"
[ "$rc" -eq 1 ] && grep -q "^error (" "$scratch/bad.err"
echo "docs/library.md example OK"
