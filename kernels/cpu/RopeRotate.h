//===- RopeRotate.h - one head row's RoPE rotation --------------*- C++ -*-===//
//
// The arithmetic of the rope kernel (kernels/cpu/rope.cpp), shared with
// attention_rope (kernels/cpu/attention.cpp), which rotates q and k as it
// loads their tiles and dq, dk as it stores them: one expression compiled
// alike in both, so the fused kernels round exactly as rope does.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CPU_ROPEROTATE_H
#define LLMC_KERNELS_CPU_ROPEROTATE_H

#include "kernels/cpu/Common.h"

namespace llmc::cpu {

/// Rotates the pairs (x[i], x[i + half]) of one row by the angles whose cos
/// and sin are cs[i], sn[i] (sin negated: the inverse rotation) and hands
/// each rotated pair to sink(i, lo', hi'), which stores it.
template <typename T, typename Sink>
inline void rotatePairs(const T *x, const float *cs, const float *sn, int64_t half, Sink &&sink) {
#pragma omp simd
  for (int64_t i = 0; i < half; ++i) {
    float lo = load(x, i), hi = load(x, i + half);
    sink(i, lo * cs[i] - hi * sn[i], hi * cs[i] + lo * sn[i]);
  }
}

} // namespace llmc::cpu

#endif
