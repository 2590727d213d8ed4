#!/usr/bin/env bash
# Batch-1 decode tokens/s of `llmc generate` beside llama.cpp (PyPI's
# llama-cpp-python, its default source build) on the same model: a random
# Llama of TinyLlama-1.1B's shape written by transformers
# (bench/random_llama_hf.py), converted to GGUF with the gguf package's
# writer (bench/hf_llama_to_gguf.py), both with THREADS threads, runs
# alternated. Rows: llmc fp32 (the HF weights) beside F32, int8:channel
# and fp8:channel (E4M3, which llama.cpp does not store) beside Q8_0,
# int4:block32 beside Q4_0 with fp32 scales (int4) and with fp16 scales
# as Q4_0's (int4h: `llmc quantize --scale-dtype f16`), nf4:block32 beside
# IQ4_NL (llama.cpp's 4-bit levels from a table; row nf4-q4_0 puts it
# beside Q4_0), bf16 beside BF16. Both quantize the same HF weights:
# llmc's rows load `llmc quantize`'s file of the row's scheme.
#
# EXPERTS=E makes the model a Mixtral of that shape, each layer's MLP E
# experts of which each token takes 2 (Mixtral's own count): llmc's
# `--model mixtral` beside llama.cpp's expert tensors (SIZE="--layers 4"
# keeps it within memory; MODEL_DIR then holds another model than the
# Llama's, so give it a directory of its own).
#
# The llama.cpp venv is built once (about 12 minutes on 2 cores) at
# LLAMACPP_VENV and reused; MODEL_DIR keeps the HF directory and GGUF files
# between runs (default: a scratch directory, removed on exit; ~11 GB).
#
# OpenMP's wait policy is libgomp's default (spin a while, then sleep),
# what a shell that sets none gets, for both programs (llama.cpp's build
# uses OpenMP too): a decode step of TinyLlama's shape is 333 kernels,
# most of them a short parallel region, and OMP_WAIT_POLICY=PASSIVE
# (bench/common.sh's default) puts the workers to sleep after each, which
# slows both, llama.cpp's 4-bit rows most (docs/performance.md).
# WAIT_POLICY=PASSIVE|ACTIVE sets one for both.
#
# RUNS: alternated runs per row, reported by their median. On a shared
# 2-core VM one program's runs have spread by up to 2.6x, so three runs
# rank nothing there: compare rows with RUNS=7 (docs/performance.md).
#
# Usage: [PROMPT=32] [NEW=32] [RUNS=3] [ROWS="fp32 int8 int4 int4h nf4 bf16 fp8"]
#        [LLAMACPP_VENV=build/llamacpp-venv] [MODEL_DIR=dir] [SIZE="--layers 22"]
#        [EXPERTS=E] [WAIT_POLICY=default] bench/decode_llamacpp.sh [build-dir]
set -euo pipefail
WAIT_POLICY=${WAIT_POLICY:-default}
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
PROMPT=${PROMPT:-32}
NEW=${NEW:-32}
RUNS=${RUNS:-3}
ROWS=${ROWS:-fp32 int8 int4 int4h nf4 bf16 fp8}
HF_PY=${HF_PY:-$BUILD/hf-venv/bin/python}
LLAMACPP_VENV=${LLAMACPP_VENV:-$BUILD/llamacpp-venv}
MODEL_DIR=${MODEL_DIR:-$WORK/model}
SIZE=${SIZE:-}
EXPERTS=${EXPERTS:-0}
FAMILY=llama
if ((EXPERTS > 0)); then
  FAMILY=mixtral
  SIZE="$SIZE --experts $EXPERTS"
fi

if [[ ! -x $LLAMACPP_VENV/bin/python ]] || ! "$LLAMACPP_VENV/bin/python" -c 'import llama_cpp, gguf' 2>/dev/null; then
  echo "# building llama-cpp-python 0.3.36 into $LLAMACPP_VENV (about 12 minutes on 2 cores)" >&2
  rm -rf "$LLAMACPP_VENV"
  python3 -m venv "$LLAMACPP_VENV"
  "$LLAMACPP_VENV/bin/pip" install -q gguf==0.19.0 numpy
  "$LLAMACPP_VENV/bin/pip" install -q llama-cpp-python==0.3.36
fi
LPY=$LLAMACPP_VENV/bin/python

HF=$MODEL_DIR/hf
mkdir -p "$MODEL_DIR"
# shellcheck disable=SC2086 # SIZE is a list of options
[[ -f $HF/model.safetensors ]] || "$HF_PY" "$ROOT/bench/random_llama_hf.py" "$HF" $SIZE
declare -A GGUF_TYPE=([fp32]=F32 [int8]=Q8_0 [int4]=Q4_0 [int4h]=Q4_0 [nf4]=IQ4_NL [nf4-q4_0]=Q4_0
  [bf16]=BF16 [fp8]=Q8_0)
declare -A SCHEME=([int8]=int8:channel [int4]=int4:block32 [int4h]=int4:block32 [nf4]=nf4:block32
  [nf4-q4_0]=nf4:block32 [fp8]=fp8:channel)
declare -A QUANTIZE_ARGS=([int4h]="--scale-dtype f16")
for row in $ROWS; do
  type=${GGUF_TYPE[$row]}
  [[ -f $MODEL_DIR/$type.gguf ]] || "$LPY" "$ROOT/bench/hf_llama_to_gguf.py" "$HF" "$MODEL_DIR/$type.gguf" "$type"
done

SPEC="max-batch=1,max-context=$((PROMPT + NEW)),page=16,chunk=$PROMPT"
for row in $ROWS; do
  args=(--model "$FAMILY" --config "$HF/config.json" --inference "$SPEC")
  case $row in
  bf16) args+=(--precision bf16) ;;
  fp32) ;;
  *)
    args+=(--weight-quant "${SCHEME[$row]}")
    # shellcheck disable=SC2086 # QUANTIZE_ARGS holds a list of options
    [[ -f $MODEL_DIR/llmc-$row.safetensors ]] ||
      "$BUILD/bin/llmc" quantize "$HF" --scheme "${SCHEME[$row]}" ${QUANTIZE_ARGS[$row]:-} \
        -o "$MODEL_DIR/llmc-$row.safetensors" > /dev/null
    ;;
  esac
  "$BUILD/bin/llmc" compile "${args[@]}" -o "$WORK/$row.llmc"
done
TOKENS=$(python3 -c "import random; random.seed(0); print(','.join(str(random.randrange(3, 32000)) for _ in range($PROMPT)))")

echo "# $(date -u +%Y-%m-%d), $(lscpu | sed -n 's/^Model name: *//p'), $(getconf _NPROCESSORS_ONLN) cores, $THREADS threads, OMP_WAIT_POLICY ${OMP_WAIT_POLICY:-unset}; $FAMILY $(python3 -c "import json; c = json.load(open('$HF/config.json')); print(f\"hidden {c['hidden_size']}, {c['num_hidden_layers']} layers, {c['num_attention_heads']} heads, {c['num_key_value_heads']} kv heads, vocab {c['vocab_size']}\" + (f\", {c['num_local_experts']} experts, {c['num_experts_per_tok']} a token\" if 'num_local_experts' in c else ''))"); batch 1, prompt $PROMPT tokens, $NEW new tokens, $RUNS runs alternated"
for ((r = 0; r < RUNS; ++r)); do
  for row in $ROWS; do
    weights=(--weights "$MODEL_DIR/llmc-$row.safetensors")
    [[ $row == fp32 || $row == bf16 ]] && weights=(--weights "$HF")
    "$BUILD/bin/llmc" generate "$WORK/$row.llmc" "${weights[@]}" --prompt-tokens "$TOKENS" \
      --max-new-tokens "$NEW" --temperature 0 2>&1 > /dev/null |
      awk -v k="$row" '/^decode:/ {gsub(/\(/, "", $7); print k, "llmc", $7}'
    "$LPY" "$ROOT/bench/llamacpp_decode.py" "$MODEL_DIR/${GGUF_TYPE[$row]}.gguf" \
      --prompt-tokens "$TOKENS" --new "$NEW" --threads "$THREADS" |
      awk -v k="$row" '/^decode/ {print k, "llama.cpp", $2 / $3}'
  done
done | python3 -c "
import statistics, sys
rates = {}
for line in sys.stdin:
    row, who, rate = line.split()
    rates.setdefault(row, {}).setdefault(who, []).append(float(rate))
names = {'fp32': ('fp32', 'F32'), 'int8': ('int8:channel', 'Q8_0'), 'int4': ('int4:block32', 'Q4_0'),
         'int4h': ('int4:block32, fp16 scales', 'Q4_0'),
         'nf4': ('nf4:block32', 'IQ4_NL'), 'nf4-q4_0': ('nf4:block32', 'Q4_0'), 'bf16': ('bf16', 'BF16'),
         'fp8': ('fp8:channel', 'Q8_0')}
print('| llmc | llama.cpp | llmc tok/s | llama.cpp tok/s | ratio | llmc runs | llama.cpp runs |')
print('| --- | --- | ---: | ---: | ---: | --- | --- |')
for row, by in rates.items():
    l, c = statistics.median(by['llmc']), statistics.median(by['llama.cpp'])
    runs = lambda v: ', '.join(f'{x:.2f}' for x in v)
    print(f'| {names[row][0]} | {names[row][1]} | {l:.2f} | {c:.2f} | {l / c:.2f}x | {runs(by[\"llmc\"])} | {runs(by[\"llama.cpp\"])} |')
"
