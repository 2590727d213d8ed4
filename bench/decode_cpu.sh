#!/usr/bin/env bash
# Inference on a CPU rank: GPT-2 124M (fp32) prefill and decode tokens/s,
# `llmc generate` over its paged KV cache against PyTorch eager with
# transformers' KV cache (bench/torch_decode.py, same threads), for a batch
# of 1 and of 8 prompts of PROMPT tokens, NEW tokens each. Decode at batch 1
# reads every weight once per token, so it is bound by memory bandwidth: the
# weight bytes read per second are printed beside the machine's copy
# bandwidth (numpy, read + write).
#
# Usage: [PROMPT=128] [NEW=64] bench/decode_cpu.sh [build-dir]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
PROMPT=${PROMPT:-128}
NEW=${NEW:-64}
PY=${PY:-$BUILD/hf-venv/bin/python}
MODEL=(--model gpt2 --preset 124M)
# Weights a decode step reads: every parameter but the position table, of
# which it reads one row per token.
WEIGHT_BYTES=$(( (124439808 - 1024 * 768) * 4 ))

rate() { python3 -c "import sys; print(f'{float(sys.argv[1]) / float(sys.argv[2]):.1f}')" "$@"; }

echo "# $(date -u +%Y-%m-%d), $(getconf _NPROCESSORS_ONLN) cores, $THREADS threads, GPT-2 124M fp32, prompts of $PROMPT tokens, $NEW new tokens each"
for batch in 1 8; do
  "$BUILD/bin/llmc" compile "${MODEL[@]}" \
    --inference "max-batch=$batch,max-context=$((PROMPT + NEW)),page=16,chunk=$PROMPT" \
    -o "$WORK/gen$batch.llmc"
  args=()
  for ((i = 0; i < batch; ++i)); do
    args+=(--prompt-tokens "$(python3 -c "import random; random.seed($i); print(','.join(str(random.randrange(50257)) for _ in range($PROMPT)))")")
  done
  "$BUILD/bin/llmc" generate "$WORK/gen$batch.llmc" "${args[@]}" --max-new-tokens "$NEW" \
    --temperature 0 > /dev/null 2> "$WORK/llmc$batch.txt"
  read -r _ ptok _ _ psec _ < <(grep '^prefill:' "$WORK/llmc$batch.txt")
  read -r _ dtok _ _ dsec _ < <(grep '^decode:' "$WORK/llmc$batch.txt")
  "$PY" "$ROOT/bench/torch_decode.py" --batch "$batch" --prompt "$PROMPT" --new "$NEW" \
    --threads "$THREADS" > "$WORK/torch$batch.txt"
  read -r _ tptok tpsec < <(grep '^prefill' "$WORK/torch$batch.txt")
  read -r _ tdtok tdsec < <(grep '^decode' "$WORK/torch$batch.txt")
  copy=$(awk '/^copy/ {print $2}' "$WORK/torch$batch.txt")
  lp=$(rate "$ptok" "$psec"); ld=$(rate "$dtok" "$dsec")
  tp=$(rate "$tptok" "$tpsec"); td=$(rate "$tdtok" "$tdsec")
  steps_per_s=$(rate "$ld" "$batch")
  gbs=$(python3 -c "print(f'{$steps_per_s * $WEIGHT_BYTES / 1e9:.2f}')")
  echo "batch $batch: prefill llmc $lp tok/s, torch $tp tok/s (x$(rate "$lp" "$tp")); decode llmc $ld tok/s, torch $td tok/s (x$(rate "$ld" "$td")); llmc decode reads weights at $gbs GB/s, copy bandwidth $copy GB/s"
done
