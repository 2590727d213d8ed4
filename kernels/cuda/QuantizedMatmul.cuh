//===- QuantizedMatmul.cuh - x · W with W expanded a chunk at a time -*- CUDA -*-===//
//
// The CUDA kernel behind matmul_nf4 and matmul_int, as
// kernels/cpu/QuantizedMatmul.h is the CPU one: y = x · W (or x · Wᵀ) with W
// in quantized storage that an Element functor reads one value of
// (`__device__ float operator()(int64_t i) const`, element i of W
// flattened row-major). W is expanded one column chunk (at most
// kChunkBytes) at a time in x's type, and a cuBLASLt GEMM per chunk
// (planned at bind time, LtGemm.h) multiplies x by it straight into the
// chunk's columns of y (rows n apart: GemmDesc::ldc).
//
// The expansion goes to one buffer per device that every quantized product
// shares: the compiler puts every kernel but the layer-streaming copies on
// the compute stream (passes/lib/StreamPlacement.cpp), so they run one
// after another, and a buffer each would hold a 16-bit copy of every
// quantized weight, which is what quantizing them saves. It is allocated
// at the first bind on the device (never during a capture) and kept for the
// process, as cuBLASLt's workspace is: captured graphs hold its address.
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
#include <map>
#include <mutex>
#include <vector>

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

/// The current device's shared expansion buffer of kChunkBytes.
inline void *sharedExpansion() {
  static std::mutex mutex;
  static std::map<int, void *> buffers;
  int device = 0;
  LLMC_CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mutex);
  void *&buffer = buffers[device];
  if (!buffer)
    buffer = deviceAlloc(static_cast<size_t>(kChunkBytes));
  return buffer;
}

/// An empty x: nothing to compute.
class EmptyKernel final : public Kernel {
public:
  void run(const StepContext &) override {}
};

template <typename T, typename Element> class QuantizedMatmulKernel final : public Kernel {
public:
  /// `gemms`: one per chunk, reading `w` and writing the chunk's columns.
  QuantizedMatmulKernel(const contracts::QuantizedProduct &d, Element element, int64_t chunk,
                        void *w, BindScratch own, std::vector<std::unique_ptr<LtGemm>> gemms)
      : d_(d), element_(element), chunk_(chunk), w_(static_cast<T *>(w)), own_(std::move(own)),
        gemms_(std::move(gemms)) {}

  void run(const StepContext &ctx) override {
    cudaStream_t stream = streamOf(ctx);
    size_t g = 0;
    for (int64_t c0 = 0; c0 < d_.n; c0 += chunk_) {
      const int64_t nc = std::min(chunk_, d_.n - c0);
      // W [N, K]: rows c0.. (all K columns); W [K, N]: columns c0.. of every row.
      const int64_t rows = d_.transposeB ? nc : d_.k, cols = d_.transposeB ? d_.k : nc;
      const int64_t r0 = d_.transposeB ? c0 : 0, first = d_.transposeB ? 0 : c0;
      expandWindow<T><<<gridFor(rows * cols), kBlock, 0, stream>>>(element_, r0, rows, first, cols,
                                                                   d_.cols, w_);
      LLMC_CUDA_CHECK_LAUNCH();
      gemms_[g++]->run(stream);
    }
  }

private:
  contracts::QuantizedProduct d_;
  Element element_;
  int64_t chunk_;
  T *w_;            // the expansion: shared, or own_ when a chunk is larger
  BindScratch own_; // only when one column of W exceeds kChunkBytes
  std::vector<std::unique_ptr<LtGemm>> gemms_;
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
  // Whole multiples of 8 columns where W allows: each chunk's columns of y
  // then start 16-byte aligned (bf16), as cuBLASLt's fastest kernels want.
  int64_t chunk = std::min(d.n, std::max<int64_t>(1, kChunkBytes / (bytes * d.k)));
  if (chunk < d.n && chunk >= 8)
    chunk = chunk / 8 * 8;
  const bool fits = chunk * d.k * bytes <= kChunkBytes;
  BindScratch own(fits ? 0 : static_cast<size_t>(chunk * d.k * bytes));
  void *w = fits ? sharedExpansion() : own.as<void>();
  std::vector<std::unique_ptr<LtGemm>> gemms;
  for (int64_t c0 = 0; c0 < d.n; c0 += chunk) {
    GemmDesc g;
    g.dtype = d.dtype;
    g.m = d.m, g.n = std::min(chunk, d.n - c0), g.k = d.k;
    g.transposeB = d.transposeB;
    g.ldc = d.n;
    g.a = args.inputs[0].data;
    g.b = w;
    g.c = static_cast<char *>(args.outputs[0].data) + c0 * bytes;
    std::string gemmError;
    gemms.push_back(LtGemm::create(g, gemmError));
    if (!gemms.back())
      return v.reject(gemmError);
  }
  return makeFloatKernel<Factory<Element>::template Of>(d.dtype, d, element, chunk, w,
                                                        std::move(own), std::move(gemms));
}

} // namespace llmc::cuda

#endif
