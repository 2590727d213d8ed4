#!/usr/bin/env bash
# The artifact fuzz driver under AddressSanitizer and UndefinedBehaviorSanitizer:
# builds a sanitized runtime and driver (no CUDA) in <work>/build, compiles
# seed artifacts with the regular build's llmc, and runs mutants of each.
# Any sanitizer report aborts with a non-zero status.
#
# That build is also the CI check of the runtime-only configuration a GPU
# machine uses (docs/cuda.md): -DLLMC_RUNTIME_ONLY=ON, with MLIR and MPI
# unreachable; its llmc-run trains a few steps and refuses an mpirun launch.
#
#   scripts/fuzz-artifact-asan.sh <bin dir> <work dir> [iterations]
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=$1; WORK=$2; ITERATIONS=${3:-2000}
mkdir -p "$WORK"
SANITIZE="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
cmake -S "$ROOT" -B "$WORK/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DLLMC_ENABLE_CUDA=OFF -DLLMC_RUNTIME_ONLY=ON -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_MLIR=ON -DCMAKE_CXX_FLAGS="$SANITIZE" -DCMAKE_C_FLAGS="$SANITIZE" \
  -DCMAKE_EXE_LINKER_FLAGS="$SANITIZE" -DCMAKE_SHARED_LINKER_FLAGS="$SANITIZE" > "$WORK/configure.log"
cmake --build "$WORK/build" --target llmc-fuzz-artifact llmc-run -j "${JOBS:-$(nproc)}" > "$WORK/build.log"
"$BIN/llmc" compile --model gpt2 --preset tiny --set n_layer=1 --set batch_size=2 --set seq_len=16 \
  -o "$WORK/gpt2.llmc"
"$BIN/llmc" compile --model llama --preset tiny --set n_layer=1 --set batch_size=2 --set seq_len=16 \
  --precision bf16 --microbatches 2 -o "$WORK/llama.llmc"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export OMP_NUM_THREADS=1
"$WORK/build/bin/llmc-run" "$WORK/gpt2.llmc" --steps 3 --quiet --ckpt-dir "$WORK/ck"
if OMPI_COMM_WORLD_SIZE=2 "$WORK/build/bin/llmc-run" "$WORK/gpt2.llmc" --steps 1 \
     > "$WORK/mpirun.log" 2>&1 || ! grep -q "no MPI support" "$WORK/mpirun.log"; then
  echo "runtime-only build without MPI: an mpirun launch was not refused" >&2
  cat "$WORK/mpirun.log" >&2
  exit 1
fi
for seed in gpt2 llama; do
  "$WORK/build/bin/llmc-fuzz-artifact" "$WORK/$seed.llmc" --iterations "$ITERATIONS" --seed 11 \
    --run-every 25
done
