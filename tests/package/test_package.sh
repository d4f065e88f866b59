#!/usr/bin/env bash
# Installs era into a scratch prefix (not the configured one) and builds outside projects against
# that install only: with find_package(era CONFIG) and with pkg-config. Each runs on the tiny
# bundle and must load the INSTALLED SentencePiece shim.
#   test_package.sh BUILD_DIR SOURCE_DIR SCRATCH BUNDLE IMAGE
set -euo pipefail
build=$1 src=$2 scratch=$3 bundle=$4 image=$5
# Outside projects are compiled with the compiler era was built with: a library built by clang
# with sanitizers (tools/sanitize.sh) needs clang's sanitizer runtime in its users too.
cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
cxx=${cxx:-c++}
rm -rf "$scratch"
mkdir -p "$scratch"
prefix=$scratch/prefix

cmake --install "$build" --prefix "$prefix" > "$scratch/install.log"
check_run() {  # what the consumer printed: the same version, the installed shim, an answer
  local out=$1
  cat "$out"
  grep -q "^version $(sed -n 's/^#define ERA_VERSION_STRING "\(.*\)"/\1/p' "$prefix/include/era/version.h") headers " "$out"
  grep -q "^shim $prefix/.*/era/libera_sentencepiece.so$" "$out" || { echo "FAIL: the installed shim was not the one loaded"; exit 1; }
  grep -q "^tokens 8 visual 32$" "$out"
  grep -q "^error image error$" "$out"
}

# 0. The public headers stand alone: only era/*.h is installed (no engine folder), and each header
#    compiles with nothing but the installed include folder on the path: no LibTorch, OpenCV or
#    spdlog header is reachable. era/debug.h is the one optional header that needs LibTorch.
extra=$(find "$prefix/include" -type f ! -path "$prefix/include/era/*.h" | head -n 5)
[ -z "$extra" ] || { echo "FAIL: installed headers outside include/era/*.h: $extra"; exit 1; }
[ -z "$(find "$prefix/include/era" -mindepth 1 -type d)" ] || { echo "FAIL: subfolders under include/era"; exit 1; }
for h in "$prefix"/include/era/*.h; do
  name=era/$(basename "$h")
  [ "$name" = era/debug.h ] && continue
  echo "#include <$name>" | "$cxx" -std=c++17 -fsyntax-only -I "$prefix/include" -x c++ - 2>"$scratch/header.err" ||
    { echo "FAIL: $name alone:"; cat "$scratch/header.err"; exit 1; }
  # Debian puts LibTorch's headers straight under /usr/include, where any compiler finds them: so
  # also check what the header asks for.
  if grep -Eq '#include [<"](torch|ATen|c10|opencv2|spdlog|nlohmann|CLI)/' "$h" || grep -Eq '#include "(model|reduce|runtime|family|pipeline|image|text|util|report|eval|bench|cli)/' "$h"; then
    echo "FAIL: $name includes an engine or internal header"; exit 1
  fi
done
echo "public headers: $(ls "$prefix"/include/era/*.h | wc -l) files, each compiles alone"

# 1. CMake package, consumer configured with only the prefix on CMAKE_PREFIX_PATH.
cmake -S "$src/tests/package/consumer" -B "$scratch/cmake-build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$cxx" \
      -DCMAKE_PREFIX_PATH="$prefix" > "$scratch/cmake-configure.log" 2>&1 || { cat "$scratch/cmake-configure.log"; exit 1; }
cmake --build "$scratch/cmake-build" -j2 > "$scratch/cmake-build.log" 2>&1 || { cat "$scratch/cmake-build.log"; exit 1; }
# The consumer must compile against the installed headers, not the source tree.
if grep -rq -- "$src/src" "$scratch/cmake-build/CMakeFiles/consumer.dir/flags.make"; then
  echo "FAIL: the consumer sees era's source tree"; exit 1
fi
"$scratch/cmake-build/consumer" "$bundle" "$image" > "$scratch/cmake-run.out"
check_run "$scratch/cmake-run.out"

# 2. The install tree moved elsewhere still works (paths are relative to the package files).
mv "$prefix" "$scratch/moved" && prefix=$scratch/moved
cmake -S "$src/tests/package/consumer" -B "$scratch/moved-build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$cxx" \
      -DCMAKE_PREFIX_PATH="$prefix" > "$scratch/moved-configure.log" 2>&1 || { cat "$scratch/moved-configure.log"; exit 1; }
cmake --build "$scratch/moved-build" -j2 > "$scratch/moved-build.log" 2>&1 || { cat "$scratch/moved-build.log"; exit 1; }
"$scratch/moved-build/consumer" "$bundle" "$image" > "$scratch/moved-run.out"
check_run "$scratch/moved-run.out"

# 3. pkg-config: `pkg-config --cflags --libs era` is all the compiler is given.
pc_dir=$(dirname "$(find "$prefix" -name era.pc | head -n 1)")
export PKG_CONFIG_PATH=$pc_dir
pkg-config --exists era
[ "$(pkg-config --modversion era)" = "$(sed -n 's/^#define ERA_VERSION_STRING "\(.*\)"/\1/p' "$prefix/include/era/version.h")" ]
# shellcheck disable=SC2046
"$cxx" -std=c++17 -O1 "$src/tests/package/consumer/consumer.cpp" -o "$scratch/pc-consumer" $(pkg-config --cflags --libs era opencv4)
"$scratch/pc-consumer" "$bundle" "$image" > "$scratch/pc-run.out"
check_run "$scratch/pc-run.out"
echo "package OK"
