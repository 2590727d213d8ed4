//===- linear.cu - the linear layer's fused GEMMs on the GPU --------------===//
//
// The CPU kernel's contract (kernels/cpu/linear.cpp) as one cuBLASLt GEMM
// planned at bind time, x's leading dims folded into M as in matmul, with
// the epilogue doing the rest as it stores each tile: BIAS, GELU_BIAS, or
// GELU_AUX_BIAS under `keep_pre`, which also stores x·w + bias (the GELU's
// input) to `pre`. cuBLASLt's GELU is the tanh approximation, gelu's. A
// residual is cuBLASLt's C with beta = 1 (y is D, a separate matrix), so
// the GEMM reads it as it stores y and no add kernel reads y back.
//
// The epilogue works on the fp32 accumulator, so under bf16 and f16 it
// rounds once where the unfused ops (and the CPU kernel) round the product,
// the biased value, the sum with the residual and the GELU each: the
// results agree within a rounding of the storage type. Where cuBLASLt has
// no algorithm for the epilogue (the aux matrix needs N to be a multiple
// of 8), the plain GEMM is followed by one elementwise pass with the
// unfused ops' rounding.
//
// matmul_gelu_grad: the GEMM with cuBLASLt's DGELU epilogue, which
// multiplies each product element by GELU's derivative at pre (the aux
// matrix) as it stores the tile (DGELU_BGRAD with `bias_grad`, summing the
// result's rows into db too); the plain GEMM and an elementwise pass
// (then a reduce_sum) where cuBLASLt has no algorithm for it (N not a
// multiple of 8).
//
// matmul_swiglu_grad: the plain GEMM and one elementwise pass (cuBLASLt
// has no epilogue for SwiGLU's backward).
//
// linear_weight_grad: the weight-gradient GEMM dw = xᵀ·dy with the BGRADA
// epilogue summing dy's rows into db as the GEMM reads them (dy is
// cuBLASLt's A), instead of a reduce_sum kernel reading dy again. Where
// cuBLASLt has no algorithm for it, the matmul and reduce_sum kernels run
// in turn, as the unfused program would.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/Linear.h"
#include "kernels/cuda/Common.cuh"
#include "kernels/cuda/Gelu.cuh"
#include "kernels/cuda/LtGemm.h"

#include <utility>
#include <vector>

namespace llmc::cuda {
namespace {

/// `v` rounded to T and widened back (the identity for fp32).
template <typename T> __device__ __forceinline__ float roundTo(float v) {
  T t;
  store(&t, 0, v);
  return load(&t, 0);
}

/// y = act(y + bias) or y (+ bias) + residual over rows of n, in place,
/// each sum rounded as add rounds it; pre (if any) = y + bias. bias and
/// residual may be null. With geluInput (matmul_gelu_grad), y =
/// gelu_grad(geluInput, y) instead.
template <typename T>
__global__ void epilogueKernel(T *y, T *pre, const T *bias, const T *residual,
                               const T *geluInput, int64_t n, int64_t total, bool gelu) {
  LLMC_GRID_STRIDE(i, total) {
    float a = load(y, i);
    if (geluInput) {
      store(y, i, geluTanhGrad(load(geluInput, i), a));
      continue;
    }
    if (bias) a = roundTo<T>(a + load(bias, i % n));
    if (residual) a += load(residual, i);
    if (pre) store(pre, i, a);
    store(y, i, gelu ? geluTanh(a) : a);
  }
}

/// matmul_swiglu_grad's pass over the product in y: y = dgate and dup =
/// swiglu_grad(gate, up, y), as the swiglu_grad kernel computes them.
template <typename T>
__global__ void swigluGradEpilogueKernel(T *y, T *dup, const T *gate, const T *up,
                                         int64_t total) {
  LLMC_GRID_STRIDE(i, total) {
    float g = load(gate, i), dy = load(y, i);
    store(y, i, swigluGradGate(g, load(up, i), dy));
    store(dup, i, swigluGradUp(g, dy));
  }
}

/// The GEMM, then the elementwise epilogue unless the GEMM did it; with
/// no GEMM (K = 0) y starts from zeros.
template <typename T> class LinearKernel final : public Kernel {
public:
  LinearKernel(const KernelArgs &args, const contracts::LinearBinding &b,
               std::unique_ptr<LtGemm> gemm, bool epilogueInGemm)
      : gemm_(std::move(gemm)), epilogueInGemm_(epilogueInGemm), gelu_(b.gelu), n_(b.n),
        total_(b.rows * b.n), y_(args.outputs[0].as<T>()),
        pre_(b.keepPre ? args.outputs[1].as<T>() : nullptr),
        bias_(b.bias >= 0 ? args.inputs[b.bias].as<T>() : nullptr),
        residual_(b.residual >= 0 ? args.inputs[b.residual].as<T>() : nullptr),
        geluInput_(b.geluInput >= 0 ? args.inputs[b.geluInput].as<T>() : nullptr),
        gate_(b.swigluGate >= 0 ? args.inputs[b.swigluGate].as<T>() : nullptr),
        up_(b.swigluUp >= 0 ? args.inputs[b.swigluUp].as<T>() : nullptr),
        dup_(b.swigluUp >= 0 ? args.outputs[1].as<T>() : nullptr) {}

  void run(const StepContext &ctx) override {
    cudaStream_t stream = streamOf(ctx);
    if (gemm_)
      gemm_->run(stream);
    else
      LLMC_CUDA_CHECK(cudaMemsetAsync(y_, 0, total_ * sizeof(T), stream));
    if (epilogueInGemm_) return;
    if (gate_)
      swigluGradEpilogueKernel<T><<<gridFor(total_), kBlock, 0, stream>>>(y_, dup_, gate_, up_,
                                                                          total_);
    else
      epilogueKernel<T><<<gridFor(total_), kBlock, 0, stream>>>(y_, pre_, bias_, residual_,
                                                                 geluInput_, n_, total_, gelu_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  std::unique_ptr<LtGemm> gemm_;
  bool epilogueInGemm_, gelu_;
  int64_t n_, total_;
  T *y_, *pre_;
  const T *bias_, *residual_, *geluInput_, *gate_, *up_;
  T *dup_;
};

/// An empty y: nothing to do.
class EmptyLinearKernel final : public Kernel {
public:
  void run(const StepContext &) override {}
};

/// The cuBLASLt epilogue for `b` on `d`: BIAS, GELU_BIAS, GELU_AUX_BIAS
/// (pre stored as the aux matrix), a residual as C, DGELU or DGELU_BGRAD
/// (GELU's input read as the aux matrix); none for SwiGLU's backward,
/// which cuBLASLt has no epilogue for.
void describeEpilogue(const contracts::LinearBinding &b, const KernelArgs &args, GemmDesc &d) {
  if (b.residual >= 0) d.addend = args.inputs[b.residual].data;
  if (b.bias >= 0) {
    d.bias = args.inputs[b.bias].data;
    d.epilogue = !b.gelu      ? GemmEpilogue::Bias
                 : b.keepPre ? GemmEpilogue::GeluAuxBias
                             : GemmEpilogue::GeluBias;
  }
  if (b.keepPre) d.aux = args.outputs[1].data;
  if (b.geluInput >= 0) {
    d.epilogue = b.biasGrad ? GemmEpilogue::DGeluBGrad : GemmEpilogue::DGelu;
    d.aux = args.inputs[b.geluInput].data; // read, never written
    if (b.biasGrad) d.biasGrad = args.outputs[1].data;
  }
}

/// The plain GEMM y = x·w of a binding (x's leading dims folded into M).
GemmDesc productDesc(const contracts::LinearBinding &b, const KernelArgs &args) {
  GemmDesc d;
  d.dtype = b.dtype;
  d.m = b.rows, d.n = b.n, d.k = b.k;
  d.transposeB = b.transposeB;
  d.a = args.inputs[0].data, d.b = args.inputs[1].data, d.c = args.outputs[0].data;
  d.strideA = d.m * d.k, d.strideC = d.m * d.n;
  return d;
}

/// The kernel `name` for the binding `b`: one GEMM with its epilogue where
/// cuBLASLt has an algorithm for it, else the plain GEMM and the
/// elementwise pass (not for a bias gradient: see makeCudaMatmulGeluGrad).
std::unique_ptr<Kernel> gemmWithEpilogue(const char *name, const contracts::LinearBinding &b,
                                         const KernelArgs &args, std::string &error) {
  Validator v(name, args, error);
  if (b.rows == 0 || b.n == 0) return std::make_unique<EmptyLinearKernel>();
  if (b.k == 0) return makeFloatKernel<LinearKernel>(b.dtype, args, b, nullptr, false);

  GemmDesc d = productDesc(b, args);
  describeEpilogue(b, args, d);

  std::string gemmError;
  std::unique_ptr<LtGemm> gemm;
  if (d.epilogue != GemmEpilogue::None || d.addend) gemm = LtGemm::create(d, gemmError);
  const bool epilogueInGemm = gemm != nullptr;
  if (!gemm) { // the plain product, then the elementwise epilogue
    d.epilogue = GemmEpilogue::None;
    d.bias = nullptr, d.aux = nullptr, d.addend = nullptr;
    gemm = LtGemm::create(d, gemmError);
    if (!gemm) return v.reject(gemmError);
  }
  return makeFloatKernel<LinearKernel>(b.dtype, args, b, std::move(gemm), epilogueInGemm);
}

std::unique_ptr<Kernel> makeCudaLinear(const KernelArgs &args, std::string &error) {
  contracts::LinearBinding b;
  if (!contracts::bindLinear(args, error, &b)) return nullptr;
  return gemmWithEpilogue("linear", b, args, error);
}
std::unique_ptr<Kernel> makeCudaMatmulSwigluGrad(const KernelArgs &args, std::string &error) {
  contracts::LinearBinding b;
  if (!contracts::bindMatmulSwigluGrad(args, error, &b)) return nullptr;
  return gemmWithEpilogue("matmul_swiglu_grad", b, args, error);
}

/// One planned GEMM whose epilogue does the rest.
class GemmKernel final : public Kernel {
public:
  explicit GemmKernel(std::unique_ptr<LtGemm> gemm) : gemm_(std::move(gemm)) {}
  void run(const StepContext &ctx) override { gemm_->run(streamOf(ctx)); }

private:
  std::unique_ptr<LtGemm> gemm_;
};

/// matmul_gelu_grad; with bias_grad, the DGELU_BGRAD epilogue sums the
/// result's rows into db as it stores them, else (no algorithm for it)
/// the kernel without bias_grad and a reduce_sum of its result.
std::unique_ptr<Kernel> makeCudaMatmulGeluGrad(const KernelArgs &args, std::string &error) {
  contracts::LinearBinding b;
  if (!contracts::bindMatmulGeluGrad(args, error, &b)) return nullptr;
  if (!b.biasGrad) return gemmWithEpilogue("matmul_gelu_grad", b, args, error);
  if (b.rows > 0 && b.n > 0 && b.k > 0) {
    GemmDesc d = productDesc(b, args);
    describeEpilogue(b, args, d);
    std::string gemmError;
    if (std::unique_ptr<LtGemm> gemm = LtGemm::create(d, gemmError))
      return std::make_unique<GemmKernel>(std::move(gemm));
  }
  KernelArgs product = args, sum;
  product.outputs = {args.outputs[0]};
  product.attrs.setInt("bias_grad", 0);
  sum.inputs = {args.outputs[0]};
  sum.outputs = {args.outputs[1]};
  return bindSequence(Backend::CUDA, "matmul_gelu_grad",
                      {{"matmul_gelu_grad", &product}, {"reduce_sum", &sum}}, error);
}

std::unique_ptr<Kernel> makeCudaLinearWeightGrad(const KernelArgs &args, std::string &error) {
  contracts::LinearWeightGradBinding b;
  if (!contracts::bindLinearWeightGrad(args, error, &b)) return nullptr;
  if (b.rows > 0 && b.k > 0 && b.n > 0) {
    GemmDesc d; // dw[K, N] = (x as [rows, K])ᵀ · (dy as [rows, N]), db beside it
    d.dtype = b.dtype;
    d.m = b.k, d.n = b.n, d.k = b.rows;
    d.transposeA = true;
    d.a = args.inputs[0].data, d.b = args.inputs[1].data, d.c = args.outputs[0].data;
    d.strideA = d.m * d.k, d.strideC = d.m * d.n;
    d.epilogue = GemmEpilogue::BiasGradB;
    d.biasGrad = args.outputs[1].data;
    std::string gemmError;
    if (std::unique_ptr<LtGemm> gemm = LtGemm::create(d, gemmError))
      return std::make_unique<GemmKernel>(std::move(gemm));
  }
  // No epilogue (or nothing to multiply): matmul, then reduce_sum.
  KernelArgs product, sum;
  contracts::splitLinearWeightGrad(args, b, &product, &sum);
  return bindSequence(Backend::CUDA, "linear_weight_grad",
                      {{"matmul", &product}, {"reduce_sum", &sum}}, error);
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "linear", makeCudaLinear);
LLMC_REGISTER_KERNEL(CUDA, "matmul_gelu_grad", makeCudaMatmulGeluGrad);
LLMC_REGISTER_KERNEL(CUDA, "matmul_swiglu_grad", makeCudaMatmulSwigluGrad);
LLMC_REGISTER_KERNEL(CUDA, "linear_weight_grad", makeCudaLinearWeightGrad);

} // namespace llmc::cuda
