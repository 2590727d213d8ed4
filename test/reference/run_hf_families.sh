#!/usr/bin/env bash
# Qwen2 and Mistral against transformers (test/reference/hf_families.py):
# round trip, logits and the first training loss, on one rank and tp=2. Exit 77
# (ctest: skipped) when the venv scripts/setup-hf.sh makes is missing.
set -euo pipefail
BIN=$1; VENV=$2; SRC=$3; WORK=$4; MPIRUN=$5
if ! "$VENV/bin/python" -c "import transformers, safetensors, torch" 2>/dev/null; then
  echo "SKIP: no transformers venv at $VENV (scripts/setup-hf.sh installs one)"
  exit 77
fi
rm -rf "$WORK" && mkdir -p "$WORK"
export OMP_WAIT_POLICY=PASSIVE TRANSFORMERS_VERBOSITY=error
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
cd "$SRC/test/reference"
"$VENV/bin/python" -W ignore hf_families.py --bin "$BIN" --work "$WORK" --mpirun "$MPIRUN" \
  --data "$SRC/data/tinytales.txt"
