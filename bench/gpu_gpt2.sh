#!/usr/bin/env bash
# GPT-2 124M training throughput on one GPU, bf16, T=1024: llmc (--target
# cuda) and PyTorch torch.compile (SDPA attention, fused AdamW) with the
# same model, batch and optimizer, in one run. Prints tokens/s and MFU
# (6N + 6·L·C·T FLOPs per token against the H100's 989 TF/s dense bf16)
# and the ratio; llmc runs once per `--attention` choice (cudnn, its own
# tensor cores, its own CUDA cores), with the start-up lines that say what
# each attention op got.
# Usage: bench/gpu_gpt2.sh [build-dir] [steps] [batch]
# ARTIFACT: an artifact compiled elsewhere (scripts/gpu-pack.sh) for a build
# without the compiler; TORCH_PYTHON: the python3 that has PyTorch.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
BATCH=${3:-16}
PEAK_TFLOPS=${PEAK_TFLOPS:-989}

TORCH_PYTHON=${TORCH_PYTHON:-/usr/bin/python3}
ARTIFACT=${ARTIFACT:-}
if [[ -z $ARTIFACT ]]; then
  ARTIFACT=$WORK/gpt2.llmc
  "$BUILD/bin/llmc" compile --model gpt2 --preset 124M --precision bf16 --target cuda \
    --set batch_size="$BATCH" --set seq_len=1024 -o "$ARTIFACT"
fi
# The median step of one llmc-run, after 5 warm-up steps; its "attention:"
# start-up lines go to stderr.
median_step() {
  "$BUILD/bin/llmc-run" "$ARTIFACT" --steps $((STEPS + 5)) --metrics "$WORK/m.jsonl" "$@" \
    > "$WORK/run.out"
  { grep '^attention: ' "$WORK/run.out" || true; } | sed "s/^/  [$*] /" >&2
  python3 - "$WORK/m.jsonl" <<'PY'
import json, sys
ms = sorted(json.loads(l)["ms"] for l in list(open(sys.argv[1]))[5:])
print(ms[len(ms) // 2])
PY
}
LLMC=$(median_step --attention cudnn)
LLMC_TC=$(median_step --attention tensor-cores)
LLMC_CC=$(median_step --attention cuda-cores)
TORCH=$("$TORCH_PYTHON" "$ROOT/bench/torch_gpu_gpt2.py" --steps "$STEPS" --batch "$BATCH")
python3 - "$LLMC" "$TORCH" "$BATCH" "$PEAK_TFLOPS" "$LLMC_TC" "$LLMC_CC" <<'PY'
import json, sys
llmc_ms, torch = float(sys.argv[1]), json.loads(sys.argv[2])
B, peak = int(sys.argv[3]), float(sys.argv[4]) * 1e12
llmc_tc_ms, llmc_cc_ms = float(sys.argv[5]), float(sys.argv[6])
L, C, V, T = 12, 768, 50257, 1024
N = V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C
flops_per_token = 6 * N + 6 * L * C * T
tokens = B * T
def row(name, ms):
    tps = tokens / ms * 1000
    return f"  {name:26s} {ms:8.1f} ms  {tps:9.0f} tok/s  MFU {100 * tps * flops_per_token / peak:5.1f} %"
print(f"GPT-2 124M, bf16, B={B}, T={T}, one GPU, median step")
print(row("llmc, --attention cudnn", llmc_ms))
print(row("llmc, --attention tensor-cores", llmc_tc_ms))
print(row("llmc, --attention cuda-cores", llmc_cc_ms))
print(row(f"torch.compile {torch['torch']}", torch["median_ms"]))
print(f"  llmc (cudnn) / torch.compile throughput: {torch['median_ms'] / llmc_ms:.2f}x")
PY
