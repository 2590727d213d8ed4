//===- QuantizedMatmul.cuh - x · W with W expanded a chunk at a time -*- CUDA -*-===//
//
// The CUDA kernel behind matmul_nf4 and matmul_int, as
// kernels/cpu/QuantizedMatmul.h is the CPU one: y = x · W (or x · Wᵀ) with W
// in quantized storage that an Element functor reads one value of
// (`__device__ float operator()(int64_t i) const`, element i of W
// flattened row-major). W is expanded one column chunk (at most
// kChunkBytes) at a time into bind-time scratch in x's type, and a
// cuBLASLt GEMM (planned at bind time, LtGemm.h) multiplies x by the
// chunk. When W fits in one chunk the GEMM writes y directly; otherwise it
// writes the chunk's [M, nc] columns into scratch, which a copy kernel
// places into y's columns.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CUDA_QUANTIZEDMATMUL_CUH
#define LLMC_KERNELS_CUDA_QUANTIZEDMATMUL_CUH

#include "kernels/contracts/QuantizedMatmul.h"
#include "kernels/cuda/BindScratch.h"
#include "kernels/cuda/Common.cuh"
#include "kernels/cuda/LtGemm.h"

#include <algorithm>
#include <climits>

namespace llmc::cuda {
namespace quantized_matmul {

/// Bytes of expanded W per GEMM.
constexpr int64_t kChunkBytes = 64 << 20;

/// out[r, c] = W[r0 + r, c0 + c] for r < rows, c < cols: a window of W
/// (row-major, rows of `ld` elements), expanded.
template <typename T, typename Element>
__global__ void expandWindow(Element element, int64_t r0, int64_t rows, int64_t c0, int64_t cols,
                             int64_t ld, T *out) {
  LLMC_GRID_STRIDE(e, rows * cols) { store(out, e, element((r0 + e / cols) * ld + c0 + e % cols)); }
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

template <typename T, typename Element> class QuantizedMatmulKernel final : public Kernel {
public:
  QuantizedMatmulKernel(const contracts::QuantizedProduct &d, Element element, void *y,
                        int64_t chunk,
         BindScratch w, BindScratch part, std::unique_ptr<LtGemm> full,
         std::unique_ptr<LtGemm> last)
      : d_(d), element_(element), y_(static_cast<T *>(y)), chunk_(chunk), w_(std::move(w)), part_(std::move(part)),
        full_(std::move(full)), last_(std::move(last)) {}

  void run(const StepContext &ctx) override {
    cudaStream_t stream = streamOf(ctx);
    for (int64_t c0 = 0; c0 < d_.n; c0 += chunk_) {
      const int64_t nc = std::min(chunk_, d_.n - c0);
      // W [N, K]: rows c0.. (all K columns); W [K, N]: columns c0.. of every row.
      const int64_t rows = d_.transposeB ? nc : d_.k, cols = d_.transposeB ? d_.k : nc;
      const int64_t r0 = d_.transposeB ? c0 : 0, first = d_.transposeB ? 0 : c0;
      expandWindow<T><<<gridFor(rows * cols), kBlock, 0, stream>>>(element_, r0, rows, first,
                                                                   cols, d_.cols, w_.as<T>());
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
  contracts::QuantizedProduct d_;
  Element element_;
  T *y_;
  int64_t chunk_;
  BindScratch w_, part_;
  std::unique_ptr<LtGemm> full_, last_;
};

template <typename Element> struct Factory {
  template <typename T> using Of = QuantizedMatmulKernel<T, Element>;
};

} // namespace quantized_matmul

/// The kernel for `d` reading W through `element`, or null with `error`
/// set (a GEMM cuBLASLt cannot plan).
template <typename Element>
std::unique_ptr<Kernel> makeQuantizedMatmul(const char *name, const KernelArgs &args,
                                            const contracts::QuantizedProduct &d,
                                            Element element, std::string &error) {
  using namespace quantized_matmul;
  Validator v(name, args, error);
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
  return makeFloatKernel<Factory<Element>::template Of>(
      d.dtype, d, element, args.outputs[0].data, chunk, std::move(w), std::move(part),
      std::move(full), std::move(last));
}

} // namespace llmc::cuda

#endif
