#!/usr/bin/env bash
# Everything the CUDA backend needs checked on a GPU, in one go, on a GPU
# machine that has nvcc, CMake and PyTorch but no MLIR, MPI or system
# packages: the programs and dependencies come from scripts/gpu-pack.sh.
#
#   preflight    versions: driver, CUDA, cuDNN, NVRTC, PyTorch, and the
#                backend PyTorch's SDPA picks (bench/gpu_preflight.py)
#   build        runtime-only build against <pack>/deps (CUDA on)
#   conformance-changed
#                the CUDA kernel tests the change since the last lease can
#                affect (<pack>/CHANGED_CUDA_TESTS, bench/gpu_changed_tests.py)
#   parity       tiny GPT, 50 steps GPU vs CPU: fp32 ≤ 1e-4, bf16 ≤ 1e-2,
#                dropout ≤ 1e-4; vocabulary 257, padded to 384 on the GPU
#                only (fp32, and bf16 in several head chunks); a GPU
#                checkpoint resumed on the CPU; GPT-2 124M, 10 steps,
#                --attention cudnn and tensor-cores each vs cuda-cores, ≤ 1e-2;
#                the one-launch AdamW vs per-tensor kernels, bit for bit; a
#                tiny Mixtral (routing, grouped GEMMs, router losses), fp32
#                ≤ 1e-4 and bf16 ≤ 1e-2; a tiny Qwen3-MoE (per-head q/k
#                norms, heads 48 wide, experts), fp32 ≤ 1e-4; generation through llmc-generate,
#                a tiny Llama against one CPU rank and its layers streamed
#                (bit for bit), on the host and split (≤ 1e-4), tp=2 too
#   shared       several ranks on this one GPU through the host transport
#                (--device-comm): ZeRO-1 and ZeRO-3 dp2, tp2+sp, dp2×tp2,
#                pp2 (1F1B and interleaved) and pp2×dp2, a tiny Mixtral
#                under ep2 and dp2×ep2 (all-to-alls), 20 steps each
#                against one CPU rank, ≤ 1e-4; a killed rank, a stopped one
#                and mismatched collectives ending the job cleanly
#   multigpu     dp=2 and tp=2 over NCCL against one GPU (needs 2 GPUs)
#   bench        the device's calibration for llmc plan (cuBLASLt GEMMs,
#                a copy, attention: llmc-bench-calibrate, copied to
#                <out>/calibration.json); GPT-2 124M vs torch.compile, once
#                per --attention choice (the baseline cached from an earlier
#                lease on the same GPU and PyTorch unless --rerun-baseline),
#                its per-kernel profile (CUDA events, each kernel's cuBLASLt
#                GEMMs split out), attention vs SDPA at head dims 64 and 128,
#                the LM head with its vocabulary padded and not, the 1.5B
#                shape; Llama 1B's prefill and decode tokens/s with every
#                layer on the device and under a 1.5 GiB budget (streamed,
#                host, split); ncu's time per kernel name over two steps of 124M
#   conformance  kernel_tests Cuda* (CUDA kernels vs CPU kernels)
#   ctest        every other runtime and kernel test through ctest
#   sanitizer    compute-sanitizer memcheck on a few steps of llmc-run and on
#                the CUDA kernel tests; racecheck, synccheck on the kernel tests
#
# The groups run in the order --steps names them (by default preflight,
# build, parity, shared, multigpu, bench, conformance, ctest, sanitizer:
# measurements first, the full conformance and the slow sanitizers last;
# under --perf: preflight, parity, bench, shared, then conformance-changed,
# conformance and the sanitizers while time is left).
# conformance skips the tests conformance-changed already ran (the same
# filter). A failing step does not stop the others;
# each writes <out>/<step>*.log, one line of <out>/summary.txt and its
# verdict, seconds and numbers (<out>/data/<step>.json) into
# <out>/results.json as soon as it ends (bench/gpu_results.py; commit that
# file as bench/results/<date>-<device>.json). Exit status: 0 when no step
# failed.
#
#   scripts/gpu-check.sh [--perf] [--pack DIR] [--out DIR] [--build DIR]
#                        [--jobs N] [--steps a,b,...] [--only p,q,...]
#                        [--budget SECONDS] [--tar FILE] [--rerun-baseline]
#                        [--no-cuda]
#
# --perf is the short lease's run: preflight, parity, bench, shared, then
# conformance-changed, conformance and sanitizer while time is left, under
# a budget of 540 s unless --budget says otherwise. A step the budget cuts
# short is "CUT (budget)", not a failure.
#
# --only runs, within the groups --steps names, only the steps whose names
# match one of these shell patterns (e.g. 'parity-fp32,bench-gpt2-*'), so a
# short lease goes to what a change needs; preflight and build always run
# when their groups are named.
#
# --tar FILE packs every log and result of <out> into one .tgz after each
# step and at the end (a device tool may bring back only a few files, and a
# run killed at its time limit never reaches the end); checkpoints are
# written outside <out>, in a temporary folder removed on exit.
# CUDA_TESTS (a gtest filter, default Cuda*) narrows the kernel tests that
# conformance and the sanitizers run, e.g. to rerun those that failed;
# KERNEL_SHARDS (default 4) is how many processes run them at once
# (scripts/sharded-gtest.sh: logs <out>/<step>-<shard>.log).
# --budget caps the whole run: each step's limit shrinks to what is left, and
# a step with under 20 s left is not started (summary: "SKIP (budget)").
# Without the build step, --build may name a build made on another machine
# (same CUDA toolkit, -DCMAKE_CUDA_ARCHITECTURES=90); when its programs do
# not load here (ldd lists a library "not found"), the script builds afresh
# in <build>-here and says so.
#
# --no-cuda builds with CUDA off and runs only preflight, build and ctest,
# for checking the script and the pack on a machine without a GPU.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PACK=$ROOT/gpu-pack
OUT_DIR=${OUT:-$ROOT/gpu-check-out}
BUILD=$ROOT/build-gpu
JOBS=$(nproc)
ALL_STEPS=preflight,build,conformance-changed,parity,shared,multigpu,bench,conformance,ctest,sanitizer
STEPS=preflight,build,parity,shared,multigpu,bench,conformance,ctest,sanitizer
BUDGET=""
ONLY=""
PERF=0
TAR=""
CUDA=ON
usage() { sed -n '/^#   scripts/,/without a GPU\./p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
while (($#)); do
  case $1 in
    --pack) PACK=$2; shift 2 ;;
    --out) OUT_DIR=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    --budget) BUDGET=$2; shift 2 ;;
    --tar) TAR=$2; shift 2 ;;
    --perf) PERF=1; STEPS=preflight,parity,bench,shared,conformance-changed,conformance,sanitizer; shift ;;
    --rerun-baseline) export RERUN_BASELINE=1; shift ;;
    --no-cuda) CUDA=OFF; shift ;;
    -h|--help) usage ;;
    *) echo "gpu-check: unknown argument '$1'" >&2; usage ;;
  esac
done
for s in ${STEPS//,/ }; do
  [[ ,$ALL_STEPS, == *,$s,* ]] || { echo "gpu-check: unknown step '$s'" >&2; exit 2; }
done
[[ -n $BUDGET ]] || { ((PERF)) && BUDGET=540 || BUDGET=0; }
[[ -f $PACK/MANIFEST ]] ||
  { echo "gpu-check: no pack at $PACK (make one with scripts/gpu-pack.sh, carry it)" >&2; exit 2; }
PACK=$(cd "$PACK" && pwd)
if [[ $CUDA == ON ]]; then
  GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  if ((GPUS == 0)); then
    echo "gpu-check: no NVIDIA GPU visible (nvidia-smi -L lists none); run this on the GPU" \
         "machine, or pass --no-cuda to check only the CPU build" >&2
    exit 2
  fi
else
  GPUS=0
  STEPS=$(tr ',' '\n' <<<"$STEPS" | grep -xE 'preflight|build|conformance|ctest' | paste -sd, -)
fi
mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
SUMMARY=$OUT_DIR/summary.txt
: > "$SUMMARY"
DATA_DIR=$OUT_DIR/data
RESULTS=$OUT_DIR/results.json
rm -rf "$DATA_DIR" "$RESULTS" && mkdir -p "$DATA_DIR"
# The commit the pack's programs were built from (what the results are
# of); the work tree here may have moved on since.
COMMIT=$(sed -n 's/^commit \([0-9a-f]*\).*/\1/p' "$PACK/MANIFEST")
HEAD_COMMIT=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || true)
[[ -n $COMMIT ]] || COMMIT=$HEAD_COMMIT
if [[ -n $HEAD_COMMIT && $COMMIT != "$HEAD_COMMIT" ]]; then
  echo "gpu-check: the pack was made at $COMMIT, the work tree is at $HEAD_COMMIT;" \
       "results are recorded as the pack's" >&2
fi
CK_DIR=$(mktemp -d)
# --tar: <out> packed whole, written beside and renamed, so a kill while
# packing leaves the previous pack.
pack_out() {
  [[ -n $TAR ]] || return 0
  tar -C "$(dirname "$OUT_DIR")" --exclude "$(basename "$TAR")" --exclude "$(basename "$TAR").part" \
    -czf "$TAR.part" "$(basename "$OUT_DIR")" && mv -f "$TAR.part" "$TAR"
}
# On every exit, an early one included: checkpoints removed, logs packed.
finish() {
  rm -rf "$CK_DIR"
  pack_out && [[ -n $TAR ]] && echo "gpu-check: packed into $TAR ($(du -h "$TAR" | cut -f1))" >&2
}
trap finish EXIT
BIN=$BUILD/bin
A=$PACK/artifacts
TORCH_PYTHON=${TORCH_PYTHON:-$(command -v python3)}
export TORCH_PYTHON OMP_WAIT_POLICY=PASSIVE
# The CUDA kernel tests that conformance and the sanitizers run (a gtest
# filter): all of them, or a subset when rerunning what failed.
export CUDA_TESTS=${CUDA_TESTS:-Cuda*}
# Processes those tests run in at once (scripts/sharded-gtest.sh), sharing
# the GPU and the cores: one process keeps the CPU references, most of
# their time, on a few cores.
export KERNEL_SHARDS=${KERNEL_SHARDS:-4}

# The CPU kernels dlopen OpenBLAS from the pack, and Gloo's libraries load
# from there too; NCCL may exist only inside PyTorch's nvidia-nccl wheel.
DEPS=$PACK/deps
[[ -f $DEPS/lib/libopenblas.so.0 ]] || tar -C "$DEPS/lib" -xJf "$DEPS/blas.tar.xz"
NCCL_FLAGS=""
if [[ $CUDA == ON ]]; then
  NCCL_DIR=$("$TORCH_PYTHON" -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' 2>/dev/null || true)
  if [[ -n $NCCL_DIR && -f $NCCL_DIR/include/nccl.h ]]; then
    NCCL_LIB=$(ls "$NCCL_DIR"/lib/libnccl.so* | head -1)
    NCCL_FLAGS="-DNCCL_INCLUDE_DIR=$NCCL_DIR/include -DNCCL_LIBRARY=$NCCL_LIB"
    export LD_LIBRARY_PATH=$NCCL_DIR/lib:${LD_LIBRARY_PATH:-}
  fi
fi
export LD_LIBRARY_PATH=$DEPS/lib:${LD_LIBRARY_PATH:-}

# step NAME LIMIT_SECONDS FUNCTION ARGS...: runs one step's function under a
# time limit (in a child bash, hence the exports; STEP_DATA names the file
# for its numbers), its output to <out>/NAME.log; one summary line and one
# entry of results.json either way.
FAILED=0
START=$SECONDS
step() {
  local name=$1 limit=$2 cut=0; shift 2
  asked "$name" || return 77
  if ((BUDGET > 0)); then
    local left=$((BUDGET - (SECONDS - START)))
    if ((left < 20)); then
      printf '%-28s %-18s %4ds\n' "$name" "SKIP (budget)" 0 | tee -a "$SUMMARY" >&2
      record "$name" "SKIP (budget)" 0
      return 77
    fi
    ((limit > left)) && limit=$left cut=1
  fi
  local start=$SECONDS status
  echo "== $name" >&2
  STEP_DATA=$DATA_DIR/$name.json timeout --kill-after=10 "$limit" bash -o pipefail -c '"$@"' step "$@" \
    > "$OUT_DIR/$name.log" 2>&1
  status=$?
  local verdict=PASS
  if ((status == 77)); then verdict=SKIP
  elif ((status == 124 || status == 137)) && ((cut)); then verdict="CUT (budget)"
  elif ((status == 124 || status == 137)); then verdict="FAIL (over ${limit}s)"; FAILED=1
  elif ((status != 0)); then verdict="FAIL (exit $status)"; FAILED=1
  fi
  printf '%-28s %-18s %4ds  %s.log\n' "$name" "$verdict" $((SECONDS - start)) "$name" | tee -a "$SUMMARY" >&2
  record "$name" "$verdict" $((SECONDS - start))
  return $status
}
record() {  # name verdict seconds
  python3 "$ROOT/bench/gpu_results.py" record "$RESULTS" --step "$1" --verdict "$2" --seconds "$3" \
    --data "$DATA_DIR/$1.json" --commit "$COMMIT" --date "$(date -u +%F)" ||
    echo "gpu-check: could not record $1 in $RESULTS" >&2
  pack_out || echo "gpu-check: could not pack $OUT_DIR into $TAR" >&2
}
wants() { [[ ,$STEPS, == *,$1,* ]]; }
asked() {  # step name: whether --only (if given) takes it
  [[ -z $ONLY || $1 == preflight || $1 == build ]] && return 0
  local pattern patterns
  IFS=, read -ra patterns <<<"$ONLY"
  for pattern in "${patterns[@]}"; do
    # shellcheck disable=SC2053 # a pattern, unquoted on purpose
    [[ $1 == $pattern ]] && return 0
  done
  return 1
}

do_build() {
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLMC_RUNTIME_ONLY=ON \
    -DLLMC_DEPS_DIR="$DEPS" -DLLMC_ENABLE_CUDA="$CUDA" -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_POLICY_VERSION_MINIMUM=3.5 $NCCL_FLAGS &&
  cmake --build "$BUILD" -j "$JOBS"
}

do_preflight() { "$TORCH_PYTHON" "$ROOT/bench/gpu_preflight.py" | tee "$STEP_DATA"; }
do_conformance_cuda() {
  "$ROOT/scripts/sharded-gtest.sh" "$KERNEL_SHARDS" "$OUT_DIR/conformance-cuda" \
    "$BIN/kernel_tests" --gtest_filter="$CUDA_TESTS"
}
# The tests gpu-pack.sh found the change since the last lease can affect.
do_conformance_changed() {
  local filter
  filter=$(cat "$PACK/CHANGED_CUDA_TESTS" 2>/dev/null) ||
    { echo "skipped: the pack has no CHANGED_CUDA_TESTS"; return 77; }
  [[ $filter != - ]] || { echo "skipped: no CUDA kernel changed since the last lease"; return 77; }
  echo "filter: $filter"
  "$ROOT/scripts/sharded-gtest.sh" "$KERNEL_SHARDS" "$OUT_DIR/conformance-changed" \
    "$BIN/kernel_tests" --gtest_filter="$filter"
}
do_ctest() { ctest --test-dir "$BUILD" -j "$JOBS" --output-on-failure -E '^Cuda'; }

# compute-sanitizer TOOL on the CUDA kernel tests; any report fails.
do_sanitize() {
  "$ROOT/scripts/sharded-gtest.sh" "$KERNEL_SHARDS" "$OUT_DIR/sanitizer-$1" \
    compute-sanitizer --tool "$1" --error-exitcode 1 --print-limit 20 \
    "$BIN/kernel_tests" --gtest_filter="$CUDA_TESTS" --gtest_brief=1
}
do_sanitize_run() {
  local w=$OUT_DIR/sanitizer-run
  rm -rf "$w" && mkdir -p "$w"
  compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 20 \
    "$BIN/llmc-run" "$A/tiny-gpu.llmc" --steps 3 --quiet --metrics "$w/m.jsonl"
}

# One parity pair: GPU and CPU runs of the same model, losses compared.
parity_pair() {  # name cpu-artifact gpu-artifact steps tolerance
  local w=$OUT_DIR/parity/$1
  rm -rf "$w" && mkdir -p "$w"
  "$BIN/llmc-run" "$A/$2" --steps "$4" --metrics "$w/cpu.jsonl" --quiet &&
  "$BIN/llmc-run" "$A/$3" --steps "$4" --metrics "$w/gpu.jsonl" --ckpt-dir "$CK_DIR/$1" |
    tee "$w/gpu.out" &&
  grep -q "done: $4 steps" "$w/gpu.out" && grep -q "device: GPU 0" "$w/gpu.out" &&
  python3 "$ROOT/test/e2e/Inputs/compare_losses.py" "$w/gpu.jsonl" "$w/cpu.jsonl" "$5"
}
# parity_pair with the fp8 experts' products on fp8 tensor cores.
do_fp8_tensor_cores() { LLMC_CUDA_FP8_MMA=1 parity_pair "$@"; }
# GPT-2 124M (D = 64, bf16), 10 steps, with its attention on cuDNN or on
# llmc's tensor cores against the same run on CUDA cores: losses within
# bf16's 1e-2, and the start-up lines must say that every attention op got
# what was asked (no fallback).
attention_baseline() {
  local w=$OUT_DIR/parity/attention
  mkdir -p "$w"
  [[ -s $w/cuda-cores.jsonl ]] ||
    "$BIN/llmc-run" "$A/gpt2-124M-bf16-gpu.llmc" --steps 10 --metrics "$w/cuda-cores.jsonl" \
      --attention cuda-cores --quiet
}
do_attention_variant() {  # cudnn | tensor-cores
  local w=$OUT_DIR/parity/attention
  attention_baseline && rm -f "$w/$1.jsonl" &&
  "$BIN/llmc-run" "$A/gpt2-124M-bf16-gpu.llmc" --steps 10 --metrics "$w/$1.jsonl" \
    --attention "$1" | tee "$w/$1.out" &&
  grep -q "^attention: $1 for " "$w/$1.out" &&
  ! grep '^attention: ' "$w/$1.out" | grep -v "^attention: $1 for [^()]*$" &&
  python3 "$ROOT/test/e2e/Inputs/compare_losses.py" "$w/$1.jsonl" "$w/cuda-cores.jsonl" 1e-2
}
# The tiny GPT in bf16 with its updates as one multi_tensor_adamw and as
# per-tensor adamw and casts: the same losses bit for bit over 10 steps
# (GEMM timing off in both, so both use the heuristic's algorithms).
do_multi_tensor_adamw() {
  local w=$OUT_DIR/parity/multi-tensor-adamw
  rm -rf "$w" && mkdir -p "$w"
  "$BIN/llmc-run" "$A/tiny-bf16-gpu.llmc" --steps 10 --no-gemm-timing --metrics "$w/fused.jsonl" \
    --quiet &&
  "$BIN/llmc-run" "$A/tiny-bf16-per-tensor-gpu.llmc" --steps 10 --no-gemm-timing \
    --metrics "$w/per-tensor.jsonl" --quiet &&
  python3 "$ROOT/test/e2e/Inputs/compare_losses.py" "$w/fused.jsonl" "$w/per-tensor.jsonl" 0
}
# --offload optimizer on the GPU: pinned host memory, copies on the
# stream, the update as a host function. The update runs the CPU's AdamW
# kernel instead of the GPU's, so the losses agree to bf16 training's
# tolerance, not bit for bit; the step times with and without offloading
# are printed (median of steps 2-10 from the metrics).
do_offload() {
  local w=$OUT_DIR/parity/offload
  rm -rf "$w" && mkdir -p "$w"
  "$BIN/llmc-run" "$A/tiny-bf16-gpu.llmc" --steps 10 --no-gemm-timing --metrics "$w/device.jsonl" \
    --quiet &&
  "$BIN/llmc-run" "$A/tiny-bf16-offload-gpu.llmc" --steps 10 --no-gemm-timing \
    --metrics "$w/offload.jsonl" | tee "$w/offload.out" &&
  python3 "$ROOT/test/e2e/Inputs/compare_losses.py" "$w/offload.jsonl" "$w/device.jsonl" 1e-2 &&
  python3 - "$w/device.jsonl" "$w/offload.jsonl" <<'PY'
import json, statistics, sys
def median_ms(path):
    rows = [json.loads(line) for line in open(path)][1:]
    return statistics.median(r["ms"] for r in rows if "ms" in r) if rows else float("nan")
print(f"step time: {median_ms(sys.argv[1]):.2f} ms without offloading, "
      f"{median_ms(sys.argv[2]):.2f} ms with --offload optimizer")
PY
}
# Generation through llmc-generate (the runtime alone): two prompts of two
# chunks each, greedy, on the GPU with cuBLASLt's heuristic algorithms
# (timing could pick others per process and per operand alignment, which
# the bit-for-bit comparison would read as a difference). The tiny Llama on the GPU against one CPU rank
# (fp32, <= 1e-4); its last three layers streamed against the GPU keeping
# every layer, bit for bit (the same kernels on the same bytes); run on the
# host and split (prefill streamed, decode on the host; also with the
# copies on their own stream) <= 1e-4, their host layers running the CPU's
# kernels; tp=2 on this one GPU (host transport), all on the device and
# split, <= 1e-4.
generate_logits() {  # artifact output [launcher...]
  local artifact=$1 out=$2; shift 2
  local timing=()
  [[ $artifact != *-gpu.llmc ]] || timing=(--no-gemm-timing)
  "$@" "$BIN/llmc-generate" "$A/$artifact" --prompt-tokens 5,9,2,7,11,3 \
    --prompt-tokens 8,1,4,4,2 --max-new-tokens 12 --temperature 0 --quiet "${timing[@]}" \
    --dump-logits "$out"
}
close_logits() {  # reference other tolerance
  local verdict
  verdict=$(python3 "$ROOT/test/e2e/Inputs/close_tensors.py" "$1" "$2" "$3") || return 1
  echo "$(basename "$2") against $(basename "$1"): $verdict"
  [[ $verdict == close* && $verdict != *differs* ]]
}
do_generate() {
  local w=$OUT_DIR/parity/generate form status=0
  rm -rf "$w" && mkdir -p "$w"
  generate_logits gen-cpu.llmc "$w/cpu.out" && generate_logits gen-gpu.llmc "$w/gpu.out" &&
    close_logits "$w/cpu.out" "$w/gpu.out" 1e-4 || return 1
  generate_logits gen-stream-gpu.llmc "$w/stream.out" && cmp "$w/gpu.out" "$w/stream.out" &&
    echo "gen-stream-gpu.llmc: the device's logits bit for bit" || status=1
  for form in host split split-overlap; do
    generate_logits "gen-$form-gpu.llmc" "$w/$form.out" &&
      close_logits "$w/gpu.out" "$w/$form.out" 1e-4 || status=1
  done
  for form in tp2 split-tp2; do
    generate_logits "gen-$form-gpu.llmc" "$w/$form.out" \
      "$ROOT/test/e2e/Inputs/launch_ranks.sh" 2 torchrun "$w/$form-rank" -- | tee "$w/$form.launch" &&
      grep -q '^exit=0' "$w/$form.launch" && close_logits "$w/gpu.out" "$w/$form.out" 1e-4 ||
      status=1
  done
  generate_logits gen-moe-cpu.llmc "$w/moe-cpu.out" &&
    generate_logits gen-moe-ep2-gpu.llmc "$w/moe-ep2.out" \
      "$ROOT/test/e2e/Inputs/launch_ranks.sh" 2 torchrun "$w/moe-ep2-rank" -- |
    tee "$w/moe-ep2.launch" && grep -q '^exit=0' "$w/moe-ep2.launch" &&
    close_logits "$w/moe-cpu.out" "$w/moe-ep2.out" 1e-4 || status=1
  return $status
}
do_resume_on_cpu() {  # the fp32 GPU run's checkpoint, 10 more steps on the CPU
  [[ -d $CK_DIR/fp32 ]] ||
    { echo "skipped: needs parity-fp32's checkpoint (run in the same call)"; return 77; }
  "$BIN/llmc-run" "$A/tiny-cpu.llmc" --steps 60 --resume --ckpt-dir "$CK_DIR/fp32" --quiet
}

# Two ranks, torchrun-style over TCP (NCCL bootstrapped through it), against
# the one-GPU losses of the parity step.
do_two_ranks() {  # name artifact
  ((GPUS >= 2)) || { echo "skipped: $GPUS GPU(s); NCCL needs one GPU per rank"; return 77; }
  [[ -s $OUT_DIR/parity/fp32/gpu.jsonl ]] ||
    { echo "skipped: needs parity-fp32's losses (run in the same call)"; return 77; }
  local w=$OUT_DIR/multigpu/$1
  rm -rf "$w" && mkdir -p "$w"
  "$ROOT/test/e2e/Inputs/launch_ranks.sh" 2 torchrun "$w/rank" -- \
    "$BIN/llmc-run" "$A/$2" --steps 50 --metrics "$w/gpu.jsonl" --quiet | tee "$w/launch.out"
  grep -q '^exit=0' "$w/launch.out" &&
  python3 "$ROOT/test/e2e/Inputs/compare_losses.py" "$w/gpu.jsonl" \
    "$OUT_DIR/parity/fp32/gpu.jsonl" 1e-4
}

# Several ranks on this one GPU through the host transport (NCCL refuses
# that; llmc-run --device-comm auto picks the host when ranks share a GPU):
# 20 steps of a layout against one CPU rank of the same model.
do_shared_gpu() {  # name ranks gpu-artifact cpu-artifact
  local w=$OUT_DIR/shared/$1
  rm -rf "$w" && mkdir -p "$w"
  "$BIN/llmc-run" "$A/$4" --steps 20 --metrics "$w/cpu.jsonl" --quiet &&
  "$ROOT/test/e2e/Inputs/launch_ranks.sh" "$2" torchrun "$w/rank" -- \
    "$BIN/llmc-run" "$A/$3" --steps 20 --metrics "$w/gpu.jsonl" --quiet | tee "$w/launch.out"
  grep -q '^exit=0' "$w/launch.out" &&
  python3 "$ROOT/test/e2e/Inputs/compare_losses.py" "$w/gpu.jsonl" "$w/cpu.jsonl" 1e-4
}

# Failures of ranks sharing the GPU end the job cleanly, as on CPU ranks:
# a killed rank (its peer reports the lost connection, exit 1, within the
# bound), a stopped one (its peer gives up after --comm-timeout) and ranks
# whose programs would issue different collectives (refused at start-up).
do_shared_failures() {
  local w=$OUT_DIR/shared/failures status=0
  rm -rf "$w" && mkdir -p "$w"
  local run=("$BIN/llmc-run" "$A/shared-zero1-dp2-gpu.llmc" --steps 1000000 --log-every 1)
  "$ROOT/test/e2e/Inputs/launch_ranks.sh" 2 torchrun "$w/kill" KILL 1 -- "${run[@]}" |
    tee "$w/kill.out"
  grep -qE '^exit=[1-9][0-9]* elapsed_ok=yes' "$w/kill.out" &&
    grep -q 'lost the connection to rank 1' "$w/kill.0.log" || status=1
  "$ROOT/test/e2e/Inputs/launch_ranks.sh" 2 torchrun "$w/stop" STOP 1 -- "${run[@]}" \
    --comm-timeout 2 | tee "$w/stop.out"
  grep -qE '^exit=[1-9][0-9]* elapsed_ok=yes' "$w/stop.out" &&
    grep -q 'has not completed after 2 s' "$w/stop.0.log" || status=1
  "$ROOT/test/e2e/Inputs/launch_ranks.sh" 2 torchrun "$w/mismatch" -- bash -c \
    'exec "$1" "$2/shared-zero$((RANK == 0 ? 1 : 3))-dp2-gpu.llmc" --steps 2' _ "$BIN/llmc-run" "$A" |
    tee "$w/mismatch.out"
  grep -qE '^exit=[1-9]' "$w/mismatch.out" &&
    grep -q 'would issue different collective sequences' "$w/mismatch.0.log" || status=1
  tail -n 3 "$w"/*.0.log
  return $status
}
do_bench_gpt2() {
  ARTIFACT=$A/gpt2-124M-bf16-gpu.llmc RESULT_JSON=$STEP_DATA BASELINE_FROM=$ROOT/bench/results \
    "$ROOT/bench/gpu_gpt2.sh" "$BUILD" "${BENCH_STEPS:-40}" 16
}
# Device time per kernel over steps 2-3 of the 124M step (llmc-run --profile:
# CUDA events around each launch; under a kernel, the share of its cuBLASLt
# GEMMs). Not --quiet: that would print no table.
do_profile_gpt2() {
  "$BIN/llmc-run" "$A/gpt2-124M-bf16-gpu.llmc" --steps 3 --profile | tee "$OUT_DIR/profile-124M.txt" &&
  python3 - "$OUT_DIR/profile-124M.txt" "$STEP_DATA" <<'PY'
import json, re, sys
rows, last = {}, None
for line in open(sys.argv[1]):
    m = re.match(r"\s+(\S+)\s+([0-9.]+) ms\s+([0-9.]+) %\s+(\d+) calls", line)
    if m:
        last = m.group(1)
        rows[last] = {"ms_per_step": float(m.group(2)) / 2, "calls_per_step": int(m.group(4)) // 2}
    part = re.match(r"\s+\. (.+?)\s+([0-9.]+) ms\s+([0-9.]+) % of it", line)
    if part and last:
        rows[last].setdefault("parts", {})[part.group(1)] = {"ms_per_step": float(part.group(2)) / 2}
json.dump({"steps_timed": 2, "kernels": rows}, open(sys.argv[2], "w"))
PY
}
do_bench_attention() {  # head_dim heads
  RESULT_JSON=$STEP_DATA "$ROOT/bench/attention_gpu.sh" "$BUILD" "$1" "$2"
}
# The fused LM head alone at GPT-2 124M's shape, its vocabulary as it is and
# padded (--vocab-multiple 128), with its GEMMs and row pass timed apart.
do_bench_head() { RESULT_JSON=$STEP_DATA "$ROOT/bench/head_gpu.sh" "$BUILD" 16384 1024; }
# Nsight Compute's device time of every kernel of 2 eager steps of GPT-2
# 124M (llmc-run --profile runs eagerly), cuBLASLt's own kernels by name:
# what the step's profile cannot split, e.g. the LM head's GEMMs against
# its row passes. The summary, one row per kernel name, into ncu.csv.
do_ncu() {
  command -v ncu > /dev/null || { echo "skipped: no ncu on PATH"; return 77; }
  ncu --clock-control none --metrics gpu__time_duration.sum --print-summary per-kernel --csv \
    "$BIN/llmc-run" "$A/gpt2-124M-bf16-gpu.llmc" --steps 2 --profile --quiet \
    > "$OUT_DIR/ncu.csv"
}
# The device's rates for `llmc plan --calibration` (compiler/plan/Calibration.h):
# GEMMs, copy bandwidth, attention and a small kernel's cost.
do_calibrate() {
  "$BIN/llmc-bench-calibrate" -o "$STEP_DATA" && cp "$STEP_DATA" "$OUT_DIR/calibration.json"
}
# Llama 3.2 1B's shape in bf16 (random weights) generating 64 tokens after
# a prompt of 1000: prefill and decode tokens/s with every layer on the
# device and under a 1.5 GiB budget with the layers beyond it streamed, run
# on the host's cores, split.
do_bench_generate() {
  local w=$OUT_DIR/bench-generate form prompt
  rm -rf "$w" && mkdir -p "$w"
  prompt=$(seq -s, 1 1000)
  for form in device stream host split; do
    "$BIN/llmc-generate" "$A/gen-1B-$form-gpu.llmc" --prompt-tokens "$prompt" \
      --max-new-tokens 64 --temperature 0 > /dev/null 2> "$w/$form.err" || return 1
    sed -n "s/^\(prefill\|decode\): */$form \1: /p" "$w/$form.err"
  done
  python3 - "$w" "$STEP_DATA" <<'PY'
import json, re, sys
rates = {}
for form in ("device", "stream", "host", "split"):
    text = open(f"{sys.argv[1]}/{form}.err").read()
    rates[form] = {step: float(re.search(rf"^{step}: .*\(([0-9.]+) tok/s", text, re.M).group(1))
                   for step in ("prefill", "decode")}
json.dump({"model": "llama 1B shape, bf16", "prompt": 1000, "new_tokens": 64,
           "device_memory": "1.5GiB", "tokens_per_s": rates}, open(sys.argv[2], "w"))
PY
}
# The 1.5B shape: fits, step time, tokens/s and MFU (no baseline).
do_bench_1p5b() {  # precision: bf16 or fp8
  local w=$OUT_DIR/bench-1.5B-$1
  rm -rf "$w" && mkdir -p "$w"
  "$BIN/llmc-run" "$A/gpt2-1.5B-$1-gpu.llmc" --steps 15 --metrics "$w/m.jsonl" &&
  python3 - "$w/m.jsonl" "$STEP_DATA" "$1" <<'PY'
import json, sys
precision = sys.argv[3]
ms = sorted(json.loads(l)["ms"] for l in list(open(sys.argv[1]))[5:])
med = ms[len(ms) // 2]
L, C, V, T, B = 48, 1600, 50257, 1024, 8
N = V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C
tps = B * T / med * 1000
mfu = 100 * tps * (6 * N + 6 * L * C * T) / 989e12
print(f"GPT-2 1.5B shape, {precision}, B={B}, T={T}: median step {med:.1f} ms, {tps:.0f} tok/s, "
      f"MFU {mfu:.1f} % of 989 TF/s (bf16's dense peak)")
json.dump({"precision": precision, "batch": B, "seq": T, "median_ms": med, "tokens_per_s": tps,
           "mfu_percent": mfu}, open(sys.argv[2], "w"))
PY
}

export ROOT PACK OUT_DIR BUILD BIN A DEPS JOBS CUDA GPUS NCCL_FLAGS CK_DIR
export -f do_build do_preflight do_conformance_cuda do_conformance_changed do_ctest do_sanitize \
  do_sanitize_run parity_pair do_fp8_tensor_cores do_resume_on_cpu attention_baseline do_attention_variant \
  do_multi_tensor_adamw do_offload do_two_ranks do_shared_gpu do_bench_gpt2 do_profile_gpt2 do_bench_attention \
  do_bench_head do_bench_1p5b do_ncu do_calibrate generate_logits close_logits do_generate \
  do_bench_generate do_shared_failures

{
  echo "commit: $(git -C "$ROOT" rev-parse HEAD 2>/dev/null)"; cat "$PACK/MANIFEST"
  nvidia-smi 2>&1 || true; nvcc --version 2>&1 | tail -2 || true
  echo "nccl: ${NCCL_FLAGS:-from the CUDA toolkit}"; echo "cores: $(nproc)"
} > "$OUT_DIR/env.txt"

# A build carried from another machine (the pack's prebuilt.tar.xz, or a
# build folder) that does not load here is rebuilt in <build>-here, its
# libraries first on the search path.
LIBRARY_PATH_REST=$LD_LIBRARY_PATH
export LD_LIBRARY_PATH=$BUILD/lib:$LIBRARY_PATH_REST
if ! wants build && [[ ! -x $BIN/kernel_tests && -f $PACK/prebuilt.tar.xz ]]; then
  mkdir -p "$BUILD" && tar -C "$BUILD" -xJf "$PACK/prebuilt.tar.xz"
fi
if ! wants build; then
  missing=$(ldd "$BIN/kernel_tests" "$BIN/llmc-run" 2>&1 | grep -E 'not found|No such file' | sort -u)
  if [[ -n $missing ]]; then
    echo "gpu-check: the build in $BUILD does not load here; building afresh in $BUILD-here:" >&2
    echo "$missing" >&2
    BUILD=$BUILD-here
    BIN=$BUILD/bin
    export BUILD BIN LD_LIBRARY_PATH=$BUILD/lib:$LIBRARY_PATH_REST
    if [[ $STEPS == preflight,* ]]; then STEPS=preflight,build,${STEPS#preflight,}; else STEPS=build,$STEPS; fi
  fi
fi
echo "bin: $BIN" >> "$OUT_DIR/env.txt"
# The filter conformance-changed runs; conformance leaves it out when equal.
CHANGED_FILTER=$(cat "$PACK/CHANGED_CUDA_TESTS" 2>/dev/null || true)

run_build() {
  step build 900 do_build
  case $? in
    0) ;;
    77) echo "gpu-check: the budget ran out before the build; nothing else can run" >&2; exit 1 ;;
    *) echo "gpu-check: build failed; see $OUT_DIR/build.log" >&2; exit 1 ;;
  esac
}
run_parity() {
  step parity-fp32 120 parity_pair fp32 tiny-cpu.llmc tiny-gpu.llmc 50 1e-4
  step parity-bf16 120 parity_pair bf16 tiny-bf16-cpu.llmc tiny-bf16-gpu.llmc 50 1e-2
  step parity-dropout 120 parity_pair dropout tiny-dropout-cpu.llmc tiny-dropout-gpu.llmc 20 1e-4
  step parity-fp8 120 parity_pair fp8 tiny-fp8-cpu.llmc tiny-fp8-gpu.llmc 50 1e-2
  step parity-fp8-exact 120 parity_pair fp8-exact tiny-fp8-cpu.llmc tiny-fp8-exact-gpu.llmc 50 1e-2
  step parity-padded 120 parity_pair padded tiny257-cpu.llmc tiny257-gpu.llmc 50 1e-4
  step parity-padded-bf16 120 parity_pair padded-bf16 tiny257-bf16-cpu.llmc tiny257-bf16-gpu.llmc 50 1e-2
  step parity-moe 120 parity_pair moe moe-cpu.llmc moe-gpu.llmc 50 1e-4
  step parity-moe-bf16 120 parity_pair moe-bf16 moe-bf16-cpu.llmc moe-bf16-gpu.llmc 50 1e-2
  step parity-moe-fp8 120 parity_pair moe-fp8 moe-fp8-cpu.llmc moe-fp8-gpu.llmc 50 1e-2
  step parity-moe-fp8-mma 120 do_fp8_tensor_cores moe-fp8-mma moe-fp8-cpu.llmc moe-fp8-gpu.llmc 50 1e-2
  step parity-qwen3-moe 120 parity_pair qwen3-moe qwen3-moe-cpu.llmc qwen3-moe-gpu.llmc 50 1e-4
  step parity-resume-on-cpu 60 do_resume_on_cpu
  step parity-attention-cudnn 150 do_attention_variant cudnn
  step parity-attention-tc 120 do_attention_variant tensor-cores
  step parity-multi-tensor-adamw 60 do_multi_tensor_adamw
  step parity-offload 60 do_offload
  step parity-generate 120 do_generate
}
run_multigpu() {
  step multigpu-dp2 120 do_two_ranks dp2 tiny-dp2-gpu.llmc
  step multigpu-tp2 120 do_two_ranks tp2 tiny-tp2-gpu.llmc
}
run_shared() {
  local layout
  for layout in zero1-dp2:2 zero3-dp2:2 tp2-sp:2 dp2-tp2:4; do
    step "shared-${layout%:*}" 90 do_shared_gpu "${layout%:*}" "${layout#*:}" \
      "shared-${layout%:*}-gpu.llmc" tiny-cpu.llmc
  done
  for layout in pp2:2 pp2-interleaved:2 pp2-dp2:4; do
    step "shared-${layout%:*}" 90 do_shared_gpu "${layout%:*}" "${layout#*:}" \
      "shared-${layout%:*}-gpu.llmc" pipe-cpu.llmc
  done
  for layout in pp2-interleaved-m8:2 pp2-zero-bubble-m8:2; do
    step "shared-${layout%:*}" 90 do_shared_gpu "${layout%:*}" "${layout#*:}" \
      "shared-${layout%:*}-gpu.llmc" pipe8-cpu.llmc
  done
  for layout in ep2:2 dp2-ep2:4; do
    step "shared-moe-${layout%:*}" 90 do_shared_gpu "moe-${layout%:*}" "${layout#*:}" \
      "shared-moe-${layout%:*}-gpu.llmc" moe-cpu.llmc
  done
  step shared-failures 90 do_shared_failures
}
run_bench() {
  step bench-calibrate 120 do_calibrate
  step bench-gpt2-124M 300 do_bench_gpt2
  step profile-124M 90 do_profile_gpt2
  step bench-attention-64 150 do_bench_attention 64 12
  step bench-attention-128 150 do_bench_attention 128 16
  step bench-head 120 do_bench_head
  step bench-gpt2-1.5B 240 do_bench_1p5b bf16
  step bench-gpt2-1.5B-fp8 240 do_bench_1p5b fp8
  step bench-generate-1B 180 do_bench_generate
  # Nsight Compute replays every kernel many times: too slow for --perf,
  # whose profile step splits the step by kernel already.
  ((PERF)) || step bench-ncu-124M 240 do_ncu
}
run_conformance() {
  if wants conformance-changed && [[ $CHANGED_FILTER == "$CUDA_TESTS" ]]; then
    echo "gpu-check: conformance-cuda left out: conformance-changed ran the same tests" >&2
    return
  fi
  step conformance-cuda 300 do_conformance_cuda
}
run_sanitizer() {
  local tool
  step sanitizer-llmc-run 120 do_sanitize_run
  step sanitizer-memcheck "${SANITIZER_LIMIT:-240}" do_sanitize memcheck
  for tool in racecheck synccheck; do
    step "sanitizer-$tool" "${SANITIZER_LIMIT:-240}" do_sanitize "$tool"
  done
}

for group in ${STEPS//,/ }; do
  case $group in
    preflight) step preflight 90 do_preflight ;;
    build) run_build ;;
    conformance-changed) [[ $CUDA == OFF ]] || step conformance-changed 300 do_conformance_changed ;;
    conformance) [[ $CUDA == OFF ]] || run_conformance ;;
    ctest) step ctest 300 do_ctest ;;
    *) "run_$group" ;;
  esac
done
echo "gpu-check: logs in $OUT_DIR" >&2
cat "$SUMMARY"
exit $FAILED
