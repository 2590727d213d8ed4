#!/usr/bin/env bash
# Training throughput of a GPT-2 preset: llmc vs PyTorch eager and, when
# scripts/setup-jax.sh has made its venv, JAX `jit` (the step as one XLA
# program): same model, batch, optimizer and threads, in one run. Prints the
# median step time of each and llmc's throughput ratio to each.
# Usage: [PRESET=tiny|124M] [BATCH=8] [SEQ=128] [FUSE=all] bench/tiny_gpt.sh [build-dir] [steps]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
PRESET=${PRESET:-tiny}
BATCH=${BATCH:-8}
SEQ=${SEQ:-128}
FUSE=${FUSE:-all}
case $PRESET in
  tiny) shape=(--n-layer 4 --n-head 4 --n-embd 128 --vocab 256) ;;
  124M) shape=(--n-layer 12 --n-head 12 --n-embd 768 --vocab 50257) ;;
  *) echo "bench/tiny_gpt.sh: PRESET must be tiny or 124M, got '$PRESET'" >&2; exit 2 ;;
esac

"$BUILD/bin/llmc" compile --model gpt2 --preset "$PRESET" --set batch_size="$BATCH" \
  --set seq_len="$SEQ" --fuse "$FUSE" -o "$WORK/model.llmc"
"$BUILD/bin/llmc-run" "$WORK/model.llmc" --steps $((STEPS + 5)) --quiet --metrics "$WORK/m.jsonl"
LLMC=$(python3 - "$WORK/m.jsonl" <<'PY'
import json, sys
ms = sorted(json.loads(l)["ms"] for l in list(open(sys.argv[1]))[5:])
print(ms[len(ms) // 2])
PY
)
TORCH=$(/usr/bin/python3 "$ROOT/bench/torch_tiny_gpt.py" "${shape[@]}" --batch "$BATCH" \
  --seq "$SEQ" --steps "$STEPS" --threads "$THREADS")
JAX_PYTHON=$BUILD/jax-venv/bin/python
JAX='{}'
if [[ -x $JAX_PYTHON ]]; then
  JAX=$("$JAX_PYTHON" "$ROOT/bench/jax_gpt.py" "${shape[@]}" --batch "$BATCH" --seq "$SEQ" \
    --steps "$STEPS" --threads "$THREADS")
else
  echo "bench/tiny_gpt.sh: no $JAX_PYTHON (scripts/setup-jax.sh makes it); JAX skipped" >&2
fi
python3 - "$LLMC" "$TORCH" "$JAX" "$PRESET" "$BATCH" "$SEQ" "$FUSE" <<'PY'
import json, sys
llmc_ms = float(sys.argv[1]); torch = json.loads(sys.argv[2]); jax = json.loads(sys.argv[3])
preset, batch, seq, fuse = sys.argv[4], int(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
tokens = batch * seq
print(f"GPT-2 {preset} (B={batch}, T={seq}, --fuse {fuse}), {torch['threads']} threads, median step")
print(f"  llmc          {llmc_ms:8.1f} ms  {tokens / llmc_ms * 1000:9.0f} tok/s")
print(f"  PyTorch eager {torch['median_ms']:8.1f} ms  {torch['tokens_per_s']:9.0f} tok/s  (torch {torch['torch']})")
if jax:
    print(f"  JAX jit       {jax['median_ms']:8.1f} ms  {jax['tokens_per_s']:9.0f} tok/s  (jax {jax['jax']})")
print(f"  llmc / PyTorch throughput: {torch['median_ms'] / llmc_ms:.2f}x")
if jax:
    print(f"  llmc / JAX throughput:     {jax['median_ms'] / llmc_ms:.2f}x")
PY
