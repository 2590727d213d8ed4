//===- CudaConformance.h - CUDA kernels against their CPU twins -----------===//
//
// A CUDA kernel is correct when it computes what the CPU kernel of the same
// name computes (the CPU kernels are themselves checked against the double
// references and PyTorch). Each CUDA test builds inputs with the helpers of
// KernelTest.h, then calls expectCudaMatchesCpu, which
//  - runs the CPU kernel on copies of the buffers;
//  - uploads the same inputs, fills every output that is not also an input
//    with 0xFF bytes (NaN for f32/bf16) so unwritten elements show, binds
//    and runs the CUDA kernel, waits, and reports any asynchronous error;
//  - compares every output with the CPU's (metric and tolerance named by
//    the caller; 1e-5 for f32 and 1e-2 for bf16 unless a test says why).
// A buffer passed as both an input and an output is aliased on both
// backends, which is how in-place kernels (adamw, qat_ema) are tested.
//
// Without a GPU every test is skipped with the reason (LLMC_REQUIRE_GPU).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_TEST_UNIT_KERNELS_CUDACONFORMANCE_H
#define LLMC_TEST_UNIT_KERNELS_CUDACONFORMANCE_H

#include "KernelTest.h"
#include "common/QuantScheme.h"

#include "kernels/AttentionImpl.h"

#include <random>
#include <string>
#include <vector>

namespace llmc::test {

/// Empty when a CUDA device is usable, else why not.
std::string missingGpuReason();

/// First statement of every CUDA test.
#define LLMC_REQUIRE_GPU()                                                                         \
  do {                                                                                             \
    std::string why_ = ::llmc::test::missingGpuReason();                                           \
    if (!why_.empty())                                                                             \
      GTEST_SKIP() << "no usable CUDA device (" << why_ << "): CUDA kernels are built, not run";   \
  } while (0)

/// Pins what runs attention (`llmc-run --attention`) while in scope, and
/// clears the notes the factories leave.
class PinAttention {
public:
  explicit PinAttention(AttentionImpl impl);
  ~PinAttention();
  PinAttention(const PinAttention &) = delete;
  PinAttention &operator=(const PinAttention &) = delete;
};

/// Every attention kernel bound since the notes were last taken ran where
/// the test pinned it, by the notes the factories leave (no reason given).
void expectBoundAsPinned();

/// How outputs are compared; `tolerances` per output (one value applies to
/// all; an infinite one skips an output the kernel leaves unspecified),
/// `metrics` per output where they differ (empty: `metric` for all).
/// Integer outputs are always compared exactly.
struct Comparison {
  Metric metric = Metric::Elementwise;
  std::vector<double> tolerances;
  std::vector<Metric> metrics = {};
};

/// Runs `name` on both backends and compares every output. `outputs` hold
/// the initial contents for in-place or accumulating kernels (a buffer that
/// is also an input, or `accumulate=1`): pass `keepOutputs` to upload them
/// instead of poisoning. Returns the GPU's outputs for further checks.
std::vector<RefTensor> expectCudaMatchesCpu(const std::string &name,
                                            const std::vector<Buffer *> &inputs,
                                            const std::vector<Buffer *> &outputs,
                                            const KernelAttrs &attrs, const Comparison &cmp,
                                            int64_t step = 1, bool keepOutputs = false);

/// `n` uniformly random bytes (NF4 codes and block maxima).
inline Buffer randomBytes(int64_t n, uint64_t seed) {
  Buffer b(DType::U8, {n});
  std::mt19937_64 rng(seed);
  uint8_t *bytes = b.view().as<uint8_t>();
  for (int64_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(rng() >> 56);
  return b;
}

/// Random NF4 storage of a piece of `pieceNumel` elements of a weight of
/// `wholeNumel`, in blocks of `block`: the piece's codes and absmax levels,
/// the whole weight's double-quantized scales and a mean of 0.3 — the
/// operands of qat_dequantize_nf4, and of matmul_nf4 after x. Each draws
/// the next of `seed`.
struct Nf4PieceStorage {
  Buffer codes, absmaxQ, scale, mean;
};
inline Nf4PieceStorage randomNf4Piece(int64_t pieceNumel, int64_t wholeNumel, int64_t block,
                                      uint64_t &seed) {
  RefTensor mean = RefTensor::zeros({1});
  mean.data[0] = 0.3;
  return {randomBytes(pieceNumel / 2, ++seed), randomBytes(pieceNumel / block, ++seed),
          Buffer::of(randomTensor({quant::nf4ScaleCount(wholeNumel / block)}, ++seed, 0.01),
                     DType::F32),
          Buffer::of(mean, DType::F32)};
}

/// A binding expected to fail on both backends.
struct CudaBindErrorCase {
  const char *kernel;
  std::vector<TensorView> inputs, outputs;
  KernelAttrs attrs;
};
/// Each case fails on the CPU, and the CUDA factory's message is the CPU's.
void expectCudaBindErrorsMatchCpu(const std::vector<CudaBindErrorCase> &cases);

/// The CUDA factory's error for a binding expected to fail ("" if it bound).
std::string cudaBindError(const std::string &name, const std::vector<TensorView> &inputs,
                          const std::vector<TensorView> &outputs, const KernelAttrs &attrs = {});

} // namespace llmc::test

#endif
