#!/usr/bin/env bash
# Installs every Debian package llmc needs, then configures the build.
# Idempotent and quick when everything is already there.
#
#   scripts/setup.sh            # packages + configure build/
#   BUILD_DIR=out scripts/setup.sh
set -euo pipefail

PACKAGES=(
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools   # compiler
  ninja-build ccache cmake g++                              # build
  flatbuffers-compiler libflatbuffers-dev                   # artifact format
  libgtest-dev libgmock-dev                                 # unit tests
  libopenmpi-dev openmpi-bin                                # multi-rank CPU runs
  libgloo-dev                                               # TCP collectives (no mpirun)
  libopenblas-dev                                           # CPU GEMM
  python3-torch python3-numpy                               # reference tests
  python3-venv                                              # transformers venv (setup-hf.sh)
  python3-pip                                               # cudnn-frontend headers (setup-cudnn-frontend.sh)
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all packages present"
fi

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
# cudnn-frontend's headers (optional: CUDA attention on cuDNN), before
# CMake looks for them; a build configured without them is configured again
# once they are there.
BUILD_DIR=$BUILD_DIR "$ROOT/scripts/setup-cudnn-frontend.sh"
if [[ ! -f $BUILD_DIR/build.ninja ]]; then
  cmake -G Ninja -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release
elif [[ -f $BUILD_DIR/deps/cudnn-frontend/include/cudnn_frontend.h ]] &&
     grep -q '^LLMC_CUDNN_FRONTEND_INCLUDE:PATH=.*NOTFOUND' "$BUILD_DIR/CMakeCache.txt" 2>/dev/null; then
  cmake "$BUILD_DIR" > /dev/null
fi
# transformers for the Hugging Face interop tests (optional: they skip without it).
BUILD_DIR=$BUILD_DIR "$ROOT/scripts/setup-hf.sh"
