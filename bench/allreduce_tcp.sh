#!/usr/bin/env bash
# All-reduce bandwidth of the TCP transport (ranks started without mpirun)
# over loopback: fp32 sums of 4 KiB to 64 MiB on 2 and 4 ranks, one process
# per rank on this host; then what it means for training: the median step
# of a 1-layer tiny GPT-2 (B=8, T=32) under dp=2 ZeRO-1 on 2 ranks, three
# runs each. Give
# several builds (label=dir) to compare them in one run, alternating (a
# build is its bin/ and lib/: a copy of both elsewhere keeps an older build
# runnable; the artifact is compiled by the first build that has llmc).
# Usage: bench/allreduce_tcp.sh [label=build-dir ...]   (default: build)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
BUILDS=("$@")
((${#BUILDS[@]})) || BUILDS=("$(basename "$BUILD")=$BUILD")
# Each rank is one thread: the ranks share the cores.
export OMP_NUM_THREADS=1
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

for ranks in 2 4; do
  for entry in "${BUILDS[@]}"; do
    label=${entry%%=*} dir=${entry#*=}
    port=$(free_port)
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
for entry in "${BUILDS[@]}"; do
  llmc=${entry#*=}/bin/llmc
  [[ -x $llmc ]] && break
done
"$llmc" compile --model gpt2 --preset tiny --set n_layer=1 --set batch_size=8 \
  --set seq_len=32 --mesh dp=2 --zero 1 -o "$WORK/dp2.llmc" > /dev/null
for round in 1 2 3; do
  for entry in "${BUILDS[@]}"; do
    label=${entry%%=*} dir=${entry#*=}
    port=$(free_port)
    pids=()
    for r in 0 1; do
      LD_LIBRARY_PATH="$dir/lib" RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
        "$dir/bin/llmc-run" "$WORK/dp2.llmc" --steps 60 --quiet \
        --metrics "$WORK/$label.train$round.$r.jsonl" > /dev/null &
      pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid"; done
  done
done
python3 - "$WORK/all.jsonl" "$(getconf _NPROCESSORS_ONLN)" "$WORK" "${BUILDS[@]}" <<'PY'
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
print("\ntiny GPT-2 (1 layer, B=8, T=32), dp=2 ZeRO-1, 2 ranks: median step after 5, three runs")
for entry in sys.argv[4:]:
    label = entry.split("=")[0]
    runs = []
    for round in (1, 2, 3):
        ms = sorted(json.loads(l)["ms"] for l in list(open(f"{sys.argv[3]}/{label}.train{round}.0.jsonl"))[5:])
        runs.append(ms[len(ms) // 2])
    print(f"  {label:>10} " + " ".join(f"{m:8.1f}" for m in runs) + " ms")
PY
