#!/usr/bin/env bash
# How close GPT-2 124M's training GEMMs come to the cores' fp32 peak: the
# FMA peak (one thread and THREADS), OpenBLAS's sgemm through llmc's loader
# at every distinct GEMM shape of a step at B=4, T=64 and T=1024, with its
# share of that peak, then PyTorch's torch.mm on the same shapes and
# threads (bench/torch_gemm.py), then the peak again: when it has dropped,
# something else ran meanwhile. About 1-2 minutes on two cores.
#
# Usage: bench/gemm_cpu.sh [--threads N] [build-dir]   (default: THREADS, every core)
set -euo pipefail
if [[ ${1:-} == --threads ]]; then
  export THREADS=${2:?bench/gemm_cpu.sh: --threads needs a value}
  shift 2
fi
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

echo "# $(date -u +%Y-%m-%d), $(getconf _NPROCESSORS_ONLN) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$BUILD/bin/llmc-bench-gemm" --threads "$THREADS" --rows "$WORK/rows"
echo
/usr/bin/python3 "$ROOT/bench/torch_gemm.py" --threads "$THREADS" "$WORK/rows"
echo "# at the end: load average $(cut -d' ' -f1-3 /proc/loadavg), and"
"$BUILD/bin/llmc-bench-gemm" --threads "$THREADS" --peak-only | sed -n 's/^peak/# peak/p'
