//===- matmul_fp8.cpp - fp8 codes of a tensor, and their product ----------===//
//
// qat_quantize_fp8: codes = round(x / scale) in E4M3 or E5M2 (common/Fp8.h,
// the rounding qat_fake_quant and `llmc quantize` use), scale = amax / fmax
// from the range of the tensor, of each slice of its dimension 0, or of
// each of a mixture of experts' groups of rows (offsets).
//
// qat_matmul_fp8: the reference of an fp8 tensor-core GEMM. The codes are
// expanded to their exact fp32 values (a 256-entry table), multiplied by
// OpenBLAS's sgemm (fp32 accumulation, as cuBLASLt's fp8 GEMMs without
// fast accumulation), and the sum scaled once by a_scale · b_scale before
// it is stored in c's type. Expansion buffers are allocated at bind time,
// like the bf16 matmul's. A product marked fast_accumulation sums in fp32
// here too: the reference stays exact, and the CUDA kernel's faster sums
// are checked against it within a tolerance.
//
//===----------------------------------------------------------------------===//

#include "common/Fp8.h"
#include "kernels/contracts/MatmulFp8.h"
#include "kernels/cpu/BatchedGemm.h"
#include "kernels/cpu/Common.h"

#include <cmath>
#include <cstring>
#include <vector>

namespace llmc::cpu {
namespace {

//===----------------------------------------------------------------------===//
// qat_quantize_fp8
//===----------------------------------------------------------------------===//

template <typename T> class QuantizeFp8Kernel final : public Kernel {
public:
  QuantizeFp8Kernel(const KernelArgs &args, const contracts::QuantizeFp8Binding &b)
      : x_(args.inputs[0].as<T>()), range_(args.inputs[1].as<float>()),
        codes_(args.outputs[0].as<uint8_t>()), scale_(args.outputs[1].as<float>()), numel_(b.numel),
        groups_(b.groups), rows_(b.rowGroups ? b.rows : 0),
        offsets_(b.rowGroups ? IdView(args.inputs[2]) : IdView()), kind_(b.kind) {}

  void run(const StepContext &) override {
    if (rows_ > 0) {
      quantizeRowGroups();
      return;
    }
    if (numel_ == 0)
      return;
    const int64_t slice = numel_ / groups_;
    for (int64_t g = 0; g < groups_; ++g)
      quantizeSlice(range_ + 2 * g, g * slice, slice, scale_[g]);
  }

private:
  /// Elements [begin, begin + n) with the range `range`; sets `scaleOut`.
  void quantizeSlice(const float *range, int64_t begin, int64_t n, float &scaleOut) const {
    // A NaN in either entry makes the scale NaN (std::max alone would
    // drop a NaN second operand).
    float amax = std::isnan(range[0]) || std::isnan(range[1]) ? NAN : std::max(range[0], range[1]);
    const float scale = amax / fp8::maxOf(kind_);
    scaleOut = scale;
    uint8_t *codes = codes_ + begin;
    // A slice of zeros (or a NaN range) has no scale to divide by: every
    // code is 0, and the scale (0 or NaN) says the rest.
    if (!(amax > 0.0f)) {
      std::memset(codes, 0, static_cast<size_t>(n));
      return;
    }
    const T *x = x_ + begin;
    const fp8::Kind kind = kind_;
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) codes[i] = fp8::encode(load(x, i) / scale, kind);
  }

  /// Each group of rows [offsets[g], offsets[g + 1]) with range g; code 0
  /// past offsets[G]; invalid offsets: every code 0, every scale NaN.
  void quantizeRowGroups() const {
    const int64_t rowSize = numel_ / rows_;
    if (!validGroupOffsets(offsets_, groups_, rows_)) {
      std::memset(codes_, 0, static_cast<size_t>(numel_));
      std::fill(scale_, scale_ + groups_, kNaN);
      return;
    }
    for (int64_t g = 0; g < groups_; ++g)
      quantizeSlice(range_ + 2 * g, offsets_[g] * rowSize,
                    (offsets_[g + 1] - offsets_[g]) * rowSize, scale_[g]);
    const int64_t used = offsets_[groups_] * rowSize;
    std::memset(codes_ + used, 0, static_cast<size_t>(numel_ - used));
  }

  const T *x_;
  const float *range_;
  uint8_t *codes_;
  float *scale_;
  int64_t numel_, groups_;
  int64_t rows_; ///< M of x [M, K] in row groups; 0 otherwise
  IdView offsets_;
  fp8::Kind kind_;
};

std::unique_ptr<Kernel> makeQuantizeFp8(const KernelArgs &args, std::string &error) {
  contracts::QuantizeFp8Binding b;
  if (!contracts::bindQuantizeFp8(args, error, &b))
    return nullptr;
  return makeFloatKernel<QuantizeFp8Kernel>(b.dtype, args, b);
}

//===----------------------------------------------------------------------===//
// qat_matmul_fp8
//===----------------------------------------------------------------------===//

template <typename T> class MatmulFp8Kernel final : public Kernel {
public:
  MatmulFp8Kernel(const KernelArgs &args, const contracts::MatmulFp8Binding &b,
                  const MatmulDims &dims)
      : d_(dims), a_(args.inputs[0].as<uint8_t>()), aScale_(args.inputs[1].as<float>()),
        b_(args.inputs[2].as<uint8_t>()), bScale_(args.inputs[3].as<float>()),
        c_(args.outputs[0].as<T>()), aKind_(b.a), bKind_(b.b), aWide_(args.inputs[0].numel()),
        bWide_(args.inputs[2].numel()), cWide_(args.outputs[0].numel()) {}

  void run(const StepContext &) override {
    const int64_t n = static_cast<int64_t>(cWide_.size());
    if (n == 0)
      return;
    if (d_.k == 0) {
      std::memset(static_cast<void *>(c_), 0, static_cast<size_t>(n) * sizeof(T));
      return;
    }
    widenFp8Parallel(a_, static_cast<int64_t>(aWide_.size()), aKind_, aWide_.data());
    widenFp8Parallel(b_, static_cast<int64_t>(bWide_.size()), bKind_, bWide_.data());
    batchedGemm(d_, aWide_.data(), bWide_.data(), cWide_.data(), 0.0f);
    const float scale = *aScale_ * *bScale_;
    const float *sum = cWide_.data();
    T *c = c_;
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) store(c, i, sum[i] * scale);
  }

private:
  MatmulDims d_;
  const uint8_t *a_;
  const float *aScale_;
  const uint8_t *b_;
  const float *bScale_;
  T *c_;
  fp8::Kind aKind_, bKind_;
  std::vector<float> aWide_, bWide_, cWide_;
};

std::unique_ptr<Kernel> makeMatmulFp8(const KernelArgs &args, std::string &error) {
  contracts::MatmulFp8Binding b;
  if (!contracts::bindMatmulFp8(args, error, &b))
    return nullptr;
  Validator v("qat_matmul_fp8", args, error);
  MatmulDims d;
  d.batch = b.dims.batch, d.m = b.dims.m, d.n = b.dims.n, d.k = b.dims.k;
  d.transposeA = b.dims.transposeA, d.transposeB = b.dims.transposeB;
  d.sharedB = b.dims.sharedB;
  std::string blasError;
  d.sgemm = blasSgemm(blasError);
  d.sgemv = blasSgemv(blasError);
  if (!d.sgemm || !d.sgemv)
    return v.reject(blasError);
  return makeFloatKernel<MatmulFp8Kernel>(b.dims.dtype, args, b, d);
}

} // namespace

LLMC_REGISTER_KERNEL(CPU, "qat_quantize_fp8", makeQuantizeFp8);
LLMC_REGISTER_KERNEL(CPU, "qat_matmul_fp8", makeMatmulFp8);

} // namespace llmc::cpu
