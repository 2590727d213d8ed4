#!/usr/bin/env bash
# Prepares, on a machine with the full build, everything a GPU machine needs
# that it cannot make itself: it has nvcc, CMake and PyTorch but no MLIR (so
# no llmc compiler), no MPI and no system packages. Writes <pack>:
#
#   artifacts/  every program scripts/gpu-check.sh runs, compiled here with
#               --target cuda (and the CPU twins of the parity runs);
#               programs only: weights are initialised by llmc-run
#   deps/       what the runtime-only build (-DLLMC_RUNTIME_ONLY=ON
#               -DLLMC_DEPS_DIR=<pack>/deps) finds there instead of the
#               system: FlatBuffers and Gloo headers, cblas.h, Gloo and the
#               libraries it loads, GoogleTest sources, the artifact schema's
#               generated header (no flatc there), and OpenBLAS with its
#               Fortran runtime as blas.tar.xz (36 MiB unpacked; the CPU
#               kernels, which the conformance tests compare against, dlopen it);
#               cudnn-frontend's headers (cudnn-frontend/include, from
#               scripts/setup-cudnn-frontend.sh: no downloads there) and the
#               toolkit's cuDNN headers (cudnn/include), so the build there
#               compiles cuDNN attention (libcudnn itself is loaded at run time
#               from the toolkit or PyTorch's wheel)
#   MANIFEST    the commit and what each artifact is
#   CHANGED_CUDA_TESTS  a gtest filter: the CUDA kernel tests that the change
#               since the newest lease in bench/results/ can affect
#
#   prebuilt.tar.xz  the runtime-only CUDA build for sm_90 made here (in
#               <repo>/build-gpu, or PREBUILT_DIR), its bin/ and shared
#               libraries, so that the GPU machine, with the same CUDA
#               toolkit, skips the build (about 9 MiB); PREBUILT=0 leaves it
#               out, and the GPU machine then builds within its lease
#
# The libraries come from Debian 12 (glibc 2.36), old enough to load on the
# GPU image. Usage: scripts/gpu-pack.sh [pack-dir] (default <repo>/gpu-pack);
# BUILD_DIR names the full build whose bin/llmc compiles (default <repo>/build).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PACK=${1:-$ROOT/gpu-pack}
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
LLMC=$BUILD_DIR/bin/llmc
[[ -x $LLMC ]] || { echo "gpu-pack: $LLMC not found; build the project first (or set BUILD_DIR)" >&2; exit 1; }

rm -rf "$PACK"
mkdir -p "$PACK"/artifacts "$PACK"/deps/{include,lib,generated}
A=$PACK/artifacts

# ---- Artifacts ----------------------------------------------------------------
# The parity runs of test/e2e/cuda-train.test: fp32, bf16, dropout; CPU and GPU.
TINY=(--model gpt2 --preset tiny --set n_layer=2)
"$LLMC" compile "${TINY[@]}" -o "$A/tiny-cpu.llmc"
"$LLMC" compile "${TINY[@]}" --target cuda -o "$A/tiny-gpu.llmc"
"$LLMC" compile "${TINY[@]}" --precision bf16 -o "$A/tiny-bf16-cpu.llmc"
"$LLMC" compile "${TINY[@]}" --precision bf16 --target cuda -o "$A/tiny-bf16-gpu.llmc"
# fp8 training: the blocks' linear layers as fp8 GEMMs (cuBLASLt on the GPU,
# the fp32 reference GEMM on the CPU); on the GPU with the forward's fast
# accumulation (the default) and without.
"$LLMC" compile "${TINY[@]}" --precision fp8 -o "$A/tiny-fp8-cpu.llmc"
"$LLMC" compile "${TINY[@]}" --precision fp8 --target cuda -o "$A/tiny-fp8-gpu.llmc"
"$LLMC" compile "${TINY[@]}" --precision fp8 --fp8-fast-accumulation none --target cuda \
  -o "$A/tiny-fp8-exact-gpu.llmc"
"$LLMC" compile "${TINY[@]}" --set dropout=0.1 -o "$A/tiny-dropout-cpu.llmc"
"$LLMC" compile "${TINY[@]}" --set dropout=0.1 --target cuda -o "$A/tiny-dropout-gpu.llmc"
# A vocabulary of 257: the GPU artifacts pad it to 384 (--target cuda's
# --vocab-multiple 128), the CPU ones keep 257; fp32 and bf16 in several
# chunks of the head (its weight gradient summed in fp32).
TINY257=("${TINY[@]}" --set vocab_size=257)
"$LLMC" compile "${TINY257[@]}" -o "$A/tiny257-cpu.llmc"
"$LLMC" compile "${TINY257[@]}" --target cuda -o "$A/tiny257-gpu.llmc"
"$LLMC" compile "${TINY257[@]}" --precision bf16 --fuse-chunk-mb 0.1 -o "$A/tiny257-bf16-cpu.llmc"
"$LLMC" compile "${TINY257[@]}" --precision bf16 --fuse-chunk-mb 0.1 --target cuda \
  -o "$A/tiny257-bf16-gpu.llmc"
# A mixture of experts (Mixtral tiny, 2 layers): routing, dispatch, the
# grouped GEMMs and the router losses on the GPU against one CPU rank, fp32
# and bf16; and fp8 (the experts' products on fp8 codes, on bf16 or, with
# LLMC_CUDA_FP8_MMA=1, fp8 tensor cores).
MOE=(--model mixtral --preset tiny --set n_layer=2 --set router_z_loss_coef=0.001)
"$LLMC" compile "${MOE[@]}" -o "$A/moe-cpu.llmc"
"$LLMC" compile "${MOE[@]}" --target cuda -o "$A/moe-gpu.llmc"
"$LLMC" compile "${MOE[@]}" --precision bf16 -o "$A/moe-bf16-cpu.llmc"
"$LLMC" compile "${MOE[@]}" --precision bf16 --target cuda -o "$A/moe-bf16-gpu.llmc"
"$LLMC" compile "${MOE[@]}" --precision fp8 -o "$A/moe-fp8-cpu.llmc"
"$LLMC" compile "${MOE[@]}" --precision fp8 --target cuda -o "$A/moe-fp8-gpu.llmc"
# Qwen3-MoE (tiny, 2 layers): per-head q/k norms, heads 48 wide (not
# n_embd / n_head), routed experts without a shared expert, fp32.
QWEN3MOE=(--model qwen3_moe --preset tiny --set n_layer=2 --set router_z_loss_coef=0.001)
"$LLMC" compile "${QWEN3MOE[@]}" -o "$A/qwen3-moe-cpu.llmc"
"$LLMC" compile "${QWEN3MOE[@]}" --target cuda -o "$A/qwen3-moe-gpu.llmc"
# Expert parallelism on the one GPU (host-staged all-to-alls): each rank
# keeps half the experts, against moe-cpu.llmc.
for layout in "ep2|--mesh ep=2" "dp2-ep2|--mesh dp=2,ep=2"; do
  "$LLMC" compile "${MOE[@]}" ${layout#*|} --target cuda -o "$A/shared-moe-${layout%%|*}-gpu.llmc"
done
# bf16 with every fusion but multi-tensor-adamw: per-tensor adamw and casts.
"$LLMC" compile "${TINY[@]}" --precision bf16 --target cuda --fuse \
  add-norm,bias,bias-gelu,bias-grad,elementwise,gelu-grad,linear-cross-entropy,qkv-split,residual,rope,swiglu-grad \
  -o "$A/tiny-bf16-per-tensor-gpu.llmc"
# ZeRO-Offload: the bf16 optimizer state in pinned host memory, the update
# on the host, against tiny-bf16-gpu.llmc.
"$LLMC" compile "${TINY[@]}" --precision bf16 --target cuda --offload optimizer \
  -o "$A/tiny-bf16-offload-gpu.llmc"
# Two ranks over NCCL (one GPU each): data and tensor parallel.
"$LLMC" compile "${TINY[@]}" --mesh dp=2 --target cuda -o "$A/tiny-dp2-gpu.llmc"
"$LLMC" compile "${TINY[@]}" --mesh tp=2 --target cuda -o "$A/tiny-tp2-gpu.llmc"
# Several ranks on the one GPU (host-staged communication, llmc-run
# --device-comm): layouts against one CPU rank; pipelines on 4 layers in 2
# microbatches, and in 8 under the schedules whose transfers need the two
# channels' streams (docs/cuda.md, "Pipeline transfers").
for layout in "zero1-dp2|--mesh dp=2 --zero 1" "zero3-dp2|--mesh dp=2 --zero 3" \
              "tp2-sp|--mesh tp=2 --sp" "dp2-tp2|--mesh dp=2,tp=2"; do
  "$LLMC" compile "${TINY[@]}" ${layout#*|} --target cuda -o "$A/shared-${layout%%|*}-gpu.llmc"
done
PIPE=(--model gpt2 --preset tiny --set n_layer=4 --set batch_size=4 --microbatches 2)
"$LLMC" compile "${PIPE[@]}" -o "$A/pipe-cpu.llmc"
for layout in "pp2|--mesh pp=2" "pp2-interleaved|--mesh pp=2 --pipeline-schedule interleaved --virtual-stages 2" \
              "pp2-dp2|--mesh pp=2,dp=2"; do
  "$LLMC" compile "${PIPE[@]}" ${layout#*|} --target cuda -o "$A/shared-${layout%%|*}-gpu.llmc"
done
PIPE8=(--model gpt2 --preset tiny --set n_layer=4 --set batch_size=8 --microbatches 8)
"$LLMC" compile "${PIPE8[@]}" -o "$A/pipe8-cpu.llmc"
for layout in "pp2-interleaved-m8|--mesh pp=2 --pipeline-schedule interleaved --virtual-stages 2" \
              "pp2-zero-bubble-m8|--mesh pp=2 --pipeline-schedule zero-bubble"; do
  "$LLMC" compile "${PIPE8[@]}" ${layout#*|} --target cuda -o "$A/shared-${layout%%|*}-gpu.llmc"
done
# Generation (llmc-generate): a tiny Llama with every layer on the device,
# its CPU twin, and under a budget its last three layers streamed, run on
# the host, split (streamed for prefill, on the host for decode; also with
# the copies on their own stream, and under tp=2 on two ranks); prompts of
# two chunks, so the second reads the keys the first wrote.
GEN=(--model llama --preset tiny --set n_layer=4 --inference max-batch=2,max-context=64,chunk=4)
"$LLMC" compile "${GEN[@]}" -o "$A/gen-cpu.llmc"
"$LLMC" compile "${GEN[@]}" --target cuda -o "$A/gen-gpu.llmc"
for form in stream host split; do
  "$LLMC" compile "${GEN[@]}" --target cuda --device-memory 3300KiB --offloaded-layers $form \
    -o "$A/gen-$form-gpu.llmc"
done
"$LLMC" compile "${GEN[@]}" --target cuda --device-memory 3300KiB --offloaded-layers split \
  --overlap-comm -o "$A/gen-split-overlap-gpu.llmc"
"$LLMC" compile "${GEN[@]}" --mesh tp=2 --target cuda -o "$A/gen-tp2-gpu.llmc"
"$LLMC" compile "${GEN[@]}" --mesh tp=2 --target cuda --device-memory 1500KiB \
  --offloaded-layers split -o "$A/gen-split-tp2-gpu.llmc"
# A tiny Mixtral's generation under ep=2 (each rank its experts, the
# partial outputs all-reduced) against its CPU twin.
GENMOE=(--model mixtral --preset tiny --set n_layer=2 --inference max-batch=2,max-context=64,chunk=4)
"$LLMC" compile "${GENMOE[@]}" -o "$A/gen-moe-cpu.llmc"
"$LLMC" compile "${GENMOE[@]}" --mesh ep=2 --target cuda -o "$A/gen-moe-ep2-gpu.llmc"
# Llama 3.2 1B's shape in bf16 (random weights): every layer on the device,
# and each form under a 1.5 GiB budget, copies on their own stream.
GEN1B=(--model llama --preset 1B --precision bf16 --target cuda
       --inference max-batch=1,max-context=2048,chunk=512)
"$LLMC" compile "${GEN1B[@]}" -o "$A/gen-1B-device-gpu.llmc"
for form in stream host split; do
  "$LLMC" compile "${GEN1B[@]}" --device-memory 1.5GiB --offloaded-layers $form --overlap-comm \
    -o "$A/gen-1B-$form-gpu.llmc"
done
# The benchmarks: GPT-2 124M as bench/gpu_gpt2.sh compiles it, and the
# 1.5B shape (48 layers, C = 1600; about 40 GiB planned at B = 8).
"$LLMC" compile --model gpt2 --preset 124M --precision bf16 --target cuda \
  --set batch_size=16 --set seq_len=1024 -o "$A/gpt2-124M-bf16-gpu.llmc"
for precision in bf16 fp8; do
  "$LLMC" compile --model gpt2 --preset 1.5B --precision $precision --target cuda \
    --set batch_size=8 --set seq_len=1024 -o "$A/gpt2-1.5B-$precision-gpu.llmc"
done

# ---- Dependencies -------------------------------------------------------------
D=$PACK/deps
cp -r /usr/include/flatbuffers /usr/include/gloo "$D/include/"
cp /usr/include/x86_64-linux-gnu/openblas-pthread/{cblas.h,openblas_config.h} "$D/include/"
# Real files under both the link name and the soname: links may not travel.
cp -L /usr/lib/libgloo.so.0 "$D/lib/libgloo.so"
cp -L /usr/lib/libgloo.so.0 "$D/lib/libgloo.so.0"
LIBDIR=/usr/lib/x86_64-linux-gnu
for so in libhiredis.so.0.14 libibverbs.so.1 libnl-route-3.so.200 libnl-3.so.200; do
  cp -L "$LIBDIR/$so" "$D/lib/$so"
done
BLAS_TMP=$(mktemp -d)
trap 'rm -rf "$BLAS_TMP"' EXIT
cp -L "$LIBDIR/openblas-pthread/libopenblas.so.0" "$LIBDIR/libgfortran.so.5" \
  "$LIBDIR/libquadmath.so.0" "$BLAS_TMP/"
tar -C "$BLAS_TMP" -cf - libopenblas.so.0 libgfortran.so.5 libquadmath.so.0 |
  xz -T1 -6 > "$D/blas.tar.xz"
# cuDNN attention's headers: cudnn-frontend's (fetched once here) and the
# toolkit's cudnn*.h, in case the GPU machine's toolkit lacks them.
BUILD_DIR=$BUILD_DIR "$ROOT/scripts/setup-cudnn-frontend.sh" >&2
if [[ -f $BUILD_DIR/deps/cudnn-frontend/include/cudnn_frontend.h ]]; then
  mkdir -p "$D/cudnn-frontend"
  cp -r "$BUILD_DIR/deps/cudnn-frontend/include" "$BUILD_DIR/deps/cudnn-frontend/VERSION" \
    "$D/cudnn-frontend/"
else
  echo "gpu-pack: no cudnn-frontend headers; the GPU build will run attention on llmc's kernels" >&2
fi
if compgen -G "/usr/local/cuda/include/cudnn*.h" > /dev/null; then
  mkdir -p "$D/cudnn/include"
  cp /usr/local/cuda/include/cudnn*.h "$D/cudnn/include/"
fi
# GoogleTest, built from source there (gmock, docs and samples left out).
mkdir -p "$D/googletest/googletest"
cp /usr/src/googletest/CMakeLists.txt "$D/googletest/"
cp -r /usr/src/googletest/googletest/{CMakeLists.txt,cmake,include,src} "$D/googletest/googletest/"
# The schema's generated header, and the hash of the schema it came from
# (CMake refuses a header generated from another schema).
flatc --cpp --scoped-enums --gen-mutable -o "$D/generated" "$ROOT/common/schema/artifact.fbs"
sha256sum "$ROOT/common/schema/artifact.fbs" | cut -d' ' -f1 > "$D/generated/artifact.fbs.sha256"

if [[ ${PREBUILT:-1} == 1 ]]; then
  PB=${PREBUILT_DIR:-$ROOT/build-gpu}
  tar -C "$D/lib" -xJf "$D/blas.tar.xz"   # linked against; not packed twice
  cmake -S "$ROOT" -B "$PB" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLMC_RUNTIME_ONLY=ON \
    -DLLMC_DEPS_DIR="$D" -DLLMC_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON -DCMAKE_POLICY_VERSION_MINIMUM=3.5 > /dev/null
  cmake --build "$PB"
  rm -f "$D"/lib/{libopenblas.so.0,libgfortran.so.5,libquadmath.so.0}
  tar -C "$PB" -cf - bin lib/libllmc_kernels.so lib/libllmc_runtime.so lib/fake-cudnn |
    xz -T2 -3 > "$PACK/prebuilt.tar.xz"
fi

# The CUDA kernel tests the change since the last lease in bench/results/
# can affect (gpu-check.sh's conformance-changed step).
python3 "$ROOT/bench/gpu_changed_tests.py" > "$PACK/CHANGED_CUDA_TESTS"

{
  echo "commit $(git -C "$ROOT" rev-parse HEAD)$(git -C "$ROOT" diff --quiet HEAD || echo ' (with local changes)')"
  echo "made   $(date -u +%Y-%m-%dT%H:%MZ)"
  for f in "$A"/*.llmc; do
    echo "$(basename "$f"): $("$BUILD_DIR/bin/llmc" inspect "$f" | sed -n 's/^model: *//p') |" \
         "$("$BUILD_DIR/bin/llmc" inspect "$f" | sed -n 's/^backend: *//p')"
  done
  [[ -f $PACK/prebuilt.tar.xz ]] && echo "prebuilt.tar.xz: runtime-only CUDA build, sm_90, $(/usr/local/cuda/bin/nvcc --version | tail -1)"
  [[ -f $D/cudnn-frontend/VERSION ]] && echo "cudnn-frontend: $(cat "$D/cudnn-frontend/VERSION") headers"
} > "$PACK/MANIFEST"
echo "gpu-pack: $(du -sh "$PACK" | cut -f1) in $PACK"
