//===- Common.cuh - helpers shared by the CUDA kernels (private) ----------===//
//
// What every CUDA kernel file needs and nothing more:
//  - LLMC_CUDA_CHECK, used after every launch and runtime call, so a bad
//    launch names its file and line instead of surfacing steps later;
//  - the stream a kernel runs on (StepContext::stream, the default stream
//    when none is given, as in the tests);
//  - bf16 and f16 as storage with fp32 arithmetic: load/store widen and
//    narrow, so one template body serves every float dtype, as on the CPU;
//  - launch geometry (grid-stride loops, the opt-in to more than 48 KB of
//    dynamic shared memory) and warp/block reductions.
//
// Binding-time checks use the backend-neutral Validator, so both backends
// report the same one-line errors.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CUDA_COMMON_CUH
#define LLMC_KERNELS_CUDA_COMMON_CUH

#include "kernels/DtypeDispatch.h"
#include "kernels/Kernel.h"
#include "kernels/Validator.h"
#include "kernels/cuda/Device.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#define LLMC_CUDA_CHECK(expr) ::llmc::cuda::check((expr), #expr, __FILE__, __LINE__)
/// After a <<<launch>>>: reports a bad configuration at once.
#define LLMC_CUDA_CHECK_LAUNCH() LLMC_CUDA_CHECK(cudaGetLastError())

namespace llmc::cuda {

using bf16 = __nv_bfloat16;
using f16 = __half;

inline cudaStream_t streamOf(const StepContext &ctx) {
  return static_cast<cudaStream_t>(ctx.stream);
}

//===----------------------------------------------------------------------===//
// Element types
//===----------------------------------------------------------------------===//

__device__ __forceinline__ float load(const float *p, int64_t i) { return p[i]; }
__device__ __forceinline__ float load(const bf16 *p, int64_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void store(float *p, int64_t i, float v) { p[i] = v; }
/// Round to nearest even, like floatToBf16 on the host.
__device__ __forceinline__ void store(bf16 *p, int64_t i, float v) { p[i] = __float2bfloat16_rn(v); }
__device__ __forceinline__ float load(const f16 *p, int64_t i) { return __half2float(p[i]); }
/// Round to nearest even, like half::fromFloat on the host.
__device__ __forceinline__ void store(f16 *p, int64_t i, float v) { p[i] = __float2half_rn(v); }

template <typename T> constexpr DType dtypeOf();
template <> constexpr DType dtypeOf<float>() { return DType::F32; }
template <> constexpr DType dtypeOf<bf16>() { return DType::BF16; }
template <> constexpr DType dtypeOf<f16>() { return DType::F16; }

/// This backend's storage types, for dispatchFloat (kernels/DtypeDispatch.h).
using FloatTypes = FloatStorage<float, bf16, f16>;

/// Instantiates `K<float>`, `K<bf16>` or `K<f16>` for a float dtype.
template <template <typename> class K, typename... Args>
std::unique_ptr<Kernel> makeFloatKernel(DType dtype, Args &&...args) {
  return makeFloatKernelFor<FloatTypes, K>(dtype, std::forward<Args>(args)...);
}

//===----------------------------------------------------------------------===//
// Launch geometry
//===----------------------------------------------------------------------===//

constexpr int kBlock = 256;

/// Blocks for a grid-stride loop over n elements: enough to fill the GPU,
/// never more than the elements need, never zero.
inline int gridFor(int64_t n, int block = kBlock) {
  int64_t blocks = (n + block - 1) / block;
  if (blocks < 1) blocks = 1;
  return static_cast<int>(blocks < 65535 * 8 ? blocks : 65535 * 8);
}

/// for (i = global thread; i < n; i += all threads)
#define LLMC_GRID_STRIDE(i, n)                                                    \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;  \
       i < (n); i += static_cast<int64_t>(gridDim.x) * blockDim.x)

/// Lets `fn` use `bytes` of dynamic shared memory (beyond the 48 KB
/// default), or explains why the device cannot (the attention kernels size
/// theirs by the head dim).
inline bool allowSmem(Validator &v, const void *fn, size_t bytes) {
  int device = 0, limit = 0;
  LLMC_CUDA_CHECK(cudaGetDevice(&device));
  LLMC_CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (bytes > static_cast<size_t>(limit))
    return v.fail("head dim needs " + std::to_string(bytes) +
                  " bytes of shared memory per block, the device allows " + std::to_string(limit));
  LLMC_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(bytes)));
  return true;
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// Sum over a warp (float, double or long long); every lane gets it, summed
/// in the same order on every lane and every run.
template <typename T> __device__ __forceinline__ T warpSum(T v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warpMax(float v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

/// Sum over the whole block (blockDim.x a multiple of 32, at most 1024) in
/// a fixed order; every thread gets the result. `shared` holds 32 values;
/// the function synchronises, so it may be called repeatedly with the same
/// buffer.
template <typename T> __device__ __forceinline__ T blockSum(T v, T *shared) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warpSum(v);
  __syncthreads(); // a previous call may still be reading `shared`
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  int warps = (blockDim.x + 31) >> 5;
  v = lane < warps ? shared[lane] : T(0);
  return warpSum(v);
}

/// Maximum over the whole block; same contract as blockSum.
__device__ __forceinline__ float blockMax(float v, float *shared) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warpMax(v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  int warps = (blockDim.x + 31) >> 5;
  v = lane < warps ? shared[lane] : -INFINITY;
  return warpMax(v);
}

} // namespace llmc::cuda

#endif
