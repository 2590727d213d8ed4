#!/usr/bin/env bash
# GPT-2 124M training throughput on one GPU, bf16, T=1024: llmc (--target
# cuda) and PyTorch torch.compile (SDPA attention, fused AdamW) with the
# same model, batch and optimizer, in one run. Prints tokens/s and MFU
# (6N + 6·L·C·T FLOPs per token against the H100's 989 TF/s dense bf16)
# and the ratio; llmc runs once per `--attention` choice (LLMC_VARIANTS:
# cudnn, its own tensor cores, its own CUDA cores), with the start-up lines
# that say what each attention op got.
# Usage: bench/gpu_gpt2.sh [build-dir] [steps] [batch]
# ARTIFACT: an artifact compiled elsewhere (scripts/gpu-pack.sh) for a build
# without the compiler; TORCH_PYTHON: the python3 that has PyTorch.
# LLMC_VARIANTS: space-separated label=llmc-run-flags (commas for spaces),
#   default "cudnn=--attention,cudnn tensor-cores=--attention,tensor-cores
#   cuda-cores=--attention,cuda-cores".
# RESULT_JSON: also write the numbers there (bench/gpu_results.py's
#   bench-gpt2-124M data).
# BASELINE_FROM: a folder of lease results (bench/results): torch.compile's
#   median is taken from the newest lease on the same GPU, PyTorch, batch
#   and sequence instead of being measured again, unless RERUN_BASELINE=1.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
BATCH=${3:-16}
PEAK_TFLOPS=${PEAK_TFLOPS:-989}
VARIANTS=${LLMC_VARIANTS:-"cudnn=--attention,cudnn tensor-cores=--attention,tensor-cores cuda-cores=--attention,cuda-cores"}

TORCH_PYTHON=${TORCH_PYTHON:-/usr/bin/python3}
ARTIFACT=${ARTIFACT:-}
if [[ -z $ARTIFACT ]]; then
  ARTIFACT=$WORK/gpt2.llmc
  "$BUILD/bin/llmc" compile --model gpt2 --preset 124M --precision bf16 --target cuda \
    --set batch_size="$BATCH" --set seq_len=1024 -o "$ARTIFACT"
fi
# The median step of one llmc-run, after 5 warm-up steps; its "attention:"
# start-up lines (stdout) are echoed to stderr. Fails when the run does, so
# a variant that fails never reports the metrics of the one before.
median_step() {
  rm -f "$WORK/m.jsonl"
  "$BUILD/bin/llmc-run" "$ARTIFACT" --steps $((STEPS + 5)) --metrics "$WORK/m.jsonl" "$@" \
    > "$WORK/run.out" || { tail -n 5 "$WORK/run.out" >&2; return 1; }
  { grep '^attention: ' "$WORK/run.out" || true; } | sed "s/^/  [$*] /" >&2
  python3 - "$WORK/m.jsonl" <<'PY'
import json, sys
ms = sorted(json.loads(l)["ms"] for l in list(open(sys.argv[1]))[5:])
print(ms[len(ms) // 2])
PY
}
LLMC_MS="" FAILED_VARIANTS=""
for variant in $VARIANTS; do
  label=${variant%%=*} flags=${variant#*=}
  # shellcheck disable=SC2086
  if ms=$(median_step ${flags//,/ }); then
    LLMC_MS+="$label=$ms "
  else
    echo "llmc ($label): llmc-run failed; no time for it" >&2
    FAILED_VARIANTS+="$label "
  fi
done
[[ -n $LLMC_MS ]] || { echo "gpu_gpt2: every llmc variant failed" >&2; exit 1; }
TORCH=""
if [[ -n ${BASELINE_FROM:-} && ${RERUN_BASELINE:-0} != 1 ]]; then
  TORCH=$("$TORCH_PYTHON" "$ROOT/bench/gpu_results.py" baseline --results "$BASELINE_FROM" \
    --batch "$BATCH" --seq 1024 || true)
fi
[[ -n $TORCH ]] ||
  TORCH=$("$TORCH_PYTHON" "$ROOT/bench/torch_gpu_gpt2.py" --steps "$STEPS" --batch "$BATCH")
FAILED_VARIANTS=$FAILED_VARIANTS python3 - "$TORCH" "$BATCH" "$PEAK_TFLOPS" "${RESULT_JSON:-}" \
  $LLMC_MS <<'PY'
import json, os, sys
torch, B, peak = json.loads(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]) * 1e12
out = sys.argv[4]
llmc = {kv.split("=")[0]: float(kv.split("=")[1]) for kv in sys.argv[5:]}
L, C, V, T = 12, 768, 50257, 1024
N = V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C
flops_per_token = 6 * N + 6 * L * C * T
tokens = B * T
def row(name, ms):
    tps = tokens / ms * 1000
    return f"  {name:26s} {ms:8.1f} ms  {tps:9.0f} tok/s  MFU {100 * tps * flops_per_token / peak:5.1f} %"
print(f"GPT-2 124M, bf16, B={B}, T={T}, one GPU, median step")
for name, ms in llmc.items():
    print(row(f"llmc ({name})", ms))
cached = " (cached)" if torch.get("cached") else ""
print(row(f"torch.compile {torch['torch']}{cached}", torch["median_ms"]))
for name, ms in llmc.items():
    print(f"  llmc ({name}) / torch.compile throughput: {torch['median_ms'] / ms:.2f}x")
if out:
    with open(out, "w") as f:
        json.dump({"batch": B, "seq": T, "llmc_ms": llmc, "torch_compile_ms": torch["median_ms"],
                   "torch": torch["torch"], "torch_cached": bool(torch.get("cached")),
                   "llmc_failed": os.environ["FAILED_VARIANTS"].split()}, f)
PY
[[ -z $FAILED_VARIANTS ]] || { echo "gpu_gpt2: llmc-run failed for: $FAILED_VARIANTS" >&2; exit 1; }
