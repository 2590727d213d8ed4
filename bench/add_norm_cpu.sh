#!/usr/bin/env bash
# The residual add + norm alone on a CPU rank, forward and backward,
# unfused (add, then the norm; the norm's backward, then add) against the
# fused kernels, for GPT-2 124M's stream (C=768) at B=4, T=64 and T=1024,
# layernorm and rmsnorm.
#
# Usage: bench/add_norm_cpu.sh [build-dir] [reps]   (default 20 repetitions)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
REPS=${2:-20}
BENCH=("$BUILD/bin/llmc-bench-add-norm")

echo "# $(date -u +%Y-%m-%d), $(getconf _NPROCESSORS_ONLN) cores"
for shape in "256 768" "4096 768" "256 768 --rms" "4096 768 --rms"; do
  # shellcheck disable=SC2086
  "${BENCH[@]}" $shape --reps "$REPS"
done
