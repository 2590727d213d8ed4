//===- AttentionWorkspace.h - what cuDNN attention takes and needs -*- C++ -*-===//
//
// The CUDA backend runs bf16/f16 attention on cuDNN's fused flash attention
// when it can (docs/cuda.md). cuDNN needs device memory besides the
// operands — its deterministic backward materialises dP, B·H·T·S values of
// 2 bytes, on Hopper — and llmc never allocates during a step, so the
// compiler plans that memory: under --target cuda every attention op cuDNN
// may take gets one more output, a u8 `workspace` buffer live only at that
// instruction (passes/LowerToExec.cpp), sized by the formula below. At bind
// time the kernel checks that what cuDNN reports fits (else it falls back
// to llmc's kernels, saying so). The compiler and the kernels share this
// header so that both apply the same rules. Plain C++, no MLIR, no CUDA.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMMON_ATTENTIONWORKSPACE_H
#define LLMC_COMMON_ATTENTIONWORKSPACE_H

#include <cstdint>
#include <string>

namespace llmc::contracts {

/// One attention op as cuDNN's SDPA node sees it: q [B, H, T, D], k and v
/// [B, KV, S, D].
struct CudnnAttentionShape {
  bool halfPrecision = false; ///< bf16 or f16 (what cuDNN's fused attention takes)
  int64_t elementBytes = 4;   ///< of q, k, v
  int64_t b = 0, t = 0, s = 0, h = 0, kv = 0, d = 0;
  bool backward = false; ///< attention_grad and its fused forms
  bool rope = false;     ///< attention_rope(_grad): q and k are rotated first
  bool segments = false; ///< segment ids (packed documents)
  int64_t window = 0;    ///< a sliding window (0: none)
  bool softcap = false;  ///< scores capped by c·tanh(s / c)
};

/// Alignment of each part of the workspace (cuDNN wants 16 bytes; 256 keeps
/// every part on its own cache lines).
constexpr int64_t kWorkspaceAlignment = 256;
/// Room for what cuDNN's engines need besides the formula's terms (their
/// forward needs none or a few KiB on Hopper).
constexpr int64_t kCudnnWorkspaceReserve = int64_t(1) << 20;

inline int64_t alignWorkspace(int64_t bytes) {
  return (bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
}

/// Why cuDNN's fused attention cannot take the op ("" when it may try; the
/// library, the device and the plan may still refuse at bind time).
inline std::string cudnnAttentionRefusal(const CudnnAttentionShape &s) {
  if (!s.halfPrecision) return "f32 (cuDNN's fused attention takes bf16 and f16)";
  if (s.d % 8 != 0 || s.d > 256)
    return "head dim " + std::to_string(s.d) + " (cuDNN takes multiples of 8 up to 256)";
  // cuDNN's ragged layout would need one batch entry per document, a count
  // each batch decides; llmc's tile skipping handles packed rows instead.
  if (s.segments) return "segment ids (packed documents run on llmc's kernels)";
  // cuDNN's diagonal band would take it; llmc has not wired and measured it.
  if (s.window > 0)
    return "a sliding window (runs on llmc's kernels)";
  // cuDNN's SDPA graph has no score modifier llmc has wired for tanh.
  if (s.softcap)
    return "a score soft-cap (runs on llmc's kernels)";
  if (s.b == 0 || s.t == 0 || s.s == 0 || s.h == 0) return "an empty operand";
  return "";
}

/// Bytes of attention_rope's staging: q and k rotated as rope stores them
/// (the storage type), each part aligned; 0 without rope.
inline int64_t cudnnRopeStagingBytes(const CudnnAttentionShape &s) {
  if (!s.rope) return 0;
  return alignWorkspace(s.b * s.t * s.h * s.d * s.elementBytes) +
         alignWorkspace(s.b * s.s * s.kv * s.d * s.elementBytes);
}

/// The SDPA part: the backward's dP (2·B·H·T·S, each sequence rounded up
/// to 128 as cuDNN's Hopper tiles do) and the frontend's fp32 softmax sums
/// (4·B·H·T), plus the reserve; the forward only the reserve.
inline int64_t cudnnSdpaWorkspaceBytes(const CudnnAttentionShape &s) {
  if (!s.backward) return kCudnnWorkspaceReserve;
  auto tiles = [](int64_t n) { return (n + 127) / 128 * 128; };
  return alignWorkspace(2 * s.b * s.h * tiles(s.t) * tiles(s.s) + 4 * s.b * s.h * s.t) +
         kCudnnWorkspaceReserve;
}

/// The workspace the compiler plans for the op: rope staging first, then
/// the SDPA part; 0 when cuDNN cannot take the op.
inline int64_t cudnnAttentionWorkspaceBytes(const CudnnAttentionShape &s) {
  if (!cudnnAttentionRefusal(s).empty()) return 0;
  return cudnnRopeStagingBytes(s) + cudnnSdpaWorkspaceBytes(s);
}

} // namespace llmc::contracts

#endif
