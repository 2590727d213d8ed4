#!/usr/bin/env bash
# llmc's tokenizer against Hugging Face's (test/reference/hf_tokenizer.py):
# ids, decoding and pre-tokenization of trained GPT-2- and Llama-style
# tokenizers. Exit 77 (ctest: skipped) when the venv scripts/setup-hf.sh
# makes is missing.
set -euo pipefail
BIN=$1; VENV=$2; SRC=$3; WORK=$4
if ! "$VENV/bin/python" -c "import transformers, tokenizers" 2>/dev/null; then
  echo "SKIP: no transformers venv at $VENV (scripts/setup-hf.sh installs one)"
  exit 77
fi
rm -rf "$WORK" && mkdir -p "$WORK"
export TOKENIZERS_PARALLELISM=false TRANSFORMERS_VERBOSITY=error
"$VENV/bin/python" -W ignore "$SRC/test/reference/hf_tokenizer.py" --bin "$BIN" --src "$SRC" --work "$WORK"
