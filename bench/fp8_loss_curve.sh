#!/usr/bin/env bash
# fp8 against bf16 training: the same model, initial weights and data
# compiled with --precision bf16 and --precision fp8, trained STEPS steps
# each on the CPU; prints the train loss averaged over the EVERY steps
# ending at each row and the validation loss measured there (llmc-run
# --eval-every), both runs side by side, and the relative gap. DATA is
# any `llmc-run --data` spec: text (bytes) or token shards, such as GPT-2
# tokens from bench/gpt2_tokens.sh. PARALLEL=1 trains both at once, each
# with THREADS threads (THREADS=1 on two cores halves the wall time).
# RUN_ARGS go to both llmc-run commands (such as --seed N).
#
# Usage: [MODEL="--model gpt2 --preset 124M --set batch_size=4 --set seq_len=128"]
#        [EVERY=25] [DATA=data/tinytales.txt] [FP8_SCALING=current] [PARALLEL=0] [RUN_ARGS=]
#        bench/fp8_loss_curve.sh [build-dir] [steps]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
read -r -a MODEL_ARGS <<< "${MODEL:---model gpt2 --preset 124M --set batch_size=4 --set seq_len=128}"
EVERY=${EVERY:-25}
DATA=${DATA:-$ROOT/data/tinytales.txt}
FP8_SCALING=${FP8_SCALING:-current}
PARALLEL=${PARALLEL:-0}
read -r -a RUN_ARGS <<< "${RUN_ARGS:-}"

"$BUILD/bin/llmc" compile "${MODEL_ARGS[@]}" --precision bf16 -o "$WORK/bf16.llmc"
"$BUILD/bin/llmc" compile "${MODEL_ARGS[@]}" --precision fp8 --fp8-scaling "$FP8_SCALING" \
  -o "$WORK/fp8.llmc"
echo "# $(date -u +%Y-%m-%d), $(lscpu | sed -n 's/^Model name: *//p'), $THREADS threads; ${MODEL_ARGS[*]}; $STEPS steps, data $(basename "$DATA"), fp8 scaling $FP8_SCALING, parallel $PARALLEL, llmc-run ${RUN_ARGS[*]}"
train() {
  local start
  start=$(date +%s)
  "$BUILD/bin/llmc-run" "$WORK/$1.llmc" --data "$DATA" --steps "$STEPS" --eval-every "$EVERY" \
    --log-every "$STEPS" --metrics "$WORK/$1.jsonl" "${RUN_ARGS[@]}" > "$WORK/$1.log"
  echo "# $1: $(($(date +%s) - start)) s"
}
if ((PARALLEL)); then
  train bf16 &
  bf16=$!
  train fp8
  wait "$bf16"
else
  train bf16
  train fp8
fi
python3 - "$WORK" "$EVERY" <<'EOF'
import json, re, sys

def read(kind):
    train = {r["step"]: r["loss"] for r in map(json.loads, open(f"{sys.argv[1]}/{kind}.jsonl"))}
    val = {}  # llmc-run's "eval  <step> | val loss <x>" lines
    for line in open(f"{sys.argv[1]}/{kind}.log"):
        m = re.match(r"eval\s+(\d+) \| val loss ([0-9.]+)", line)
        if m:
            val[int(m.group(1))] = float(m.group(2))
    return train, val

(bt, bv), (ft, fv) = read("bf16"), read("fp8")
every = int(sys.argv[2])
last = max(bt)
rows = [1] + list(range(every, last + 1, every))
if rows[-1] != last:
    rows.append(last)

def mean(d, s):
    window = [d[k] for k in range(max(1, s - every + 1), s + 1) if k in d]
    return sum(window) / len(window)

print("| step | bf16 train | fp8 train | gap | bf16 val | fp8 val | gap |")
print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for s in rows:
    b, f = (bt[s], ft[s]) if s == 1 else (mean(bt, s), mean(ft, s))
    vals = ("", "", "")
    if s in bv and s in fv:
        vals = (f"{bv[s]:.4f}", f"{fv[s]:.4f}", f"{(fv[s] - bv[s]) / bv[s]:+.2%}")
    print(f"| {s} | {b:.4f} | {f:.4f} | {(f - b) / b:+.2%} | {vals[0]} | {vals[1]} | {vals[2]} |")
EOF
