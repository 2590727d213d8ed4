//===- Gelu.cuh - the tanh GELU of gelu and linear (private) --------------===//
//
// One formula for the gelu kernel (activation.cu) and linear's elementwise
// epilogue (linear.cu): kernels/cpu's, with the same constants and order
// of operations, through 1 + tanh(u) = 2·σ(2u). σ uses the accurate expf
// (not __expf), so results stay within a few ulp of the CPU's.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CUDA_GELU_CUH
#define LLMC_KERNELS_CUDA_GELU_CUH

namespace llmc::cuda {

/// u = kGeluC·(x + kGeluA·x³).
constexpr float kGeluC = 0.7978845608028654f; // √(2/π)
constexpr float kGeluA = 0.044715f;

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

/// GELU, tanh approximation, as x·σ(2u).
__device__ __forceinline__ float geluTanh(float x) {
  float u = kGeluC * (x + kGeluA * x * x * x);
  return x * sigmoid(2.0f * u);
}

} // namespace llmc::cuda

#endif
