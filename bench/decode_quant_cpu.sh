#!/usr/bin/env bash
# Weight-only quantized inference on a CPU rank: GPT-2 124M decode tokens/s
# at batch 1, the fp32 artifact against one compiled with --weight-quant
# <scheme> for each scheme (random weights: the timing does not depend on
# their values), runs alternated, with the weight bytes a decode step
# reads. A decode step reads every weight once, so fewer bytes are fewer
# seconds where expanding them costs less than reading the difference.
#
# Usage: [PROMPT=128] [NEW=32] [RUNS=5] [SCHEMES="nf4:block64 int8:channel int4:block64"]
#        bench/decode_quant_cpu.sh [build-dir]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
PROMPT=${PROMPT:-128}
NEW=${NEW:-32}
RUNS=${RUNS:-5}
SCHEMES=${SCHEMES:-nf4:block64 int8:channel int4:block64}
MODEL=(--model gpt2 --preset 124M)
SPEC="max-batch=1,max-context=$((PROMPT + NEW)),page=16,chunk=$PROMPT"
kinds=(fp32)
"$BUILD/bin/llmc" compile "${MODEL[@]}" --inference "$SPEC" -o "$WORK/fp32.llmc"
for scheme in $SCHEMES; do
  "$BUILD/bin/llmc" compile "${MODEL[@]}" --inference "$SPEC" --weight-quant "$scheme" \
    -o "$WORK/$scheme.llmc"
  kinds+=("$scheme")
done
# A decode step reads every parameter but the position table (one row of
# it): the artifact's `params` bytes, less wpe's other 1023 rows.
echo "# $(date -u +%Y-%m-%d), $(getconf _NPROCESSORS_ONLN) cores, $THREADS threads, GPT-2 124M batch 1, prompt $PROMPT tokens, $NEW new tokens, $RUNS runs each"
for kind in "${kinds[@]}"; do
  "$BUILD/bin/llmc" inspect "$WORK/$kind.llmc" | python3 -c "
import re, sys
units = {'B': 1, 'KiB': 2**10, 'MiB': 2**20, 'GiB': 2**30}
for line in sys.stdin:
    m = re.match(r'\s+params\s+([0-9.]+) (\w+)', line)
    if m:
        read = float(m.group(1)) * units[m.group(2)] - 1023 * 768 * 4
        print(f'# weight bytes read per decode token, $kind: {read / 1e6:.1f} MB')
"
done
DECODE_ARGS=(--prompt-tokens "$(python3 -c "import random; random.seed(0); print(','.join(str(random.randrange(50257)) for _ in range($PROMPT)))")")
pairs=()
for kind in "${kinds[@]}"; do pairs+=("$kind=$WORK/$kind.llmc"); done
decode_medians "$RUNS" "$NEW" "${pairs[@]}"
