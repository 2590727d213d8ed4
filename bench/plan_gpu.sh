#!/usr/bin/env bash
# `llmc plan` against llmc's own step times on one GPU: GPT-2 124M (B = 16)
# and the 1.5B shape (B = 8), T = 1024, bf16, one rank, as gpu-check's bench
# step compiles and times them (scripts/gpu-pack.sh). Prints the predicted
# step for the kernels llmc runs with the dgx-h200 preset, with a calibration
# of the device when one is given (gpu-check's calibration.json), and at
# the attention rate a `bench-attention-*` step measured for llmc's own
# kernels when a results file with it is given; beside the step times
# measured in that results file (bench/results/<date>-<device>.json).
# docs/planner.md records a run.
#
#   bench/plan_gpu.sh [build-dir] [results.json] [calibration.json]
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
RESULTS=${2:-}
CALIBRATION=${3:-}

step_ms() { awk '$1 == "1" {for (i = 1; i <= NF; i++) if ($i == "s" || $i == "ms") {print ($i == "s" ? $(i-1) * 1000 : $(i-1)); exit}}'; }
predict() { # preset batch extra-args...
  local preset=$1 batch=$2; shift 2
  "$BUILD/bin/llmc" plan --model gpt2 --preset "$preset" --seq 1024 --global-batch "$batch" \
    --cluster dgx-h200:1 --microbatch-sizes "$batch" --zero 0 --recompute none --top 1 \
    --verify 0 "$@" | step_ms
}
measured() { # jq-like path into the results file, as python
  [[ -n $RESULTS ]] || { echo "-"; return; }
  python3 - "$RESULTS" "$1" <<'PY'
import json, sys
steps = json.load(open(sys.argv[1])).get("steps", {})
value = eval(sys.argv[2], {}, {"s": lambda name: steps.get(name, {}).get("data", {})})
print(value if value is not None else "-")
PY
}
# The slowest llmc attention rate measured at head dim 64 (or 128), T = 1024.
attention_rate() {
  [[ -n $RESULTS ]] || return 0
  python3 - "$RESULTS" <<'PY'
import json, sys
steps = json.load(open(sys.argv[1])).get("steps", {})
for dim in ("64", "128"):
    for r in steps.get(f"bench-attention-{dim}", {}).get("data", {}).get("rows", []):
        if r.get("seq") == 1024 and r.get("tflops"):
            print(min(r["tflops"].values())); sys.exit()
PY
}

calibrated=()
[[ -n $CALIBRATION ]] && calibrated=(--calibration "$CALIBRATION")
rate=$(attention_rate)
printf '%-26s %14s %14s %18s %14s\n' model "preset ms" "calibrated ms" "at llmc's attn ms" "measured ms"
for row in "124M 16 min(s('bench-gpt2-124M').get('llmc_ms',{}).values(),default=None)" \
           "1.5B 8 s('bench-gpt2-1.5B').get('median_ms')"; do
  read -r preset batch expr <<< "$row"
  p=$(predict "$preset" "$batch")
  c=-; [[ -n $CALIBRATION ]] && c=$(predict "$preset" "$batch" "${calibrated[@]}")
  a=-; [[ -n $rate ]] && a=$(predict "$preset" "$batch" --attention-tflops "$rate")
  printf '%-26s %14s %14s %18s %14s\n' "GPT-2 $preset, B=$batch" "$p" "$c" "$a" "$(measured "$expr")"
done
[[ -n $rate ]] && echo "(llmc's attention at $rate TFLOP/s, as measured in $RESULTS)"
exit 0
