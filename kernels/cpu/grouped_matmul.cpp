//===- grouped_matmul.cpp - each group of rows times its own weight -------===//
//
// The experts of a mixture-of-experts layer as one kernel
// (contracts/GroupedMatmul.h). The rows of a group are contiguous, so each
// non-empty group is one plain GEMM through OpenBLAS's sgemm, the call
// matmul makes for the same operands: y's rows [b, e) = x's rows [b, e) ·
// weight g (slice g of the stacked weights). The weight gradient is one
// GEMM per group over the same rows, xᵀ·dy (dyᵀ·x with transpose_b), and
// zeros for an empty group. Rows past the last group are zero in y.
//
// Parallelism is BLAS's threads inside each GEMM, so a step with a few big
// groups (experts with many tokens each) keeps every core busy; many tiny
// groups run one after the other, each GEMM too small to spread.
//
// A group of a few rows (a decode step's tokens of one expert) against a
// transposed fp32 or bf16 weight [F, K] skips BLAS for DecodeGemv.h's row
// dots, as matmul's decode products do: sgemm would pack (and bf16 widen)
// the whole expert to multiply a row or two, so a decode step would move
// the experts' bytes several times instead of once.
//
// bf16 and f16 are storage only, as in matmul: x (and dy) are widened once
// into fp32 scratch sized at bind time, each weight a GEMM uses one at a
// time into one [K, F] scratch, the GEMMs write fp32, and the result is
// rounded once.
//
// The offsets are read on every run; invalid ones (contracts/
// GroupedMatmul.h) make every output NaN, never an out-of-bounds access.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/GroupedMatmul.h"
#include "kernels/cpu/Blas.h"
#include "kernels/cpu/Common.h"
#include "kernels/cpu/DecodeGemv.h"

namespace llmc::cpu {
namespace {

using contracts::GroupedMatmulBinding;

/// `x` (a float tensor) as fp32: itself, or widened into `scratch`.
template <typename T> const float *asFloat(const T *x, int64_t n, std::vector<float> &scratch) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else {
    widenParallel(x, scratch.data(), n);
    return scratch.data();
  }
}

/// Where a float output is computed in fp32: itself, or `scratch`.
template <typename T> float *outAsFloat(T *out, std::vector<float> &scratch) {
  if constexpr (std::is_same_v<T, float>)
    return out;
  else
    return scratch.data();
}

/// Scratch for a float tensor of `n` elements: none for f32.
template <typename T> std::vector<float> wideScratch(int64_t n) {
  return std::vector<float>(std::is_same_v<T, float> ? 0 : n);
}

template <typename T> class GroupedMatmulKernel final : public Kernel {
public:
  GroupedMatmulKernel(const KernelArgs &args, const GroupedMatmulBinding &b, SgemmFn sgemm)
      : b_(b), sgemm_(sgemm), avx512_(useAvx512()), x_(args.inputs[0].as<T>()),
        offsets_(args.inputs[1]), weights_(args.inputs[2].as<T>()), y_(args.outputs[0].as<T>()),
        xWide_(wideScratch<T>(b.rows * b.k)), wWide_(wideScratch<T>(b.k * b.f)),
        yWide_(wideScratch<T>(b.rows * b.f)) {}

  void run(const StepContext &) override {
    const int64_t size = b_.rows * b_.f;
    if (size == 0)
      return;
    if (!validGroupOffsets(offsets_, b_.groups, b_.rows)) {
      fillNaN(y_, size);
      return;
    }
    const float *x = asFloat(x_, b_.rows * b_.k, xWide_);
    float *y = outAsFloat(y_, yWide_);
    const int64_t weightSize = b_.k * b_.f;
    for (int64_t g = 0; g < b_.groups; ++g) {
      const int64_t begin = offsets_[g], end = offsets_[g + 1];
      if (begin == end)
        continue;
      if (rowDots(end - begin))
        decode::denseRows(weights_ + g * weightSize, std::is_same_v<T, bf16>, b_.f,
                          decode::Rows{x + begin * b_.k, x + begin * b_.k, end - begin, b_.k,
                                       y + begin * b_.f, b_.f},
                          avx512_);
      else
        product(x + begin * b_.k, asFloat(weights_ + g * weightSize, weightSize, wWide_),
                y + begin * b_.f, end - begin);
    }
    const int64_t used = offsets_[b_.groups];
    std::fill(y + used * b_.f, y + size, 0.0f);
    if constexpr (!std::is_same_v<T, float>)
      narrowParallel(y, y_, size);
  }

private:
  /// Whether a group of `rows` rows takes the row dots: a few rows, the
  /// weight [F, K] in fp32 or bf16, a sum that is not empty.
  bool rowDots(int64_t rows) const {
    return rows <= decode::kDenseRows && b_.transposeB && b_.k > 0 && !std::is_same_v<T, f16>;
  }

  /// y [rows, F] = x [rows, K] · w (w [K, F], or [F, K] transposed).
  void product(const float *x, const float *w, float *y, int64_t rows) const {
    const int k = static_cast<int>(b_.k), f = static_cast<int>(b_.f);
    if (k == 0) { // an empty sum
      std::fill(y, y + rows * b_.f, 0.0f);
      return;
    }
    sgemm_(CblasRowMajor, CblasNoTrans, b_.transposeB ? CblasTrans : CblasNoTrans,
           static_cast<int>(rows), f, k, 1.0f, x, k, w, b_.transposeB ? k : f, 0.0f, y, f);
  }

  GroupedMatmulBinding b_;
  SgemmFn sgemm_;
  bool avx512_; ///< the row dots' AVX-512 body
  const T *x_;
  IdView offsets_;
  const T *weights_; ///< [G, K, F] or [G, F, K]
  T *y_;
  std::vector<float> xWide_, wWide_, yWide_; // bf16, f16 only: fp32 copies
};

template <typename T> class GroupedMatmulWeightGradKernel final : public Kernel {
public:
  GroupedMatmulWeightGradKernel(const KernelArgs &args, const GroupedMatmulBinding &b,
                                SgemmFn sgemm)
      : b_(b), sgemm_(sgemm), x_(args.inputs[0].as<T>()), dy_(args.inputs[1].as<T>()),
        offsets_(args.inputs[2]), dw_(args.outputs[0].as<T>()),
        xWide_(wideScratch<T>(b.rows * b.k)), dyWide_(wideScratch<T>(b.rows * b.f)),
        dwWide_(wideScratch<T>(b.k * b.f)) {}

  void run(const StepContext &) override {
    const int64_t size = b_.k * b_.f;
    if (size == 0)
      return;
    if (!validGroupOffsets(offsets_, b_.groups, b_.rows)) {
      fillNaN(dw_, size * b_.groups);
      return;
    }
    const float *x = asFloat(x_, b_.rows * b_.k, xWide_);
    const float *dy = asFloat(dy_, b_.rows * b_.f, dyWide_);
    for (int64_t g = 0; g < b_.groups; ++g) {
      const int64_t begin = offsets_[g], end = offsets_[g + 1];
      T *dwg = dw_ + g * size;
      float *dw = outAsFloat(dwg, dwWide_);
      gradient(x + begin * b_.k, dy + begin * b_.f, dw, end - begin);
      if constexpr (!std::is_same_v<T, float>)
        narrowParallel(dw, dwg, size);
    }
  }

private:
  /// dw = xᵀ·dy [K, F], or dyᵀ·x [F, K] transposed, over `rows` rows; zeros
  /// for none.
  void gradient(const float *x, const float *dy, float *dw, int64_t rows) const {
    if (rows == 0) {
      std::fill(dw, dw + b_.k * b_.f, 0.0f);
      return;
    }
    const int k = static_cast<int>(b_.k), f = static_cast<int>(b_.f), r = static_cast<int>(rows);
    if (b_.transposeB)
      sgemm_(CblasRowMajor, CblasTrans, CblasNoTrans, f, k, r, 1.0f, dy, f, x, k, 0.0f, dw, k);
    else
      sgemm_(CblasRowMajor, CblasTrans, CblasNoTrans, k, f, r, 1.0f, x, k, dy, f, 0.0f, dw, f);
  }

  GroupedMatmulBinding b_;
  SgemmFn sgemm_;
  const T *x_, *dy_;
  IdView offsets_;
  T *dw_; ///< [G, K, F] or [G, F, K]
  std::vector<float> xWide_, dyWide_, dwWide_; // bf16, f16 only: fp32 copies
};

std::unique_ptr<Kernel> makeGroupedMatmul(const KernelArgs &args, std::string &error) {
  GroupedMatmulBinding binding;
  if (!contracts::bindGroupedMatmul(args, error, &binding))
    return nullptr;
  Validator v("grouped_matmul", args, error);
  std::string blasError;
  SgemmFn sgemm = blasSgemm(blasError);
  if (!sgemm)
    return v.reject(blasError);
  return makeFloatKernel<GroupedMatmulKernel>(binding.dtype, args, binding, sgemm);
}

std::unique_ptr<Kernel> makeGroupedMatmulWeightGrad(const KernelArgs &args, std::string &error) {
  GroupedMatmulBinding binding;
  if (!contracts::bindGroupedMatmulWeightGrad(args, error, &binding))
    return nullptr;
  Validator v("grouped_matmul_weight_grad", args, error);
  std::string blasError;
  SgemmFn sgemm = blasSgemm(blasError);
  if (!sgemm)
    return v.reject(blasError);
  return makeFloatKernel<GroupedMatmulWeightGradKernel>(binding.dtype, args, binding, sgemm);
}

} // namespace

LLMC_REGISTER_KERNEL(CPU, "grouped_matmul", makeGroupedMatmul);
LLMC_REGISTER_KERNEL(CPU, "grouped_matmul_weight_grad", makeGroupedMatmulWeightGrad);

} // namespace llmc::cpu
