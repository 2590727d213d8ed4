//===- matmul.cpp - batched matrix product through OpenBLAS ---------------===//
//
// c[...] (+)= op(a[...]) · op(b[...]) where op optionally swaps the last two
// dims. Everything goes to OpenBLAS's sgemm (loaded by blas.cpp): when b
// is a shared 2-D matrix and a is not transposed, a's leading dims fold
// into M and the whole product is one GEMM (the common x·W case); otherwise
// one GEMM per leading index. A product of one row (a decode step at batch
// 1) is a GEMV: sgemm would first copy all of b into its packed layout,
// tripling the bytes a memory-bound step moves.
// A few rows of x times a shared W [N, K] (transposed: Llama's weights and
// heads at decode) skip BLAS for DecodeGemv.h's row dots, which read fp32
// or bf16 weights as they are stored (bf16 is not widened into scratch
// first) with one contiguous stream per thread.
// `accumulate` maps to beta = 1, which is how gradient accumulation adds
// into an existing buffer without a separate add.
//
// bf16 and f16 are storage only: operands are widened into fp32 scratch
// allocated at bind time, multiplied with sgemm, and the result rounded back
// once. (The OpenBLAS 0.3.21 sbgemm has no fast path on CPUs without
// AVX512-BF16 and would still need an fp32 C, so it buys nothing here.)
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/Matmul.h"
#include "kernels/cpu/BatchedGemm.h"
#include "kernels/cpu/Blas.h"
#include "kernels/cpu/Common.h"
#include "kernels/cpu/DecodeGemv.h"

namespace llmc::cpu {
namespace {

template <typename T> class MatmulKernel final : public Kernel {
public:
  MatmulKernel(const KernelArgs &args, const MatmulDims &dims)
      : d_(dims), a_(args.inputs[0].data), b_(args.inputs[1].data), c_(args.outputs[0].data),
        aSize_(args.inputs[0].numel()), bSize_(args.inputs[1].numel()),
        cSize_(args.outputs[0].numel()) {
    if constexpr (!std::is_same_v<T, float>) {
      aWide_.resize(aSize_);
      if (!d_.decodeRows)
        bWide_.resize(bSize_);
      cWide_.resize(cSize_);
    }
  }

  void run(const StepContext &) override {
    if (cSize_ == 0) return;
    if (d_.decodeRows) {
      decodeRows();
      return;
    }
    if (d_.k == 0) { // an empty sum: c = 0, or unchanged when accumulating
      if (!d_.accumulate) std::memset(c_, 0, cSize_ * sizeof(T));
      return;
    }
    float beta = d_.accumulate ? 1.0f : 0.0f;
    if constexpr (std::is_same_v<T, float>) {
      batchedGemm(d_, static_cast<const float *>(a_), static_cast<const float *>(b_),
                  static_cast<float *>(c_), beta);
    } else {
      widenParallel(static_cast<const T *>(a_), aWide_.data(), aSize_);
      widenParallel(static_cast<const T *>(b_), bWide_.data(), bSize_);
      if (d_.accumulate)
        widenParallel(static_cast<const T *>(c_), cWide_.data(), cSize_);
      batchedGemm(d_, aWide_.data(), bWide_.data(), cWide_.data(), beta);
      narrowParallel(cWide_.data(), static_cast<T *>(c_), cSize_);
    }
  }

private:
  /// c [rows, N] = a [rows, K] · bᵀ, b read in its own dtype (fp32, bf16).
  void decodeRows() {
    const float *a;
    float *c;
    if constexpr (std::is_same_v<T, float>) {
      a = static_cast<const float *>(a_), c = static_cast<float *>(c_);
    } else {
      widenParallel(static_cast<const T *>(a_), aWide_.data(), aSize_);
      a = aWide_.data(), c = cWide_.data();
    }
    decode::denseRows(b_, std::is_same_v<T, bf16>, d_.n,
                      decode::Rows{a, a, d_.batch * d_.m, d_.k, c, d_.n}, d_.avx512);
    if constexpr (!std::is_same_v<T, float>)
      narrowParallel(c, static_cast<T *>(c_), cSize_);
  }

  MatmulDims d_;
  const void *a_, *b_;
  void *c_;
  int64_t aSize_, bSize_, cSize_;
  std::vector<float> aWide_, bWide_, cWide_; // bf16, f16 only: fp32 copies
};

std::unique_ptr<Kernel> makeMatmul(const KernelArgs &args, std::string &error) {
  contracts::MatmulBinding binding;
  if (!contracts::bindMatmul(args, error, &binding)) return nullptr;
  Validator v("matmul", args, error);
  MatmulDims d;
  d.batch = binding.batch, d.m = binding.m, d.n = binding.n, d.k = binding.k;
  d.transposeA = binding.transposeA, d.transposeB = binding.transposeB;
  d.sharedB = binding.sharedB, d.accumulate = binding.accumulate;
  // A decode step's product: a few rows, W [N, K] in fp32 or bf16.
  d.decodeRows = d.sharedB && d.transposeB && !d.transposeA && !d.accumulate && d.k > 0 &&
                 d.batch * d.m <= decode::kDenseRows && binding.dtype != DType::F16;
  d.avx512 = useAvx512();
  std::string blasError;
  d.sgemm = blasSgemm(blasError);
  d.sgemv = blasSgemv(blasError);
  if (!d.sgemm || !d.sgemv) return v.reject(blasError);
  return makeFloatKernel<MatmulKernel>(binding.dtype, args, d);
}

} // namespace

LLMC_REGISTER_KERNEL(CPU, "matmul", makeMatmul);

} // namespace llmc::cpu
