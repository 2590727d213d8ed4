#!/usr/bin/env bash
# What fusion changes on a CPU rank: GPT-2 124M (B=4, T=SEQ) compiled with
# --fuse none and with the default fusions, side by side — the planned
# arena, the train_step's kernels and kernel bytes (llmc inspect), and the
# median step time over STEPS steps after the first 2, in ROUNDS
# alternating runs of each.
#
# Usage: [SEQ=64] [ROUNDS=3] bench/fusion_cpu.sh [build-dir] [steps]   (default 10 steps)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
STEPS=${2:-10}
SEQ=${SEQ:-64}
ROUNDS=${ROUNDS:-3}
MODEL=(--model gpt2 --preset 124M --set seq_len="$SEQ" --set batch_size=4)

median_ms() { # <metrics.jsonl>: median step time after the first 2 steps
  python3 - "$1" <<'PY'
import json, statistics, sys
ms = [json.loads(l)["ms"] for l in open(sys.argv[1]) if l.strip()][2:]
print(f"{statistics.median(ms):.1f}")
PY
}

echo "# $(date -u +%Y-%m-%d), $(getconf _NPROCESSORS_ONLN) cores, GPT-2 124M B=4 T=$SEQ, $STEPS steps x $ROUNDS rounds"
declare -A times=([none]="" [all]="")
for fuse in none all; do
  "$BUILD/bin/llmc" compile "${MODEL[@]}" --fuse "$fuse" -o "$WORK/$fuse.llmc"
  echo "--fuse $fuse:"
  "$BUILD/bin/llmc" inspect "$WORK/$fuse.llmc" | grep -E "^  arena|^  train_step +[0-9]+ kernels"
done
for ((r = 0; r < ROUNDS; ++r)); do
  for fuse in none all; do
    "$BUILD/bin/llmc-run" "$WORK/$fuse.llmc" --steps "$STEPS" --metrics "$WORK/$fuse.jsonl" --quiet
    times[$fuse]+="$(median_ms "$WORK/$fuse.jsonl") "
  done
done
echo "median step ms per round: --fuse none ${times[none]}; fused ${times[all]}"
