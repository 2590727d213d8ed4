#!/usr/bin/env bash
# How far bf16 training strays from fp32, with bf16 and with fp32 gradients
# (--grad-dtype). Trains the tiny GPT-2 of the parity matrix (2 layers,
# d = 128, 8 rows of 32 tokens per step) for STEPS steps in fp32 on one
# rank, then in bf16 with each gradient type on one rank and on several
# layouts, and prints the mean and max relative deviation of each run's
# per-step losses from the fp32 run's. fp32 on the same layouts gives the
# floor (reduction order alone). A second table sets each layout's bf16 run
# beside the one-rank bf16 run with the same gradient type: how far the
# layout alone (microbatch sums, reductions over ranks) moves bf16 training,
# which is what the parity matrix's gpt2-bf16 family bounds.
#
# Usage: [SEED=n] bench/grad_dtype.sh [build-dir] [steps]   (default 200 steps)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
STEPS=${2:-200}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
# One thread per rank: the runs differ by their numerics, not thread counts.
export OMP_NUM_THREADS=1

MODEL=(--model gpt2 --preset tiny --set n_layer=2 --set seq_len=32 --steps "$STEPS"
       --seed "${SEED:-1337}")
# name | ranks | flags (each layout consumes the same 8 rows per step)
LAYOUTS=(
  "one rank|1|--set batch_size=8"
  "one rank, 4 microbatches|1|--set batch_size=2 --microbatches 4"
  "one rank, 8 microbatches|1|--set batch_size=1 --microbatches 8"
  "dp=2 ZeRO-1, 4 microbatches|2|--set batch_size=2 --microbatches 4 --mesh dp=2 --zero 1"
  "dp=2 ZeRO-2, 4 microbatches|2|--set batch_size=2 --microbatches 4 --mesh dp=2 --zero 2"
  "dp=2 ZeRO-3|2|--set batch_size=8 --mesh dp=2 --zero 3"
)

run() { # <out.jsonl> <ranks> <llmc compile flags...>
  local out=$1 ranks=$2
  shift 2
  "$BUILD/bin/llmc" compile "${MODEL[@]}" "$@" -o "$out.llmc"
  if [[ $ranks == 1 ]]; then
    "$BUILD/bin/llmc-run" "$out.llmc" --steps "$STEPS" --metrics "$out" --quiet
  else
    mpirun -np "$ranks" --bind-to none "$BUILD/bin/llmc-run" "$out.llmc" --steps "$STEPS" \
      --metrics "$out" --quiet
  fi
}

run "$WORK/fp32.jsonl" 1 --set batch_size=8
rows=()
for i in "${!LAYOUTS[@]}"; do
  IFS='|' read -r name ranks flags <<< "${LAYOUTS[$i]}"
  # shellcheck disable=SC2086
  {
    [[ $i == 0 ]] || run "$WORK/$i-fp32.jsonl" "$ranks" $flags
    run "$WORK/$i-bf16.jsonl" "$ranks" $flags --precision bf16 --grad-dtype bf16
    run "$WORK/$i-fp32grads.jsonl" "$ranks" $flags --precision bf16 --grad-dtype fp32
  }
  rows+=("$name|$i")
done

python3 - "$WORK" "$STEPS" "${rows[@]}" <<'PY'
import json, sys
work, steps, rows = sys.argv[1], int(sys.argv[2]), sys.argv[3:]

def losses(path):
    by_step = {}
    for line in open(path):
        record = json.loads(line)
        if "loss" in record and "step" in record:
            by_step[record["step"]] = record["loss"]
    return [by_step[s] for s in sorted(by_step)]

ref = losses(f"{work}/fp32.jsonl")
assert len(ref) == steps, f"fp32 run logged {len(ref)} of {steps} steps"

def deviation(path, ref=ref):
    run = losses(path)
    assert len(run) == len(ref), f"{path}: {len(run)} steps, fp32 {len(ref)}"
    rel = [abs(a - b) / abs(b) for a, b in zip(run, ref)]
    return sum(rel) / len(rel), max(rel)

fmt = lambda d: f"{d[0]:.2e} / {d[1]:.2e}"
print(f"relative deviation of per-step losses from fp32 on one rank, {steps} steps (mean / max)")
print("| layout | fp32 (floor) | bf16, bf16 gradients | bf16, fp32 gradients |")
print("| --- | ---: | ---: | ---: |")
for row in rows:
    name, i = row.split("|")
    floor = "0 (the reference)" if i == "0" else fmt(deviation(f"{work}/{i}-fp32.jsonl"))
    print(f"| {name} | {floor} | {fmt(deviation(f'{work}/{i}-bf16.jsonl'))} | "
          f"{fmt(deviation(f'{work}/{i}-fp32grads.jsonl'))} |")
print()
print(f"relative deviation of per-step losses from one rank's bf16 run with the same "
      f"gradient type, {steps} steps (mean / max)")
print("| layout | bf16 gradients | fp32 gradients |")
print("| --- | ---: | ---: |")
one = {kind: losses(f"{work}/0-{kind}.jsonl") for kind in ("bf16", "fp32grads")}
for row in rows[1:]:
    name, i = row.split("|")
    print(f"| {name} | " + " | ".join(
        fmt(deviation(f"{work}/{i}-{kind}.jsonl", one[kind])) for kind in ("bf16", "fp32grads"))
        + " |")
PY
