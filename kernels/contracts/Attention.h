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
#include "kernels/Validator.h"
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
  /// Sliding window (attribute `window`, causal only): query i sees the
  /// keys in (i − window, i]; 0: every key up to i.
  int64_t window = 0;
  /// Score soft-cap (attribute `softcap`): scores s become c·tanh(s / c)
  /// before masking; 0: uncapped.
  float softcap = 0.0f;
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
inline bool bindAttention(const KernelArgs &args, std::string &error, AttentionBinding *out);
inline bool bindAttentionGrad(const KernelArgs &args, std::string &error, AttentionBinding *out);
inline bool bindAttentionPacked(const KernelArgs &args, std::string &error, AttentionBinding *out);
inline bool bindAttentionPackedGrad(const KernelArgs &args, std::string &error,
                                    AttentionBinding *out);
inline bool bindAttentionRope(const KernelArgs &args, std::string &error, AttentionBinding *out);
inline bool bindAttentionRopeGrad(const KernelArgs &args, std::string &error,
                                  AttentionBinding *out);

/// q, k, v (or dq, dk, dv) of a binding: three tensors, or the column
/// blocks of the packed first one.
template <typename T>
inline std::tuple<T *, T *, T *> qkvOf(const std::vector<TensorView> &tensors,
                                       const AttentionBinding &b) {
  if (!b.packed)
    return {tensors[0].as<T>(), tensors[1].as<T>(), tensors[2].as<T>()};
  T *base = tensors[0].as<T>();
  return {base, base + b.keyOffset(), base + b.valueOffset()};
}

/// Index of the first input after q, k and v (after qkv, when packed).
inline size_t inputsAfterQkv(const AttentionBinding &b) { return b.packed ? 1 : 3; }

//===----------------------------------------------------------------------===//
// Definitions
//===----------------------------------------------------------------------===//

namespace attention_impl {

/// Whether the outputs end with a workspace after the op's `results`, and
/// that it is a 1-D u8 buffer; a count other than results + 1 is left to
/// the arity check.
inline bool checkWorkspace(Validator &v, const KernelArgs &args, size_t results,
                           AttentionBinding *dims) {
  if (args.outputs.size() != results + 1)
    return true;
  const TensorView &w = v.out(results);
  if (w.dtype != DType::U8 || w.rank() != 1)
    return v.fail("workspace (output " + std::to_string(results) +
                  ") must be a 1-D u8 buffer, got " + w.describe());
  dims->workspace = true;
  dims->workspaceIndex = results;
  return true;
}

/// The arity of an op with `results` outputs and an optional workspace.
inline bool checkArity(Validator &v, const KernelArgs &args, size_t minInputs, size_t maxInputs,
                       size_t results, AttentionBinding *dims) {
  return checkWorkspace(v, args, results, dims) &&
         v.arity(minInputs, maxInputs, results + (dims->workspace ? 1 : 0));
}

/// The optional `window` attribute: >= 0, and only on causal attention.
inline bool checkWindow(Validator &v, AttentionBinding *dims) {
  if (!v.intAttr("window", &dims->window, 0))
    return false;
  if (dims->window < 0)
    return v.fail("attribute 'window' must be >= 0, got " + std::to_string(dims->window));
  if (dims->window > 0 && !dims->causal)
    return v.fail("attribute 'window' needs causal attention");
  return true;
}

/// The optional `softcap` attribute: >= 0 (absent or 0: uncapped).
inline bool checkSoftcap(Validator &v, float *softcap) {
  double cap;
  if (!v.floatAttr("softcap", &cap, 0.0))
    return false;
  if (cap < 0)
    return v.fail("attribute 'softcap' must be >= 0, got " + std::to_string(cap));
  *softcap = static_cast<float>(cap);
  return true;
}

/// Checks q, k, v and the attributes; fills `dims`.
inline bool checkAttention(Validator &v, AttentionBinding *dims) {
  double scale;
  if (!v.floatAttr("scale", &scale) || !v.flagAttr("causal", &dims->causal) ||
      !checkWindow(v, dims) || !checkSoftcap(v, &dims->softcap))
    return false;
  dims->scale = static_cast<float>(scale);
  const TensorView &q = v.in(0), &k = v.in(1), &val = v.in(2);
  if (!v.isFloat(q, "q") || !v.hasRank(q, "q", 4) || !v.hasDType(k, "k", q.dtype) ||
      !v.hasRank(k, "k", 4) || !v.hasType(val, "v", q.dtype, k.shape))
    return false;
  dims->dtype = q.dtype;
  dims->b = q.dim(0), dims->t = q.dim(1), dims->h = q.dim(2), dims->d = q.dim(3);
  dims->s = k.dim(1), dims->kv = k.dim(2);
  if (k.dim(0) != dims->b || k.dim(3) != dims->d)
    return v.fail("k must be [B, S, KV, D] with q's B and D: q is " + q.describe() + ", k is " +
                  k.describe());
  if (dims->kv <= 0 || dims->h % dims->kv != 0)
    return v.fail("query heads H = " + std::to_string(dims->h) +
                  " must be a multiple of kv heads KV = " + std::to_string(dims->kv));
  dims->group = dims->h / dims->kv;
  if (dims->causal && dims->s != dims->t)
    return v.fail("causal attention needs S == T: q is " + q.describe() + ", k is " + k.describe());
  return true;
}

/// Checks the optional segment ids, input `segmentIndex` when present.
inline bool checkSegments(Validator &v, const KernelArgs &args, size_t segmentIndex,
                          AttentionBinding *dims) {
  dims->segments = args.inputs.size() > segmentIndex;
  if (!dims->segments)
    return true;
  const TensorView &segments = v.in(segmentIndex);
  if (!v.isIndex(segments, "segment_ids") ||
      !v.hasType(segments, "segment_ids", segments.dtype, {dims->b, dims->t}))
    return false;
  if (dims->s != dims->t)
    return v.fail("segment ids need S == T, got T = " + std::to_string(dims->t) +
                  ", S = " + std::to_string(dims->s));
  dims->segmentDType = segments.dtype;
  dims->segmentIndex = segmentIndex;
  return true;
}

/// attention_rope's optional inputs after the first `fixed`: positions,
/// then segment ids, as `operand_segments` says (without it, one extra
/// input is segment ids, two are both); and the rotation.
inline bool checkRotation(Validator &v, const KernelArgs &args, size_t fixed,
                          AttentionBinding *dims) {
  const KernelAttrs &a = args.attrs;
  bool positions = args.inputs.size() == fixed + 2;
  if (a.hasInts("operand_segments")) {
    const std::vector<int64_t> &sizes = a.getInts("operand_segments");
    if (sizes.size() != fixed + 2)
      return v.fail("attribute 'operand_segments' must have " + std::to_string(fixed + 2) +
                    " entries");
    positions = sizes[fixed] == 1;
    if (args.inputs.size() != fixed + static_cast<size_t>(sizes[fixed] + sizes[fixed + 1]))
      return v.fail("attribute 'operand_segments' does not match the " +
                    std::to_string(args.inputs.size()) + " inputs");
  }
  const TensorView &q = v.in(0);
  if (q.dim(3) % 2 != 0)
    return v.fail("rotated q and k need an even head dim D, got " + q.describe());
  if (dims->s != dims->t)
    return v.fail("rotated keys need S == T: q is " + q.describe() + ", k is " +
                  v.in(1).describe());
  dims->rope = true;
  dims->rotation.dtype = dims->dtype;
  dims->rotation.rows = dims->t;
  dims->rotation.positions = positions;
  dims->positionIndex = fixed;
  if (positions && (!v.isIndex(v.in(fixed), "positions") ||
                    !v.hasType(v.in(fixed), "positions", v.in(fixed).dtype, {dims->b, dims->t})))
    return false;
  if (!contracts::bindRotation(v, &dims->rotation))
    return false;
  return checkSegments(v, args, fixed + positions, dims); // segment ids, if any, come last
}

/// attention_grad's out, lse, dout (inputs 3 to 5) and dq, dk, dv.
inline bool checkGradOperands(Validator &v, const AttentionBinding &dims) {
  const TensorView &q = v.in(0), &k = v.in(1);
  return v.hasType(v.in(3), "out", q.dtype, q.shape) &&
         v.hasType(v.in(4), "lse", DType::F32, {dims.b, dims.h, dims.t}) &&
         v.hasType(v.in(5), "dout", q.dtype, q.shape) &&
         v.hasType(v.out(0), "dq", q.dtype, q.shape) &&
         v.hasType(v.out(1), "dk", q.dtype, k.shape) && v.hasType(v.out(2), "dv", q.dtype, k.shape);
}

/// attention's (or attention_rope's) out and lse, for q (input 0).
inline bool checkForwardResults(Validator &v, const AttentionBinding &dims) {
  const TensorView &q = v.in(0);
  return v.hasType(v.out(0), "out", q.dtype, q.shape) &&
         v.hasType(v.out(1), "lse", DType::F32, {dims.b, dims.h, dims.t});
}

/// Checks a packed qkv (input 0) and the attributes; fills `dims`.
inline bool checkPacked(Validator &v, AttentionBinding *dims) {
  double scale;
  int64_t heads, kvHeads;
  if (!v.floatAttr("scale", &scale) || !v.flagAttr("causal", &dims->causal) ||
      !checkWindow(v, dims) || !checkSoftcap(v, &dims->softcap) || !v.intAttr("heads", &heads, 0) ||
      !v.intAttr("kv_heads", &kvHeads, 0))
    return false;
  dims->scale = static_cast<float>(scale);
  const TensorView &qkv = v.in(0);
  if (!v.isFloat(qkv, "qkv") || !v.hasRank(qkv, "qkv", 3))
    return false;
  if (heads < 1 || kvHeads < 1 || heads % kvHeads != 0)
    return v.fail("attribute 'heads' (" + std::to_string(heads) +
                  ") must be a positive multiple of 'kv_heads' (" + std::to_string(kvHeads) + ")");
  const int64_t width = heads + 2 * kvHeads;
  if (qkv.dim(2) == 0 || qkv.dim(2) % width != 0)
    return v.fail(
        "qkv must be [B, T, (heads + 2·kv_heads)·D] with heads = " + std::to_string(heads) +
        ", kv_heads = " + std::to_string(kvHeads) + ", got " + qkv.describe());
  dims->dtype = qkv.dtype;
  dims->b = qkv.dim(0), dims->t = dims->s = qkv.dim(1);
  dims->h = heads, dims->kv = kvHeads, dims->d = qkv.dim(2) / width;
  dims->group = heads / kvHeads;
  dims->packed = true;
  return true;
}

} // namespace attention_impl
using namespace attention_impl;

inline bool bindAttentionPacked(const KernelArgs &args, std::string &error, AttentionBinding *out) {
  Validator v("attention_packed", args, error);
  AttentionBinding dims;
  if (!checkArity(v, args, 1, 2, 2, &dims) || !checkPacked(v, &dims) ||
      !checkSegments(v, args, 1, &dims))
    return false;
  if (!v.hasType(v.out(0), "out", dims.dtype, {dims.b, dims.t, dims.h, dims.d}) ||
      !v.hasType(v.out(1), "lse", DType::F32, {dims.b, dims.h, dims.t}))
    return false;
  *out = dims;
  return true;
}

inline bool bindAttentionPackedGrad(const KernelArgs &args, std::string &error,
                                    AttentionBinding *out) {
  Validator v("attention_packed_grad", args, error);
  AttentionBinding dims;
  if (!checkArity(v, args, 4, 5, 1, &dims) || !checkPacked(v, &dims) ||
      !checkSegments(v, args, 4, &dims))
    return false;
  const TensorView &qkv = v.in(0);
  const std::vector<int64_t> outShape = {dims.b, dims.t, dims.h, dims.d};
  if (!v.hasType(v.in(1), "out", dims.dtype, outShape) ||
      !v.hasType(v.in(2), "lse", DType::F32, {dims.b, dims.h, dims.t}) ||
      !v.hasType(v.in(3), "dout", dims.dtype, outShape) ||
      !v.hasType(v.out(0), "dqkv", dims.dtype, qkv.shape))
    return false;
  *out = dims;
  return true;
}

inline bool bindAttentionRope(const KernelArgs &args, std::string &error, AttentionBinding *out) {
  Validator v("attention_rope", args, error);
  AttentionBinding dims;
  if (!checkArity(v, args, 3, 5, 2, &dims) || !checkAttention(v, &dims) ||
      !checkRotation(v, args, 3, &dims) || !checkForwardResults(v, dims))
    return false;
  *out = dims;
  return true;
}

inline bool bindAttentionRopeGrad(const KernelArgs &args, std::string &error,
                                  AttentionBinding *out) {
  Validator v("attention_rope_grad", args, error);
  AttentionBinding dims;
  if (!checkArity(v, args, 6, 8, 3, &dims) || !checkAttention(v, &dims) ||
      !checkRotation(v, args, 6, &dims) || !checkGradOperands(v, dims))
    return false;
  *out = dims;
  return true;
}

inline bool bindAttention(const KernelArgs &args, std::string &error, AttentionBinding *out) {
  Validator v("attention", args, error);
  AttentionBinding dims;
  if (!checkArity(v, args, 3, 4, 2, &dims) || !checkAttention(v, &dims) ||
      !checkSegments(v, args, 3, &dims) || !checkForwardResults(v, dims))
    return false;
  *out = dims;
  return true;
}

inline bool bindAttentionGrad(const KernelArgs &args, std::string &error, AttentionBinding *out) {
  Validator v("attention_grad", args, error);
  AttentionBinding dims;
  if (!checkArity(v, args, 6, 7, 3, &dims) || !checkAttention(v, &dims) ||
      !checkSegments(v, args, 6, &dims) || !checkGradOperands(v, dims))
    return false;
  *out = dims;
  return true;
}

} // namespace llmc::contracts

#endif
