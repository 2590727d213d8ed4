//===- Attention.h - binding contract of attention and attention_grad -*- C++ -*-===//
//
// The checks and derived dimensions of attention (q[B, T, H, D] against
// k, v[B, S, KV, D], grouped-query when KV < H, optionally causal and
// segment-masked) and of its gradient, and of the packed forms that read
// q, k and v from one qkv[B, T, (H + 2·KV)·D] and write dq, dk and dv into
// one dqkv of its shape, shared by the CPU factories
// (kernels/cpu/attention.cpp) and the CUDA ones (kernels/cuda/attention.cu,
// which add their head-dim and grid limits).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_ATTENTION_H
#define LLMC_KERNELS_CONTRACTS_ATTENTION_H

#include "kernels/Kernel.h"
#include "kernels/contracts/Rope.h"

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace llmc::contracts {

/// attention(q, k, v[, segment_ids]) -> out, lse,
/// attention_grad(q, k, v, out, lse, dout[, segment_ids]) -> dq, dk, dv,
/// attention_packed(qkv[, segment_ids]) -> out, lse,
/// attention_packed_grad(qkv, out, lse, dout[, segment_ids]) -> dqkv, and
/// attention_rope(q, k, v[, positions][, segment_ids]) -> out, lse and
/// attention_rope_grad(q, k, v, out, lse, dout[, positions][, segment_ids])
/// -> dq, dk, dv, which rotate q and k (and dq, dk back) as rope does; the
/// attribute `operand_segments` says which of positions and segment ids
/// are given (without it, an extra input is segment ids). Each may end its
/// outputs with a 1-D u8 `workspace`: device memory the compiler planned
/// for the CUDA backend's cuDNN path (AttentionWorkspace.h); the CPU
/// kernels leave it alone.
struct AttentionBinding {
  DType dtype = DType::F32; ///< q's
  int64_t b = 0, t = 0, h = 0, d = 0, s = 0, kv = 0;
  int64_t group = 1; ///< query heads per kv head, H / KV
  float scale = 1.0f;
  bool causal = false;
  bool segments = false;           ///< the segment_ids input is present
  DType segmentDType = DType::I32; ///< its dtype (i32 or i64), when present
  size_t segmentIndex = 0;         ///< its input index, when present
  /// attention_rope: q and k are rotated as rope (`rotation`: theta, the
  /// scaling, positions in [0, T)) would rotate them, at input
  /// `positionIndex` when `rotation.positions`.
  bool rope = false;
  RopeBinding rotation;
  size_t positionIndex = 0;
  /// q, k and v are column blocks of one qkv row: q at 0, k at H·D, v at
  /// (H + KV)·D (and their gradients likewise in dqkv).
  bool packed = false;
  /// The outputs end with the workspace, output `workspaceIndex`.
  bool workspace = false;
  size_t workspaceIndex = 0;

  /// Elements from one (b, t) row of q (dq) to the next, and of k, v (dk, dv).
  int64_t queryStride() const { return packed ? (h + 2 * kv) * d : h * d; }
  int64_t keyStride() const { return packed ? (h + 2 * kv) * d : kv * d; }
  /// Where k and v start in the packed row (0 when they are tensors of their own).
  int64_t keyOffset() const { return packed ? h * d : 0; }
  int64_t valueOffset() const { return packed ? (h + kv) * d : 0; }
};
bool bindAttention(const KernelArgs &args, std::string &error, AttentionBinding *out);
bool bindAttentionGrad(const KernelArgs &args, std::string &error, AttentionBinding *out);
bool bindAttentionPacked(const KernelArgs &args, std::string &error, AttentionBinding *out);
bool bindAttentionPackedGrad(const KernelArgs &args, std::string &error, AttentionBinding *out);
bool bindAttentionRope(const KernelArgs &args, std::string &error, AttentionBinding *out);
bool bindAttentionRopeGrad(const KernelArgs &args, std::string &error, AttentionBinding *out);

/// q, k, v (or dq, dk, dv) of a binding: three tensors, or the column
/// blocks of the packed first one.
template <typename T>
std::tuple<T *, T *, T *> qkvOf(const std::vector<TensorView> &tensors, const AttentionBinding &b) {
  if (!b.packed) return {tensors[0].as<T>(), tensors[1].as<T>(), tensors[2].as<T>()};
  T *base = tensors[0].as<T>();
  return {base, base + b.keyOffset(), base + b.valueOffset()};
}

/// Index of the first input after q, k and v (after qkv, when packed).
inline size_t inputsAfterQkv(const AttentionBinding &b) { return b.packed ? 1 : 3; }

} // namespace llmc::contracts

#endif
