#!/usr/bin/env bash
# `llmc plan` against measurement on this machine: calibrate a CPU
# "cluster" (a GEMM rate and a memory bandwidth per rank from PyTorch on one
# thread, the TCP transport's all-reduce latency and bandwidth on 4 ranks),
# plan two models on 4 ranks with it (communication blocking, as the CPU
# executor runs it), run the 6 best and the 6 worst
# predictions that fit (4 processes, TCP launcher, median step after 5), and
# print predicted vs measured step time and Spearman's rank correlation.
# Nothing is fitted per row: the plan sees only the calibration. Needs
# Debian's python3-torch (/usr/bin/python3) for the calibration.
#
#   bench/plan_cpu.sh [build-dir] [steps]       (default steps: 10; the median
#                                                 is taken after 3 warm-up steps)
# PLAN_MODELS=tiny or PLAN_MODELS=wide runs one of the two models.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
STEPS=${2:-10}
RANKS=4
CORES=$(getconf _NPROCESSORS_ONLN)
export OMP_NUM_THREADS=1
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
launch() { # program args... on RANKS ranks; rank 0's stdout to $WORK/out
  local port pids=() r
  port=$(free_port)
  for ((r = 0; r < RANKS; r++)); do
    RANK=$r WORLD_SIZE=$RANKS MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$@" \
      > "$WORK/out.$r" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || return 1; done
}

# --- calibration -------------------------------------------------------------
read -r GFLOPS MEMBW KERNEL_US < <(/usr/bin/python3 - <<'PY'
import time, torch
torch.set_num_threads(1)
def best(f, n=5):
    t = []
    for _ in range(n):
        s = time.perf_counter(); f(); t.append(time.perf_counter() - s)
    return min(t)
a = torch.randn(1024, 1024); b = torch.randn(1024, 1024)
gemm = 2 * 1024**3 / best(lambda: a @ b) / 1e9
x = torch.randn(64 << 20 >> 2); y = torch.empty_like(x)
copy = 2 * x.numel() * 4 / best(lambda: y.copy_(x)) / 1e9
# The fixed cost of one kernel call: an add of 16 elements, 1000 times.
s = torch.ones(16); t = torch.empty(16)
def adds():
    for _ in range(1000): torch.add(s, s, out=t)
kernel = best(adds) / 1000 * 1e6
print(f"{gemm:.2f} {copy:.2f} {kernel:.2f}")
PY
)
launch "$BUILD/bin/llmc-bench-allreduce"
read -r LAT_US LINK_GBS < <(python3 - "$WORK/out.0" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
small = min(rows, key=lambda r: r["bytes"]); large = max(rows, key=lambda r: r["bytes"])
n = large["ranks"]
# Ring all-reduce: 2(n-1) steps of alpha; the bus bandwidth is the link's.
print(f"{small['us'] / (2 * (n - 1)):.1f} {large['busbw_gbs']:.3f}")
PY
)
# RANKS processes share CORES cores: each rank gets CORES/RANKS of a core.
SHARE=$(python3 -c "print($CORES / $RANKS)")
TFLOPS=$(python3 -c "print($GFLOPS * $SHARE / 1000)")
RANK_MEMBW=$(python3 -c "print($MEMBW * $SHARE)")
RANK_KERNEL_US=$(python3 -c "print($KERNEL_US / $SHARE)")
echo "calibration: GEMM $GFLOPS GFLOP/s, copy $MEMBW GB/s, $KERNEL_US us per small kernel, per thread;"
echo "  $RANKS ranks on $CORES cores"
echo "  per rank: $TFLOPS TFLOP/s, $RANK_MEMBW GB/s, $RANK_KERNEL_US us per kernel;"
echo "  all-reduce alpha $LAT_US us, link $LINK_GBS GB/s"
CLUSTER=(--gpus $RANKS --node-size $RANKS --gpu-memory 4GiB --gpu-tflops "$TFLOPS"
         --memory-bw "$RANK_MEMBW" --intra-bw "$LINK_GBS" --inter-bw "$LINK_GBS"
         --latency "$LAT_US" --kernel-overhead "$RANK_KERNEL_US" --no-overlap
         --fp32-matmul-scale 1 --precision fp32 --target cpu --verify 0)

# --- plan and measure ---------------------------------------------------------
measure() { # label, model flags...
  local label=$1; shift
  "$BUILD/bin/llmc" plan "$@" "${CLUSTER[@]}" --global-batch 16 --top 6 --bottom \
    > "$WORK/plan.txt"
  echo; echo "== $label"; sed -n '1,6p' "$WORK/plan.txt"
  mapfile -t rows < <(awk '$1 ~ /^[0-9]+$/ {print $1}' "$WORK/plan.txt")
  : > "$WORK/pairs"
  for row in "${rows[@]}"; do
    local flags line predicted layout
    flags=$("$BUILD/bin/llmc" plan "$@" "${CLUSTER[@]}" --global-batch 16 --emit-flags "$row" |
            sed 's/^llmc compile //; s/ -o model.llmc$//')
    line=$(awk -v r="$row" '$1 == r' "$WORK/plan.txt")
    layout=$(echo "$line" | cut -c7-58 | sed 's/ *$//')
    predicted=$(echo "$line" | awk '{for (i = 1; i <= NF; i++) if ($i == "ms" || $i == "s") {print ($i == "s" ? $(i-1) * 1000 : $(i-1)); exit}}')
    eval "\"$BUILD/bin/llmc\" compile $flags -o \"$WORK/m.llmc\"" > /dev/null
    launch "$BUILD/bin/llmc-run" "$WORK/m.llmc" --steps "$STEPS" --quiet --metrics "$WORK/metrics.jsonl"
    python3 - "$WORK/metrics.jsonl" "$row" "$layout" "$predicted" >> "$WORK/pairs" <<'PY'
import json, sys
ms = sorted(json.loads(l)["ms"] for l in list(open(sys.argv[1]))[3:])
print(f"{sys.argv[2]}\t{sys.argv[3]}\t{sys.argv[4]}\t{ms[len(ms) // 2]:.1f}")
PY
  done
  python3 - "$WORK/pairs" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
print(f"{'#':>4}  {'layout':<46} {'predicted ms':>12} {'measured ms':>12} {'ratio':>6}")
for r, layout, p, m in rows:
    print(f"{r:>4}  {layout:<46} {float(p):12.1f} {float(m):12.1f} {float(m) / float(p):6.2f}")
def ranks(v):
    order = sorted(range(len(v)), key=lambda i: v[i]); out = [0] * len(v)
    for k, i in enumerate(order): out[i] = k
    return out
p = ranks([float(r[2]) for r in rows]); m = ranks([float(r[3]) for r in rows]); n = len(rows)
rho = 1 - 6 * sum((a - b) ** 2 for a, b in zip(p, m)) / (n * (n * n - 1))
print(f"Spearman rank correlation, predicted vs measured: {rho:.2f} over {n} layouts")
PY
}
if [[ ${PLAN_MODELS:-both} != wide ]]; then
  measure "tiny preset (4 layers, d=128, T=128)" --model gpt2 --preset tiny --seq 128
fi
if [[ ${PLAN_MODELS:-both} != tiny ]]; then
  measure "4 layers, d=512, T=256" --model gpt2 --preset tiny --set n_layer=4 --set n_embd=512 \
  --set n_head=8 --set n_kv_head=8 --set ffn_hidden=2048 --set max_positions=256 --seq 256
fi
