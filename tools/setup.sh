#!/usr/bin/env bash
# Installs what era needs (only what is missing) and builds it. Safe to re-run.
#
#   tools/setup.sh [--route debian|pypi|all] [--target T ...] [--prefetch-pypi]
#                                                                  (default: debian, everything)
#
# Two LibTorch routes, each with its own build folder:
#   debian  Debian's packages: LibTorch 1.13 (CPU) and python3-torch.        -> build/
#   pypi    PyTorch 2.11 from the Python package index in a virtual environment
#           (.venv-torch2, pins in tools/requirements-pypi.txt); era builds against the wheel's
#           bundled, CUDA-enabled LibTorch, and the Hugging Face parity tests run. -> build-torch2/
# --target builds only those CMake targets (repeatable; tools/demo.sh builds era_infer alone, not
# the test suite). The build shows its progress, one line per compiled file.
# --prefetch-pypi (with --route debian): also make the pypi route's virtual environment in the
# background while the debian route builds (a download of about 5 GB: the network, not the cores);
# a later --route pypi waits for it. tools/test.sh uses it.
# Used by tools/demo.sh (debian), tools/test.sh (both) and CI.
# ERA_WERROR=ON in the environment builds with warnings as errors (CI's .ci/run sets it); unset or
# OFF, warnings stay warnings. Either way the build folders are configured with that value.
set -euo pipefail
cd "$(dirname "$0")/.."

route=debian
targets=()
prefetch=0
while (($#)); do
  case "$1" in
    --route) route=${2:-}; shift 2 || { echo "setup.sh: --route needs a value" >&2; exit 2; } ;;
    --route=*) route=${1#--route=}; shift ;;
    --target) [ -n "${2:-}" ] || { echo "setup.sh: --target needs a value" >&2; exit 2; }; targets+=("$2"); shift 2 ;;
    --target=*) targets+=("${1#--target=}"); shift ;;
    --prefetch-pypi) prefetch=1; shift ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown argument '$1' (use --route debian|pypi|all, --target T, --prefetch-pypi)" >&2; exit 2 ;;
  esac
done
case "$route" in
  debian|pypi|all) ;;
  *) echo "setup.sh: --route must be debian, pypi or all, got '$route'" >&2; exit 2 ;;
esac

# Both routes: the compiler, and the C++ libraries era uses besides LibTorch.
# xvfb, xauth, imagemagick, x11-apps: the desktop example's test runs it in a virtual X server
# (xvfb-run) and takes a real screenshot of its window (import / xwd); fonts-dejavu-core: the
# Unicode font its window draws answers with (libgif-dev: GIF input; libicu-dev: the Unicode
# regular expressions and normalisation of the byte-level BPE tokenizer).
# libcpp-httplib-dev, libssl-dev: era_server's HTTP layer and its base64 (data: URLs);
# curl and python3-venv: its end-to-end test (curl, and the openai client in .venv-client).
PACKAGES=(build-essential cmake pkg-config
          libopencv-dev nlohmann-json3-dev libcli11-dev libspdlog-dev
          libsentencepiece-dev sentencepiece libgtest-dev libgmock-dev libgif-dev libicu-dev
          libcpp-httplib-dev libssl-dev curl python3-venv
          xvfb xauth imagemagick x11-apps fonts-dejavu-core)
# Debian's LibTorch and Python side. libopenblas0-openmp: Debian's LibTorch calls the system
# libblas.so.3, which is the scalar reference BLAS unless OpenBLAS takes over that alternative
# (several times faster matmuls, for the C++ side and the exporter alike). OpenBLAS's OpenMP build
# rather than its pthread one: it runs on LibTorch's own OpenMP threads, so LibTorch keeps every
# core for the work around the products (bf16 weights widened to float32, norms, softmax) instead
# of one beside OpenBLAS's own pool (docs/perf/intel-xeon-avx512.md: the vision tower 18 %
# and prefill 10 % faster on average on a 2-core Xeon).
DEBIAN_ROUTE=(libtorch-dev python3-torch python3-numpy python3-pil python3-sentencepiece
              libopenblas0-openmp)
PYPI_ROUTE=(python3-venv)
[ "$route" = pypi ] || PACKAGES+=("${DEBIAN_ROUTE[@]}")
[ "$route" = debian ] || PACKAGES+=("${PYPI_ROUTE[@]}")

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
if ((${#missing[@]})); then
  echo "era setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Debian picks the BLAS behind libblas.so.3 / liblapack.so.3 by priority, and OpenBLAS's pthread
# build (100, pulled in by other packages or an earlier era set-up) outranks the OpenMP one (95):
# select the OpenMP build where the choice is one of OpenBLAS's or the reference BLAS; a BLAS the
# user chose otherwise (MKL, BLIS, ...) is left alone.
if [ "$route" != pypi ]; then
  multiarch=$(gcc -dumpmachine)
  for lib in libblas.so.3 liblapack.so.3 libopenblas.so.0; do
    name=$lib-$multiarch
    want=/usr/lib/$multiarch/openblas-openmp/$lib
    now=$(readlink "/etc/alternatives/$name" 2>/dev/null || true)
    case "$now" in
      "$want") ;;
      ""|*/openblas-pthread/*|*/openblas-serial/*|*/blas/*|*/lapack/*)
        [ -e "$want" ] || { echo "era setup: $want is missing (libopenblas0-openmp)" >&2; exit 1; }
        echo "era setup: $lib -> OpenBLAS's OpenMP build (was ${now:-unset})"
        $SUDO update-alternatives --quiet --set "$name" "$want" ;;
      *) echo "era setup: keeping $now for $lib (chosen outside era; README: Threads)" ;;
    esac
  done
fi

# The official openai Python client for server.e2e (both routes): its own small venv, remade when
# the pin in tools/requirements-client.txt changes.
CLIENT_VENV=.venv-client
CLIENT_REQ=tools/requirements-client.txt
if ! cmp -s "$CLIENT_REQ" "$CLIENT_VENV/era-requirements.txt"; then
  echo "era setup: $CLIENT_VENV ($(grep -m1 '^openai==' "$CLIENT_REQ"))"
  rm -rf "$CLIENT_VENV"
  /usr/bin/python3 -m venv "$CLIENT_VENV"
  "$CLIENT_VENV/bin/pip" install -q --disable-pip-version-check -r "$CLIENT_REQ"
  cp "$CLIENT_REQ" "$CLIENT_VENV/era-requirements.txt"
fi

# configure_and_build BUILD_DIR LOG CMAKE_ARGS...: configure and build (the --target list, or
# everything) into BUILD_DIR. LOG keeps the configure output, BUILD_DIR/build-output.log the
# compiler's; the progress goes to the terminal ("[ 42%] era_core: src/pipeline/session.cpp");
# on failure the errors are shown.
configure_and_build() {
  local dir=$1 log=$2; shift 2
  echo "era setup: configuring $dir (log: $log)"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DERA_WERROR="${ERA_WERROR:-OFF}" "$@" > "$log" 2>&1 || { cat "$log"; exit 1; }
  local what=(--target all)
  if ((${#targets[@]})); then
    what=()
    for t in "${targets[@]}"; do what+=(--target "$t"); done
  fi
  echo "era setup: building ${what[*]} in $dir on $(nproc) cores (log: $dir/build-output.log)"
  # pipefail (set above): the pipeline fails when the build does; sed only picks the progress lines.
  if ! cmake --build "$dir" -j "$(nproc)" "${what[@]}" 2>&1 | tee "$dir/build-output.log" |
      sed -n -u -E 's#^\[ *([0-9]+)%\] Building CXX object (CMakeFiles|[^ ]*/CMakeFiles)/([^/]+)\.dir/(.*)\.o$#  [\1%] \3: \4#p;
                    s#^\[ *([0-9]+)%\] Linking CXX (executable|static library|shared module|shared library) (.*)$#  [\1%] linking \3#p'; then
    grep -E -A5 "error|Error" "$dir/build-output.log" | head -n 80
    echo "era setup: building $dir failed (whole log: $dir/build-output.log)" >&2
    exit 1
  fi
  echo "era setup: $dir built"
}

# The pypi route's virtual environment, (re)made from scratch when the pins change: a stamp holds
# the requirements it has. A lock file orders a background prefetch and the route's own step.
VENV=.venv-torch2
REQ=tools/requirements-pypi.txt
VENV_LOCK=.venv-torch2.lock
VENV_PREFETCH_LOG=.venv-torch2-prefetch.log
make_pypi_venv() {
  if ! cmp -s "$REQ" "$VENV/era-requirements.txt"; then
    rm -rf "$VENV"
    /usr/bin/python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check -r "$REQ"
    cp "$REQ" "$VENV/era-requirements.txt"
  fi
}
if [ "$prefetch" = 1 ] && [ "$route" = debian ] && ! cmp -s "$REQ" "$VENV/era-requirements.txt"; then
  echo "era setup: making $VENV in the background for the pypi route (log: $VENV_PREFETCH_LOG)"
  # set -e holds in the subshell: a failed pip ends it without a stamp, and the lock is released.
  ( flock 9; make_pypi_venv ) 9> "$VENV_LOCK" > "$VENV_PREFETCH_LOG" 2>&1 &
fi

if [ "$route" != pypi ]; then
  echo "era setup: route debian (LibTorch 1.13 from Debian) -> build/"
  configure_and_build build build.log -DERA_PYTHON=/usr/bin/python3
fi

if [ "$route" != debian ]; then
  echo "era setup: route pypi (PyTorch from PyPI, $(grep -m1 '^torch==' "$REQ")) -> build-torch2/"
  # A venv a --prefetch-pypi run is still making: wait for it (its lock), then check its stamp (a
  # failed or interrupted prefetch left none: made again here, with pip's errors shown).
  exec 9> "$VENV_LOCK"
  if ! flock -n 9; then
    echo "era setup: waiting for $VENV, being made in the background (log: $VENV_PREFETCH_LOG)"
    flock 9
  fi
  make_pypi_venv
  exec 9>&-
  TORCH_DIR=$("$VENV/bin/python" -c 'import os, torch; print(os.path.dirname(torch.__file__))')
  # ERA_HF_PARITY=ON: configuring fails if the venv cannot import transformers, so the parity
  # tests can never be skipped silently on this route.
  configure_and_build build-torch2 build-torch2.log -DCMAKE_PREFIX_PATH="$TORCH_DIR" \
    -DERA_PYTHON="$PWD/$VENV/bin/python" -DERA_HF_PARITY=ON -DERA_REQUIRE_CUDA=ON
fi
