#!/usr/bin/env bash
# The whole ctest suite under AddressSanitizer + UndefinedBehaviorSanitizer (Debian's LibTorch
# route, clang), in its own build folder:
#
#   tools/sanitize.sh [CTEST_ARGS...]          e.g. tools/sanitize.sh -R 'Manifest|fuzz'
#   tools/sanitize.sh --build-only [TARGETS...]   configure and build only (tools/fuzz.sh uses it)
#
# Builds into build-asan/ with clang++ -fsanitize=address,undefined (every UB check fatal) and
# -fsanitize=fuzzer-no-link, so tools/fuzz.sh fuzzes from the same build. Needs what
# tools/setup.sh --route debian installs, plus clang and libclang-rt-14-dev (installed here).
#
# One setting, with its reason: alloc_dealloc_mismatch=0. The SentencePiece shim must be
# deep-bound (src/text/sentencepiece_backend.h); ASan refuses RTLD_DEEPBIND in its dlopen
# interceptor, so sanitizer builds reach libc's dlopen directly (src/text/tokenizer.cpp). Inside
# the deep-bound sentencepiece, operator new comes from libstdc++ (malloc underneath) while era's
# code frees with ASan's operator delete: ASan would call that pairing a mismatch, which it is not.
# The setting is compiled into the sanitized binaries (__asan_default_options, tokenizer.cpp), so
# it holds however they are started. LeakSanitizer stays on, with one suppression
# (tools/lsan.supp: libdbus, which the desktop example's window system leaves allocated).
# No other suppression: any other report fails the test that triggered it.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v clang++ > /dev/null || need+=(clang)
[ -n "$(ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.asan-x86_64.a 2>/dev/null)" ] || need+=(libclang-rt-14-dev)
if ((${#need[@]})); then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

build_only=0
targets=()
if [ "${1:-}" = "--build-only" ]; then
  build_only=1
  shift
  targets=("$@")
  set --
fi

dir=build-asan
# (Warnings stay warnings here, ERA_WERROR or not: -Werror is for GCC's builds, which CI runs; clang
# warns about other things, and this build hunts for memory errors.)
if [ ! -f "$dir/CMakeCache.txt" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DERA_WERROR=OFF \
    -DERA_SANITIZE="address,undefined" -DERA_FUZZ=ON > "$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; exit 1; }
fi
cmake --build "$dir" -j "$(nproc)" ${targets[@]+--target "${targets[@]}"} > "$dir/build-output.log" 2>&1 || {
  grep -E -A5 "error|Error" "$dir/build-output.log" | head -n 80
  echo "sanitize.sh: building $dir failed (whole log: $dir/build-output.log)" >&2
  exit 1
}
[ "$build_only" -eq 0 ] || exit 0

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$PWD/tools/lsan.supp:print_suppressions=0"
ctest --test-dir "$dir" --output-on-failure -j "$(nproc)" "$@"
