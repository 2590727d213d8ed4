#!/usr/bin/env bash
# Weight-only NF4 inference on a CPU rank: GPT-2 124M decode tokens/s at
# batch 1, the fp32 artifact against one compiled with --weight-quant nf4
# (random weights: the timing does not depend on their values), runs
# alternated, with the weight bytes a decode step reads. A decode step
# reads every weight once, so fewer bytes are fewer seconds where
# expanding them costs less than reading the difference.
#
# Usage: [PROMPT=128] [NEW=32] [RUNS=5] bench/decode_nf4_cpu.sh [build-dir]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
PROMPT=${PROMPT:-128}
NEW=${NEW:-32}
RUNS=${RUNS:-5}
MODEL=(--model gpt2 --preset 124M)
SPEC="max-batch=1,max-context=$((PROMPT + NEW)),page=16,chunk=$PROMPT"
"$BUILD/bin/llmc" compile "${MODEL[@]}" --inference "$SPEC" -o "$WORK/fp32.llmc"
"$BUILD/bin/llmc" compile "${MODEL[@]}" --inference "$SPEC" --weight-quant nf4:block64 \
  -o "$WORK/nf4.llmc"
# A decode step reads every parameter but the position table (one row of
# it): the fp32 ones at 4 bytes; the NF4 ones at 4 bits, plus an int8 absmax
# per 64 and an fp32 scale per 256 blocks (GPT-2's tied wte, read by the
# head and the lookup, stays fp32).
read -r fp32_bytes nf4_bytes < <(python3 - <<'PY'
d, layers, vocab, ctx = 768, 12, 50257, 1024
matmul = layers * (d * 3 * d + d * d + 2 * d * 4 * d)
total = 124439808
fp32 = (total - ctx * d) * 4
blocks = matmul // 64
nf4 = matmul // 2 + blocks + 4 * (blocks // 256) + (total - ctx * d - matmul) * 4
print(fp32, nf4)
PY
)
echo "# $(date -u +%Y-%m-%d), $(getconf _NPROCESSORS_ONLN) cores, $THREADS threads, GPT-2 124M batch 1, prompt $PROMPT tokens, $NEW new tokens, $RUNS runs each"
echo "# weight bytes read per decode token: fp32 $fp32_bytes, nf4 $nf4_bytes"
prompt=$(python3 -c "import random; random.seed(0); print(','.join(str(random.randrange(50257)) for _ in range($PROMPT)))")
for ((r = 0; r < RUNS; ++r)); do
  for kind in fp32 nf4; do
    "$BUILD/bin/llmc" generate "$WORK/$kind.llmc" --prompt-tokens "$prompt" --max-new-tokens "$NEW" \
      --temperature 0 2>&1 > /dev/null | awk -v k="$kind" '/^decode:/ {gsub(/\(/, "", $7); print k, $7}'
  done
done | python3 -c "
import statistics, sys
rates = {}
for line in sys.stdin:
    kind, rate = line.split()
    rates.setdefault(kind, []).append(float(rate))
for kind in ('fp32', 'nf4'):
    print(f'{kind}: decode median {statistics.median(rates[kind]):.1f} tok/s (runs: {\", \".join(f\"{r:.1f}\" for r in rates[kind])})')
print(f'nf4 / fp32: {statistics.median(rates[\"nf4\"]) / statistics.median(rates[\"fp32\"]):.2f}x')
"
