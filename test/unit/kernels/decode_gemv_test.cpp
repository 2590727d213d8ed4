//===- decode_gemv_test.cpp - decode-step products from stored weights ----===//
//
// The few-row products over W [N, K] that decode in registers
// (kernels/cpu/DecodeGemv.h, DecodeGemvInt8.h): matmul_int (int8, int4 and
// fp8, symmetric, in blocks, per row and per tensor), matmul_nf4 and matmul in
// fp32 and bf16 with transpose_b. M = 1..5 rows (5: four rows of x, then
// one), N not a multiple of 16 or of the threads' share (so 4-bit codes'
// eight-row groups, DecodeGemvRowGroups.h, leave tails), K a multiple of a
// step, not one, and runs (one scale per row) ending in a partial step;
// each with every body this CPU can run (AVX-512, AVX2; for the integer
// dots also the ymm VNNI body and AVX2's vpmaddubsw; for 4-bit codes each
// from the repacked copy, DecodeGemvPacked.h, and from the codes in place).
//
// fp32 activations: against the double reference of the expanded weight,
// tolerance(dtype) of the norm (sums are fp32 in the kernel's own order).
// int8/int4 in whole blocks of 32 quantize x to int8 per 32 elements
// (Q8_0): against a reference that quantizes x the same way (exact integer
// sums, so only fp32 scaling and summing differ: tolerance(F32)), and
// element by element against the fp32-activation reference within the
// bound of that rounding, Σ_blocks d/2 · Σ_block |W| (d = amax/127 of x's
// block), plus fp32 summation slack. NF4 likewise, its levels in 127ths
// (W'), the bound widened by Σ |x| · |W' − W|.
//
//===----------------------------------------------------------------------===//

#include "IntWeightCases.h"
#include "Nf4WeightCases.h"
#include "QuantizedActivations.h"

#include <cmath>
#include <cstdlib>
#include <limits>

namespace llmc::test {
namespace {

/// The environment of one body: (variable, value) pairs.
struct Isa {
  const char *name;
  std::vector<std::pair<const char *, const char *>> env;
};

/// Every body this CPU can run: the best (AVX-512 VNNI where available),
/// ymm VNNI (AVX-VNNI, or AVX-512 VNNI's EVEX form), AVX2 without VNNI,
/// and AVX2 only (no AVX-512); 4-bit codes from the repacked copy
/// (DecodeGemvPacked.h), and in place with the zmm, ymm VNNI and AVX2
/// bodies.
const std::vector<Isa> kIsas = {
    {"best", {}},
    {"ymm VNNI", {{"LLMC_CPU_DOT", "avxvnni"}}},
    {"AVX2 dot", {{"LLMC_CPU_DOT", "avx2"}}},
    {"no AVX-512", {{"LLMC_CPU_NO_AVX512", "1"}}},
    {"best in place", {{"LLMC_CPU_NO_PACK", "1"}}},
    {"ymm VNNI in place", {{"LLMC_CPU_DOT", "avxvnni"}, {"LLMC_CPU_NO_PACK", "1"}}},
    {"AVX2 dot in place", {{"LLMC_CPU_DOT", "avx2"}, {"LLMC_CPU_NO_PACK", "1"}}},
};

/// Runs `body` under each of kIsas.
template <typename Body> void onEachIsa(Body body) {
  for (const Isa &isa : kIsas) {
    SCOPED_TRACE(isa.name);
    std::vector<std::unique_ptr<ScopedEnv>> env;
    for (const auto &[key, value] : isa.env) env.push_back(std::make_unique<ScopedEnv>(key, value));
    body();
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
    // K = 96: three steps (with AVX-512 VNNI, int4: a partial step of
    // blocks); 64 in blocks of 64; 160 with blocks of 32; 100 (int8 only):
    // a row's one scale ends in a partial step, so x stays fp32.
    const std::vector<int64_t> ns = {1, 17, 100};
    const std::vector<Grouping> groupings = {{0, -1}, {0, 0}, {32, -1}, {64, -1}};
    for (const CodeFormat &f : allCodeFormats())
      for (int64_t k : {64, 96, 100, 160})
        for (const Grouping &g : groupings)
          for (int64_t n : ns)
            for (int64_t m : kRows) {
              if (g.block > 0 && k % g.block != 0)
                continue;
              const Shape s{m, n, k};
              SCOPED_TRACE(f.name() + " " + g.name() + " " + s.name());
              std::vector<int64_t> shape = {n, k};
              IntWeight w = randomWeight(f, n, k, g, false, seed += 3);
              RefTensor x = randomTensor({m, k}, ++seed);
              Buffer xb = Buffer::of(x, DType::F32), out(DType::F32, {m, n});
              out.poison();
              ASSERT_TRUE(
                  runKernel("matmul_int", inputsOf(xb, w), {&out}, intAttrs(f, g, shape, true)));
              const RefTensor wRef = referenceWeight(w, f, shape, g);
              if (k % 32 != 0 || f.fp8) { // fp32 activations
                EXPECT_CLOSE(out.toRef(), ref::matmul(x, wRef, false, true), Metric::Norm,
                             tolerance(DType::F32));
                continue;
              }
              const QuantizedRef q = quantizeQ8(x);
              EXPECT_CLOSE(out.toRef(), productQuantized(q, wRef), Metric::Norm,
                           tolerance(DType::F32));
              EXPECT_TRUE(withinRoundingBound(out.toRef(), x, q, wRef));
            }
  });
}

/// Copies `from`'s bytes over `to`'s (buffers of one shape and dtype).
void load(Buffer &to, Buffer &from) {
  const TensorView a = to.view(), b = from.view();
  ASSERT_EQ(a.bytes(), b.bytes());
  std::memcpy(a.data, b.data, b.bytes());
}

/// An int4 weight [37, 96] in blocks of 32 and an NF4 one in blocks of 32.
struct FourBitWeights {
  IntWeight ints;
  Nf4Weight nf4;
  static constexpr int64_t n = 37, k = 96;
  static FourBitWeights random(uint64_t seed) {
    return {randomWeight(CodeFormat{4, false}, n, k, Grouping{32, -1}, false, seed),
            randomWeight(n * k, 32, seed + 1)};
  }
  /// The int4 and the NF4 products' reference weights (NF4's in 127ths).
  std::vector<RefTensor> references() const {
    return {referenceWeight(ints, CodeFormat{4, false}, {n, k}, Grouping{32, -1}),
            nf4Int8Weights(nf4, {n, k}, 32)};
  }
  /// Copies `other`'s storage over this one's (what loading weights does).
  void load(FourBitWeights &other) {
    for (auto [to, from] : {std::pair{&ints.codesBuf, &other.ints.codesBuf},
                            {&ints.scaleBuf, &other.ints.scaleBuf},
                            {&nf4.codesBuf, &other.nf4.codesBuf},
                            {&nf4.absmaxQBuf, &other.nf4.absmaxQBuf},
                            {&nf4.scaleBuf, &other.nf4.scaleBuf},
                            {&nf4.meanBuf, &other.nf4.meanBuf}})
      test::load(*to, *from);
  }
};

/// A decode product's 4-bit weights are read after binding: llmc-run and
/// llmc generate bind their programs before or after --weights fills the
/// parameters. Prepared with its weights constant (Kernel::prepare, as
/// llmc generate does once it has loaded them), a kernel reads the
/// repacked copy (DecodeGemvPacked.h) made then, and a second kernel on
/// the same storage with two rows of x (a prefill program's) shares it.
/// Unprepared, or with a weight input not constant (a layer streamed into
/// a reused slot), a kernel reads the storage as it is at each product:
/// weights loaded between two products are the second one's.
TEST(DecodeGemv, FourBitWeightsAreReadAfterLoading) {
  onEachIsa([] {
    for (int prepared : {0, 1, 2}) { // no, with the scales not constant, yes
      SCOPED_TRACE(prepared == 2 ? "prepared" : prepared == 1 ? "scales vary" : "unprepared");
      const int64_t k = FourBitWeights::k;
      FourBitWeights bound = FourBitWeights::random(610), first = FourBitWeights::random(612),
                     second = FourBitWeights::random(614);
      std::vector<std::unique_ptr<Kernel>> kernels; // per rows of x: int4's, NF4's
      std::vector<Buffer> xs, outs;
      for (int64_t m : {1, 2}) {
        xs.emplace_back(DType::F32, std::vector<int64_t>{m, k});
        outs.emplace_back(DType::F32, std::vector<int64_t>{m, FourBitWeights::n});
      }
      const std::vector<int64_t> shape = {FourBitWeights::n, k};
      for (size_t i = 0; i < xs.size(); ++i) {
        kernels.push_back(bindKernel("matmul_int", inputsOf(xs[i], bound.ints), {&outs[i]},
                                     intAttrs({4, false}, {32, -1}, shape, true)));
        Nf4Weight &w = bound.nf4;
        kernels.push_back(bindKernel("matmul_nf4",
                                     {&xs[i], &w.codesBuf, &w.absmaxQBuf, &w.scaleBuf, &w.meanBuf},
                                     {&outs[i]}, nf4Attrs(32, shape, true, w.absmaxFormat)));
      }
      for (const auto &kernel : kernels) ASSERT_TRUE(kernel);
      bound.load(first);
      if (prepared > 0)
        for (size_t j = 0; j < kernels.size(); ++j) {
          std::vector<bool> constant(j % 2 == 0 ? 3 : 5, true);
          constant[2] = prepared == 2;
          kernels[j]->prepare(constant);
        }
      for (uint64_t seed : {620, 621}) {
        if (seed == 621 && prepared < 2)
          bound.load(second);
        const std::vector<RefTensor> refs =
            seed == 621 && prepared < 2 ? second.references() : first.references();
        for (size_t i = 0; i < xs.size(); ++i) {
          const RefTensor x = randomTensor({xs[i].shape[0], k}, seed);
          Buffer values = Buffer::of(x, DType::F32);
          load(xs[i], values);
          const QuantizedRef q = quantizeQ8(x);
          for (int codes = 0; codes < 2; ++codes) {
            kernels[2 * i + codes]->run(StepContext{});
            EXPECT_CLOSE(outs[i].toRef(), productQuantized(q, refs[codes]), Metric::Norm,
                         tolerance(DType::F32));
          }
        }
      }
    }
  });
}

TEST(DecodeGemv, QuantizedActivationsKeepNonFiniteValues) {
  onEachIsa([] {
    // 5 rows take the row-at-a-time bodies, 37 the eight-row groups too.
    for (int64_t n : {5, 37}) {
      const int64_t k = 64;
      IntWeight w = randomWeight({4, false}, n, k, {32, -1}, false, 77);
      w.scaleBuf.view().as<float>()[0] = 0.5f; // no zero scale: every row sees x
      RefTensor x = randomTensor({1, k}, 78);
      x.data[40] = std::numeric_limits<double>::quiet_NaN();
      Buffer xb = Buffer::of(x, DType::F32), out(DType::F32, {1, n});
      ASSERT_TRUE(runKernel("matmul_int", inputsOf(xb, w), {&out},
                            intAttrs({4, false}, {32, -1}, {n, k}, true)));
      for (int64_t r = 0; r < n; ++r)
        EXPECT_TRUE(std::isnan(out.view().as<float>()[r])) << n << " rows, row " << r;
    }
  });
}

/// An E4M3 NaN code (S.1111.111) reads as NaN, never as the 480 its fp16
/// widening would give, on the decode path (one row of x, Wᵀ in steps of
/// 32) and the expanding one (40 rows): its column of y is NaN, the others
/// finite.
TEST(DecodeGemv, Fp8NanCodesReadAsNan) {
  onEachIsa([] {
    const int64_t n = 8, k = 64, nanRow = 3;
    for (int64_t rows : {1, 40})
      for (uint8_t nanCode : {uint8_t{0x7F}, uint8_t{0xFF}}) {
        SCOPED_TRACE("rows " + std::to_string(rows) + " code " + std::to_string(nanCode));
        IntWeight w = randomWeight({8, true}, n, k, {0, 0}, false, 31);
        w.codesBuf.view().as<uint8_t>()[nanRow * k + 5] = nanCode;
        Buffer xb = Buffer::of(randomTensor({rows, k}, 32), DType::F32), out(DType::F32, {rows, n});
        ASSERT_TRUE(runKernel("matmul_int", inputsOf(xb, w), {&out},
                              intAttrs({8, true}, {0, 0}, {n, k}, true)));
        const float *y = out.view().as<float>();
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < n; ++c)
            EXPECT_EQ(std::isnan(y[r * n + c]), c == nanRow) << "row " << r << " column " << c;
      }
  });
}

TEST(DecodeGemv, UnknownDotBodyIsAnError) {
  const ScopedEnv unknown("LLMC_CPU_DOT", "avx1024");
  IntWeight w = randomWeight({4, false}, 2, 32, {32, -1}, false, 9);
  RefTensor x = randomTensor({1, 32}, 10);
  Buffer xb = Buffer::of(x, DType::F32), out(DType::F32, {1, 2});
  std::vector<TensorView> inputs;
  for (Buffer *b : inputsOf(xb, w)) inputs.push_back(b->view());
  const std::string error =
      bindError("matmul_int", inputs, {out.view()}, intAttrs({4, false}, {32, -1}, {2, 32}, true));
  EXPECT_NE(error.find("LLMC_CPU_DOT=avx1024"), std::string::npos) << error;
}

TEST(DecodeGemv, Nf4Int8LevelsAreTheNearestMultiplesOf127ths) {
  for (int c = 0; c < 16; ++c)
    EXPECT_EQ(quant::kNf4Int8Levels[c], std::nearbyint(127.0 * quant::kNf4Levels[c])) << c;
}

// Blocks of 32 and 64 whose sixteen-block runs of a row cross a 256-block
// scale (K = 768 in blocks of 32, 1536 in blocks of 64: 24 blocks a row),
// with int8 and E4M3 absmax levels (AVX-512 gathers the latter's values).
TEST(DecodeGemv, Nf4CodesMatchTheReference) {
  onEachIsa([] {
    uint64_t seed = 5100;
    for (quant::AbsmaxFormat format : {quant::AbsmaxFormat::Int8, quant::AbsmaxFormat::Fp8E4M3})
      for (int64_t block : {32, 64})
        for (int64_t k : {int64_t{64}, int64_t{192}, 24 * block})
          for (int64_t n : {1, 17, 30})
            for (int64_t m : kRows) {
              const Shape s{m, n, k};
              SCOPED_TRACE("nf4 block" + std::to_string(block) + " " + s.name() + " " +
                           quant::absmaxFormatName(format) + " absmax");
              std::vector<int64_t> shape = {n, k};
              Nf4Weight wt = randomWeight(n * k, block, seed += 3, format);
              RefTensor x = randomTensor({m, k}, ++seed);
              Buffer xb = Buffer::of(x, DType::F32), out(DType::F32, {m, n});
              out.poison();
              ASSERT_TRUE(runKernel("matmul_nf4",
                                    {&xb, &wt.codesBuf, &wt.absmaxQBuf, &wt.scaleBuf, &wt.meanBuf},
                                    {&out}, nf4Attrs(block, shape, true, format)));
            // x quantized per 32 and the levels in 127ths: exact integer
            // sums, so only fp32 scaling and summing differ.
              const RefTensor wInt8 = nf4Int8Weights(wt, {n, k}, block);
              const QuantizedRef q = quantizeQ8(x);
              EXPECT_CLOSE(out.toRef(), productQuantized(q, wInt8), Metric::Norm,
                           tolerance(DType::F32));
              const RefTensor wRef = ref::dequantizeNf4(wt.codes, wt.absmaxQ, wt.absmaxScale,
                                                        wt.mean, shape, block, format);
              EXPECT_TRUE(withinRoundingBound(out.toRef(), x, q, wInt8, &wRef));
            }
  });
}

/// 4-bit weights whose every scale is an fp16 value (`llmc quantize
/// --scale-dtype f16`'s) are read from a copy holding the scales in fp16,
/// two blocks a unit (DecodeGemvPacked.h): an even, an odd and a single
/// block per row (K = 128, 96, 32) and runs of two blocks (int4 in blocks
/// of 64); NF4 with absmax levels in 2^−10 and mean 0, whose absmax are
/// fp16 values. The same products as with fp32 scales.
TEST(DecodeGemv, FourBitHalfScalesMatchTheReference) {
  onEachIsa([] {
    uint64_t seed = 7100;
    for (int64_t k : {32, 96, 128})
      for (int64_t n : {17, 37})
        for (int64_t m : {1, 2, 5}) {
          const Shape s{m, n, k};
          const RefTensor x = randomTensor({m, k}, ++seed);
          const QuantizedRef q = quantizeQ8(x);
          Buffer xb = Buffer::of(x, DType::F32), out(DType::F32, {m, n});
          for (int64_t block : {32, 64}) {
            if (k % block != 0)
              continue;
            SCOPED_TRACE("int4 block" + std::to_string(block) + " " + s.name());
            IntWeight w = randomWeight({4, false}, n, k, {block, -1}, false, seed += 3);
            w.scale = roundTo(w.scale, DType::F16);
            w.scaleBuf = Buffer::of(w.scale, DType::F32);
            out.poison();
            ASSERT_TRUE(runKernel("matmul_int", inputsOf(xb, w), {&out},
                                  intAttrs({4, false}, {block, -1}, {n, k}, true)));
            const RefTensor wRef = referenceWeight(w, {4, false}, {n, k}, {block, -1});
            EXPECT_CLOSE(out.toRef(), productQuantized(q, wRef), Metric::Norm,
                         tolerance(DType::F32));
          }
          SCOPED_TRACE("nf4 block32 " + s.name());
          Nf4Weight wt = randomWeight(n * k, 32, seed += 3);
          for (double &scale : wt.absmaxScale.data) scale = 1.0 / 1024;
          wt.mean = 0.0;
          wt.scaleBuf = Buffer::of(wt.absmaxScale, DType::F32);
          wt.meanBuf = Buffer::of(RefTensor::zeros({1}), DType::F32);
          out.poison();
          ASSERT_TRUE(runKernel("matmul_nf4",
                                {&xb, &wt.codesBuf, &wt.absmaxQBuf, &wt.scaleBuf, &wt.meanBuf},
                                {&out}, nf4Attrs(32, {n, k}, true, quant::AbsmaxFormat::Int8)));
          EXPECT_CLOSE(out.toRef(), productQuantized(q, nf4Int8Weights(wt, {n, k}, 32)),
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
