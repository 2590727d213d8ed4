//===- rmsnorm.cpp - RMS normalization and its backward -------------------===//
//
// Forward: y = x·rstd·γ with rstd = 1/√(mean(x²) + ε), one row per
// iteration of an OpenMP loop. Backward, with x̂ = x·rstd and g = dy·γ:
//   dx = rstd · (g − x̂·mean(g·x̂)),  dγ = Σ_rows dy·x̂
// dγ is accumulated per thread in bind-time scratch and summed in thread
// order (deterministic for a given thread count), as in layernorm.cpp.
//
// add_rmsnorm and rmsnorm_grad_add, the residual forms, are these loops with
// the sum formed (and stored, rounded as `add` stores it) while the row is
// read, and the addend added to dx (rounded first) where dx is written; see
// layernorm.cpp.
//
// With `unit_offset` (Gemma's RMSNorm) γ is 1 + gamma, formed in fp32 as
// gamma is widened; dγ is then the gradient of gamma itself.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/RmsNorm.h"
#include "kernels/cpu/Common.h"

namespace llmc::cpu {
namespace {

/// γ in fp32: gamma widened, plus `offset` (1 under unit_offset).
template <typename T> void widenGamma(const T *gamma, float offset, float *out, int64_t c) {
  widenVector(gamma, out, c);
  if (offset != 0.0f)
    for (int64_t i = 0; i < c; ++i) out[i] += offset;
}

inline float rowRstd(const float *x, int64_t c, float eps) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < c; ++i) sum += x[i] * x[i];
  return 1.0f / std::sqrt(sum / static_cast<float>(c) + eps);
}

template <typename T> class RmsNormKernel final : public Kernel {
public:
  /// rmsnorm (x, gamma → y) or, with `residual`, add_rmsnorm
  /// (a, b, gamma → sum, y).
  RmsNormKernel(const KernelArgs &args, float eps, float gammaOffset, bool residual)
      : x_(args.inputs[0].as<T>()), b_(residual ? args.inputs[1].as<T>() : nullptr),
        gamma_(args.inputs[residual ? 2 : 1].as<T>()),
        sum_(residual ? args.outputs[0].as<T>() : nullptr),
        out_(args.outputs[residual ? 1 : 0].as<T>()), c_(args.inputs[0].dim(-1)),
        rows_(c_ ? args.inputs[0].numel() / c_ : 0), eps_(eps), gammaOffset_(gammaOffset),
        threads_(bindThreads()), gammaWide_(c_), rowScratch_(threads_, c_) {}

  void run(const StepContext &) override {
    widenGamma(gamma_, gammaOffset_, gammaWide_.data(), c_);
    const float *gamma = gammaWide_.data();
    const int64_t c = c_;
#pragma omp parallel num_threads(threads_) if (rows_ * c > kParallelGrain)
    {
      float *scratch = rowScratch_.at(omp_get_thread_num());
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows_; ++r) {
        const float *x = b_ ? rowSumAsFloat(x_, b_, sum_, r, c, scratch)
                            : rowAsFloat(x_, r, c, scratch);
        float rstd = rowRstd(x, c, eps_);
        T *out = out_ + r * c;
#pragma omp simd
        for (int64_t i = 0; i < c; ++i) store(out, i, x[i] * rstd * gamma[i]);
      }
    }
  }

private:
  const T *x_, *b_, *gamma_; // x_ is a and b_ is b in add_rmsnorm
  T *sum_, *out_;
  int64_t c_, rows_;
  float eps_;
  float gammaOffset_; // 1 under unit_offset (Gemma): γ is 1 + gamma
  int threads_;
  std::vector<float> gammaWide_;
  ThreadScratch rowScratch_;
};

template <typename T> class RmsNormGradKernel final : public Kernel {
public:
  /// rmsnorm_grad, or with a fourth input rmsnorm_grad_add.
  RmsNormGradKernel(const KernelArgs &args, float eps, float gammaOffset)
      : x_(args.inputs[0].as<T>()), gamma_(args.inputs[1].as<T>()), dy_(args.inputs[2].as<T>()),
        addend_(args.inputs.size() > 3 ? args.inputs[3].as<T>() : nullptr),
        dx_(args.outputs[0].as<T>()), dgamma_(args.outputs[1].as<T>()), c_(args.inputs[0].dim(-1)),
        rows_(c_ ? args.inputs[0].numel() / c_ : 0), eps_(eps), gammaOffset_(gammaOffset),
        threads_(bindThreads()), gammaWide_(c_), scratch_(threads_, 4 * c_) {}

  void run(const StepContext &) override {
    widenGamma(gamma_, gammaOffset_, gammaWide_.data(), c_);
    const float *g = gammaWide_.data();
    const int64_t c = c_;
    const float invC = 1.0f / static_cast<float>(c);
#pragma omp parallel num_threads(threads_) if (rows_ * c > kParallelGrain)
    {
      int threads = omp_get_num_threads();
      float *xRow = scratch_.at(omp_get_thread_num()), *dyRow = xRow + c;
      float *dgammaPart = xRow + 2 * c, *dxRow = xRow + 3 * c;
      std::fill(dgammaPart, dgammaPart + c, 0.0f);
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows_; ++r) {
        const float *x = rowAsFloat(x_, r, c, xRow);
        const float *dy = rowAsFloat(dy_, r, c, dyRow);
        float rstd = rowRstd(x, c, eps_);
        float sumGX = 0.0f;
#pragma omp simd reduction(+ : sumGX)
        for (int64_t i = 0; i < c; ++i) {
          float xhat = x[i] * rstd;
          sumGX += dy[i] * g[i] * xhat;
          dgammaPart[i] += dy[i] * xhat;
        }
        float meanGX = sumGX * invC;
        T *dx = dx_ + r * c;
        if (addend_) { // dx into scratch first: dx may overwrite the addend
#pragma omp simd
          for (int64_t i = 0; i < c; ++i) dxRow[i] = rstd * (dy[i] * g[i] - x[i] * rstd * meanGX);
          storePlusRow(dx, dxRow, addend_ + r * c, c);
        } else {
#pragma omp simd
          for (int64_t i = 0; i < c; ++i) store(dx, i, rstd * (dy[i] * g[i] - x[i] * rstd * meanGX));
        }
      }
#pragma omp for schedule(static)
      for (int64_t i = 0; i < c; ++i) {
        float dgamma = 0.0f;
        for (int t = 0; t < threads; ++t) dgamma += scratch_.at(t)[2 * c + i];
        store(dgamma_, i, dgamma);
      }
    }
  }

private:
  const T *x_, *gamma_, *dy_, *addend_;
  T *dx_, *dgamma_;
  int64_t c_, rows_;
  float eps_;
  float gammaOffset_; // 1 under unit_offset (Gemma): γ is 1 + gamma
  int threads_;
  std::vector<float> gammaWide_;
  ThreadScratch scratch_; // per thread: x row, dy row, dγ partial, dx row
};

std::unique_ptr<Kernel> makeRmsNorm(const KernelArgs &args, std::string &error) {
  contracts::RmsNormBinding b;
  if (!contracts::bindRmsNorm(args, error, &b)) return nullptr;
  return makeFloatKernel<RmsNormKernel>(b.dtype, args, static_cast<float>(b.epsilon),
                                        b.unitOffset ? 1.0f : 0.0f, false);
}

std::unique_ptr<Kernel> makeAddRmsNorm(const KernelArgs &args, std::string &error) {
  contracts::RmsNormBinding b;
  if (!contracts::bindAddRmsNorm(args, error, &b)) return nullptr;
  return makeFloatKernel<RmsNormKernel>(b.dtype, args, static_cast<float>(b.epsilon),
                                        b.unitOffset ? 1.0f : 0.0f, true);
}

std::unique_ptr<Kernel> makeRmsNormGrad(const KernelArgs &args, std::string &error) {
  contracts::RmsNormBinding b;
  if (!contracts::bindRmsNormGrad(args, error, &b)) return nullptr;
  return makeFloatKernel<RmsNormGradKernel>(b.dtype, args, static_cast<float>(b.epsilon),
                                            b.unitOffset ? 1.0f : 0.0f);
}

std::unique_ptr<Kernel> makeRmsNormGradAdd(const KernelArgs &args, std::string &error) {
  contracts::RmsNormBinding b;
  if (!contracts::bindRmsNormGradAdd(args, error, &b)) return nullptr;
  return makeFloatKernel<RmsNormGradKernel>(b.dtype, args, static_cast<float>(b.epsilon),
                                            b.unitOffset ? 1.0f : 0.0f);
}

} // namespace

LLMC_REGISTER_KERNEL(CPU, "rmsnorm", makeRmsNorm);
LLMC_REGISTER_KERNEL(CPU, "rmsnorm_grad", makeRmsNormGrad);
LLMC_REGISTER_KERNEL(CPU, "add_rmsnorm", makeAddRmsNorm);
LLMC_REGISTER_KERNEL(CPU, "rmsnorm_grad_add", makeRmsNormGradAdd);

} // namespace llmc::cpu
