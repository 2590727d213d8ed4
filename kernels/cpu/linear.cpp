//===- linear.cpp - the linear layer's fused ops: epilogue, weight grads --===//
//
// y = x·w + bias (+ residual), x·w + residual, or gelu(x·w + bias), in one
// kernel: one sgemm writes the product (the call matmul makes for the same
// operands, so the product is matmul's bit for bit), then a single pass
// over the rows, each thread a contiguous block, adds the bias and the
// residual or applies GELU where the unfused graph runs an add or gelu
// kernel per term, each reading and writing the whole output. Under
// `keep_pre` the pass also stores x·w + bias, which gelu_grad reads.
//
// matmul_gelu_grad and matmul_swiglu_grad are the same kernel with the
// activation's backward as the pass: y = gelu_grad(pre, x·w), or dgate
// (y) and dup = swiglu_grad(gate, up, x·w), where the unfused graph stores
// the product and a gelu_grad or swiglu_grad kernel reads it back. In fp32
// the pass reads the product from y and writes y in place, so y must not
// be an input's buffer. With `bias_grad` the pass also sums y's rows into
// db as it stores them, in reduce_sum's order (ColumnSums.h), where the
// unfused graph reads y again in a reduce_sum kernel.
//
// bf16 and f16 are storage only, as in matmul: operands are widened into
// fp32 scratch, multiplied with sgemm, and the product, the biased value,
// the sum with the residual and the GELU are each rounded to the storage
// type, exactly as matmul, add and gelu round them; so in every dtype the
// result equals the unfused ops'. In fp32 the product is y itself, so y
// must not be the residual's buffer (the planner never writes linear in
// place).
//
// A decode step's product (up to 4 rows, W [N, K] in fp32 or bf16) skips
// sgemm for DecodeGemv.h's row dots over the weight as stored.
//
// linear_weight_grad (dw = xᵀ·dy, db = dy's rows summed) is, on the CPU,
// the matmul and reduce_sum kernels it stands for, run in turn: OpenBLAS has
// no hook where the weight-gradient GEMM passes over dy's rows, and the
// separate sum reads dy once, so `--fuse all` forms the op only for CUDA.
// Here it is the CUDA kernel's twin and computes the unfused kernels' values.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/Linear.h"
#include "kernels/cpu/Blas.h"
#include "kernels/cpu/ColumnSums.h"
#include "kernels/cpu/Common.h"
#include "kernels/cpu/DecodeGemv.h"

#include <optional>
#include <utility>

namespace llmc::cpu {
namespace {

template <typename T> class LinearKernel final : public Kernel {
public:
  LinearKernel(const KernelArgs &args, const contracts::LinearBinding &b, SgemmFn sgemm)
      : b_(b), sgemm_(sgemm), x_(args.inputs[0].as<T>()), w_(args.inputs[1].as<T>()),
        bias_(b.bias >= 0 ? args.inputs[b.bias].as<T>() : nullptr),
        residual_(b.residual >= 0 ? args.inputs[b.residual].as<T>() : nullptr),
        geluInput_(b.geluInput >= 0 ? args.inputs[b.geluInput].as<T>() : nullptr),
        gate_(b.swigluGate >= 0 ? args.inputs[b.swigluGate].as<T>() : nullptr),
        up_(b.swigluUp >= 0 ? args.inputs[b.swigluUp].as<T>() : nullptr),
        y_(args.outputs[0].as<T>()), pre_(b.keepPre ? args.outputs[1].as<T>() : nullptr),
        dup_(b.swigluUp >= 0 ? args.outputs[1].as<T>() : nullptr),
        db_(b.biasGrad ? args.outputs[1].as<T>() : nullptr),
        biasWide_(bias_ ? b.n : 0) {
    if (b.biasGrad) biasGradSums_.emplace(b.rows, b.n);
    // A decode step's product (a few rows, W [N, K], fp32 or bf16) is row
    // dots over W as stored (DecodeGemv.h): sgemm would first pack, and
    // bf16 widen, the whole weight.
    decodeRows_ =
        b.rows <= decode::kDenseRows && b.transposeB && b.k > 0 && !std::is_same_v<T, f16>;
    avx512_ = useAvx512();
    if constexpr (!std::is_same_v<T, float>) {
      xWide_.resize(b.rows * b.k);
      if (!decodeRows_)
        wWide_.resize(b.k * b.n);
      product_.resize(b.rows * b.n);
    }
  }

  void run(const StepContext &) override {
    const int64_t rows = b_.rows, n = b_.n, k = b_.k;
    if (rows == 0 || n == 0) return;
    if (bias_) widenVector(bias_, biasWide_.data(), n);
    float *product;
    if (decodeRows_) {
      product = decodeProduct();
    } else if constexpr (std::is_same_v<T, float>) {
      product = y_; // the epilogue then works in place
      gemm(x_, w_, product);
    } else {
      widenParallel(x_, xWide_.data(), rows * k);
      widenParallel(w_, wWide_.data(), k * n);
      product = product_.data();
      gemm(xWide_.data(), wWide_.data(), product);
    }
    if (biasGradSums_)
      geluGradWithBiasGrad(product);
    else
      epilogue(product);
  }

private:
  /// product = x · wᵀ by DecodeGemv.h's row dots, w read as stored; returns
  /// the product (y itself in fp32).
  float *decodeProduct() {
    const int64_t rows = b_.rows, k = b_.k;
    const float *x;
    float *product;
    if constexpr (std::is_same_v<T, float>) {
      x = x_, product = y_;
    } else {
      widenParallel(x_, xWide_.data(), rows * k);
      x = xWide_.data(), product = product_.data();
    }
    decode::denseRows(w_, std::is_same_v<T, bf16>, b_.n, decode::Rows{x, x, rows, k, product, b_.n},
                      avx512_);
    return product;
  }

  /// product[rows, N] = x · w (or x · wᵀ), one sgemm over every row.
  void gemm(const float *x, const float *w, float *product) const {
    const int n = static_cast<int>(b_.n), k = static_cast<int>(b_.k);
    if (k == 0) {
      std::memset(product, 0, sizeof(float) * b_.rows * b_.n);
      return;
    }
    sgemm_(CblasRowMajor, CblasNoTrans, b_.transposeB ? CblasTrans : CblasNoTrans,
           static_cast<int>(b_.rows), n, k, 1.0f, x, k, w, b_.transposeB ? k : n, 0.0f, product,
           n);
  }

  /// y = act(round(product) + bias) or round(product) (+ bias) + residual,
  /// row by row, rounding each sum; pre = the biased value. For
  /// matmul_gelu_grad, y = gelu_grad(pre, round(product)); for
  /// matmul_swiglu_grad, y and dup = swiglu_grad(gate, up, round(product)).
  void epilogue(const float *product) {
    const int64_t rows = b_.rows, n = b_.n;
    const float *bias = bias_ ? biasWide_.data() : nullptr;
    const T *residual = residual_, *geluInput = geluInput_, *gate = gate_, *up = up_;
    T *y = y_, *pre = pre_, *dup = dup_;
    const bool gelu = b_.gelu;
#pragma omp parallel for schedule(static) if (rows * n > kParallelGrain)
    for (int64_t r = 0; r < rows; ++r) {
      const float *p = product + r * n;
      T *yr = y + r * n;
      const T *rr = residual ? residual + r * n : nullptr;
      if (geluInput) {
        const T *gr = geluInput + r * n;
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) store(yr, j, geluTanhGrad(load(gr, j), roundTo<T>(p[j])));
      } else if (gate) {
        const T *gr = gate + r * n, *ur = up + r * n;
        T *dr = dup + r * n;
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) {
          float g = load(gr, j), dy = roundTo<T>(p[j]);
          store(yr, j, swigluGradGate(g, load(ur, j), dy));
          store(dr, j, swigluGradUp(g, dy));
        }
      } else if (!bias) {
        storePlusRow(yr, p, rr, n);
      } else if (rr) {
#pragma omp simd
        for (int64_t j = 0; j < n; ++j)
          store(yr, j, roundTo<T>(roundTo<T>(p[j]) + bias[j]) + load(rr, j));
      } else if (!gelu) {
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) store(yr, j, roundTo<T>(p[j]) + bias[j]);
      } else if (pre) {
        T *pr = pre + r * n;
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) {
          float a = roundTo<T>(roundTo<T>(p[j]) + bias[j]);
          store(pr, j, a);
          store(yr, j, geluTanh(a));
        }
      } else {
#pragma omp simd
        for (int64_t j = 0; j < n; ++j)
          store(yr, j, geluTanh(roundTo<T>(roundTo<T>(p[j]) + bias[j])));
      }
    }
  }

  /// matmul_gelu_grad with bias_grad: y = gelu_grad(pre, round(product))
  /// and db = y's rows summed in reduce_sum's order (ColumnSums.h), each
  /// value added as it is stored, so y is not read back for db.
  void geluGradWithBiasGrad(const float *product) {
    const int64_t n = b_.n;
    const T *geluInput = geluInput_;
    T *y = y_;
    biasGradSums_->run(
        [=](int64_t r, int64_t j0, int64_t cols, double *acc) {
          const float *p = product + r * n + j0;
          const T *gr = geluInput + r * n + j0;
          T *yr = y + r * n + j0;
#pragma omp simd
          for (int64_t j = 0; j < cols; ++j) {
            float v = roundTo<T>(geluTanhGrad(load(gr, j), roundTo<T>(p[j])));
            store(yr, j, v);
            acc[j] += v;
          }
        },
        db_);
  }

  contracts::LinearBinding b_;
  SgemmFn sgemm_;
  const T *x_, *w_, *bias_, *residual_, *geluInput_, *gate_, *up_; // null where absent
  T *y_, *pre_, *dup_, *db_;
  std::vector<float> biasWide_;
  std::optional<ColumnSums> biasGradSums_; // matmul_gelu_grad with bias_grad
  std::vector<float> xWide_, wWide_, product_; // bf16, f16 only: fp32 copies
  bool decodeRows_ = false, avx512_ = false;   // a few rows times W [N, K]: row dots
};

using BindFn = bool (*)(const KernelArgs &, std::string &, contracts::LinearBinding *);

/// The GEMM with the epilogue `bind` describes, named `name` in errors.
template <BindFn bind>
std::unique_ptr<Kernel> makeGemmWithEpilogue(const char *name, const KernelArgs &args,
                                             std::string &error) {
  contracts::LinearBinding b;
  if (!bind(args, error, &b)) return nullptr;
  std::string blasError;
  SgemmFn sgemm = blasSgemm(blasError);
  if (!sgemm) {
    error = std::string(name) + ": " + blasError;
    return nullptr;
  }
  return makeFloatKernel<LinearKernel>(b.dtype, args, b, sgemm);
}

std::unique_ptr<Kernel> makeLinear(const KernelArgs &args, std::string &error) {
  return makeGemmWithEpilogue<contracts::bindLinear>("linear", args, error);
}
std::unique_ptr<Kernel> makeMatmulGeluGrad(const KernelArgs &args, std::string &error) {
  return makeGemmWithEpilogue<contracts::bindMatmulGeluGrad>("matmul_gelu_grad", args, error);
}
std::unique_ptr<Kernel> makeMatmulSwigluGrad(const KernelArgs &args, std::string &error) {
  return makeGemmWithEpilogue<contracts::bindMatmulSwigluGrad>("matmul_swiglu_grad", args, error);
}

std::unique_ptr<Kernel> makeLinearWeightGrad(const KernelArgs &args, std::string &error) {
  contracts::LinearWeightGradBinding b;
  if (!contracts::bindLinearWeightGrad(args, error, &b)) return nullptr;
  KernelArgs product, sum;
  contracts::splitLinearWeightGrad(args, b, &product, &sum);
  return bindSequence(Backend::CPU, "linear_weight_grad",
                      {{"matmul", &product}, {"reduce_sum", &sum}}, error);
}

} // namespace

LLMC_REGISTER_KERNEL(CPU, "linear", makeLinear);
LLMC_REGISTER_KERNEL(CPU, "matmul_gelu_grad", makeMatmulGeluGrad);
LLMC_REGISTER_KERNEL(CPU, "matmul_swiglu_grad", makeMatmulSwigluGrad);
LLMC_REGISTER_KERNEL(CPU, "linear_weight_grad", makeLinearWeightGrad);

} // namespace llmc::cpu
