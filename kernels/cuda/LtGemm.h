//===- LtGemm.h - row-major batched GEMM through cuBLASLt (private) -*- C++ -*-===//
//
// The one place the CUDA kernels talk to cuBLASLt. A GEMM is planned once,
// when its kernel binds: descriptors and layouts are built, the heuristic
// picks an algorithm (cached per shape for the process), and run() is a
// single cublasLtMatmul on the caller's stream. Where timing is on
// (cuda::gemmTiming()), the algorithm is the fastest of the heuristic's top
// candidates measured on the device at that moment; else the heuristic's
// first.
//
// Operands are row-major, as everywhere in llmc. cuBLASLt is column-major,
// so c[M,N] = op(a)·op(b) is computed as its transpose cᵀ = op(b)ᵀ·op(a)ᵀ:
// b is passed as cuBLASLt's A and a as its B, with no data movement. A bias
// epilogue therefore adds a vector of N (one value per output column, the
// usual per-feature bias), which is what a fused linear layer wants.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CUDA_LTGEMM_H
#define LLMC_KERNELS_CUDA_LTGEMM_H

#include "common/Fp8.h"
#include "kernels/Tensor.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>

namespace llmc::cuda {

/// What cuBLASLt applies to a·b (+ c) before storing.
enum class GemmEpilogue {
  None,
  Bias,        ///< + bias[n]
  GeluBias,    ///< gelu_tanh(· + bias[n])
  GeluAuxBias, ///< gelu_tanh(· + bias[n]), and · + bias[n] stored in aux
  /// biasGrad[n] = Σ_k op(b)[k, n], beside the product: a linear layer's
  /// bias gradient when b is dy (cuBLASLt's BGRADA: b is its A).
  BiasGradB,
  /// gelu_grad(aux, ·): the product is the gradient of GELU's output and
  /// aux (laid out as c) holds GELU's input (cuBLASLt's DGELU).
  DGelu,
  /// DGelu, and biasGrad[n] = Σ_m of the result (cuBLASLt's DGELU_BGRAD).
  DGeluBGrad,
};

/// One row-major, possibly batched, product
///   c[t] = op(a[t])·op(b[t]) (+ c[t] when accumulating, + addend[t] when
///   given) (epilogue)
/// for t < batch, where op swaps the last two dims when the flag is set.
/// a is [M,K] (or [K,M] transposed), b [K,N] (or [N,K]), c [M,N]; each
/// matrix's rows lie `ld` elements apart (dense unless an ld is given).
struct GemmDesc {
  DType dtype = DType::F32; ///< of a, b and c: f32, bf16 or f16 (f32 arithmetic)
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;
  /// Elements between consecutive batch entries; 0 shares one matrix.
  int64_t strideA = 0, strideB = 0, strideC = 0;
  bool transposeA = false, transposeB = false;
  /// Leading dimensions: elements between consecutive stored rows of a
  /// ([M,K]: at least K; [K,M]: at least M), b and c (an addend is laid out
  /// as c); 0 means dense. A padded row (a vocabulary padded to a multiple
  /// of 8, say) keeps 16-byte aligned rows, which the fastest algorithms
  /// need: the alignment of ld·element size is part of what the algorithm
  /// may assume, and of the plan cache's key.
  int64_t lda = 0, ldb = 0, ldc = 0;
  bool accumulate = false; ///< beta = 1 (c += ...), else beta = 0
  /// c (and an addend) in f32 while a and b are `dtype`, bf16 or f16: a
  /// 16-bit product added into an fp32 sum without first being rounded to
  /// 16 bits (the LM head's weight gradient over its chunks). No epilogue,
  /// no fp8.
  bool f32Output = false;
  /// Laid out as c and read as cuBLASLt's C with beta = 1, c being D (a
  /// residual added in the epilogue, c untouched before); not with
  /// `accumulate`.
  const void *addend = nullptr;
  GemmEpilogue epilogue = GemmEpilogue::None;
  const void *bias = nullptr; ///< [n] of dtype, for the bias epilogues
  /// GeluAuxBias: the pre-activation it stores; DGelu: GELU's input it
  /// reads. Dense row-major [M, N] (N a multiple of 8, as cuBLASLt
  /// requires), whatever c's leading dimension.
  void *aux = nullptr;
  void *biasGrad = nullptr; ///< BiasGradB, DGeluBGrad: the [n] sums, of dtype
  /// fp8 operands: a and b hold OCP E4M3 or E5M2 codes (one byte each),
  /// `dtype` is c's, and the product is multiplied by *scaleA · *scaleB
  /// (device pointers, read when the GEMM runs) with fp32 accumulation,
  /// or with `fp8FastAccumulation` cuBLASLt's fast accumulation (partial
  /// sums not promoted to fp32). cuBLASLt multiplies fp8 only K-major (a
  /// [M, K], b [N, K]: transposeA false, transposeB true), without
  /// epilogue or batch, on sm_89 or newer.
  bool fp8 = false;
  bool fp8FastAccumulation = false;
  fp8::Kind fp8A = fp8::Kind::E4M3, fp8B = fp8::Kind::E4M3;
  const float *scaleA = nullptr, *scaleB = nullptr;
  /// The bound operands: their alignment steers the algorithm choice.
  const void *a = nullptr, *b = nullptr;
  void *c = nullptr;
};

/// A planned cuBLASLt matmul; owns its descriptors.
class LtGemm {
public:
  /// Plans `desc` (every size positive) on the current device. Returns null
  /// with `error` set when cuBLASLt is unavailable, rejects the problem or
  /// has no algorithm for it; the error names the shapes.
  static std::unique_ptr<LtGemm> create(const GemmDesc &desc, std::string &error);
  ~LtGemm();
  LtGemm(const LtGemm &) = delete;
  LtGemm &operator=(const LtGemm &) = delete;

  /// Enqueues the product on `stream`. Throws std::runtime_error naming the
  /// cuBLASLt status if the launch fails.
  void run(cudaStream_t stream) const;

  /// "bf16 c[4x64x96] = a[64x32]·b^T[96x32] (b shared)": the problem, for errors.
  static std::string describe(const GemmDesc &desc);

  /// How the algorithm of this plan was chosen: "heuristic" (the
  /// heuristic's first), or "timed: candidate i of n, x µs vs y µs for the
  /// first" (for tests and logs).
  const std::string &choice() const { return choice_; }

private:
  LtGemm() = default;

  GemmDesc desc_;
  float alpha_ = 1.0f, beta_ = 0.0f;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t layoutA_ = nullptr, layoutB_ = nullptr, layoutC_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  void *workspace_ = nullptr;
  size_t workspaceBytes_ = 0;
  std::string choice_;
};

} // namespace llmc::cuda

#endif
