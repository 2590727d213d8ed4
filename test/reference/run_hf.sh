#!/usr/bin/env bash
# Hugging Face interop against transformers (test/reference/hf_interop.py):
# round trip, logits and first training loss for GPT-2 and Llama. Exit 77
# (ctest: skipped) when the venv scripts/setup-hf.sh makes is missing.
set -euo pipefail
BIN=$1; VENV=$2; SRC=$3; WORK=$4
if ! "$VENV/bin/python" -c "import transformers, safetensors, torch" 2>/dev/null; then
  echo "SKIP: no transformers venv at $VENV (scripts/setup-hf.sh installs one)"
  exit 77
fi
rm -rf "$WORK" && mkdir -p "$WORK"
export OMP_WAIT_POLICY=PASSIVE
"$VENV/bin/python" "$SRC/test/reference/hf_interop.py" --bin "$BIN" --work "$WORK" \
  --data "$SRC/data/tinytales.txt"
