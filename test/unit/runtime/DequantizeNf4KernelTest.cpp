//===- DequantizeNf4KernelTest.cpp - the QLoRA kernel reads export storage ===//
//
// A QLoRA artifact reads base weights exactly as `llmc quantize --scheme
// nf4:block<N> [--double-quant fp8]` stores them: the CPU kernel
// qat_dequantize_nf4 applied to the stored arrays must give, bit for bit,
// what quant::dequantize gives (and so what fake_quant gives with the
// reconstructed absmax), with int8 and E4M3 absmax levels, for odd sizes,
// several blocks per double-quantization block, and bf16 output (the f32
// value rounded). Bad shapes and absmax formats are named at bind time.
//
//===----------------------------------------------------------------------===//

#include "kernels/Kernel.h"
#include "runtime/quant/QuantizedTensor.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

using namespace llmc;

namespace {

struct Bound {
  std::unique_ptr<Kernel> kernel;
  std::string error;
};

Bound bind(quant::QuantizedTensor &q, void *out, DType outType, int64_t block) {
  // absmax_format as the exec lowering encodes it (absent: int8).
  KernelArgs args;
  int64_t groups = static_cast<int64_t>(q.absmaxCodes.size());
  args.inputs.push_back({q.codes.data(), DType::U8, {static_cast<int64_t>(q.codes.size())}});
  args.inputs.push_back({q.absmaxCodes.data(), DType::U8, {groups}});
  args.inputs.push_back(
      {q.absmaxScales.data(), DType::F32, {static_cast<int64_t>(q.absmaxScales.size())}});
  args.inputs.push_back({&q.absmaxMean, DType::F32, {}});
  args.outputs.push_back({out, outType, q.shape});
  args.attrs.setInt("block", block);
  if (q.doubleQuant == quant::DoubleQuant::Fp8E4M3)
    args.attrs.setInt("absmax_format", static_cast<int64_t>(quant::AbsmaxFormat::Fp8E4M3));
  Bound b;
  b.kernel = findKernel(Backend::CPU, "qat_dequantize_nf4")(args, b.error);
  return b;
}

quant::QuantizedTensor storedNf4(const std::vector<int64_t> &shape, int64_t block, uint64_t seed,
                                 quant::DoubleQuant levels = quant::DoubleQuant::Int8) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> x(n);
  for (float &v : x) v = normal(rng);
  x[n / 3] = 0.5f; // an outlier block
  for (int64_t i = 0; i < block && i < n; ++i) x[i] = 0.0f; // an empty block
  quant::Scheme s = quant::makeScheme(quant::Format::Nf4, quant::Granularity::Block, 0, block);
  quant::QuantizedTensor q;
  EXPECT_EQ(quant::quantize(x.data(), shape, s, levels, q), "");
  return q;
}

TEST(DequantizeNf4Kernel, MatchesTheExportedStorageBitForBit) {
  for (quant::DoubleQuant levels : {quant::DoubleQuant::Int8, quant::DoubleQuant::Fp8E4M3})
    for (auto [shape, block] : std::vector<std::pair<std::vector<int64_t>, int64_t>>{
             {{128, 384}, 64}, {{3, 64}, 64}, {{1, 7}, 7}, {{600, 512}, 64}, {{5, 96}, 32}}) {
      SCOPED_TRACE(levels == quant::DoubleQuant::Int8 ? "int8 levels" : "E4M3 levels");
      quant::QuantizedTensor q = storedNf4(shape, block, 7, levels);
      std::vector<float> expected = quant::dequantize(q);
      std::vector<float> out(expected.size(), std::nanf(""));
      Bound b = bind(q, out.data(), DType::F32, block);
      ASSERT_TRUE(b.kernel) << b.error;
      b.kernel->run(StepContext{});
      for (size_t i = 0; i < out.size(); ++i)
        ASSERT_EQ(out[i], expected[i])
            << "element " << i << " of " << shape[0] << "x" << shape[1] << ", block " << block;

      std::vector<uint16_t> half(expected.size(), 0xFFFF);
      Bound h = bind(q, half.data(), DType::BF16, block);
      ASSERT_TRUE(h.kernel) << h.error;
      h.kernel->run(StepContext{});
      for (size_t i = 0; i < expected.size(); ++i) {
        uint32_t bits;
        std::memcpy(&bits, &expected[i], 4);
        uint32_t rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16; // nearest even
        ASSERT_EQ(half[i], rounded) << "element " << i;
      }
    }
}

TEST(DequantizeNf4Kernel, BadShapesAreNamed) {
  quant::QuantizedTensor q = storedNf4({4, 64}, 64, 3);
  std::vector<float> out(256);
  EXPECT_NE(bind(q, out.data(), DType::F32, 48).error.find("must divide the last dimension"),
            std::string::npos);
  q.absmaxCodes.pop_back();
  EXPECT_NE(bind(q, out.data(), DType::F32, 64).error.find("absmax_q must be u8[4]"),
            std::string::npos);
  quant::QuantizedTensor r = storedNf4({4, 64}, 64, 3);
  KernelArgs args;
  args.inputs = {{r.codes.data(), DType::U8, {128}},
                 {r.absmaxCodes.data(), DType::U8, {4}},
                 {r.absmaxScales.data(), DType::F32, {1}},
                 {&r.absmaxMean, DType::F32, {}}};
  args.outputs = {{out.data(), DType::F32, {4, 64}}};
  args.attrs.setInt("block", 64);
  args.attrs.setInt("absmax_format", 2);
  std::string error;
  EXPECT_EQ(findKernel(Backend::CPU, "qat_dequantize_nf4")(args, error), nullptr);
  EXPECT_NE(error.find("attribute 'absmax_format' must be 0 (int8) or 1 (fp8_e4m3), got 2"),
            std::string::npos)
      << error;
}

} // namespace
