//===- matmul_nf4_test.cpp - matmul_nf4 against dequantize + matmul -------===//
//
// matmul_nf4 is a conformance case (Conformance.h); the AVX2 expansion is
// checked here the same way. A decode step's products (few rows of x times
// Wᵀ in blocks of whole 32s) quantize x to int8 and the levels to 127ths
// (kernels/cpu/DecodeGemvInt8.h): those are not conformance cases but
// checked against a reference that does the same. The weight is random NF4 storage (random codes
// and absmax levels, scales and a mean that leave some blocks' absmax ≤ 0, i.e. zero); the
// reference expands it (ref::dequantizeNf4, the exact fp32 values) and multiplies in double. Both
// layouts, rows on the few-rows path (1, 3, 16) and the sgemm path (17, 40), blocks of 32 and 64,
// and shapes whose tiles, k-chunks and column chunks end ragged; absmax levels int8 and (f32
// activations) E4M3, whose products keep the int8 form's tolerance. Norm metric, as matmul's.
//
//===----------------------------------------------------------------------===//

#include "Conformance.h"
#include "Nf4WeightCases.h"
#include "QuantizedActivations.h"
#include "kernels/reference/Common.h"

#include <cstdlib>
#include <random>

namespace llmc::test {
namespace {

struct Case {
  std::vector<int64_t> lead; // x's dims before K
  int64_t k, n, block;
};

/// Runs matmul_nf4 on random x [lead..., K] in `dtype` (seed `seed`) and
/// `wt` (`w`, transposed or not) into `out`, poisoned first; x is left in
/// `x`. False when the kernel does not bind.
bool runOnCase(const Case &c, DType dtype, Nf4Weight &wt, const std::vector<int64_t> &w, bool tb,
               uint64_t seed, RefTensor &x, Buffer &out) {
  std::vector<int64_t> xShape = c.lead;
  xShape.push_back(c.k);
  x = roundTo(randomTensor(xShape, seed), dtype);
  Buffer xb = Buffer::of(x, dtype);
  out.poison();
  return runKernel("matmul_nf4", {&xb, &wt.codesBuf, &wt.absmaxQBuf, &wt.scaleBuf, &wt.meanBuf},
                   {&out}, nf4Attrs(c.block, w, tb, wt.absmaxFormat));
}

/// x's shape with its last dimension `n`: the output's.
std::vector<int64_t> outShape(const Case &c) {
  std::vector<int64_t> shape = c.lead;
  shape.push_back(c.n);
  return shape;
}

void matchesDequantizeThenMatmul();

/// Every layout, rows on the few-rows path (1, 3, 16) and the sgemm path
/// (17, 40), blocks of 32 and 64; 600 columns make tiles of 256 end ragged,
/// 200 rows of K a k-chunk of 64 ragged, K = 2048 sgemm column chunks of
/// 512 (+ 88); GPT-2's fused QKV at 16 rows. On the GPU, bf16 multiplies
/// the weights rounded to bf16 and the CPU in fp32: within 1e-2.
const std::vector<Case> kCases = {
    {{1}, 128, 192, 64},    {{1, 1}, 200, 600, 32}, {{3}, 96, 64, 32},        {{2, 8}, 64, 320, 64},
    {{17}, 64, 96, 32},     {{40}, 200, 600, 64},   {{2, 20}, 2048, 600, 64}, {{1}, 2048, 600, 64},
    {{3}, 64, 33 * 64, 64}, {{3}, 200, 640, 32},    {{16}, 768, 2304, 64},
};

/// The absmax level formats a case runs with: E4M3 in f32 only (the
/// levels change the weights, not how bf16 activations round).
std::vector<quant::AbsmaxFormat> absmaxFormatsFor(DType dtype) {
  if (dtype == DType::F32)
    return {quant::AbsmaxFormat::Int8, quant::AbsmaxFormat::Fp8E4M3};
  return {quant::AbsmaxFormat::Int8};
}

/// "" for int8 levels (the cases' names before E4M3 levels existed).
std::string formatLabel(quant::AbsmaxFormat format) {
  return format == quant::AbsmaxFormat::Int8 ? "" : "_e4m3";
}

std::vector<ConformanceCase> matmulNf4Cases() {
  std::vector<ConformanceCase> cases;
  uint64_t seed = 900;
  for (DType dtype : {DType::F32, DType::BF16})
    for (quant::AbsmaxFormat format : absmaxFormatsFor(dtype))
      for (const Case &c : kCases)
        for (bool tb : {false, true}) {
          std::vector<int64_t> w =
              tb ? std::vector<int64_t>{c.n, c.k} : std::vector<int64_t>{c.k, c.n};
          if (w[1] % c.block != 0 || takesIntegerDots(ref::product(c.lead), c.k, c.block, tb))
            continue;
          std::string label = std::string(dtypeName(dtype)) + "_" + shapeLabel(c.lead) + "_k" +
                              std::to_string(c.k) + "_n" + std::to_string(c.n) + "_block" +
                              std::to_string(c.block) + (tb ? "_transposed" : "") +
                              formatLabel(format);
          cases.push_back(
              {"matmul_nf4", label, [=, caseSeed = seed += 3] {
                 KernelCall k;
                 std::vector<int64_t> xShape = c.lead, yShape = c.lead;
                 xShape.push_back(c.k);
                 yShape.push_back(c.n);
                 k.input(randomTensor(xShape, caseSeed), dtype);
                 Nf4Weight wt = randomWeight(c.k * c.n, c.block, caseSeed + 1, format);
                 for (Buffer *b : {&wt.codesBuf, &wt.absmaxQBuf, &wt.scaleBuf, &wt.meanBuf})
                   k.input(*b);
                 k.output(dtype, yShape);
                 k.attrs = nf4Attrs(c.block, w, tb, format);
                 k.reference = [=](const std::vector<RefTensor> &in) {
                   return std::vector<RefTensor>{ref::matmulNf4(
                       in[0], in[1], in[2], in[3], in[4].data[0], w, c.block, tb, format)};
                 };
                 k.metric = k.cudaMetric = Metric::Norm;
                 return k;
               }});
        }
  return cases;
}

LLMC_CONFORMANCE_CASES(MatmulNf4, matmulNf4Cases);

/// qat_dequantize_nf4 over odd element counts (a half-used last byte), one
/// scale and several, and GPT-2's MLP weight in QLoRA's 64-element blocks;
/// scales and a mean that leave some blocks' absmax ≤ 0 (y = 0); int8 and
/// E4M3 absmax levels (E4M3's NaN codes among the random bytes: zero
/// blocks). Exact: the CPU kernel is built without FMA contraction, the
/// GPU rounds each operation explicitly, and both round the fp32 value
/// once to `dtype`.
std::vector<ConformanceCase> dequantizeNf4Cases() {
  const std::vector<std::pair<std::vector<int64_t>, int64_t>> shapes = {
      {{3, 7}, 7}, {{5, 33}, 3}, {{37, 128}, 64}, {{1000, 64}, 64}, {{768, 3072}, 64}};
  std::vector<ConformanceCase> cases;
  uint64_t seed = 700;
  for (quant::AbsmaxFormat format : {quant::AbsmaxFormat::Int8, quant::AbsmaxFormat::Fp8E4M3})
    for (DType dtype : kFloatTypes)
      for (const auto &[shape, block] : shapes) {
        std::string label = std::string(dtypeName(dtype)) + "_" + shapeLabel(shape) + "_block" +
                            std::to_string(block) + formatLabel(format);
        cases.push_back(
            {"qat_dequantize_nf4", label, [=, caseSeed = seed += 3] {
               KernelCall k;
               Nf4Weight wt = randomWeight(shape[0] * shape[1], block, caseSeed, format);
               for (Buffer *b : {&wt.codesBuf, &wt.absmaxQBuf, &wt.scaleBuf, &wt.meanBuf})
                 k.input(*b);
               k.output(dtype, shape);
               k.attrs = attrs({}, {{"block", block}});
               if (format != quant::AbsmaxFormat::Int8)
                 k.attrs.setInt("absmax_format", static_cast<int64_t>(format));
               k.reference = [=](const std::vector<RefTensor> &in) {
                 return std::vector<RefTensor>{roundTo(
                     ref::dequantizeNf4(in[0], in[1], in[2], in[3].data[0], shape, block, format),
                     dtype)};
               };
               k.tolerances = k.cudaTolerances = {0.0};
               return k;
             }});
      }
  return cases;
}

LLMC_CONFORMANCE_CASES(QatDequantizeNf4, dequantizeNf4Cases);

/// The AVX2 expansion, on a CPU whose kernels would otherwise take AVX-512
/// (the conformance cases take the machine's widest).
TEST(MatmulNf4Kernel, MatchesDequantizeThenMatmulWithoutAvx512) {
  const ScopedEnv noAvx512("LLMC_CPU_NO_AVX512", "1");
  matchesDequantizeThenMatmul();
}

void matchesDequantizeThenMatmul() {
  uint64_t seed = 900;
  for (DType dtype : {DType::F32, DType::BF16})
    for (const Case &c : kCases)
      for (bool tb : {false, true}) {
        std::vector<int64_t> w = tb ? std::vector<int64_t>{c.n, c.k}
                                    : std::vector<int64_t>{c.k, c.n};
        if (w[1] % c.block != 0 || takesIntegerDots(ref::product(c.lead), c.k, c.block, tb))
          continue;
        SCOPED_TRACE(std::string(dtypeName(dtype)) + " k" + std::to_string(c.k) + " n" +
                     std::to_string(c.n) + " block " + std::to_string(c.block) +
                     (tb ? " transposed" : "") + " rows " + std::to_string(c.lead.back()));
        Nf4Weight wt = randomWeight(c.k * c.n, c.block, seed += 3);
        RefTensor x;
        Buffer out(dtype, outShape(c));
        ASSERT_TRUE(runOnCase(c, dtype, wt, w, tb, ++seed, x, out));
        RefTensor weight =
            ref::dequantizeNf4(wt.codes, wt.absmaxQ, wt.absmaxScale, wt.mean, w, c.block);
        RefTensor rows = x;
        rows.shape = {x.numel() / c.k, c.k};
        RefTensor expected = ref::matmul(rows, weight, false, tb);
        expected.shape = outShape(c);
        EXPECT_CLOSE(out.toRef(), expected, Metric::Norm, tolerance(dtype));
        EXPECT_CLOSE(out.toRef(),
                     ref::matmulNf4(x, wt.codes, wt.absmaxQ, wt.absmaxScale, wt.mean, w, c.block,
                                    tb),
                     Metric::Norm, tolerance(dtype));
      }
}

TEST(MatmulNf4Kernel, OddElementCountsAndUnalignedSegments) {
  // An odd number of weights (a half-used last byte) and odd rows, so row
  // segments start on a high nibble: W [K, N] with N = 7, block 7.
  Nf4Weight wt = randomWeight(5 * 7, 7, 77);
  for (int64_t rows : {1, 20}) {
    RefTensor x = randomTensor({rows, 5}, 78);
    Buffer xb = Buffer::of(x, DType::F32), out(DType::F32, {rows, 7});
    out.poison();
    ASSERT_TRUE(runKernel("matmul_nf4",
                          {&xb, &wt.codesBuf, &wt.absmaxQBuf, &wt.scaleBuf, &wt.meanBuf}, {&out},
                          nf4Attrs(7, {5, 7}, false)));
    EXPECT_CLOSE(out.toRef(),
                 ref::matmulNf4(x, wt.codes, wt.absmaxQ, wt.absmaxScale, wt.mean, {5, 7}, 7,
                                false),
                 Metric::Norm, 1e-5);
  }
}

/// The products the conformance cases leave out: a decode step's, x
/// quantized to int8 per 32 and the levels to 127ths, against a reference
/// that does the same (tight) and, in f32, the bound of both roundings
/// against fp32 x and the stored levels (QuantizedActivations.h).
TEST(MatmulNf4Kernel, DecodeProductsQuantizeX) {
  uint64_t seed = 1900;
  for (DType dtype : {DType::F32, DType::BF16})
    for (quant::AbsmaxFormat format : absmaxFormatsFor(dtype))
      for (const Case &c : kCases) {
        const int64_t rows = ref::product(c.lead);
        if (!takesIntegerDots(rows, c.k, c.block, true))
          continue;
        SCOPED_TRACE(std::string(dtypeName(dtype)) + " k" + std::to_string(c.k) + " n" +
                     std::to_string(c.n) + " block " + std::to_string(c.block) + " rows " +
                     std::to_string(rows) + " " + quant::absmaxFormatName(format) + " absmax");
        const std::vector<int64_t> shape = {c.n, c.k};
        Nf4Weight wt = randomWeight(c.k * c.n, c.block, seed += 3, format);
        RefTensor x;
        Buffer out(dtype, outShape(c));
        ASSERT_TRUE(runOnCase(c, dtype, wt, shape, true, ++seed, x, out));
        RefTensor x2 = x, y = out.toRef();
        x2.shape = {rows, c.k}, y.shape = {rows, c.n};
        const RefTensor wInt8 = nf4Int8Weights(wt, shape, c.block);
        const QuantizedRef q = quantizeQ8(x2);
        EXPECT_CLOSE(y, productQuantized(q, wInt8), Metric::Norm, tolerance(dtype));
        if (dtype == DType::F32) {
          const RefTensor stored = ref::dequantizeNf4(wt.codes, wt.absmaxQ, wt.absmaxScale, wt.mean,
                                                      shape, c.block, format);
          EXPECT_TRUE(withinRoundingBound(y, x2, q, wInt8, &stored));
        }
      }
}

/// A piece of a split weight on the integer dots finds its blocks' scales
/// by their index in the whole weight: rank 1's rows of GPT-2's fused QKV
/// (Wᵀ [1152, 768] of [2304, 768] in three chunks). The piece's weights are
/// read back through the expanding path (x = I, 768 rows), then the levels
/// put in 127ths for the reference.
TEST(MatmulNf4Kernel, DecodeProductsOfAPieceFindTheirScales) {
  const int64_t n = 1152, k = 768, block = 64, wholeBlocks = 2304 * 768 / block;
  Buffer codes = u8Buffer(randomBytes(n * k / 2, 31)),
         absmaxQ = u8Buffer(randomBytes(n * k / block, 32));
  const RefTensor codesRef = randomBytes(n * k / 2, 31);
  Buffer scale =
      Buffer::of(randomTensor({quant::nf4ScaleCount(wholeBlocks)}, 33, 0.01), DType::F32);
  RefTensor mean = RefTensor::zeros({1});
  mean.data[0] = 0.3;
  Buffer meanBuf = Buffer::of(mean, DType::F32);
  KernelAttrs a = nf4Attrs(block, {n, k}, true);
  a.setInts("whole_shape", {2304, 768});
  a.setInts("chunks", {3, 1});
  a.setInts("piece_offset", {384, 0});
  auto run = [&](const RefTensor &x) {
    Buffer xb = Buffer::of(x, DType::F32), out(DType::F32, {x.shape[0], n});
    out.poison();
    EXPECT_TRUE(runKernel("matmul_nf4", {&xb, &codes, &absmaxQ, &scale, &meanBuf}, {&out}, a));
    return out.toRef();
  };
  RefTensor identity = RefTensor::zeros({k, k});
  for (int64_t i = 0; i < k; ++i) identity.data[i * k + i] = 1.0;
  const RefTensor wT = run(identity); // [k, n]: the piece's stored weights, transposed
  RefTensor stored = RefTensor::zeros({n, k}), wInt8 = RefTensor::zeros({n, k});
  std::vector<uint8_t> bytes(codesRef.data.begin(), codesRef.data.end());
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) {
      const int index = quant::nf4Index(bytes.data(), r * k + c);
      const double w = wT.data[c * n + r];
      stored.data[r * k + c] = w;
      wInt8.data[r * k + c] =
          index == 7 ? 0.0 : w * (quant::kNf4Int8Levels[index] / 127.0) / quant::kNf4Levels[index];
    }
  const RefTensor x = randomTensor({5, k}, 34);
  const RefTensor y = run(x);
  const QuantizedRef q = quantizeQ8(x);
  EXPECT_CLOSE(y, productQuantized(q, wInt8), Metric::Norm, tolerance(DType::F32));
  EXPECT_TRUE(withinRoundingBound(y, x, q, wInt8, &stored));
}

/// The attributes of matmul_nf4 over a [64, 128] piece of a weight of
/// `whole` (without `complete`: whole_shape alone).
KernelAttrs piece(std::vector<int64_t> whole, std::vector<int64_t> chunks,
                  std::vector<int64_t> offset, bool complete = true) {
  KernelAttrs a = nf4Attrs(64, {64, 128}, false);
  a.setInts("whole_shape", std::move(whole));
  if (complete) {
    a.setInts("chunks", std::move(chunks));
    a.setInts("piece_offset", std::move(offset));
  }
  return a;
}

TEST(MatmulNf4Kernel, ContractErrorsNameTheOperandOrAttribute) {
  auto f32 = [](std::vector<int64_t> s) { return typeOnly(DType::F32, std::move(s)); };
  auto u8 = [](std::vector<int64_t> s) { return typeOnly(DType::U8, std::move(s)); };
  // W [64, 128] in blocks of 64: 4096 code bytes, 128 blocks, one scale.
  std::vector<TensorView> good = {f32({2, 64}), u8({4096}), u8({128}), f32({1}), f32({})};
  const std::vector<BindErrorCase> cases = {
      {good, {f32({2, 128})}, nf4Attrs(48, {64, 128}, false), "must divide"},
      {good, {f32({2, 128})}, nf4Attrs(64, {128, 64}, false), "must end in the weight's K = 128"},
      {{f32({2, 64}), u8({4095}), u8({128}), f32({1}), f32({})},
       {f32({2, 128})},
       nf4Attrs(64, {64, 128}, false),
       "codes"},
      {{f32({2, 64}), u8({4096}), u8({64}), f32({1}), f32({})},
       {f32({2, 128})},
       nf4Attrs(64, {64, 128}, false),
       "absmax_q"},
      {{f32({2, 64}), u8({4096}), u8({128}), f32({2}), f32({})},
       {f32({2, 128})},
       nf4Attrs(64, {64, 128}, false),
       "absmax_scale"},
      {good, {typeOnly(DType::BF16, {2, 128})}, nf4Attrs(64, {64, 128}, false), "y"},
      {good, {f32({2, 64})}, nf4Attrs(64, {64, 128}, false), "y"},
      {good, {f32({2, 128})}, attrs({}, {{"block", 64}}), "weight_shape"},
      {good,
       {f32({2, 128})},
       nf4Attrs(64, {64, 128}, false, static_cast<quant::AbsmaxFormat>(7)),
       "attribute 'absmax_format' must be 0 (int8) or 1 (fp8_e4m3), got 7"},
      // A piece: all three placing attributes, inside the whole weight, and
      // the whole weight's scales.
      {good, {f32({2, 128})}, piece({128, 128}, {1, 1}, {0, 0}, false), "'chunks'"},
      {{f32({2, 64}), u8({64, 64}), u8({64, 2}), f32({1}), f32({})},
       {f32({2, 128})},
       piece({128, 128}, {1, 1}, {96, 0}),
       "does not lie within whole_shape 128x128"},
      {{f32({2, 64}), u8({64, 64}), u8({64, 2}), f32({1}), f32({})},
       {f32({2, 128})},
       piece({2048, 128}, {1, 1}, {64, 0}),
       "absmax_scale must be f32[16]"},
  };
  expectBindErrorsMention("matmul_nf4", cases);
}

} // namespace
} // namespace llmc::test
