#!/usr/bin/env bash
# Runs one of the checks against Hugging Face's libraries in this
# directory (hf_interop.py, hf_tokenizer.py, hf_generate.py,
# hf_families.py, hf_gemma3.py) with the venv scripts/setup-hf.sh makes,
# in a fresh work directory. Exit 77 (ctest: skipped) when the venv is missing.
#
# Usage: run_hf.sh <script.py> <bin> <venv> <work> [script arguments...]
set -euo pipefail
SCRIPT=$1; BIN=$2; VENV=$3; WORK=$4
shift 4
if ! "$VENV/bin/python" -c "import transformers, tokenizers, safetensors, torch" 2>/dev/null; then
  echo "SKIP: no transformers venv at $VENV (scripts/setup-hf.sh installs one)"
  exit 77
fi
rm -rf "$WORK" && mkdir -p "$WORK"
export OMP_WAIT_POLICY=PASSIVE TRANSFORMERS_VERBOSITY=error TOKENIZERS_PARALLELISM=false
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
cd "$(dirname "${BASH_SOURCE[0]}")"
"$VENV/bin/python" -W ignore "$SCRIPT" --bin "$BIN" --work "$WORK" "$@"
