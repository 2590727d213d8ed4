#!/usr/bin/env bash
# The whole test suite on a fresh machine: set up, build, check what the
# change adds (scripts/lint-changed.sh: format, clang-tidy and commit
# subjects; on CI's clone, the last commit), run every test (lit: dialects,
# passes, tools end to end; GoogleTest: kernels, runtime, compiler; PyTorch
# reference) through one ctest. Arguments go to ctest.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
"$ROOT/scripts/setup.sh" --test
JOBS=${JOBS:-$(nproc)}
cmake --build "$BUILD_DIR" -j "$JOBS"
# The lint's verdict waits until the tests have run, so that one run shows both.
lint=0
BUILD_DIR=$BUILD_DIR "$ROOT/scripts/lint-changed.sh" || lint=$?
export OMP_WAIT_POLICY=PASSIVE
cd "$BUILD_DIR"
ctest --output-on-failure -j "$JOBS" "$@"
if ((lint)); then
  echo "test.sh: scripts/lint-changed.sh failed (its messages are above the tests')" >&2
  exit "$lint"
fi
