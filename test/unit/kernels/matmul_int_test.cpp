//===- matmul_int_test.cpp - matmul_int against dequantize + matmul -------===//
//
// Conformance cases (Conformance.h). The weight is random int8/int4/fp8
// storage (random codes, scales of either sign with some zero, zero points
// over the whole level range); the reference expands it (ref::dequantizeInt, the exact fp32 values)
// and multiplies in double. Every grouping (one scale, per row, per column, blocks), both
// symmetries and layouts, rows on the few-rows path (1, 3, 16) and the sgemm path (17, 40), and
// shapes whose tiles and chunks end ragged. Identity rows of x read the expanded weight back
// exactly. Few rows times W^T in whole blocks of 32, symmetric, quantize x
// to int8 per 32 (a decode step's product): those are not conformance
// cases (the CUDA kernel keeps x in fp32) but compare with the quantized-x
// reference and the rounding bound of QuantizedActivations.h.
//
//===----------------------------------------------------------------------===//

#include "Conformance.h"
#include "IntWeightCases.h"
#include "QuantizedActivations.h"

namespace llmc::test {
namespace {

/// x [lead..., K] times a stored [K, N] (or, transposed, [N, K]) weight.
struct IntShape {
  std::vector<int64_t> lead; // x's dims before K
  int64_t k, n;
};

int64_t rowsOf(const std::vector<int64_t> &lead) {
  int64_t rows = 1;
  for (int64_t d : lead) rows *= d;
  return rows;
}

ConformanceCase matmulIntCase(DType dtype, const CodeFormat &f, const IntShape &c,
                              const Grouping &g, bool tb, bool asymmetric, uint64_t seed) {
  std::vector<int64_t> shape = tb ? std::vector<int64_t>{c.n, c.k} : std::vector<int64_t>{c.k, c.n};
  std::string label = std::string(dtypeName(dtype)) + "_" + f.name() + "_" + g.name() +
                      (asymmetric ? "_asym" : "") + "_" + shapeLabel(c.lead) + "_k" +
                      std::to_string(c.k) + "_n" + std::to_string(c.n) + (tb ? "_transposed" : "");
  return {"matmul_int", label, [=] {
            KernelCall k;
            std::vector<int64_t> xShape = c.lead, yShape = c.lead;
            xShape.push_back(c.k);
            yShape.push_back(c.n);
            k.input(randomTensor(xShape, seed), dtype);
            IntWeight w = randomWeight(f, shape[0], shape[1], g, asymmetric, seed + 1);
            k.input(w.codesBuf);
            k.input(w.scaleBuf);
            if (asymmetric)
              k.input(w.zeroPointBuf);
            k.output(dtype, yShape);
            k.attrs = intAttrs(f, g, shape, tb);
            k.reference = [=](const std::vector<RefTensor> &in) {
              RefTensor zeroPoint = asymmetric ? in[3] : RefTensor{};
              return std::vector<RefTensor>{ref::matmulInt(in[0], in[1], in[2], zeroPoint, shape,
                                                           f.bits, g.block, g.channelAxis, tb,
                                                           f.fp8)};
            };
            k.metric = k.cudaMetric = Metric::Norm;
            return k;
          }};
}

/// Every grouping, both symmetries (fp8: symmetric), both layouts and
/// every code format; rows on the
/// few-rows path (1, 3, 16) and the sgemm path (17, 40); 600 columns make
/// tiles end ragged, 200 rows of K a k-chunk ragged, K = 2048 sgemm column
/// chunks of 512 (+ 88), N = 33·32 an odd number of blocks; GPT-2's fused
/// QKV at 16 rows. On the GPU, bf16 multiplies the weights rounded to bf16
/// and the CPU in fp32: within 1e-2.
std::vector<ConformanceCase> matmulIntCases() {
  const std::vector<IntShape> shapes = {
      {{1}, 128, 192},    {{1, 1}, 200, 600}, {{3}, 96, 64},   {{2, 8}, 64, 320},
      {{17}, 64, 96},     {{40}, 200, 600},   {{3}, 200, 640}, {{2, 20}, 2048, 600},
      {{3}, 64, 33 * 32}, {{16}, 768, 2304},
  };
  const std::vector<Grouping> groupings = {{0, -1}, {0, 0}, {0, 1}, {32, -1}};
  std::vector<ConformanceCase> cases;
  uint64_t seed = 1200;
  for (DType dtype : {DType::F32, DType::BF16})
    for (const CodeFormat &f : allCodeFormats())
      for (const IntShape &c : shapes)
        for (const Grouping &g : groupings)
          for (bool tb : {false, true})
            for (bool asymmetric : {false, true}) {
              int64_t storedCols = tb ? c.k : c.n;
              if ((g.block > 0 && storedCols % g.block != 0) || (f.fp8 && asymmetric))
                continue;
              // bf16 only widens x and rounds y: blocks (runs of one scale)
              // and per-column scales suffice.
              if (dtype == DType::BF16 && g.block == 0 && g.channelAxis != 1)
                continue;
              seed += 3;
              if (!f.fp8 && quantizesActivations(rowsOf(c.lead), c.n, c.k, g, tb, asymmetric))
                continue; // DecodeProductsQuantizeX
              cases.push_back(matmulIntCase(dtype, f, c, g, tb, asymmetric, seed));
            }
  return cases;
}

LLMC_CONFORMANCE_CASES(MatmulInt, matmulIntCases);

/// The products matmulIntCases leaves out: a decode step's, x quantized to
/// int8 per 32 (QuantizedActivations.h), against the quantized-x reference
/// (tight) and, in f32, the bound of that rounding against fp32 x.
TEST(MatmulIntKernel, DecodeProductsQuantizeX) {
  const std::vector<IntShape> shapes = {
      {{1}, 128, 192}, {{3}, 96, 64}, {{2, 8}, 64, 320}, {{3}, 64, 33 * 32}, {{16}, 768, 2304}};
  const std::vector<Grouping> groupings = {{0, -1}, {0, 0}, {32, -1}};
  uint64_t seed = 1700;
  for (DType dtype : {DType::F32, DType::BF16})
    for (const CodeFormat f : {CodeFormat{8, false}, CodeFormat{4, false}})
      for (const IntShape &c : shapes)
        for (const Grouping &g : groupings) {
          const int64_t rows = rowsOf(c.lead);
          if (!quantizesActivations(rows, c.n, c.k, g, /*transposeB=*/true, false))
            continue;
          SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + f.name() + " " + g.name() + " k" +
                       std::to_string(c.k) + " n" + std::to_string(c.n) + " rows " +
                       std::to_string(rows));
          std::vector<int64_t> shape = {c.n, c.k};
          IntWeight w = randomWeight(f, c.n, c.k, g, false, seed += 3);
          std::vector<int64_t> xShape = c.lead, yShape = c.lead;
          xShape.push_back(c.k);
          yShape.push_back(c.n);
          RefTensor x = roundTo(randomTensor(xShape, ++seed), dtype);
          Buffer xb = Buffer::of(x, dtype), out(dtype, yShape);
          out.poison();
          ASSERT_TRUE(
              runKernel("matmul_int", inputsOf(xb, w), {&out}, intAttrs(f, g, shape, true)));
          RefTensor x2 = x, y = out.toRef();
          x2.shape = {rows, c.k}, y.shape = {rows, c.n};
          const RefTensor wRef = referenceWeight(w, f, shape, g);
          const QuantizedRef q = quantizeQ8(x2);
          EXPECT_CLOSE(y, productQuantized(q, wRef), Metric::Norm, tolerance(dtype));
          if (dtype == DType::F32) {
            EXPECT_TRUE(withinRoundingBound(y, x2, q, wRef));
          }
        }
}

/// x = the identity: y is W (or Wᵀ) itself, so every expanded element is
/// compared exactly with the stored value, on both paths; 96 columns give
/// int4 runs of 16 bytes and more (the vectorized unpacking).
TEST(MatmulIntKernel, ExpandsEveryElementExactly) {
  const std::vector<Grouping> groupings = {{0, -1}, {0, 0}, {0, 1}, {8, -1}, {32, -1}};
  uint64_t seed = 7;
  for (const CodeFormat &f : allCodeFormats())
    for (int64_t k : {7, 40}) // few rows, and sgemm; odd K: int4 rows start on a high nibble
      for (int64_t n : {24, 96})
        for (const Grouping &g : groupings)
          for (bool tb : {false, true})
            for (bool asymmetric : {false, true}) {
              std::vector<int64_t> shape = tb ? std::vector<int64_t>{n, k}
                                              : std::vector<int64_t>{k, n};
              if ((g.block > 0 && shape[1] % g.block != 0) || (f.fp8 && asymmetric))
                continue;
              SCOPED_TRACE(f.name() + " " + g.name() + (asymmetric ? " asym" : "") + " k" +
                           std::to_string(k) + " n" + std::to_string(n) +
                           (tb ? " transposed" : ""));
              IntWeight w = randomWeight(f, shape[0], shape[1], g, asymmetric, seed += 5);
              RefTensor x = RefTensor::zeros({k, k});
              for (int64_t i = 0; i < k; ++i) x.data[i * k + i] = 1.0;
              Buffer xb = Buffer::of(x, DType::F32), out(DType::F32, {k, n});
              out.poison();
              ASSERT_TRUE(
                  runKernel("matmul_int", inputsOf(xb, w), {&out}, intAttrs(f, g, shape, tb)));
              RefTensor weight = referenceWeight(w, f, shape, g);
              RefTensor got = out.toRef();
              for (int64_t r = 0; r < k; ++r)
                for (int64_t c = 0; c < n; ++c) {
                  double want = tb ? weight.data[c * k + r] : weight.data[r * n + c];
                  ASSERT_EQ(got.data[r * n + c], want) << "row " << r << " column " << c;
                }
            }
}

TEST(MatmulIntKernel, ContractErrorsNameTheOperandOrAttribute) {
  auto f32 = [](std::vector<int64_t> s) { return typeOnly(DType::F32, std::move(s)); };
  auto u8 = [](std::vector<int64_t> s) { return typeOnly(DType::U8, std::move(s)); };
  auto i32 = [](std::vector<int64_t> s) { return typeOnly(DType::I32, std::move(s)); };
  // W [64, 128] int4 in blocks of 64: 4096 code bytes, 128 scales.
  const Grouping blocks{64, -1}, rows{0, 0};
  std::vector<TensorView> good = {f32({2, 64}), u8({4096}), f32({128})};
  KernelAttrs both = intAttrs({4, false}, blocks, {64, 128}, false);
  both.setInt("channel_axis", 0);
  const std::vector<BindErrorCase> cases = {
      {good, {f32({2, 128})}, intAttrs({4, false}, {48, -1}, {64, 128}, false), "must divide"},
      {good,
       {f32({2, 128})},
       intAttrs({3, false}, blocks, {64, 128}, false),
       "'bits' must be 8 or 4"},
      {good, {f32({2, 128})}, both, "exclude each other"},
      {good, {f32({2, 128})}, intAttrs({4, false}, {0, 2}, {64, 128}, false), "channel_axis"},
      {good, {f32({2, 128})}, intAttrs({4, false}, blocks, {128, 64}, false), "K = 128"},
      {good, {f32({2, 128})}, intAttrs({8, false}, blocks, {64, 128}, false), "codes"},
      {good, {f32({2, 128})}, intAttrs({4, false}, rows, {64, 128}, false), "scale"},
      {{f32({2, 64}), u8({4096}), f32({128}), i32({127})},
       {f32({2, 128})},
       intAttrs({4, false}, blocks, {64, 128}, false),
       "zero_point"},
      {good,
       {typeOnly(DType::BF16, {2, 128})},
       intAttrs({4, false}, blocks, {64, 128}, false),
       "y"},
      {good, {f32({2, 128})}, attrs({}, {{"bits", 4}}), "weight_shape"},
      {good,
       {f32({2, 128})},
       intAttrs({4, true}, blocks, {64, 128}, false),
       "fp8 codes are 8 bits"},
      {{f32({2, 64}), u8({8192}), f32({128}), i32({128})},
       {f32({2, 128})},
       intAttrs({8, true}, blocks, {64, 128}, false),
       "no zero point"},
  };
  expectBindErrorsMention("matmul_int", cases);
}

} // namespace
} // namespace llmc::test
