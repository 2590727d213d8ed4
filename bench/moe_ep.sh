#!/usr/bin/env bash
# What expert parallelism costs on CPU ranks: a Mixtral trained on 2 ranks
# (mpirun, one thread each) as dp2 (every rank every expert) and as ep2
# (each rank half the experts, the routed rows exchanged by all-to-all),
# dropless and with a capacity factor, in one run. Prints each layout's
# median step time, its ratio to dp2, the all-to-all bytes each rank sends
# per step (llmc inspect) and the arena (the expert state halves, the
# exchange buffers appear).
# Usage: [SIZE=tiny|small] [BATCH=8] [SEQ=128] [CAPACITY=1] bench/moe_ep.sh [build-dir] [steps]
#   (SIZE: bench/common.sh's moe_shape)
set -euo pipefail
THREADS=1
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
SIZE=${SIZE:-small}
BATCH=${BATCH:-8}
SEQ=${SEQ:-128}
CAPACITY=${CAPACITY:-1}
moe_shape "$SIZE"
source "$ROOT/scripts/openblas-coretype.sh" # PyTorch with llmc's BLAS kernels
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
MODEL=(--model mixtral --preset tiny --set n_layer="$L" --set n_head="$H" --set n_kv_head="$KV"
  --set n_embd="$C" --set ffn_hidden="$F" --set num_experts="$E" --set experts_per_token="$K"
  --set vocab_size="$V" --set batch_size="$BATCH" --set seq_len="$SEQ"
  --set router_aux_loss_coef=0.02)
LAYOUTS=("dp2|--mesh dp=2" "ep2|--mesh ep=2"
  "dp2-cf$CAPACITY|--mesh dp=2 --set moe_capacity_factor=$CAPACITY"
  "ep2-cf$CAPACITY|--mesh ep=2 --set moe_capacity_factor=$CAPACITY")
for layout in "${LAYOUTS[@]}"; do
  name=${layout%%|*}
  # shellcheck disable=SC2086 # the layout's flags split on purpose
  "$BUILD/bin/llmc" compile "${MODEL[@]}" ${layout#*|} -o "$WORK/$name.llmc"
  "$BUILD/bin/llmc" inspect "$WORK/$name.llmc" > "$WORK/$name.txt"
  mpirun -np 2 --bind-to none "$BUILD/bin/llmc-run" "$WORK/$name.llmc" --steps $((STEPS + 5)) \
    --quiet --metrics "$WORK/$name.jsonl"
done
python3 - "$WORK" "$SIZE" "$BATCH" "$SEQ" "$E" "$K" "${LAYOUTS[@]}" <<'PY'
import json, os, re, sys
work, size, batch, seq, experts, k = sys.argv[1:7]
names = [l.split("|")[0] for l in sys.argv[7:]]
def median_ms(name):
    ms = sorted(json.loads(l)["ms"] for l in list(open(f"{work}/{name}.jsonl"))[5:])
    return ms[len(ms) // 2]
def inspect(name):
    text = open(f"{work}/{name}.txt").read()
    sent = re.search(r"train_step.*\n\s+\d+ all-to-alls sending (.+?) to other ranks", text)
    arena = re.search(r"arena\s+(\S+ \S+)", text)
    return (sent.group(1) if sent else "0 B"), arena.group(1)
base = median_ms(names[0])
print(f"Mixtral {size} ({experts} experts, top {k}; B={batch}, T={seq}) on 2 ranks x 1 thread, "
      f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'default')}, median step")
for name in names:
    ms = median_ms(name)
    sent, arena = inspect(name)
    print(f"  {name:10s} {ms:8.1f} ms  {int(batch) * int(seq) / ms * 1000:8.0f} tok/s  "
          f"{base / ms:5.2f}x dp2 throughput  all-to-all {sent:>10s}/step/rank  arena {arena}")
PY
