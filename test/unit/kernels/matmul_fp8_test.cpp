//===- matmul_fp8_test.cpp - qat_quantize_fp8 and qat_matmul_fp8 ----------===//
//
// The fp8 GEMM's kernels: conformance cases (the CPU against the double
// references of kernels/reference/matmul_fp8.cpp, CUDA against the CPU,
// with the workspace the CUDA target plans for K-major copies), the codes
// agreeing with qat_fake_quant (codes · scale is its value, bit for bit),
// the degenerate ranges and the binding errors.
//
//===----------------------------------------------------------------------===//

#include "Conformance.h"
#include "Fp8Codes.h"

#include "common/Fp8.h"
#include "common/QuantScheme.h"

#include <cmath>
#include <limits>

namespace llmc::test {
namespace {

/// The range [1, 2] (−min, max) of a tensor whose amax is `amax`.
RefTensor rangeOf(double amax) { return RefTensor{{1, 2}, {0.5 * amax, amax}}; }

/// Codes are checked through their values (a zero's sign is the kernel's
/// to choose), the scales exactly; a GPU's codes are the CPU's.
void expectCodesAndScales(KernelCall &k, int64_t format) {
  k.tolerances = {std::numeric_limits<double>::infinity(), 0.0};
  k.check = [format](const std::vector<RefTensor> &, const std::vector<RefTensor> &out,
                     const std::vector<RefTensor> &expected) {
    RefTensor values = codeValues(out[0], format);
    for (int64_t i = 0; i < values.numel(); ++i)
      if (values.data[i] != expected[0].data[i])
        return ::testing::AssertionFailure()
               << "element " << i << ": code " << out[0].data[i] << " is " << values.data[i]
               << ", expected " << expected[0].data[i];
    return ::testing::AssertionSuccess();
  };
  k.cudaTolerances = {0.0, 0.0};
}

std::vector<ConformanceCase> quantizeCases() {
  std::vector<ConformanceCase> cases;
  uint64_t seed = 3100;
  for (int64_t format : {kE4M3, kE5M2})
    for (DType dtype : kFloatTypes)
      for (double amax : {0.0, 3.0, 1e-3}) {
        std::string label = std::string(fp8FormatName(format)) + "_" + dtypeName(dtype) + "_amax" +
                            std::to_string(static_cast<int>(amax * 1000));
        cases.push_back({"qat_quantize_fp8", label, [=, caseSeed = seed += 2] {
                           KernelCall k;
                           // Some values beyond amax: they saturate.
                           RefTensor x = randomTensor({3, 5, 64}, caseSeed, amax > 0 ? amax : 1.0);
                           k.input(amax > 0 ? x : RefTensor::zeros(x.shape), dtype);
                           k.input(rangeOf(amax), DType::F32);
                           k.output(DType::U8, {3, 5, 64});
                           k.output(DType::F32, {1});
                           k.attrs = attrs({}, {{"format", format}});
                           auto f = static_cast<quant::Format>(format);
                           k.reference = [f](const std::vector<RefTensor> &in) {
                             ref::Fp8Operand q = ref::quantizeFp8(in[0], in[1], f);
                             return std::vector<RefTensor>{q.values, RefTensor{{1}, {q.scale}}};
                           };
                           expectCodesAndScales(k, format);
                           return k;
                         }});
      }
  return cases;
}

/// One scale per slice of dimension 0 (a stack of experts' weights viewed
/// [G, A·B]): slices of different ranges, one of them all zeros.
std::vector<ConformanceCase> quantizeSliceCases() {
  std::vector<ConformanceCase> cases;
  for (int64_t format : {kE4M3, kE5M2})
    for (DType dtype : {DType::F32, DType::BF16}) {
      std::string label = std::string(fp8FormatName(format)) + "_" + dtypeName(dtype);
      cases.push_back({"qat_quantize_fp8", "slices_" + label, [=] {
                         KernelCall k;
                         const std::vector<double> amax = {3.0, 0.0, 1e-3};
                         RefTensor x = randomTensor({3, 4, 40}, 3190 + format, 1.0);
                         for (int64_t i = 0; i < x.numel(); ++i) x.data[i] *= amax[i / 160];
                         RefTensor range = RefTensor::zeros({3, 2});
                         for (int g = 0; g < 3; ++g) range.data[2 * g + 1] = amax[g];
                         k.input(x, dtype);
                         k.input(range, DType::F32);
                         k.output(DType::U8, {3, 4, 40});
                         k.output(DType::F32, {3});
                         k.attrs = attrs({}, {{"format", format}});
                         auto f = static_cast<quant::Format>(format);
                         k.reference = [f](const std::vector<RefTensor> &in) {
                           ref::Fp8Slices q = ref::quantizeFp8Slices(in[0], in[1], f);
                           return std::vector<RefTensor>{q.values, RefTensor{{3}, q.scales}};
                         };
                         expectCodesAndScales(k, format);
                         return k;
                       }});
    }
  return cases;
}

/// One scale per group of a mixture of experts' rows (offsets): an empty
/// group first, groups of different ranges (one all zeros), and rows past
/// the last group, whose codes are 0.
std::vector<ConformanceCase> quantizeRowGroupCases() {
  std::vector<ConformanceCase> cases;
  for (int64_t format : {kE4M3, kE5M2})
    for (DType dtype : {DType::F32, DType::BF16})
      for (DType index : {DType::I32, DType::I64}) {
        std::string label = std::string(fp8FormatName(format)) + "_" + dtypeName(dtype) +
                            (index == DType::I64 ? "_i64" : "");
        cases.push_back({"qat_quantize_fp8", "row_groups_" + label, [=] {
                           KernelCall k;
                           const std::vector<int64_t> offsets = {0, 0, 5, 7, 11};
                           const std::vector<double> amax = {1.0, 3.0, 0.0, 1e-3};
                           RefTensor x = randomTensor({14, 24}, 3270 + format, 1.0);
                           RefTensor range = RefTensor::zeros({4, 2}), off = RefTensor::zeros({5});
                           for (int g = 0; g < 4; ++g) {
                             range.data[2 * g + 1] = amax[g];
                             for (int64_t r = offsets[g]; r < offsets[g + 1]; ++r)
                               for (int64_t c = 0; c < 24; ++c) x.data[r * 24 + c] *= amax[g];
                           }
                           for (size_t i = 0; i < offsets.size(); ++i)
                             off.data[i] = static_cast<double>(offsets[i]);
                           k.input(x, dtype);
                           k.input(range, DType::F32);
                           k.input(Buffer::of(off, index));
                           k.output(DType::U8, {14, 24});
                           k.output(DType::F32, {4});
                           k.attrs = attrs({}, {{"format", format}});
                           auto f = static_cast<quant::Format>(format);
                           k.reference = [f](const std::vector<RefTensor> &in) {
                             ref::Fp8Slices q = ref::quantizeFp8RowGroups(in[0], in[1], in[2], f);
                             return std::vector<RefTensor>{q.values, RefTensor{{4}, q.scales}};
                           };
                           expectCodesAndScales(k, format);
                           return k;
                         }});
      }
  return cases;
}

/// Bytes of the K-major copies the CUDA kernel needs (LowerToExec's plan).
int64_t transposeBytes(int64_t aNumel, int64_t bNumel, bool transposeA, bool transposeB) {
  auto aligned = [](int64_t n) { return (n + 255) / 256 * 256; };
  return (transposeA ? aligned(aNumel) : 0) + (transposeB ? 0 : aligned(bNumel));
}

std::vector<ConformanceCase> matmulCases() {
  std::vector<ConformanceCase> cases;
  struct Shape {
    std::vector<int64_t> a, b;
    bool transposeA, transposeB;
    const char *name;
    bool fastAccumulation = false;
  };
  // A linear layer's three products: y = x·w (x [B, T, K], w [K, N]),
  // dx = dy·wᵀ, dw = xᵀ·dy over the folded rows; then a forward product
  // with fast accumulation over GPT-2's width, which the CPU sums exactly
  // and CUDA's narrower accumulator must keep within the bound below.
  const std::vector<Shape> shapes = {
      {{2, 8, 32}, {32, 48}, false, false, "forward"},
      {{16, 48}, {32, 48}, false, true, "grad_input"},
      {{16, 32}, {16, 48}, true, false, "grad_weight"},
      {{2, 16, 768}, {768, 64}, false, false, "forward_fast_accumulation", true},
  };
  const std::vector<std::pair<int64_t, int64_t>> formats = {
      {kE4M3, kE4M3}, {kE5M2, kE4M3}, {kE4M3, kE5M2}};
  uint64_t seed = 3300;
  for (const Shape &s : shapes)
    for (auto [fa, fb] : formats)
      for (DType dtype : {DType::F32, DType::BF16}) {
        std::string label = std::string(s.name) + "_" + fp8FormatName(fa) + "_" +
                            fp8FormatName(fb) + "_" + dtypeName(dtype);
        cases.push_back(
            {"qat_matmul_fp8", label, [=, caseSeed = seed += 4] {
               KernelCall k;
               k.input(randomCodes(s.a, caseSeed, fa), DType::U8);
               k.input(RefTensor{{1}, {0.0125}}, DType::F32);
               k.input(randomCodes(s.b, caseSeed + 1, fb), DType::U8);
               k.input(RefTensor{{1}, {3.0e-4}}, DType::F32);
               int64_t m = s.transposeA ? s.a.back() : s.a[s.a.size() - 2];
               int64_t n = s.transposeB ? s.b[0] : s.b[1];
               std::vector<int64_t> c(s.a.begin(), s.a.end() - 2);
               c.insert(c.end(), {m, n});
               k.output(dtype, c);
               k.attrs = attrs({}, {{"transpose_a", s.transposeA ? 1 : 0},
                                    {"transpose_b", s.transposeB ? 1 : 0},
                                    {"a_format", fa},
                                    {"b_format", fb},
                                    {"fast_accumulation", s.fastAccumulation ? 1 : 0}});
               k.reference = [=](const std::vector<RefTensor> &in) {
                 ref::Fp8Operand a{codeValues(in[0], fa), in[1].data[0]};
                 ref::Fp8Operand b{codeValues(in[2], fb), in[3].data[0]};
                 return std::vector<RefTensor>{ref::matmulFp8(a, b, s.transposeA, s.transposeB)};
               };
               int64_t aNumel = 1, bNumel = 1;
               for (int64_t d : s.a) aNumel *= d;
               for (int64_t d : s.b) bNumel *= d;
               CudaVariant planned;
               planned.workspaceBytes = transposeBytes(aNumel, bNumel, s.transposeA, s.transposeB);
               k.cudaVariants = {planned};
               // Each element is a sum of K products of either sign,
               // which can cancel: the norm metric, as matmul's.
               k.metric = k.cudaMetric = Metric::Norm;
               // cuBLASLt's fp8 products keep about 14 bits inside each
               // tensor-core instruction's sum on Hopper (DeepSeek-V3,
               // §3.3.2), and across them with fast accumulation: an fp32
               // output is held to 1e-3, which a layout or scale slip
               // still fails by orders of magnitude.
               if (dtype == DType::F32)
                 k.cudaTolerances = {1e-3};
               return k;
             }});
      }
  return cases;
}

LLMC_CONFORMANCE_CASES(QatQuantizeFp8, quantizeCases);
LLMC_CONFORMANCE_CASES(QatQuantizeFp8Slices, quantizeSliceCases);
LLMC_CONFORMANCE_CASES(QatQuantizeFp8RowGroups, quantizeRowGroupCases);
LLMC_CONFORMANCE_CASES(QatMatmulFp8, matmulCases);

/// codes · scale is exactly qat_fake_quant's value for the same x and
/// range: the fp8 GEMM multiplies what fake quantization rounded to.
TEST(MatmulFp8, CodesTimesScaleIsFakeQuantsValue) {
  for (int64_t format : {kE4M3, kE5M2}) {
    SCOPED_TRACE(fp8FormatName(format));
    Buffer x = Buffer::of(randomTensor({4, 96}, 41, 2.5), DType::F32);
    Buffer range = Buffer::of(rangeOf(6.0), DType::F32);
    Buffer codes(DType::U8, {4, 96}), scale(DType::F32, {1}), fake(DType::F32, {4, 96});
    ASSERT_TRUE(runKernel("qat_quantize_fp8", {&x, &range}, {&codes, &scale},
                          attrs({}, {{"format", format}})));
    ASSERT_TRUE(runKernel("qat_fake_quant", {&x, &range}, {&fake},
                          attrs({}, {{"format", format}, {"granularity", 0}, {"symmetric", 1}})));
    RefTensor c = codes.toRef(), y = fake.toRef();
    const float s = static_cast<float>(scale.toRef().data[0]);
    auto kind = quant::fp8KindOf(static_cast<quant::Format>(format));
    for (int64_t i = 0; i < c.numel(); ++i)
      ASSERT_EQ(fp8::decode(static_cast<uint8_t>(c.data[i]), kind) * s,
                static_cast<float>(y.data[i]))
          << "element " << i;
  }
}

/// A tensor of zeros has no scale: codes 0, scale 0, product 0. A NaN in
/// the range makes the scale NaN, so the product (and the step) is NaN.
TEST(MatmulFp8, DegenerateRanges) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (double bad : {0.0, nan}) {
    Buffer x = Buffer::of(randomTensor({2, 16}, 7), DType::F32);
    Buffer range = Buffer::of(RefTensor{{1, 2}, {bad, bad}}, DType::F32);
    Buffer codes(DType::U8, {2, 16}), scale(DType::F32, {1});
    ASSERT_TRUE(runKernel("qat_quantize_fp8", {&x, &range}, {&codes, &scale},
                          attrs({}, {{"format", kE4M3}})));
    for (double c : codes.toRef().data) EXPECT_EQ(c, 0.0);
    double s = scale.toRef().data[0];
    EXPECT_TRUE(std::isnan(bad) ? std::isnan(s) : s == 0.0);
    Buffer w = Buffer::of(randomCodes({16, 8}, 9, kE4M3), DType::U8);
    Buffer ws = Buffer::of(RefTensor{{1}, {1.0}}, DType::F32), y(DType::F32, {2, 8});
    ASSERT_TRUE(runKernel("qat_matmul_fp8", {&codes, &scale, &w, &ws}, {&y},
                          attrs({}, {{"a_format", kE4M3}, {"b_format", kE4M3}})));
    for (double v : y.toRef().data) EXPECT_TRUE(std::isnan(bad) ? std::isnan(v) : v == 0.0);
  }
}

TEST(MatmulFp8, BindingErrors) {
  auto u8 = [](std::vector<int64_t> s) { return typeOnly(DType::U8, std::move(s)); };
  auto f32 = [](std::vector<int64_t> s) { return typeOnly(DType::F32, std::move(s)); };
  auto bind = [](const std::vector<TensorView> &in, const std::vector<TensorView> &out,
                 const KernelAttrs &a) { return bindError("qat_matmul_fp8", in, out, a); };

  KernelAttrs e4e4 = attrs({}, {{"a_format", kE4M3}, {"b_format", kE4M3}});
  EXPECT_EQ(bind({u8({4, 16}), f32({1}), u8({16, 8}), f32({1})}, {f32({4, 8})},
                 attrs({}, {{"a_format", kE5M2}, {"b_format", kE5M2}})),
            "qat_matmul_fp8: both operands are E5M2, which no fp8 tensor core multiplies");
  EXPECT_EQ(bind({u8({4, 16}), f32({1}), u8({16, 8}), f32({1})}, {f32({4, 8})},
                 attrs({}, {{"a_format", 0}, {"b_format", kE4M3}})),
            "qat_matmul_fp8: attribute 'a_format' must be an fp8 format (2 fp8_e4m3, 3 fp8_e5m2), "
            "got 0");
  EXPECT_EQ(bind({u8({4, 16}), f32({1}), u8({8, 8}), f32({1})}, {f32({4, 8})}, e4e4),
            "qat_matmul_fp8: contraction dims differ: a u8[4x16] has K = 16, b u8[8x8] has K = 8");
  EXPECT_EQ(bind({f32({4, 16}), f32({1}), u8({16, 8}), f32({1})}, {f32({4, 8})}, e4e4),
            "qat_matmul_fp8: a must be u8, got f32[4x16]");
  EXPECT_EQ(bindError("qat_quantize_fp8", {f32({4, 16}), f32({1, 2})}, {u8({4, 8}), f32({1})},
                      attrs({}, {{"format", kE4M3}})),
            "qat_quantize_fp8: codes must be u8[4x16], got u8[4x8]");
  EXPECT_EQ(bindError("qat_quantize_fp8", {f32({4, 16}), f32({3, 2})}, {u8({4, 16}), f32({3})},
                      attrs({}, {{"format", kE4M3}})),
            "qat_quantize_fp8: range must be [1, 2] (one scale) or one row per slice of x's "
            "dimension 0, got f32[3x2] for x f32[4x16]");
  EXPECT_EQ(bindError("qat_quantize_fp8", {f32({4, 16}), f32({4, 2})}, {u8({4, 16}), f32({1})},
                      attrs({}, {{"format", kE4M3}})),
            "qat_quantize_fp8: scale must be f32[4], got f32[1]");
  EXPECT_EQ(bindError("qat_quantize_fp8", {f32({6, 16}), f32({2, 2}), typeOnly(DType::I32, {4})},
                      {u8({6, 16}), f32({3})}, attrs({}, {{"format", kE4M3}})),
            "qat_quantize_fp8: range must be f32[3x2], got f32[2x2]");
}

} // namespace
} // namespace llmc::test
