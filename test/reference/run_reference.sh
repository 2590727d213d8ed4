#!/usr/bin/env bash
# PyTorch reference test: compiles a small GPT-2 and a small Llama, dumps
# llmc's loss and gradients for one batch, trains 10 AdamW steps, and checks
# both against test/reference/torch_reference.py. Exit 77 (ctest: skipped)
# when python3-torch is missing.
set -euo pipefail
BIN=$1; PYTHON=$2; SRC=$3; WORK=$4
if ! "$PYTHON" -c "import torch, numpy" 2>/dev/null; then
  echo "SKIP: python3-torch is not installed (scripts/setup.sh --test installs it)"
  exit 77
fi
rm -rf "$WORK" && mkdir -p "$WORK"
DATA="$SRC/data/tinytales.txt"
export OMP_WAIT_POLICY=PASSIVE
# PyTorch runs llmc's OpenBLAS kernels: the fp8 checks below turn the
# last-bit differences of two summation orders into rounding flips (on
# Sapphire Rapids, SkylakeX against SSE3 kernels moved a gradient by
# 5.8e-3, beyond 5e-3; with both SkylakeX, 1.2e-4).
source "$SRC/scripts/openblas-coretype.sh"

check() { # family, config json, extra compile flags...
  local family=$1 config=$2; shift 2
  local tag="$family${*:+-}$(echo "$*" | tr -c 'a-z0-9' '-')"
  local m="$WORK/$tag.llmc"
  "$BIN/llmc" compile --model "$family" --preset tiny --set n_layer=2 --set batch_size=4 \
    --set seq_len=32 --warmup 0 --lr-schedule constant --lr 1e-3 "$@" -o "$m"
  "$BIN/llmc-run" "$m" --steps 0 --dump-grads "$WORK/$tag.grads" --data "$DATA" --quiet
  # HISTORY_STEP=k: checkpoint step k, whose fp8 amax histories are checked.
  local ckpt=() histories=()
  if [[ -n ${HISTORY_STEP:-} ]]; then
    ckpt=(--ckpt-dir "$WORK/$tag.ckpt" --ckpt-every "$HISTORY_STEP")
    histories=(--histories "$(printf '%s/step_%08d' "$WORK/$tag.ckpt" "$HISTORY_STEP")")
  fi
  "$BIN/llmc-run" "$m" --steps "${STEPS:-10}" --metrics "$WORK/$tag.jsonl" --data "$DATA" \
    ${ckpt[@]+"${ckpt[@]}"} --quiet
  "$PYTHON" "$SRC/test/reference/torch_reference.py" --family "$family" --config "$config" \
    --dump "$WORK/$tag.grads" --metrics "$WORK/$tag.jsonl" --data "$DATA" \
    --seq-len 32 --rows 4 ${REF_ARGS[@]+"${REF_ARGS[@]}"} ${histories[@]+"${histories[@]}"}
}

# With the default fusions and without any.
for fuse in all none; do
  check gpt2 '{"n_layer": 2, "n_head": 4, "n_kv_head": 4, "n_embd": 128, "eps": 1e-5}' --fuse $fuse
  check llama '{"n_layer": 2, "n_head": 4, "n_kv_head": 2, "n_embd": 128, "eps": 1e-5, "theta": 10000.0}' --fuse $fuse
done

# --precision fp8's recipe (E4M3 weights and inputs of the blocks' linear
# layers, E5M2 dY, per-tensor current scaling), at fp32 compute through
# --qat so the comparison is not blurred by bf16, against torch_reference.py
# --fp8. One layer: fp8 rounding is discontinuous, and a last-bit difference
# between two fp32 implementations that moves a value across an fp8
# rounding boundary flips it (an E5M2 step is 25%); the tolerances leave
# room for a few such flips and are 10x below what dropping the E5M2
# quantization of dY, or using E4M3 for it, gives (5e-2).
FP8_RECIPE="weights=fp8_e4m3, activations=fp8_e4m3, gradients=fp8_e5m2, skip=head"
REF_ARGS=(--fp8 --grad-tol 5e-3 --loss-tol 5e-4)
check gpt2 '{"n_layer": 1, "n_head": 4, "n_kv_head": 4, "n_embd": 128, "eps": 1e-5}' \
  --set n_layer=1 --qat "$FP8_RECIPE"
check llama '{"n_layer": 1, "n_head": 4, "n_kv_head": 2, "n_embd": 128, "eps": 1e-5, "theta": 10000.0}' \
  --set n_layer=1 --qat "$FP8_RECIPE"

# --fp8-scaling delayed (Transformer Engine's DelayedScaling: amax history,
# margin, scale from the history of the steps before) over 16 steps, against
# torch_reference.py --fp8-delayed, TE's update written as TE writes it. The
# histories start empty (scale 1, TE's initial scale), so step 1 also checks
# the first-step path; the losses' tolerances are the current-scaling ones
# above (measured <= 1.9e-4 under every OPENBLAS_CORETYPE; rounding flips
# accumulate, and by step 20 Llama reaches 5.2e-4 under Haswell and Zen,
# hence 16 steps). A wrong margin or amax algorithm moves the losses less than that,
# so each history of step 6's checkpoint (its range and amaxes) is also
# checked against the PyTorch scaler's (1e-1: the amaxes are of tensors
# that drift apart as the losses do, dY's most; measured <= 4.2e-2, where
# margin 1 for 0 or max for most_recent gives >= 0.5).
FP8_DELAYED="delayed16:margin1:max"
FP8_DELAYED_RECIPE="weights=fp8_e4m3:$FP8_DELAYED, activations=fp8_e4m3:$FP8_DELAYED, gradients=fp8_e5m2:$FP8_DELAYED, skip=head"
REF_ARGS=(--fp8 --fp8-delayed 16,1,max --grad-tol 5e-3 --loss-tol 5e-4 --history-tol 1e-1)
STEPS=16 HISTORY_STEP=6 check gpt2 '{"n_layer": 1, "n_head": 4, "n_kv_head": 4, "n_embd": 128, "eps": 1e-5}' \
  --set n_layer=1 --qat "$FP8_DELAYED_RECIPE"
FP8_DELAYED="delayed4:margin0:most_recent"
FP8_DELAYED_RECIPE="weights=fp8_e4m3:$FP8_DELAYED, activations=fp8_e4m3:$FP8_DELAYED, gradients=fp8_e5m2:$FP8_DELAYED, skip=head"
REF_ARGS=(--fp8 --fp8-delayed 4,0,most_recent --grad-tol 5e-3 --loss-tol 5e-4 --history-tol 1e-1)
STEPS=16 HISTORY_STEP=6 check llama '{"n_layer": 1, "n_head": 4, "n_kv_head": 2, "n_embd": 128, "eps": 1e-5, "theta": 10000.0}' \
  --set n_layer=1 --qat "$FP8_DELAYED_RECIPE"
