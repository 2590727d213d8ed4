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

#include "kernels/contracts/Matmul.h"
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
  contracts::MatmulBinding binding;
  if (!contracts::bindMatmul(args, error, &binding)) return nullptr;
  Validator v("matmul", args, error);
  const TensorView &a = v.in(0), &b = v.in(1), &c = v.out(0);
  GemmDesc d;
  d.m = binding.m, d.n = binding.n, d.k = binding.k, d.batch = binding.batch;
  d.transposeA = binding.transposeA, d.transposeB = binding.transposeB;
  d.accumulate = binding.accumulate;
  const bool sharedB = binding.sharedB;

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
