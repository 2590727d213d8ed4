#!/usr/bin/env bash
# The KV cache's type on a CPU rank: decode tokens/s of the tiny Llama
# (GQA, 4 layers, 2 kv heads of 32) at batch 8 over long prompts, where a
# decode step reads far more cache than weights (8 x 4096 tokens x 2 KiB =
# 64 MiB of fp32 cache against 3.2 MB of weights; at 1024 tokens the types
# differ by less than this machine's noise), compiled with kv=f32, bf16,
# int8 and fp8 (random weights: the timing does not depend on their
# values), runs alternated.
#
# Usage: [PROMPT=4096] [NEW=64] [BATCH=8] [RUNS=5] [KINDS="f32 bf16 int8 fp8"]
#        bench/decode_kv_cpu.sh [build-dir]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
PROMPT=${PROMPT:-4096}
NEW=${NEW:-64}
BATCH=${BATCH:-8}
RUNS=${RUNS:-5}
KINDS=${KINDS:-f32 bf16 int8 fp8}
SPEC="max-batch=$BATCH,max-context=$((PROMPT + NEW)),page=16,chunk=256"
for kv in $KINDS; do
  "$BUILD/bin/llmc" compile --model llama --preset tiny --inference "$SPEC,kv=$kv" -o "$WORK/$kv.llmc"
  "$BUILD/bin/llmc" inspect "$WORK/$kv.llmc" | grep -A1 '^kv cache:' | sed "s/^/# $kv: /"
done
echo "# $(date -u +%Y-%m-%d), $(getconf _NPROCESSORS_ONLN) cores, $THREADS threads, tiny Llama, batch $BATCH, prompts of $PROMPT tokens, $NEW new tokens, $RUNS runs each"
DECODE_ARGS=()
for ((b = 0; b < BATCH; ++b)); do
  DECODE_ARGS+=(--prompt-tokens "$(python3 -c "import random; random.seed($b); print(','.join(str(random.randrange(256)) for _ in range($PROMPT)))")")
done
pairs=()
for kv in $KINDS; do pairs+=("$kv=$WORK/$kv.llmc"); done
decode_medians "$RUNS" "$NEW" "${pairs[@]}"
