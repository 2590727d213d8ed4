//===- decode_gemv_test.cpp - decode-step products from stored weights ----===//
//
// The few-row products over W [N, K] that decode in registers
// (kernels/cpu/DecodeGemv.h): matmul_int (int8 and int4, symmetric, in
// blocks, per row and per tensor), matmul_nf4 and matmul in fp32 and bf16
// with transpose_b, against the double reference of the expanded weight.
// M = 1..5 rows (5: four rows of x, then one), N not a multiple of 16 or
// of the threads' share, K a multiple of a step, not one, and runs (one
// scale per row) ending in a partial step; each once with AVX-512 (where
// the CPU has it) and once forced to AVX2. Sums are fp32 in the kernel's
// own order: tolerance(dtype) of the norm, as the expanding paths.
//
//===----------------------------------------------------------------------===//

#include "IntWeightCases.h"
#include "Nf4WeightCases.h"

#include <cstdlib>

namespace llmc::test {
namespace {

/// Runs `body` with AVX-512 (if the CPU has it), then with AVX2 only.
template <typename Body> void onEachIsa(Body body) {
  for (bool avx2Only : {false, true}) {
    SCOPED_TRACE(avx2Only ? "AVX2" : "AVX-512 where available");
    if (avx2Only)
      setenv("LLMC_CPU_NO_AVX512", "1", 1);
    body();
    unsetenv("LLMC_CPU_NO_AVX512");
  }
}

struct Shape {
  int64_t m, n, k;
  std::string name() const {
    return "m" + std::to_string(m) + " n" + std::to_string(n) + " k" + std::to_string(k);
  }
};

const std::vector<int64_t> kRows = {1, 2, 3, 4, 5};

TEST(DecodeGemv, IntCodesMatchTheReference) {
  onEachIsa([] {
    uint64_t seed = 4100;
    // K = 96: three steps; 64 in blocks of 64; 160 with blocks of 32;
    // 100 (int8 only): a row's one scale ends in a partial step.
    const std::vector<int64_t> ns = {1, 17, 100};
    const std::vector<Grouping> groupings = {{0, -1}, {0, 0}, {32, -1}, {64, -1}};
    for (int bits : {8, 4})
      for (int64_t k : {64, 96, 100, 160})
        for (const Grouping &g : groupings)
          for (int64_t n : ns)
            for (int64_t m : kRows) {
              if (g.block > 0 && k % g.block != 0)
                continue;
              const Shape s{m, n, k};
              SCOPED_TRACE("int" + std::to_string(bits) + " " + g.name() + " " + s.name());
              std::vector<int64_t> shape = {n, k};
              IntWeight w = randomWeight(bits, n, k, g, false, seed += 3);
              RefTensor x = randomTensor({m, k}, ++seed);
              Buffer xb = Buffer::of(x, DType::F32), out(DType::F32, {m, n});
              out.poison();
              ASSERT_TRUE(
                  runKernel("matmul_int", inputsOf(xb, w), {&out}, intAttrs(bits, g, shape, true)));
              EXPECT_CLOSE(out.toRef(),
                           ref::matmulInt(x, w.codes, w.scale, w.zeroPoint, shape, bits, g.block,
                                          g.channelAxis, true),
                           Metric::Norm, tolerance(DType::F32));
            }
  });
}

TEST(DecodeGemv, Nf4CodesMatchTheReference) {
  onEachIsa([] {
    uint64_t seed = 5100;
    for (int64_t block : {32, 64})
      for (int64_t k : {64, 192})
        for (int64_t n : {1, 17, 100})
          for (int64_t m : kRows) {
            const Shape s{m, n, k};
            SCOPED_TRACE("nf4 block" + std::to_string(block) + " " + s.name());
            std::vector<int64_t> shape = {n, k};
            Nf4Weight wt = randomWeight(n * k, block, seed += 3);
            RefTensor x = randomTensor({m, k}, ++seed);
            Buffer xb = Buffer::of(x, DType::F32), out(DType::F32, {m, n});
            out.poison();
            ASSERT_TRUE(runKernel("matmul_nf4",
                                  {&xb, &wt.codesBuf, &wt.absmaxQBuf, &wt.scaleBuf, &wt.meanBuf},
                                  {&out}, nf4Attrs(block, shape, true)));
            EXPECT_CLOSE(out.toRef(),
                         ref::matmulNf4(x, wt.codes, wt.absmaxQ, wt.absmaxScale, wt.mean, shape,
                                        block, true),
                         Metric::Norm, tolerance(DType::F32));
          }
  });
}

TEST(DecodeGemv, FloatWeightsMatchTheReference) {
  onEachIsa([] {
    uint64_t seed = 6100;
    for (DType dtype : {DType::F32, DType::BF16})
      for (int64_t k : {1, 31, 96, 100})
        for (int64_t n : {1, 17, 100})
          for (int64_t m : {1, 3, 4}) {
            const Shape s{m, n, k};
            SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + s.name());
            // A leading dimension of 1: x [1, m, k], as a decode step's.
            RefTensor x = roundTo(randomTensor({1, m, k}, ++seed), dtype);
            RefTensor w = roundTo(randomTensor({n, k}, ++seed), dtype);
            Buffer xb = Buffer::of(x, dtype), wb = Buffer::of(w, dtype), out(dtype, {1, m, n});
            out.poison();
            ASSERT_TRUE(runKernel("matmul", {&xb, &wb}, {&out}, attrs({}, {{"transpose_b", 1}})));
            RefTensor rows = x;
            rows.shape = {m, k};
            RefTensor expected = ref::matmul(rows, w, false, true);
            expected.shape = {1, m, n};
            EXPECT_CLOSE(out.toRef(), expected, Metric::Norm, tolerance(dtype));
          }
  });
}

} // namespace
} // namespace llmc::test
