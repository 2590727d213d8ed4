//===- matmul.cu - batched matrix product through cuBLASLt ----------------===//
//
// c[...] (+)= op(a[...]) · op(b[...]), the contract of kernels/cpu/matmul.cpp,
// as one cuBLASLt call planned at bind time (LtGemm: descriptors, layouts and
// the heuristic's algorithm are fixed once; run() only enqueues).
//
// The batch decomposition follows the CPU: a shared 2-D b with an
// untransposed a folds a's leading dims into M (the common x·W case: one big
// GEMM, the best shape for tensor cores); otherwise one strided-batched GEMM
// over the leading index, with b's batch stride 0 when it is shared.
// `accumulate` is beta = 1. bf16 operands are multiplied with fp32
// accumulation and rounded once on store, as the CPU's widen-sgemm-narrow.
// f32 uses full fp32 unless TF32 was allowed (cuda::allowTf32) at bind time.
//
// Degenerate shapes never reach cuBLASLt (it rejects zero sizes): an empty
// c does nothing, and K = 0 is an empty sum: c = 0, or c unchanged when
// accumulating.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Common.cuh"
#include "kernels/cuda/LtGemm.h"

#include <algorithm>
#include <climits>

namespace llmc::cuda {
namespace {

class MatmulKernel final : public Kernel {
public:
  explicit MatmulKernel(std::unique_ptr<LtGemm> gemm) : gemm_(std::move(gemm)) {}
  void run(const StepContext &ctx) override { gemm_->run(streamOf(ctx)); }

private:
  std::unique_ptr<LtGemm> gemm_;
};

/// K = 0: zero c (unless accumulating); an empty c: nothing.
class EmptyMatmulKernel final : public Kernel {
public:
  EmptyMatmulKernel(void *c, size_t bytes) : c_(c), bytes_(bytes) {}
  void run(const StepContext &ctx) override {
    if (bytes_) LLMC_CUDA_CHECK(cudaMemsetAsync(c_, 0, bytes_, streamOf(ctx)));
  }

private:
  void *c_;
  size_t bytes_;
};

std::unique_ptr<Kernel> makeCudaMatmul(const KernelArgs &args, std::string &error) {
  Validator v("matmul", args, error);
  GemmDesc d;
  bool sharedB = false;
  if (!v.arity(2, 1) || !v.flagAttr("transpose_a", &d.transposeA) ||
      !v.flagAttr("transpose_b", &d.transposeB) || !v.flagAttr("accumulate", &d.accumulate))
    return nullptr;
  const TensorView &a = v.in(0), &b = v.in(1), &c = v.out(0);
  if (!v.isFloat(a, "a") || !v.hasDType(b, "b", a.dtype) || !v.hasDType(c, "c", a.dtype))
    return nullptr;
  if (a.rank() < 2) return v.reject("a must have rank >= 2, got " + a.describe());
  if (b.rank() != 2 && b.rank() != a.rank())
    return v.reject("b must be 2-D or have a's rank, got " + b.describe());
  sharedB = b.rank() == 2;
  if (!sharedB && !std::equal(a.shape.begin(), a.shape.end() - 2, b.shape.begin()))
    return v.reject("batched b must have a's leading dims: a is " + a.describe() + ", b is " +
                    b.describe());
  d.m = d.transposeA ? a.dim(-1) : a.dim(-2);
  d.k = d.transposeA ? a.dim(-2) : a.dim(-1);
  int64_t kb = d.transposeB ? b.dim(-1) : b.dim(-2);
  d.n = d.transposeB ? b.dim(-2) : b.dim(-1);
  if (kb != d.k)
    return v.reject("contraction dims differ: a " + a.describe() + " has K = " +
                    std::to_string(d.k) + ", b " + b.describe() + " has K = " + std::to_string(kb));
  std::vector<int64_t> shape(a.shape.begin(), a.shape.end() - 2);
  d.batch = product(shape);
  shape.push_back(d.m);
  shape.push_back(d.n);
  if (!v.hasType(c, "c", a.dtype, shape) || !v.fitsInt(a, "a") || !v.fitsInt(b, "b"))
    return nullptr;
  if (sharedB && !d.transposeA && d.batch * d.m > INT_MAX)
    return v.reject("a is too large for BLAS: " + a.describe());

  if (c.numel() == 0) return std::make_unique<EmptyMatmulKernel>(c.data, 0);
  if (d.k == 0) return std::make_unique<EmptyMatmulKernel>(c.data, d.accumulate ? 0 : c.bytes());

  d.dtype = a.dtype;
  d.a = a.data, d.b = b.data, d.c = c.data;
  if (sharedB && !d.transposeA) { // rows of every batch entry are rows of one [batch·M, K] a
    d.m *= d.batch;
    d.batch = 1;
  }
  d.strideA = d.m * d.k;
  d.strideB = sharedB ? 0 : d.k * d.n;
  d.strideC = d.m * d.n;
  if (d.batch > INT_MAX)
    return v.reject("a has " + std::to_string(d.batch) + " leading entries, more than cuBLASLt's " +
                    "int batch count: " + a.describe());
  std::string gemmError;
  std::unique_ptr<LtGemm> gemm = LtGemm::create(d, gemmError);
  if (!gemm) return v.reject(gemmError);
  return std::make_unique<MatmulKernel>(std::move(gemm));
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "matmul", makeCudaMatmul);

} // namespace llmc::cuda
