#!/usr/bin/env bash
# The matmul epilogue alone on a CPU rank: GPT-2's MLP input layer (bias +
# GELU, the pre-activation kept as in training), its QKV projection (bias
# only) and its MLP output projection with the residual stream (bias +
# residual; with --no-bias, Llama's down_proj), unfused (matmul, add, add
# or gelu) against the fused `linear`, for the tiny preset (B=8, T=128,
# C=128) and 124M (B=4, T=64 and T=1024); then the MLP backward's
# data-gradient product with GELU's backward and c_fc's bias gradient,
# unfused against `matmul_gelu_grad`.
#
# Usage: bench/linear_cpu.sh [build-dir] [reps]   (default 20 repetitions)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
REPS=${2:-20}
BENCH=("$BUILD/bin/llmc-bench-linear")

echo "# $(date -u +%Y-%m-%d), $(getconf _NPROCESSORS_ONLN) cores"
for shape in "1024 128 512 --keep-pre" "1024 128 384" "1024 512 128 --residual" \
             "256 768 3072 --keep-pre" "256 768 2304" "256 3072 768 --residual" \
             "256 3072 768 --residual --no-bias" "4096 768 3072 --keep-pre" "4096 768 2304" \
             "4096 3072 768 --residual" "4096 3072 768 --residual --no-bias"; do
  # shellcheck disable=SC2086
  "${BENCH[@]}" $shape --reps "$REPS"
done
for shape in "1024 128 512" "256 768 3072" "4096 768 3072"; do
  # shellcheck disable=SC2086
  "${BENCH[@]}" $shape --gelu-grad --reps "$REPS"
done
