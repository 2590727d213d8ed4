#!/usr/bin/env bash
# Training throughput of the tiny GPT-2 preset: llmc vs PyTorch eager, same
# model, batch, optimizer and threads, in one run. Prints the median step
# time of each and the ratio. Usage: bench/tiny_gpt.sh [build-dir] [steps]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

"$BUILD/bin/llmc" compile --model gpt2 --preset tiny -o "$WORK/tiny.llmc"
"$BUILD/bin/llmc-run" "$WORK/tiny.llmc" --steps $((STEPS + 5)) --quiet --metrics "$WORK/m.jsonl"
LLMC=$(python3 - "$WORK/m.jsonl" <<'PY'
import json, sys
ms = sorted(json.loads(l)["ms"] for l in list(open(sys.argv[1]))[5:])
print(ms[len(ms) // 2])
PY
)
TORCH=$(/usr/bin/python3 "$ROOT/bench/torch_tiny_gpt.py" --steps "$STEPS" --threads "$THREADS")
python3 - "$LLMC" "$TORCH" <<'PY'
import json, sys
llmc_ms = float(sys.argv[1]); torch = json.loads(sys.argv[2])
tokens = 8 * 128
print(f"tiny GPT-2 (4 layers, d=128, B=8, T=128), {torch['threads']} threads, median step")
print(f"  llmc          {llmc_ms:8.1f} ms  {tokens / llmc_ms * 1000:9.0f} tok/s")
print(f"  PyTorch eager {torch['median_ms']:8.1f} ms  {torch['tokens_per_s']:9.0f} tok/s  (torch {torch['torch']})")
print(f"  llmc / PyTorch throughput: {torch['median_ms'] / llmc_ms:.2f}x")
PY
