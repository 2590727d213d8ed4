//===- matmul_nf4.cu - x · W with W expanded from NF4, a chunk at a time --===//
//
// matmul_nf4, as kernels/cpu/matmul_nf4.cpp: y = x · W (or x · Wᵀ) with W
// in NF4 storage (kernels/QuantScheme.h). W is expanded one column chunk
// (at most kChunkBytes) at a time into bind-time scratch in x's type, and
// a cuBLASLt GEMM (planned at bind time, LtGemm.h) multiplies x by the
// chunk. When W fits in one chunk the GEMM writes y directly; otherwise it
// writes the chunk's [M, nc] columns into scratch, which a copy kernel
// places into y's columns. The expansion rounds as qat_dequantize_nf4 does
// (no fused multiply-add), then to x's type.
//
//===----------------------------------------------------------------------===//

#include "kernels/QuantScheme.h"
#include "kernels/contracts/MatmulNf4.h"
#include "kernels/cuda/BindScratch.h"
#include "kernels/cuda/Common.cuh"
#include "kernels/cuda/LtGemm.h"
#include "kernels/cuda/Nf4.cuh"

#include <algorithm>
#include <climits>

namespace llmc::cuda {
namespace {

/// Bytes of expanded W per GEMM.
constexpr int64_t kChunkBytes = 64 << 20;

/// out[r, c] = W[r0 + r, c0 + c] for r < rows, c < cols: a window of W
/// (row-major, rows of `ld` elements), expanded.
template <typename T>
__global__ void expandNf4(const uint8_t *codes, const uint8_t *absmaxQ, const float *absmaxScale,
                          const float *absmaxMean, Nf4Levels levels, int64_t r0, int64_t rows,
                          int64_t c0, int64_t cols, int64_t ld, int64_t block, T *out) {
  const float mean = *absmaxMean;
  LLMC_GRID_STRIDE(e, rows * cols) {
    const int64_t i = (r0 + e / cols) * ld + c0 + e % cols; // element of W
    store(out, e, nf4Element(codes, absmaxQ, absmaxScale, mean, levels, i, block));
  }
}

/// y[m, c0 + c] = part[m, c] for c < cols.
template <typename T>
__global__ void placeColumns(const T *part, int64_t rows, int64_t cols, int64_t c0, int64_t n,
                             T *y) {
  LLMC_GRID_STRIDE(e, rows * cols) { y[(e / cols) * n + c0 + e % cols] = part[e]; }
}

/// An empty x: nothing to compute.
class EmptyKernel final : public Kernel {
public:
  void run(const StepContext &) override {}
};

template <typename T> class MatmulNf4Kernel final : public Kernel {
public:
  MatmulNf4Kernel(const KernelArgs &args, const contracts::MatmulNf4Binding &d, int64_t chunk,
                  BindScratch w, BindScratch part, std::unique_ptr<LtGemm> full,
                  std::unique_ptr<LtGemm> last)
      : d_(d), chunk_(chunk), codes_(args.inputs[1].as<uint8_t>()),
        absmaxQ_(args.inputs[2].as<uint8_t>()), absmaxScale_(args.inputs[3].as<float>()),
        absmaxMean_(args.inputs[4].as<float>()), y_(args.outputs[0].as<T>()), w_(std::move(w)),
        part_(std::move(part)), full_(std::move(full)), last_(std::move(last)) {
    levels_ = Nf4Levels::fromScheme();
  }

  void run(const StepContext &ctx) override {
    cudaStream_t stream = streamOf(ctx);
    for (int64_t c0 = 0; c0 < d_.n; c0 += chunk_) {
      const int64_t nc = std::min(chunk_, d_.n - c0);
      // W [N, K]: rows c0.. (all K columns); W [K, N]: columns c0.. of every row.
      const int64_t rows = d_.transposeB ? nc : d_.k, cols = d_.transposeB ? d_.k : nc;
      const int64_t r0 = d_.transposeB ? c0 : 0, first = d_.transposeB ? 0 : c0;
      const int64_t ld = d_.transposeB ? d_.k : d_.n;
      expandNf4<T><<<gridFor(rows * cols), kBlock, 0, stream>>>(codes_, absmaxQ_, absmaxScale_,
                                                                absmaxMean_, levels_, r0, rows,
                                                                first, cols, ld, d_.block,
                                                                w_.as<T>());
      LLMC_CUDA_CHECK_LAUNCH();
      const LtGemm &gemm = nc == chunk_ ? *full_ : *last_;
      gemm.run(stream);
      if (chunk_ < d_.n) {
        placeColumns<T><<<gridFor(d_.m * nc), kBlock, 0, stream>>>(part_.as<T>(), d_.m, nc, c0,
                                                                   d_.n, y_);
        LLMC_CUDA_CHECK_LAUNCH();
      }
    }
  }

private:
  contracts::MatmulNf4Binding d_;
  int64_t chunk_;
  const uint8_t *codes_, *absmaxQ_;
  const float *absmaxScale_, *absmaxMean_;
  T *y_;
  BindScratch w_, part_;
  std::unique_ptr<LtGemm> full_, last_;
  Nf4Levels levels_;
};

std::unique_ptr<Kernel> makeCudaMatmulNf4(const KernelArgs &args, std::string &error) {
  contracts::MatmulNf4Binding d;
  if (!contracts::bindMatmulNf4(args, error, &d)) return nullptr;
  Validator v("matmul_nf4", args, error);
  if (d.m == 0) return std::make_unique<EmptyKernel>();
  if (d.m > INT_MAX) return v.reject("x has too many rows for cuBLASLt: " + v.in(0).describe());
  const int64_t bytes = dtypeSize(d.dtype);
  int64_t chunk = std::min(d.n, std::max<int64_t>(1, kChunkBytes / (bytes * d.k)));
  BindScratch w(static_cast<size_t>(chunk * d.k * bytes));
  BindScratch part(chunk < d.n ? static_cast<size_t>(d.m * chunk * bytes) : 0);
  auto plan = [&](int64_t nc) -> std::unique_ptr<LtGemm> {
    GemmDesc g;
    g.dtype = d.dtype;
    g.m = d.m, g.n = nc, g.k = d.k;
    g.transposeB = d.transposeB;
    g.a = args.inputs[0].data;
    g.b = w.as<void>();
    g.c = chunk < d.n ? part.as<void>() : args.outputs[0].data;
    std::string gemmError;
    std::unique_ptr<LtGemm> gemm = LtGemm::create(g, gemmError);
    if (!gemm) v.fail(gemmError);
    return gemm;
  };
  std::unique_ptr<LtGemm> full = plan(chunk), last;
  if (!full) return nullptr;
  if (d.n % chunk != 0 && !(last = plan(d.n % chunk))) return nullptr;
  return makeFloatKernel<MatmulNf4Kernel>(d.dtype, args, d, chunk, std::move(w), std::move(part),
                                          std::move(full), std::move(last));
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "matmul_nf4", makeCudaMatmulNf4);

} // namespace llmc::cuda
