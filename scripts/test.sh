#!/usr/bin/env bash
# The whole test suite on a fresh machine: set up, build, run every test
# (lit: dialects, passes, tools end to end; GoogleTest: kernels, runtime,
# compiler; PyTorch reference) through one ctest.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
"$ROOT/scripts/setup.sh"
JOBS=${JOBS:-$(nproc)}
cmake --build "$BUILD_DIR" -j "$JOBS"
export OMP_WAIT_POLICY=PASSIVE
cd "$BUILD_DIR" && ctest --output-on-failure -j "$JOBS" "$@"
