//===- Gelu.cuh - the activations' formulas (private) ---------------------===//
//
// One formula per activation for the activation kernels (activation.cu),
// linear's elementwise epilogue (linear.cu) and the fused elementwise
// program (fused_elementwise.cu): kernels/cpu's, with the same constants
// and order of operations, the GELU through 1 + tanh(u) = 2·σ(2u). σ uses the accurate expf
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

/// dy · gelu'(x).
__device__ __forceinline__ float geluTanhGrad(float x, float dy) {
  float u = kGeluC * (x + kGeluA * x * x * x);
  float du = kGeluC * (1.0f + 3.0f * kGeluA * x * x);
  float s = sigmoid(2.0f * u);
  return dy * (s + 2.0f * x * s * (1.0f - s) * du);
}
__device__ __forceinline__ float siluOf(float x) { return x * sigmoid(x); }
__device__ __forceinline__ float siluGradOf(float x, float dy) {
  float s = sigmoid(x);
  return dy * s * (1.0f + x * (1.0f - s));
}
__device__ __forceinline__ float sigmoidGradOf(float x, float dy) {
  float s = sigmoid(x);
  return dy * s * (1.0f - s);
}
__device__ __forceinline__ float swigluOf(float gate, float up) {
  return gate * sigmoid(gate) * up;
}
__device__ __forceinline__ float swigluGradGate(float gate, float up, float dy) {
  float s = sigmoid(gate);
  return dy * up * s * (1.0f + gate * (1.0f - s));
}
__device__ __forceinline__ float swigluGradUp(float gate, float dy) {
  return dy * gate * sigmoid(gate);
}

} // namespace llmc::cuda

#endif
