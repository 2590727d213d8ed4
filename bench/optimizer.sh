#!/usr/bin/env bash
# The optimizer's share of a training step: the tiny GPT-2 with AdamW
# (fp32 moments) and with --optimizer adamw8bit, in one run. Prints the
# milliseconds per step spent in the optimizer kernel (llmc-run --profile),
# the median step time, the optimizer state each plan holds, and the ratios.
# Usage: bench/optimizer.sh [build-dir] [steps]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

for opt in adamw adamw8bit; do
  "$BUILD/bin/llmc" compile --model gpt2 --preset tiny --optimizer $opt -o "$WORK/$opt.llmc"
  "$BUILD/bin/llmc" inspect "$WORK/$opt.llmc" > "$WORK/$opt.inspect"
  "$BUILD/bin/llmc-run" "$WORK/$opt.llmc" --steps $((STEPS + 1)) --profile --metrics "$WORK/$opt.jsonl" \
    > "$WORK/$opt.log"
done
python3 - "$WORK" "$STEPS" "$THREADS" <<'PY'
import json, re, sys
work, steps, threads = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rows = {}
for opt in ("adamw", "adamw8bit"):
    log = open(f"{work}/{opt}.log").read()
    kernel = float(re.search(rf"^  {opt} +([0-9.]+) ms", log, re.M).group(1)) / steps
    ms = sorted(json.loads(l)["ms"] for l in list(open(f"{work}/{opt}.jsonl"))[1:])
    state = re.search(r"^  optimizer_state +(.+)$", open(f"{work}/{opt}.inspect").read(), re.M).group(1)
    rows[opt] = (kernel, ms[len(ms) // 2], state.strip())
print(f"tiny GPT-2 (842,496 parameters), {threads} threads, {steps} steps")
for opt, (kernel, step, state) in rows.items():
    print(f"  {opt:10s} optimizer {kernel:7.2f} ms/step   step {step:7.1f} ms   state {state}")
a, b = rows["adamw"], rows["adamw8bit"]
print(f"  adamw8bit / adamw: optimizer time {b[0] / a[0]:.2f}x, step time {b[1] / a[1]:.2f}x")
PY
