#!/usr/bin/env bash
# `llmc plan` against published Megatron-LM measurements on A100 clusters.
# For each published configuration: the planner's prediction for that exact
# run (its tp, pp, GPU count and global batch, and the microbatch size and
# pipeline schedule the authors' own script for Table 1 gives:
# examples/sc21/run_table_1.sh in NVIDIA/Megatron-LM, "scripts for sc21",
# 2021-08-10; interleaved where it sets
# --num-layers-per-virtual-pipeline-stage, with layers per stage / that
# many chunks), converted to the paper's own FLOP count, beside the
# published number. The prediction prices the kernels Megatron-LM ran then:
# attention without a flash kernel (--attention-kernel unfused) and dropout
# 0.1 on the hidden states and the attention probabilities (Megatron-LM's
# GPT defaults). Beside it, the same layout with llmc's kernels (flash
# attention, no dropout), and the layout the planner would pick with the
# search open (--target cuda, llmc's kernels). Every layout, pipelined or
# not, is priced as the CUDA target's programs (--target cuda), which
# compile every pipeline schedule (docs/cuda.md, "Pipeline transfers").
# docs/planner.md records a run.
#
#   bench/plan_published.sh [build-dir]
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
PY=${PYTHON:-python3}

plan() { # args...
  "$BUILD/bin/llmc" plan --model gpt2 --preset 124M --set max_positions=2048 \
    --set vocab_size=51200 --seq 2048 "$@" --top 1 --verify 0
}
step_of() { awk '$1 == "1" {for (i = 1; i <= NF; i++) if ($i == "s" || $i == "ms") {print ($i == "s" ? $(i-1) : $(i-1) / 1000); exit}}'; }
layout_of() { awk '$1 == "1" {print substr($0, 7, 52)}' | sed 's/ *$//'; }
megatron=(--attention-kernel unfused --set dropout=0.1)

echo "Narayanan et al. 2021, Table 1 (A100, seq 2048, vocab 51200, full recomputation):"
echo "TFLOP/s per GPU by the paper's count F = 96·B·s·l·h²·(1 + s/6h + V/16lh) / (step · GPUs)"
printf '%-8s %-22s %6s %6s %-18s | %9s %9s %6s | %6s | %s\n' model "layers h heads" GPUs batch \
  "microbatches" published predicted ratio llmc "planner's pick (its TFLOP/s by the same count)"
while read -r name layers hidden heads tp pp gpus batch mbs chunks published; do
  shape=(--set n_layer=$layers --set n_embd=$hidden --set n_head=$heads --set n_kv_head=$heads
         --set ffn_hidden=$((4 * hidden)))
  # The run's schedule: 1F1B, or interleaved over $chunks chunks per stage.
  schedule=(--pipeline-schedule 1f1b)
  [ "$chunks" -gt 1 ] && schedule=(--pipeline-schedule interleaved --virtual-stages $chunks)
  layout=(--cluster dgx-a100:$gpus --global-batch $batch --tp $tp --pp $pp --zero 0 --sp off
          --recompute full --microbatch-sizes $mbs "${schedule[@]}" --target cuda)
  published_kernels=$(plan "${shape[@]}" "${layout[@]}" "${megatron[@]}")
  llmc_kernels=$(plan "${shape[@]}" "${layout[@]}")
  open=$(plan "${shape[@]}" --cluster dgx-a100:$gpus --global-batch $batch)
  $PY - "$layers" "$hidden" "$gpus" "$batch" "$published" "$(step_of <<< "$published_kernels")" \
    "$(step_of <<< "$llmc_kernels")" "$(step_of <<< "$open")" "$(layout_of <<< "$open")" "$name" \
    "$tp" "$pp" "$heads" "$mbs" "$chunks" <<'PY'
import sys
l, h, g, b, pub, fixed, flash, open_ = (float(x) for x in sys.argv[1:9])
pick, name, tp, pp, heads, mbs, chunks = sys.argv[9:16]
m = int(b) // (int(g) // (int(tp) * int(pp))) // int(mbs)
run = f"mbs{mbs} m{m}" + (f" ×{chunks}" if int(chunks) > 1 else "")
s, V = 2048, 51200
F = 96 * b * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
rate = lambda step: F / step / g / 1e12
print(f"{name:<8} {int(l):>3} {int(h):>6} {heads:>4} tp{tp} pp{pp:<3} {int(g):>6} {int(b):>6} {run:<18} | "
      f"{pub:>9.0f} {rate(fixed):>9.0f} {rate(fixed) / pub:>6.2f} | {rate(flash):>6.0f} | "
      f"{pick} ({rate(open_):.0f})")
PY
done <<'TABLE'
1.7B 24 2304 24 1 1 32 512 16 1 137
3.6B 30 3072 32 2 1 64 512 16 1 138
7.5B 36 4096 32 4 1 128 512 16 1 142
18.4B 40 6144 48 8 1 256 1024 8 1 135
39.1B 48 8192 64 8 2 512 1536 4 1 138
76.1B 60 10240 80 8 4 1024 1792 2 3 140
145.6B 80 12288 96 8 8 1536 2304 2 2 148
310.1B 96 16384 128 8 16 1920 2160 1 2 155
529.6B 105 20480 128 8 35 2520 2520 1 3 163
1008B 128 25600 160 8 64 3072 3072 1 1 163
TABLE

echo
echo "Korthikanti et al. 2022 (530B: 105 layers, h 20480, 128 heads; tp8 pp35 on 2240 A100s):"
echo "MFU by the paper's count 72·B·s·l·h²·(1 + s/6h + V/12lh) / (step · GPUs · 312 TFLOP/s)"
shape=(--set n_layer=105 --set n_embd=20480 --set n_head=128 --set n_kv_head=128 --set ffn_hidden=81920)
for mode in "full off 42.1" "selective on 54.2"; do
  read -r rc sp published <<< "$mode"
  out=$(plan "${shape[@]}" --cluster dgx-a100:2240 --global-batch 2240 --tp 8 --pp 35 --zero 0 \
        --sp $sp --recompute $rc --microbatch-sizes 1 --pipeline-schedule 1f1b,interleaved \
        --target cuda "${megatron[@]}")
  $PY - "$(step_of <<< "$out")" "$rc" "$sp" "$published" <<'PY'
import sys
step = float(sys.argv[1]); rc, sp, pub = sys.argv[2], sys.argv[3], float(sys.argv[4])
b, s, l, h, V, g = 2240, 2048, 105, 20480, 51200, 2240
F = 72 * b * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h))
mfu = 100 * F / step / g / 312e12
print(f"  recompute {rc:<9} sp {sp:<3}: published MFU {pub:.1f}%, predicted {mfu:.1f}% ({mfu / pub:.2f})")
PY
done
