#!/usr/bin/env bash
# Step time with and without --overlap-comm on CPU ranks: dp=2 ZeRO-3 (the
# parameter gathers and gradient reduce-scatters on the communication
# stream, gathers prefetched a block ahead) and dp=2 with gradient buckets
# (each bucket's all-reduce beside the backward of the layers before it).
# Both variants run the same model on the same ranks; each is run ROUNDS
# times, alternating, and the median step time (after the first 3 steps)
# of each round is kept; the table prints the median and the best round
# of each variant and their ratios (the best round is the one least
# disturbed by other load on a shared machine). One OpenMP thread per rank, so the communication thread has the
# rest of a core to run in when the machine has one; MPI yields while it
# waits (OMPI_MCA_mpi_yield_when_idle=1).
#
# Usage: [ROUNDS=n] [RANKS=n] bench/overlap_cpu.sh [build-dir] [steps]   (default 20 steps)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
STEPS=${2:-20}
ROUNDS=${ROUNDS:-3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
export OMP_NUM_THREADS=1

MODEL=(--model gpt2 --preset tiny --set n_layer=4 --set n_embd=256 --set n_head=4 --set n_kv_head=4
       --set seq_len=128 --set batch_size=8 --set vocab_size=4096)
# name | llmc compile flags
LAYOUTS=(
  "dp=2 ZeRO-3|--mesh dp=2 --zero 3"
  "dp=2, 1 MiB gradient buckets|--mesh dp=2 --grad-bucket-mb 1"
)

median_ms() { # <metrics.jsonl>: median step time after the first 3 steps
  python3 - "$1" <<'PY'
import json, statistics, sys
ms = [json.loads(l)["ms"] for l in open(sys.argv[1]) if l.strip()][3:]
print(f"{statistics.median(ms):.2f}")
PY
}

echo "# $(date -u +%Y-%m-%d), $(getconf _NPROCESSORS_ONLN) cores, ${STEPS} steps x ${ROUNDS} rounds per variant"
printf '%-30s %10s %10s %7s %10s %10s %7s\n' layout "plain ms" "overlap ms" ratio \
  "best pl." "best ov." ratio
for layout in "${LAYOUTS[@]}"; do
  IFS='|' read -r name flags <<< "$layout"
  # shellcheck disable=SC2086
  "$BUILD/bin/llmc" compile "${MODEL[@]}" $flags -o "$WORK/plain.llmc"
  # shellcheck disable=SC2086
  "$BUILD/bin/llmc" compile "${MODEL[@]}" $flags --overlap-comm -o "$WORK/overlap.llmc"
  declare -A times=([plain]="" [overlap]="")
  for ((r = 0; r < ROUNDS; ++r)); do
    for variant in plain overlap; do
      mpirun -np "${RANKS:-2}" --bind-to none "$BUILD/bin/llmc-run" "$WORK/$variant.llmc" \
        --steps "$STEPS" --metrics "$WORK/$variant.jsonl" --quiet
      times[$variant]+="$(median_ms "$WORK/$variant.jsonl") "
    done
  done
  python3 - "$name" "${times[plain]}" "${times[overlap]}" <<'PY'
import statistics, sys
name, plain, overlap = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
p, o = statistics.median(map(float, plain)), statistics.median(map(float, overlap))
bp, bo = min(map(float, plain)), min(map(float, overlap))
print(f"{name:<30} {p:10.2f} {o:10.2f} {o / p:7.3f} {bp:10.2f} {bo:10.2f} {bo / bp:7.3f}")
print(f"  rounds: plain {' '.join(plain)}; overlap {' '.join(overlap)}")
PY
done
