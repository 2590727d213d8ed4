#!/usr/bin/env bash
# Text from the model scripts/train-tiny.sh trained: compiles the same tiny
# GPT-2 for inference (@prefill and @decode over a paged KV cache) and runs
# llmc generate on the training run's latest checkpoint. Arguments go to
# llmc generate (default: --prompt "Once upon a time").
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
OUT=${OUT:-$ROOT/out}
if [ ! -e "$OUT/ckpt/latest" ]; then
  echo "scripts/generate.sh: no checkpoint in $OUT/ckpt; run scripts/train-tiny.sh first" >&2
  exit 1
fi
cmake --build "$BUILD_DIR" -j "$(nproc)" --target llmc
export OMP_WAIT_POLICY=PASSIVE
"$BUILD_DIR/bin/llmc" compile --model gpt2 --preset tiny \
  --inference max-batch=4,max-context=128 -o "$OUT/tiny-gpt2-generate.llmc"
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--prompt "Once upon a time")
"$BUILD_DIR/bin/llmc" generate "$OUT/tiny-gpt2-generate.llmc" --weights "$OUT/ckpt" \
  --max-new-tokens 100 "${args[@]}"
