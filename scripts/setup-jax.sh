#!/usr/bin/env bash
# Installs JAX (CPU) into a venv for the training benchmark's peer compiler
# (bench/tiny_gpt.sh runs bench/jax_gpt.py, the step as one XLA program,
# when the venv exists). Benchmarks only: no test needs it. Idempotent.
#
#   scripts/setup-jax.sh            # venv in build/jax-venv
#   BUILD_DIR=out scripts/setup-jax.sh
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
VENV=$BUILD_DIR/jax-venv
# The release the benchmark numbers in docs/performance.md were taken with.
PIN=(jax==0.10.2 jaxlib==0.10.2)

if "$VENV/bin/python" -c "import jax" 2>/dev/null; then
  echo "setup-jax: jax $("$VENV/bin/python" -c 'import jax; print(jax.__version__)') present in $VENV"
  exit 0
fi
mkdir -p "$BUILD_DIR"
# Its own numpy: jax needs a newer one than Debian's.
/usr/bin/python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check "${PIN[@]}"
echo "setup-jax: installed ${PIN[*]} into $VENV"
