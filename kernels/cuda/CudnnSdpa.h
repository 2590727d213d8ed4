//===- CudnnSdpa.h - cuDNN's fused flash attention, behind a small door -*- C++ -*-===//
//
// The interface of attention_cudnn.cpp, the one translation unit that
// includes cudnn-frontend (it takes minutes to compile): a scaled
// dot-product attention forward or backward as cuDNN's graph API runs it,
// planned for a shape once per process (at bind time, never while a CUDA
// graph is being captured) and bound to its operands. Plain C++: no cuDNN
// or CUDA types.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CUDA_CUDNNSDPA_H
#define LLMC_KERNELS_CUDA_CUDNNSDPA_H

#include <cstdint>
#include <memory>
#include <string>
#include <tuple>

namespace llmc::cuda {

/// One SDPA problem in llmc's layouts: q [B, T, H, D] and k, v [B, S, KV, D]
/// with `queryRow` and `keyRow` elements from one (b, t) row to the next
/// (H·D and KV·D, or (H + 2·KV)·D when they are column blocks of one packed
/// qkv); out and dout [B, T, H, D] and lse [B, H, T] f32 dense. dq, dk and
/// dv are laid out as q, k and v. Query head h reads kv head h / (H / KV).
struct CudnnSdpaShape {
  bool bf16 = true; ///< else f16
  int64_t b = 0, t = 0, s = 0, h = 0, kv = 0, d = 0;
  int64_t queryRow = 0, keyRow = 0;
  float scale = 1.0f;
  bool causal = false; ///< key j visible to query i iff j <= i (S == T)
  bool backward = false;

  auto key() const {
    return std::tie(bf16, b, t, s, h, kv, d, queryRow, keyRow, scale, causal, backward);
  }
  bool operator<(const CudnnSdpaShape &o) const { return key() < o.key(); }
};

/// Device pointers of one call. The forward reads q, k, v and writes out
/// and lse; the backward reads q, k, v, out, lse, dout and writes dq, dk,
/// dv (deterministically: the same bits on every run).
struct CudnnSdpaOperands {
  const void *q = nullptr, *k = nullptr, *v = nullptr;
  void *out = nullptr;
  float *lse = nullptr;
  const void *dout = nullptr;
  void *dq = nullptr, *dk = nullptr, *dv = nullptr;
  void *workspace = nullptr;
  int64_t workspaceBytes = 0;
};

/// A planned SDPA bound to its operands.
class CudnnSdpaCall {
public:
  virtual ~CudnnSdpaCall() = default;
  /// Enqueues the call on `stream` (a cudaStream_t). Throws
  /// std::runtime_error naming cuDNN's error if cuDNN refuses to run it.
  virtual void run(void *stream) = 0;
};

/// The call for `shape` on `operands`: the plan is built on the first
/// request for the shape (needs the GPU) and kept for the process. Null,
/// with `why` (one line), when this build has no cudnn-frontend, cuDNN is
/// not loaded (processCudnn()), the plan cannot be built for the shape, an
/// operand is not 16-byte aligned, or cuDNN needs more workspace than
/// `operands.workspaceBytes`.
std::unique_ptr<CudnnSdpaCall> bindCudnnSdpa(const CudnnSdpaShape &shape,
                                             const CudnnSdpaOperands &operands,
                                             std::string &why);

} // namespace llmc::cuda

#endif
