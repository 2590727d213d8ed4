#!/usr/bin/env bash
# Training throughput of a mixture of experts: llmc's Mixtral against
# transformers' MixtralForCausalLM in PyTorch eager (the experts looped
# with index_select / index_add_, as transformers runs them), same config,
# batch, load-balancing loss, AdamW and threads, in one run. Prints the
# median step time of each and llmc's throughput ratio.
# Usage: [SIZE=tiny|small] [BATCH=8] [SEQ=128] bench/moe_train.sh [build-dir] [steps]
#   (SIZE: bench/common.sh's moe_shape)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
SIZE=${SIZE:-tiny}
BATCH=${BATCH:-8}
SEQ=${SEQ:-128}
moe_shape "$SIZE"
# The BLAS kernels llmc picks for itself (kernels/cpu/blas.cpp), given to
# PyTorch's OpenBLAS too: Debian's falls back to SSE3 kernels otherwise.
source "$ROOT/scripts/openblas-coretype.sh" # PyTorch with llmc's BLAS kernels
PYTHON=$BUILD/hf-venv/bin/python
[[ -x $PYTHON ]] || { echo "bench/moe_train.sh: no $PYTHON (scripts/setup-hf.sh makes it)" >&2; exit 2; }

"$BUILD/bin/llmc" compile --model mixtral --preset tiny --set n_layer="$L" --set n_head="$H" \
  --set n_kv_head="$KV" --set n_embd="$C" --set ffn_hidden="$F" --set num_experts="$E" \
  --set experts_per_token="$K" --set vocab_size="$V" --set batch_size="$BATCH" \
  --set seq_len="$SEQ" --set router_aux_loss_coef=0.02 -o "$WORK/model.llmc"
"$BUILD/bin/llmc-run" "$WORK/model.llmc" --steps $((STEPS + 5)) --quiet --metrics "$WORK/m.jsonl"
LLMC=$(python3 - "$WORK/m.jsonl" <<'PY'
import json, sys
ms = sorted(json.loads(l)["ms"] for l in list(open(sys.argv[1]))[5:])
print(ms[len(ms) // 2])
PY
)
TORCH=$("$PYTHON" -W ignore "$ROOT/bench/torch_moe.py" --layers "$L" --heads "$H" --kv-heads "$KV" \
  --width "$C" --ffn "$F" --experts "$E" --top-k "$K" --vocab "$V" --batch "$BATCH" --seq "$SEQ" \
  --steps "$STEPS" --threads "$THREADS")
python3 - "$LLMC" "$TORCH" "$SIZE" "$BATCH" "$SEQ" "$E" "$K" <<'PY'
import json, sys
llmc_ms = float(sys.argv[1]); torch = json.loads(sys.argv[2])
size, batch, seq, experts, k = sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6], sys.argv[7]
tokens = batch * seq
import os
print(f"Mixtral {size} ({experts} experts, top {k}; B={batch}, T={seq}), {torch['threads']} threads, "
      f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'default')}, median step")
print(f"  llmc          {llmc_ms:8.1f} ms  {tokens / llmc_ms * 1000:9.0f} tok/s")
print(f"  PyTorch eager {torch['median_ms']:8.1f} ms  {torch['tokens_per_s']:9.0f} tok/s  "
      f"(torch {torch['torch']}, transformers {torch['transformers']})")
print(f"  llmc / PyTorch throughput: {torch['median_ms'] / llmc_ms:.2f}x")
PY
