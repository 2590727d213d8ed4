//===- Attention.h - binding contract of attention and attention_grad -*- C++ -*-===//
//
// The checks and derived dimensions of attention (q[B, T, H, D] against
// k, v[B, S, KV, D], grouped-query when KV < H, optionally causal and
// segment-masked) and of its gradient, shared by the CPU factories
// (kernels/cpu/attention.cpp) and the CUDA ones (kernels/cuda/attention.cu,
// which add their head-dim and grid limits).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_ATTENTION_H
#define LLMC_KERNELS_CONTRACTS_ATTENTION_H

#include "kernels/Kernel.h"

#include <cstdint>
#include <string>

namespace llmc::contracts {

/// attention(q, k, v[, segment_ids]) -> out, lse and
/// attention_grad(q, k, v, out, lse, dout[, segment_ids]) -> dq, dk, dv.
struct AttentionBinding {
  DType dtype = DType::F32; ///< q's
  int64_t b = 0, t = 0, h = 0, d = 0, s = 0, kv = 0;
  int64_t group = 1; ///< query heads per kv head, H / KV
  float scale = 1.0f;
  bool causal = false;
  bool segments = false;           ///< the segment_ids input is present
  DType segmentDType = DType::I32; ///< its dtype (i32 or i64), when present
};
bool bindAttention(const KernelArgs &args, std::string &error, AttentionBinding *out);
bool bindAttentionGrad(const KernelArgs &args, std::string &error, AttentionBinding *out);

} // namespace llmc::contracts

#endif
