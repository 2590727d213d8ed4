#!/usr/bin/env bash
# Installs Hugging Face `transformers` into venvs for the interop tests
# (test/reference/run_hf.sh): the library defines HF's file layouts and
# module semantics, so the tests check llmc against it. The venvs see
# Debian's torch 1.13 (--system-site-packages):
#   build/hf-venv       transformers 4.44.2, a release that imports and runs
#                       on it (GPT-2 … Gemma 2, Mixtral, Qwen-MoE);
#   build/hf-venv-4.51  transformers 4.51.3, the first with Qwen3 and
#                       Gemma 3, which runs on it through
#                       test/reference/torch_compat.py (names it imports
#                       but the tests' fp32 eager path never calls).
# Then GPT-2's own tokenizer files (scripts/fetch-gpt2-vocab.sh).
# Optional: without network the tests skip, saying so. Idempotent.
#
#   scripts/setup-hf.sh            # venvs in build/
#   BUILD_DIR=out scripts/setup-hf.sh
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
# One venv with its pinned packages (transformers and the versions of its
# dependencies the tests last ran with); a venv that imports is kept.
install_venv() {
  local venv=$1; shift
  if "$venv/bin/python" -c "import transformers, torch" 2>/dev/null; then
    echo "setup-hf: transformers $("$venv/bin/python" -c 'import transformers; print(transformers.__version__)') present in $venv"
    return
  fi
  mkdir -p "$BUILD_DIR"
  if ! /usr/bin/python3 -m venv --system-site-packages "$venv" ||
     ! "$venv/bin/pip" install -q --disable-pip-version-check "$@"; then
    echo "setup-hf: could not install $* into $venv; the tests that need it will skip"
    return
  fi
  echo "setup-hf: installed $* into $venv"
}

install_venv "$BUILD_DIR/hf-venv" \
  transformers==4.44.2 tokenizers==0.19.1 safetensors==0.8.0 huggingface-hub==0.36.2
install_venv "$BUILD_DIR/hf-venv-4.51" \
  transformers==4.51.3 tokenizers==0.21.4 safetensors==0.8.0 huggingface-hub==0.36.2
# GPT-2's own vocabulary (hf_tokenizer's gpt2-real case, bench/gpt2_tokens.sh).
BUILD_DIR=$BUILD_DIR "$ROOT/scripts/fetch-gpt2-vocab.sh" ||
  echo "setup-hf: no GPT-2 vocabulary; hf_tokenizer's gpt2-real case will skip"
