#!/usr/bin/env bash
# Installs the Debian packages llmc needs, then configures the build.
# Idempotent and quick when everything is already there.
#
#   scripts/setup.sh            # what building and training need (the main job)
#   scripts/setup.sh --test     # also what the test suite and the lint need:
#                               # PyTorch, clang-format/clang-tidy 22, the
#                               # transformers venv, cudnn-frontend's headers
#   BUILD_DIR=out scripts/setup.sh
set -euo pipefail

test_setup=0
case ${1:-} in
  "") ;;
  --test) test_setup=1 ;;
  *) echo "setup: unknown argument '$1' (--test or nothing)" >&2; exit 2 ;;
esac

# Configuring the build needs every one of these (GoogleTest included: the
# test binaries are part of the build).
PACKAGES=(
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools   # compiler
  ninja-build ccache cmake g++                              # build
  flatbuffers-compiler libflatbuffers-dev                   # artifact format
  libgtest-dev libgmock-dev                                 # unit tests
  libopenmpi-dev openmpi-bin                                # multi-rank CPU runs
  libgloo-dev                                               # TCP collectives (no mpirun)
  libopenblas-dev                                           # CPU GEMM
)
TEST_PACKAGES=(
  python3-torch python3-numpy                               # reference tests, torchrun
  python3-venv                                              # transformers venv (setup-hf.sh)
  python3-pip                                               # cudnn-frontend headers (setup-cudnn-frontend.sh)
  clang-format-22 clang-tidy-22                             # scripts/lint-changed.sh
)
((test_setup)) && PACKAGES+=("${TEST_PACKAGES[@]}")

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
# cudnn-frontend's headers (optional: CUDA attention on cuDNN; the tests
# compile that path), before CMake looks for them; a build configured
# without them is configured again once they are there.
((test_setup)) && BUILD_DIR=$BUILD_DIR "$ROOT/scripts/setup-cudnn-frontend.sh"
# The CUDA backend: built whenever nvcc is there for the tests (CI compiles
# and links every CUDA file); for the main job, which trains on the CPU,
# only when a GPU is visible (on 2 cores an empty-cache build of llmc and
# llmc-run takes about 5 minutes without it, 15 with it).
# LLMC_ENABLE_CUDA=ON|OFF in the environment decides instead.
cuda=${LLMC_ENABLE_CUDA:-}
if [[ -z $cuda ]]; then
  cuda=ON
  ((test_setup)) || nvidia-smi -L > /dev/null 2>&1 || cuda=OFF
fi
if [[ ! -f $BUILD_DIR/build.ninja ]]; then
  cmake -G Ninja -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DLLMC_ENABLE_CUDA=$cuda
elif ((test_setup)); then
  # A build the main job configured before the test packages were there
  # finds them now (torchrun, cudnn-frontend's headers) and builds the CUDA
  # backend if the main job left it out.
  cmake "$BUILD_DIR" -DLLMC_ENABLE_CUDA=$cuda > /dev/null
fi
# transformers for the Hugging Face interop tests (optional: they skip without it).
if ((test_setup)); then
  BUILD_DIR=$BUILD_DIR "$ROOT/scripts/setup-hf.sh"
fi
