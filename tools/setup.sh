#!/usr/bin/env bash
# Installs era's Debian dependencies (only those missing) and builds it into build/.
# Used by tools/demo.sh, tools/test.sh and CI; safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."

# xvfb, xauth, imagemagick, x11-apps: the desktop example's test runs it in a virtual X server
# (xvfb-run) and takes a real screenshot of its window (import / xwd).
# libopenblas0-pthread: Debian's LibTorch calls the system libblas.so.3, which is the scalar
# reference BLAS unless OpenBLAS is installed to take over that alternative (several times
# faster matmuls, for the C++ side and for the exporter's Python alike).
PACKAGES=(build-essential cmake pkg-config
          libtorch-dev python3-torch python3-numpy python3-pil python3-sentencepiece libopenblas0-pthread
          libopencv-dev nlohmann-json3-dev libcli11-dev libspdlog-dev
          libsentencepiece-dev sentencepiece libgtest-dev libgmock-dev
          xvfb xauth imagemagick x11-apps)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "era setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DERA_PYTHON=/usr/bin/python3 > build.log 2>&1 || { cat build.log; exit 1; }
cmake --build build -j "$(nproc)" 2>&1 | tail -n 5
