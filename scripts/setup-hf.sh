#!/usr/bin/env bash
# Installs Hugging Face `transformers` into a venv for the interop tests
# (test/reference/run_hf.sh): the library defines HF's file layouts and
# module semantics, so the tests check llmc against it. The venv sees
# Debian's torch 1.13 (--system-site-packages); the pin is a release that
# imports and runs on it. Optional: without network the tests skip, saying
# so. Idempotent.
#
#   scripts/setup-hf.sh            # venv in build/hf-venv
#   BUILD_DIR=out scripts/setup-hf.sh
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
VENV=$BUILD_DIR/hf-venv
# transformers and the versions of its dependencies the tests last ran with.
PIN=(transformers==4.44.2 tokenizers==0.19.1 safetensors==0.8.0 huggingface-hub==0.36.2)

if "$VENV/bin/python" -c "import transformers, torch" 2>/dev/null; then
  echo "setup-hf: transformers $("$VENV/bin/python" -c 'import transformers; print(transformers.__version__)') present in $VENV"
  exit 0
fi
mkdir -p "$BUILD_DIR"
if ! /usr/bin/python3 -m venv --system-site-packages "$VENV" ||
   ! "$VENV/bin/pip" install -q --disable-pip-version-check "${PIN[@]}"; then
  echo "setup-hf: could not install ${PIN[*]} into $VENV; the Hugging Face interop tests will skip"
  exit 0
fi
echo "setup-hf: installed ${PIN[*]} into $VENV"
