//===- grouped_matmul_fp8.cpp - the experts' products on fp8 codes --------===//
//
// qat_grouped_matmul_fp8 and qat_grouped_matmul_weight_grad_fp8
// (contracts/GroupedMatmulFp8.h): the reference of a grouped fp8
// tensor-core GEMM, as kernels/cpu/matmul_fp8.cpp is of one GEMM. The codes
// are expanded to their exact fp32 values (a 256-entry table): the rows
// once, the stacked weights one expert at a time, so the scratch is the
// rows and one expert. Each group is one OpenBLAS sgemm (fp32 sums), and
// its sum is scaled once by its two scales (per operand or per group)
// before it is stored in the output's type. Rows past the last group are
// zero; invalid offsets make every output NaN.
//
//===----------------------------------------------------------------------===//

#include "common/Fp8.h"
#include "kernels/contracts/GroupedMatmulFp8.h"
#include "kernels/cpu/Blas.h"
#include "kernels/cpu/Common.h"

#include <vector>

namespace llmc::cpu {
namespace {

using contracts::GroupedMatmulFp8Binding;

/// Scale `g` of an operand's scales (one, or one per group).
float scaleAt(const float *scales, bool perGroup, int64_t g) { return scales[perGroup ? g : 0]; }

/// out[0, n) = sum[0, n) · scale, in out's type.
template <typename T> void storeScaled(const float *sum, float scale, T *out, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
  for (int64_t i = 0; i < n; ++i) store(out, i, sum[i] * scale);
}

template <typename T> class GroupedMatmulFp8Kernel final : public Kernel {
public:
  GroupedMatmulFp8Kernel(const KernelArgs &args, const GroupedMatmulFp8Binding &b, SgemmFn sgemm)
      : b_(b), d_(b.dims), sgemm_(sgemm), x_(args.inputs[0].as<uint8_t>()),
        xScale_(args.inputs[1].as<float>()), offsets_(args.inputs[2]),
        w_(args.inputs[3].as<uint8_t>()), wScale_(args.inputs[4].as<float>()),
        y_(args.outputs[0].as<T>()), xWide_(d_.rows * d_.k), wWide_(d_.k * d_.f),
        sum_(d_.rows * d_.f) {}

  void run(const StepContext &) override {
    const int64_t size = d_.rows * d_.f;
    if (size == 0)
      return;
    if (!validGroupOffsets(offsets_, d_.groups, d_.rows)) {
      fillNaN(y_, size);
      return;
    }
    widenFp8Parallel(x_, d_.rows * d_.k, b_.a, xWide_.data());
    const int64_t weightSize = d_.k * d_.f;
    for (int64_t g = 0; g < d_.groups; ++g) {
      const int64_t begin = offsets_[g], rows = offsets_[g + 1] - begin;
      if (rows == 0)
        continue;
      float *sum = sum_.data() + begin * d_.f;
      if (d_.k == 0) {
        std::fill(sum, sum + rows * d_.f, 0.0f);
      } else {
        widenFp8Parallel(w_ + g * weightSize, weightSize, b_.b, wWide_.data());
        const int k = static_cast<int>(d_.k), f = static_cast<int>(d_.f);
        sgemm_(CblasRowMajor, CblasNoTrans, d_.transposeB ? CblasTrans : CblasNoTrans,
               static_cast<int>(rows), f, k, 1.0f, xWide_.data() + begin * d_.k, k, wWide_.data(),
               d_.transposeB ? k : f, 0.0f, sum, f);
      }
      const float scale =
          scaleAt(xScale_, b_.aScalePerGroup, g) * scaleAt(wScale_, b_.bScalePerGroup, g);
      storeScaled(sum, scale, y_ + begin * d_.f, rows * d_.f);
    }
    const int64_t used = offsets_[d_.groups] * d_.f;
    for (int64_t i = used; i < size; ++i) store(y_, i, 0.0f);
  }

private:
  GroupedMatmulFp8Binding b_;
  contracts::GroupedMatmulBinding d_;
  SgemmFn sgemm_;
  const uint8_t *x_;
  const float *xScale_;
  IdView offsets_;
  const uint8_t *w_; ///< [G, K, F] or [G, F, K]
  const float *wScale_;
  T *y_;
  std::vector<float> xWide_, wWide_, sum_;
};

template <typename T> class GroupedMatmulWeightGradFp8Kernel final : public Kernel {
public:
  GroupedMatmulWeightGradFp8Kernel(const KernelArgs &args, const GroupedMatmulFp8Binding &b,
                                   SgemmFn sgemm)
      : b_(b), d_(b.dims), sgemm_(sgemm), x_(args.inputs[0].as<uint8_t>()),
        xScale_(args.inputs[1].as<float>()), dy_(args.inputs[2].as<uint8_t>()),
        dyScale_(args.inputs[3].as<float>()), offsets_(args.inputs[4]),
        dw_(args.outputs[0].as<T>()), xWide_(d_.rows * d_.k), dyWide_(d_.rows * d_.f),
        sum_(d_.k * d_.f) {}

  void run(const StepContext &) override {
    const int64_t size = d_.k * d_.f;
    if (size == 0)
      return;
    if (!validGroupOffsets(offsets_, d_.groups, d_.rows)) {
      fillNaN(dw_, size * d_.groups);
      return;
    }
    const int64_t used = offsets_[d_.groups];
    widenFp8Parallel(x_, used * d_.k, b_.a, xWide_.data());
    widenFp8Parallel(dy_, used * d_.f, b_.b, dyWide_.data());
    for (int64_t g = 0; g < d_.groups; ++g) {
      const int64_t begin = offsets_[g], rows = offsets_[g + 1] - begin;
      gradient(xWide_.data() + begin * d_.k, dyWide_.data() + begin * d_.f, rows);
      const float scale =
          scaleAt(xScale_, b_.aScalePerGroup, g) * scaleAt(dyScale_, b_.bScalePerGroup, g);
      storeScaled(sum_.data(), scale, dw_ + g * size, size);
    }
  }

private:
  /// sum_ = xᵀ·dy [K, F], or dyᵀ·x [F, K] transposed, over `rows` rows;
  /// zeros for none.
  void gradient(const float *x, const float *dy, int64_t rows) {
    float *dw = sum_.data();
    if (rows == 0) {
      std::fill(sum_.begin(), sum_.end(), 0.0f);
      return;
    }
    const int k = static_cast<int>(d_.k), f = static_cast<int>(d_.f), r = static_cast<int>(rows);
    if (d_.transposeB)
      sgemm_(CblasRowMajor, CblasTrans, CblasNoTrans, f, k, r, 1.0f, dy, f, x, k, 0.0f, dw, k);
    else
      sgemm_(CblasRowMajor, CblasTrans, CblasNoTrans, k, f, r, 1.0f, x, k, dy, f, 0.0f, dw, f);
  }

  GroupedMatmulFp8Binding b_;
  contracts::GroupedMatmulBinding d_;
  SgemmFn sgemm_;
  const uint8_t *x_;
  const float *xScale_;
  const uint8_t *dy_;
  const float *dyScale_;
  IdView offsets_;
  T *dw_; ///< [G, K, F] or [G, F, K]
  std::vector<float> xWide_, dyWide_, sum_;
};

template <template <typename> class KernelT>
std::unique_ptr<Kernel> make(const char *name, const KernelArgs &args, std::string &error,
                             bool (*bind)(const KernelArgs &, std::string &,
                                          GroupedMatmulFp8Binding *)) {
  GroupedMatmulFp8Binding binding;
  if (!bind(args, error, &binding))
    return nullptr;
  Validator v(name, args, error);
  std::string blasError;
  SgemmFn sgemm = blasSgemm(blasError);
  if (!sgemm)
    return v.reject(blasError);
  return makeFloatKernel<KernelT>(binding.dims.dtype, args, binding, sgemm);
}

std::unique_ptr<Kernel> makeGroupedMatmulFp8(const KernelArgs &args, std::string &error) {
  return make<GroupedMatmulFp8Kernel>("qat_grouped_matmul_fp8", args, error,
                                      contracts::bindGroupedMatmulFp8);
}

std::unique_ptr<Kernel> makeGroupedMatmulWeightGradFp8(const KernelArgs &args, std::string &error) {
  return make<GroupedMatmulWeightGradFp8Kernel>("qat_grouped_matmul_weight_grad_fp8", args, error,
                                                contracts::bindGroupedMatmulWeightGradFp8);
}

} // namespace

LLMC_REGISTER_KERNEL(CPU, "qat_grouped_matmul_fp8", makeGroupedMatmulFp8);
LLMC_REGISTER_KERNEL(CPU, "qat_grouped_matmul_weight_grad_fp8", makeGroupedMatmulWeightGradFp8);

} // namespace llmc::cpu
