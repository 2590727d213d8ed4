#!/usr/bin/env bash
# All-reduce bandwidth of the TCP transport (ranks started without mpirun)
# over loopback: fp32 sums of 4 KiB to 64 MiB on 2 and 4 ranks, one process
# per rank on this host. Give several builds (label=dir) to compare them in
# one run, alternating per rank count (a build is its bin/ and lib/: a copy
# of both elsewhere keeps an older build runnable).
# Usage: bench/allreduce_tcp.sh [label=build-dir ...]   (default: build)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
BUILDS=("$@")
((${#BUILDS[@]})) || BUILDS=("$(basename "$BUILD")=$BUILD")
# Each rank is one thread: the ranks share the cores.
export OMP_NUM_THREADS=1

for ranks in 2 4; do
  for entry in "${BUILDS[@]}"; do
    label=${entry%%=*} dir=${entry#*=}
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    pids=()
    for ((r = 0; r < ranks; r++)); do
      LD_LIBRARY_PATH="$dir/lib" RANK=$r WORLD_SIZE=$ranks MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
        "$dir/bin/llmc-bench-allreduce" > "$WORK/$label.$ranks.$r.jsonl" &
      pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid"; done
    sed "s/^{/{\"label\": \"$label\", /" "$WORK/$label.$ranks.0.jsonl" >> "$WORK/all.jsonl"
  done
done
python3 - "$WORK/all.jsonl" "$(getconf _NPROCESSORS_ONLN)" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
labels = list(dict.fromkeys(r["label"] for r in rows))
print(f"fp32 sum all-reduce over loopback, {sys.argv[2]} cores; median time, bus bandwidth GB/s")
for ranks in (2, 4):
    print(f"\n{ranks} ranks")
    print(f"  {'bytes':>10}" + "".join(f" {l + ' us':>14} {l + ' GB/s':>14}" for l in labels))
    sizes = sorted({r["bytes"] for r in rows if r["ranks"] == ranks})
    for size in sizes:
        line = f"  {size:>10}"
        for l in labels:
            r = next(r for r in rows if r["ranks"] == ranks and r["bytes"] == size and r["label"] == l)
            line += f" {r['us']:>14.1f} {r['busbw_gbs']:>14.3f}"
        print(line)
PY
