#!/usr/bin/env bash
# Fused elementwise chains against their unfused kernels on a CPU rank, at
# GPT-2 124M's shapes (B=4): dQKV's [B·T, 2304] at T=64 and T=1024, and
# the residual stream's [B·T, 768] at T=1024.
#
# Usage: bench/elementwise_cpu.sh [build-dir] [reps]   (default 20 repetitions)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
REPS=${2:-20}

echo "# $(date -u +%Y-%m-%d), $(getconf _NPROCESSORS_ONLN) cores"
for shape in "256 2304" "4096 2304" "4096 768"; do
  # shellcheck disable=SC2086
  "$BUILD/bin/llmc-bench-elementwise" $shape --reps "$REPS"
done
