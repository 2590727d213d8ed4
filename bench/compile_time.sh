#!/usr/bin/env bash
# Compile time of 175B-shaped GPT models (d = 12288, 96 heads, ffn 49152,
# sequence 2048, bf16) against the number of layers and of ranks: a planner
# compiles many layouts, so compiling must grow at most linearly with layers
# and not with dp. Prints one line per compile (wall seconds, peak memory).
#
#   bench/compile_time.sh [build-dir]
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

SHAPE=(--model gpt2 --preset 124M --set n_embd=12288 --set n_head=96 --set n_kv_head=96
       --set ffn_hidden=49152 --set max_positions=2048 --set seq_len=2048 --precision bf16)

run() { # label, llmc compile flags...
  local label=$1; shift
  /usr/bin/time -f "%e %M" -o "$WORK/time" "$BUILD/bin/llmc" compile "${SHAPE[@]}" "$@" \
    -o "$WORK/m.llmc" || return 1
  read -r seconds kib < "$WORK/time"
  printf '%-44s %7.2f s %7d MiB\n' "$label" "$seconds" $((kib / 1024))
}

echo "layers (pp=16, dp=8, tp=8, sp, ZeRO-1, 16 microbatches: 1024 ranks)"
for layers in 24 48 96; do
  run "  n_layer=$layers" --set n_layer=$layers --set batch_size=8 \
    --mesh pp=16,dp=8,tp=8 --sp --zero 1 --microbatches 16
done
echo "ranks (96 layers, ZeRO-3 over dp)"
for dp in 8 64 1024; do
  run "  dp=$dp" --set n_layer=96 --set batch_size=$dp --mesh dp=$dp --zero 3
done
