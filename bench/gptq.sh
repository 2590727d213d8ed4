#!/usr/bin/env bash
# GPTQ against round-to-nearest on the tiny GPT-2 and tiny Llama: trains
# each for STEPS steps on the bundled corpus (fp32), then quantizes the
# checkpoint's matmul weights with `llmc quantize` both ways — int4 and
# int3, per channel and in blocks (64 for GPT-2; 32 for Llama, whose
# down_proj has 352 inputs, which 64 does not divide) —
# and evaluates every file with `llmc-run --weights --steps 0`. GPTQ
# calibrates on BATCHES training batches of the same corpus (its validation
# tail is held out, as llmc-run holds it out). Prints the table of
# docs/quantization.md (validation loss, nats per byte).
# Usage: bench/gptq.sh [build-dir] [steps]   (BATCHES=16 EVAL=32 by default)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
BATCHES=${BATCHES:-16}
EVAL=${EVAL:-32}
schemes() { local b=$([ "$1" = llama ] && echo 32 || echo 64); echo "int4:channel int4:block$b int3:channel int3:block$b"; }

loss() { grep -o 'val loss [0-9.]*' "$1" | tail -1 | cut -d' ' -f3; }

for model in gpt2 llama; do
  m="--model $model --preset tiny"
  "$BUILD/bin/llmc" compile $m -o "$WORK/$model.llmc"
  "$BUILD/bin/llmc-run" "$WORK/$model.llmc" --steps "$STEPS" --ckpt-dir "$WORK/ck-$model" \
    --eval-batches "$EVAL" --log-every 500 > "$WORK/$model-train.log"
  "$BUILD/bin/llmc" quantize "$WORK/ck-$model" $m --scheme none -o "$WORK/$model-fp32.safetensors" > /dev/null
  "$BUILD/bin/llmc-run" "$WORK/$model.llmc" --weights "$WORK/$model-fp32.safetensors" --steps 0 \
    --eval-batches "$EVAL" > "$WORK/$model-fp32.log"
  echo "$model fp32 - $(loss "$WORK/$model-fp32.log")" >> "$WORK/rows"
  for scheme in $(schemes $model); do
    for method in rtn gptq gptq-act; do
      extra=""
      case $method in
      gptq) extra="--method gptq --calibration bundled --batches $BATCHES" ;;
      gptq-act) extra="--method gptq --calibration bundled --batches $BATCHES --act-order" ;;
      esac
      f="$WORK/$model-$scheme-$method"
      "$BUILD/bin/llmc" quantize "$WORK/ck-$model" $m --scheme "$scheme" $extra -o "$f.safetensors" \
        > "$f.report" 2> /dev/null
      "$BUILD/bin/llmc-run" "$WORK/$model.llmc" --weights "$f.safetensors" --steps 0 \
        --eval-batches "$EVAL" > "$f.log"
      echo "$model $scheme $method $(loss "$f.log")" >> "$WORK/rows"
    done
  done
done
python3 - "$WORK/rows" "$STEPS" "$BATCHES" "$EVAL" <<'PY'
import sys
rows, steps, batches, evals = sys.argv[1], *sys.argv[2:5]
loss = {}
for line in open(rows):
    model, scheme, method, value = line.split()
    loss[model, scheme, method] = float(value)
print(f"{steps} training steps; GPTQ on {batches} calibration batches; "
      f"validation loss over {evals} batches")
print("| model | weights | RTN | GPTQ | GPTQ act-order |")
print("| --- | --- | ---: | ---: | ---: |")
for model in ("gpt2", "llama"):
    print(f"| {model} | fp32 | {loss[model, 'fp32', '-']:.4f} | | |")
    b = 32 if model == "llama" else 64
    for scheme in ("int4:channel", f"int4:block{b}", "int3:channel", f"int3:block{b}"):
        r, g, a = (loss[model, scheme, m] for m in ("rtn", "gptq", "gptq-act"))
        print(f"| {model} | {scheme} | {r:.4f} | {g:.4f} | {a:.4f} |")
PY
