//===- RowPack.cuh - 16-byte loads and stores of row elements (private) ---===//
//
// The row kernels (layernorm.cu, rmsnorm.cu) move their rows in packs of V
// consecutive elements: one 16-byte access per pack (V = 4 f32 or 8
// bf16/f16) where every row and parameter vector starts 16-byte aligned
// and the row length is a multiple of V, else V = 1 (one element per
// access, any alignment). Values are widened to fp32 as load() does and
// rounded as store() does, so the arithmetic is the same for every V; what
// changes with V is which thread owns which columns.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CUDA_ROWPACK_CUH
#define LLMC_KERNELS_CUDA_ROWPACK_CUH

#include "kernels/cuda/Common.cuh"

#include <cstdint>
#include <initializer_list>

namespace llmc::cuda {

/// Elements of T in one 16-byte access.
template <typename T> constexpr int kPackOf = 16 / static_cast<int>(sizeof(T));

/// Elements [p·V, p·V + V) of `row` as fp32.
template <int V, typename T>
__device__ __forceinline__ void loadPack(const T *row, int64_t p, float (&x)[V]) {
  if constexpr (V == 1) {
    x[0] = load(row, p);
  } else {
    static_assert(V * sizeof(T) == 16, "a pack is 16 bytes");
    const uint4 raw = *reinterpret_cast<const uint4 *>(row + p * V);
    const T *e = reinterpret_cast<const T *>(&raw);
#pragma unroll
    for (int u = 0; u < V; ++u) x[u] = load(e, u);
  }
}

/// Rounds `x` to T into elements [p·V, p·V + V) of `row`.
template <int V, typename T>
__device__ __forceinline__ void storePack(T *row, int64_t p, const float (&x)[V]) {
  if constexpr (V == 1) {
    store(row, p, x[0]);
  } else {
    uint4 raw;
    T *e = reinterpret_cast<T *>(&raw);
#pragma unroll
    for (int u = 0; u < V; ++u) store(e, u, x[u]);
    *reinterpret_cast<uint4 *>(row + p * V) = raw;
  }
}

/// x rounded to T and back: what a later kernel reads of a stored value.
template <typename T> __device__ __forceinline__ float roundedTo(float x) {
  T stored;
  store(&stored, 0, x);
  return load(&stored, 0);
}

/// v stored as T, plus an addend: what storing v and then running `add`
/// give, bit for bit (the fused norms' backward adding the residual
/// stream's gradient). __fadd_rn keeps the sum out of an FMA with the
/// product that made v (nvcc contracts a plain `+`).
template <typename T> __device__ __forceinline__ float roundedPlus(float v, float addend) {
  return __fadd_rn(roundedTo<T>(v), addend);
}

/// Whether rows of `c` elements of T at these addresses (null ones left
/// out) can move in 16-byte packs: every address 16-byte aligned and the
/// row length a multiple of a pack.
template <typename T>
bool packable(int64_t c, std::initializer_list<const void *> addresses) {
  if (c % kPackOf<T> != 0) return false;
  for (const void *a : addresses)
    if (a && reinterpret_cast<uintptr_t>(a) % 16 != 0) return false;
  return true;
}

} // namespace llmc::cuda

#endif
