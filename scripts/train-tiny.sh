#!/usr/bin/env bash
# The main job on a fresh machine: set up, build, compile the bundled tiny
# GPT-2 into a training artifact, train it on CPU on the bundled corpus and
# print a sample. Extra arguments go to llmc-run (e.g. --steps 1000).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
"$ROOT/scripts/setup.sh"
cmake --build "$BUILD_DIR" -j "$(nproc)" --target llmc llmc-run
export OMP_WAIT_POLICY=PASSIVE
OUT=${OUT:-$ROOT/out}
mkdir -p "$OUT"
"$BUILD_DIR/bin/llmc" compile --model gpt2 --preset tiny --lr 2e-3 --min-lr 2e-4 --warmup 20 \
  --steps 600 -o "$OUT/tiny-gpt2.llmc"
"$BUILD_DIR/bin/llmc" inspect "$OUT/tiny-gpt2.llmc"
"$BUILD_DIR/bin/llmc-run" "$OUT/tiny-gpt2.llmc" --data bundled --log-every 25 \
  --ckpt-dir "$OUT/ckpt" --metrics "$OUT/metrics.jsonl" --sample 300 "$@"
