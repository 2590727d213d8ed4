//===- layernorm.cpp - layer normalization and its backward ---------------===//
//
// Forward: per row of C, mean and biased variance (two passes over a row
// already in L1, which is more accurate than E[x²] − E[x]²), then
// (x − μ)·rstd·γ + β. Rows are independent: one OpenMP loop over rows.
//
// Backward recomputes the statistics from x (cheaper than storing them):
//   x̂ = (x − μ)·rstd,  g = dy·γ
//   dx = rstd · (g − mean(g) − x̂·mean(g·x̂)),  dγ = Σ_rows dy·x̂,  dβ = Σ_rows dy
// dγ and dβ are reductions across rows: each thread accumulates its rows
// into its own bind-time scratch, then the partials are summed per column
// in thread order, so results do not depend on scheduling.
//
// The residual forms are the same loops with one more operand. add_layernorm
// (a, b → sum, y) forms each row's sum, stores it rounded to the element type
// as `add` does and normalizes the rounded row while it is in L1: one read of
// a and b and one write of sum and y, where add + layernorm read the sum back.
// With a bias of b (a fifth input) the sum is a + (b + bias), each add
// rounded as its own kernel would.
// layernorm_grad_add adds `addend` to dx (rounded first, as layernorm_grad
// stores it) as it writes dx, which may overwrite the addend (the planner
// places it there when the addend dies), so dx goes through scratch first.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/LayerNorm.h"
#include "kernels/cpu/Common.h"

namespace llmc::cpu {
namespace {

/// mean and 1/√(var + ε) of one row.
inline void rowStats(const float *x, int64_t c, float eps, float *mean, float *rstd) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < c; ++i) sum += x[i];
  float mu = sum / static_cast<float>(c), var = 0.0f;
#pragma omp simd reduction(+ : var)
  for (int64_t i = 0; i < c; ++i) var += (x[i] - mu) * (x[i] - mu);
  *mean = mu;
  *rstd = 1.0f / std::sqrt(var / static_cast<float>(c) + eps);
}

template <typename T> class LayerNormKernel final : public Kernel {
public:
  /// layernorm (x, gamma, beta → y) or, with `residual`, add_layernorm
  /// (a, b, gamma, beta[, bias] → sum, y).
  LayerNormKernel(const KernelArgs &args, float eps, bool residual)
      : x_(args.inputs[0].as<T>()), b_(residual ? args.inputs[1].as<T>() : nullptr),
        bias_(residual && args.inputs.size() == 5 ? args.inputs[4].as<T>() : nullptr),
        gamma_(args.inputs[residual ? 2 : 1].as<T>()),
        beta_(args.inputs[residual ? 3 : 2].as<T>()),
        sum_(residual ? args.outputs[0].as<T>() : nullptr),
        out_(args.outputs[residual ? 1 : 0].as<T>()), c_(args.inputs[0].dim(-1)),
        rows_(c_ ? args.inputs[0].numel() / c_ : 0), eps_(eps), threads_(bindThreads()),
        params_(2 * c_), rowScratch_(threads_, c_) {}

  void run(const StepContext &) override {
    float *gamma = params_.data(), *beta = params_.data() + c_;
    widenVector(gamma_, gamma, c_);
    widenVector(beta_, beta, c_);
    const int64_t c = c_;
#pragma omp parallel num_threads(threads_) if (rows_ * c > kParallelGrain)
    {
      float *scratch = rowScratch_.at(omp_get_thread_num());
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows_; ++r) {
        const float *x = b_ ? rowSumAsFloat(x_, b_, sum_, r, c, scratch, bias_)
                            : rowAsFloat(x_, r, c, scratch);
        float mean, rstd;
        rowStats(x, c, eps_, &mean, &rstd);
        T *out = out_ + r * c;
#pragma omp simd
        for (int64_t i = 0; i < c; ++i) store(out, i, (x[i] - mean) * rstd * gamma[i] + beta[i]);
      }
    }
  }

private:
  const T *x_, *b_, *bias_, *gamma_, *beta_; // x_ is a and b_ is b in add_layernorm
  T *sum_, *out_;
  int64_t c_, rows_;
  float eps_;
  int threads_;
  std::vector<float> params_; // γ, β as fp32
  ThreadScratch rowScratch_;
};

template <typename T> class LayerNormGradKernel final : public Kernel {
public:
  /// layernorm_grad, or with a fourth input layernorm_grad_add.
  LayerNormGradKernel(const KernelArgs &args, float eps)
      : x_(args.inputs[0].as<T>()), gamma_(args.inputs[1].as<T>()), dy_(args.inputs[2].as<T>()),
        addend_(args.inputs.size() > 3 ? args.inputs[3].as<T>() : nullptr),
        dx_(args.outputs[0].as<T>()), dgamma_(args.outputs[1].as<T>()),
        dbeta_(args.outputs[2].as<T>()), c_(args.inputs[0].dim(-1)),
        rows_(c_ ? args.inputs[0].numel() / c_ : 0), eps_(eps), threads_(bindThreads()),
        gammaWide_(c_), scratch_(threads_, 5 * c_) {}

  void run(const StepContext &) override {
    widenVector(gamma_, gammaWide_.data(), c_);
    const float *g = gammaWide_.data();
    const int64_t c = c_;
    const float invC = 1.0f / static_cast<float>(c);
#pragma omp parallel num_threads(threads_) if (rows_ * c > kParallelGrain)
    {
      int threads = omp_get_num_threads();
      float *xRow = scratch_.at(omp_get_thread_num()), *dyRow = xRow + c;
      float *dgammaPart = xRow + 2 * c, *dbetaPart = xRow + 3 * c, *dxRow = xRow + 4 * c;
      std::fill(dgammaPart, dgammaPart + 2 * c, 0.0f);
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows_; ++r) {
        const float *x = rowAsFloat(x_, r, c, xRow);
        const float *dy = rowAsFloat(dy_, r, c, dyRow);
        float mean, rstd;
        rowStats(x, c, eps_, &mean, &rstd);
        float sumG = 0.0f, sumGX = 0.0f;
#pragma omp simd reduction(+ : sumG, sumGX)
        for (int64_t i = 0; i < c; ++i) {
          float xhat = (x[i] - mean) * rstd, gi = dy[i] * g[i];
          sumG += gi;
          sumGX += gi * xhat;
          dgammaPart[i] += dy[i] * xhat;
          dbetaPart[i] += dy[i];
        }
        float meanG = sumG * invC, meanGX = sumGX * invC;
        T *dx = dx_ + r * c;
        if (addend_) { // dx into scratch first: dx may overwrite the addend
#pragma omp simd
          for (int64_t i = 0; i < c; ++i) {
            float xhat = (x[i] - mean) * rstd;
            dxRow[i] = rstd * (dy[i] * g[i] - meanG - xhat * meanGX);
          }
          storePlusRow(dx, dxRow, addend_ + r * c, c);
        } else {
#pragma omp simd
          for (int64_t i = 0; i < c; ++i) {
            float xhat = (x[i] - mean) * rstd;
            store(dx, i, rstd * (dy[i] * g[i] - meanG - xhat * meanGX));
          }
        }
      }
      // The implicit barrier above makes every partial complete.
#pragma omp for schedule(static)
      for (int64_t i = 0; i < c; ++i) {
        float dgamma = 0.0f, dbeta = 0.0f;
        for (int t = 0; t < threads; ++t) {
          dgamma += scratch_.at(t)[2 * c + i];
          dbeta += scratch_.at(t)[3 * c + i];
        }
        store(dgamma_, i, dgamma);
        store(dbeta_, i, dbeta);
      }
    }
  }

private:
  const T *x_, *gamma_, *dy_, *addend_;
  T *dx_, *dgamma_, *dbeta_;
  int64_t c_, rows_;
  float eps_;
  int threads_;
  std::vector<float> gammaWide_;
  ThreadScratch scratch_; // per thread: x row, dy row, dγ and dβ partials, dx row
};

std::unique_ptr<Kernel> makeLayerNorm(const KernelArgs &args, std::string &error) {
  contracts::LayerNormBinding b;
  if (!contracts::bindLayerNorm(args, error, &b)) return nullptr;
  return makeFloatKernel<LayerNormKernel>(b.dtype, args, static_cast<float>(b.epsilon), false);
}

std::unique_ptr<Kernel> makeAddLayerNorm(const KernelArgs &args, std::string &error) {
  contracts::LayerNormBinding b;
  if (!contracts::bindAddLayerNorm(args, error, &b)) return nullptr;
  return makeFloatKernel<LayerNormKernel>(b.dtype, args, static_cast<float>(b.epsilon), true);
}

std::unique_ptr<Kernel> makeLayerNormGrad(const KernelArgs &args, std::string &error) {
  contracts::LayerNormBinding b;
  if (!contracts::bindLayerNormGrad(args, error, &b)) return nullptr;
  return makeFloatKernel<LayerNormGradKernel>(b.dtype, args, static_cast<float>(b.epsilon));
}

std::unique_ptr<Kernel> makeLayerNormGradAdd(const KernelArgs &args, std::string &error) {
  contracts::LayerNormBinding b;
  if (!contracts::bindLayerNormGradAdd(args, error, &b)) return nullptr;
  return makeFloatKernel<LayerNormGradKernel>(b.dtype, args, static_cast<float>(b.epsilon));
}

} // namespace

LLMC_REGISTER_KERNEL(CPU, "layernorm", makeLayerNorm);
LLMC_REGISTER_KERNEL(CPU, "layernorm_grad", makeLayerNormGrad);
LLMC_REGISTER_KERNEL(CPU, "add_layernorm", makeAddLayerNorm);
LLMC_REGISTER_KERNEL(CPU, "layernorm_grad_add", makeLayerNormGradAdd);

} // namespace llmc::cpu
