//===- grouped_matmul_fp8_test.cpp - the experts' products on fp8 codes ---===//
//
// qat_grouped_matmul_fp8's and qat_grouped_matmul_weight_grad_fp8's cases
// (Conformance.h): the CPU against the double references of
// kernels/reference/grouped_matmul.cpp, a GPU against the CPU. Random
// finite codes of both formats (never two E5M2), scales one per operand or
// one per group, group layouts with empty groups, groups inside and across
// the CUDA kernels' 64-row tiles and rows past the last group (zeros in y,
// unread by the gradient); norm metric, as grouped_matmul's. Invalid
// offsets make every output NaN. On a GPU each case runs twice: the codes
// staged in bf16 (the default) and on fp8 tensor cores
// (LLMC_CUDA_FP8_MMA=1). Here also: the binding errors.
//
//===----------------------------------------------------------------------===//

#include "Conformance.h"
#include "Fp8Codes.h"

#include <limits>

namespace llmc::test {
namespace {

struct Layout {
  std::string name;
  int64_t k, f;
  std::vector<int64_t> offsets; ///< [G + 1]
  int64_t rows;                 ///< M >= offsets.back()
  int64_t groups() const { return static_cast<int64_t>(offsets.size()) - 1; }
};

std::vector<Layout> layouts() {
  return {
      {"four_one_empty", 13, 33, {0, 10, 10, 29, 37}, 37},
      {"odd_tiles", 70, 129, {0, 0, 3, 67, 67, 130, 131, 131}, 131},
      {"tail", 20, 70, {0, 5, 5, 40}, 200},
  };
}

RefTensor offsetsTensor(const std::vector<int64_t> &offsets) {
  RefTensor t = RefTensor::zeros({static_cast<int64_t>(offsets.size())});
  for (size_t i = 0; i < offsets.size(); ++i) t.data[i] = static_cast<double>(offsets[i]);
  return t;
}

/// Scales of magnitude near `base`: one, or one per group.
RefTensor scales(int64_t groups, bool perGroup, double base) {
  RefTensor s = RefTensor::zeros({perGroup ? groups : 1});
  for (int64_t g = 0; g < s.numel(); ++g) s.data[g] = base * (1.0 + 0.25 * static_cast<double>(g));
  return s;
}

std::vector<double> valuesOf(const RefTensor &t) { return t.data; }

/// The CUDA runs of a case: the codes staged in bf16 for bf16 tensor
/// cores, and as they are for fp8 ones, whose sums inside one instruction
/// keep about 14 bits on Hopper (DeepSeek-V3, §3.3.2): there an fp32
/// output is held to 1e-3, which a layout or scale slip (an error of order
/// one) still fails.
std::vector<CudaVariant> tensorCoreRuns(DType dtype) {
  CudaVariant fp8Rate;
  fp8Rate.env = {{"LLMC_CUDA_FP8_MMA", "1"}};
  if (dtype == DType::F32)
    fp8Rate.tolerances = {1e-3};
  return {CudaVariant{}, fp8Rate};
}

std::string label(const Layout &l, int64_t fx, int64_t fw, bool perGroup, int tb, DType dtype) {
  return l.name + "_" + fp8FormatName(fx) + "_" + fp8FormatName(fw) +
         (perGroup ? "_per_group" : "_per_operand") + (tb ? "_tb" : "") + "_" + dtypeName(dtype);
}

/// The operand formats of the three products of a linear layer: the
/// forward's (E4M3 · E4M3), dX's (E5M2 dY · E4M3 W) and dW's (E4M3 x ·
/// E5M2 dY).
const std::vector<std::pair<int64_t, int64_t>> kFormats = {
    {kE4M3, kE4M3}, {kE5M2, kE4M3}, {kE4M3, kE5M2}};

std::vector<ConformanceCase> forwardCases() {
  std::vector<ConformanceCase> cases;
  uint64_t seed = 5100;
  for (const Layout &l : layouts())
    for (auto [fx, fw] : kFormats)
      for (bool perGroup : {false, true})
        for (int tb : {0, 1})
          for (DType dtype : {DType::F32, DType::BF16})
            cases.push_back(
                {"qat_grouped_matmul_fp8", label(l, fx, fw, perGroup, tb, dtype),
                 [=, caseSeed = seed += 3] {
                   KernelCall k;
                   const std::vector<int64_t> w = tb ? std::vector<int64_t>{l.groups(), l.f, l.k}
                                                     : std::vector<int64_t>{l.groups(), l.k, l.f};
                   k.input(randomCodes({l.rows, l.k}, caseSeed, fx), DType::U8);
                   k.input(scales(l.groups(), false, 0.0125), DType::F32);
                   k.input(offsetsTensor(l.offsets), DType::I32);
                   k.input(randomCodes(w, caseSeed + 1, fw), DType::U8);
                   k.input(scales(l.groups(), perGroup, 3.0e-4), DType::F32);
                   k.output(Buffer::of(randomTensor({l.rows, l.f}, caseSeed + 2), dtype));
                   k.attrs = attrs({}, {{"transpose_b", tb}, {"x_format", fx}, {"w_format", fw}});
                   k.reference = [=](const std::vector<RefTensor> &in) {
                     return std::vector<RefTensor>{
                         ref::groupedMatmulFp8(codeValues(in[0], fx), valuesOf(in[1]), in[2],
                                               codeValues(in[3], fw), valuesOf(in[4]), tb)};
                   };
                   k.metric = k.cudaMetric = Metric::Norm;
                   k.cudaVariants = tensorCoreRuns(dtype);
                   return k;
                 }});
  return cases;
}

std::vector<ConformanceCase> weightGradCases() {
  std::vector<ConformanceCase> cases;
  uint64_t seed = 5300;
  for (const Layout &l : layouts())
    for (auto [fx, fd] : kFormats)
      for (bool perGroup : {false, true})
        for (int tb : {0, 1})
          for (DType dtype : {DType::F32, DType::BF16})
            cases.push_back(
                {"qat_grouped_matmul_weight_grad_fp8", label(l, fx, fd, perGroup, tb, dtype),
                 [=, caseSeed = seed += 3] {
                   KernelCall k;
                   const std::vector<int64_t> dw = tb ? std::vector<int64_t>{l.groups(), l.f, l.k}
                                                      : std::vector<int64_t>{l.groups(), l.k, l.f};
                   k.input(randomCodes({l.rows, l.k}, caseSeed, fx), DType::U8);
                   k.input(scales(l.groups(), perGroup, 0.0125), DType::F32);
                   k.input(randomCodes({l.rows, l.f}, caseSeed + 1, fd), DType::U8);
                   k.input(scales(l.groups(), false, 3.0e-4), DType::F32);
                   k.input(offsetsTensor(l.offsets), DType::I32);
                   k.output(Buffer::of(randomTensor(dw, caseSeed + 2), dtype));
                   k.attrs = attrs({}, {{"transpose_b", tb}, {"x_format", fx}, {"dy_format", fd}});
                   k.reference = [=](const std::vector<RefTensor> &in) {
                     return std::vector<RefTensor>{ref::groupedMatmulWeightGradFp8(
                         codeValues(in[0], fx), valuesOf(in[1]), codeValues(in[2], fd),
                         valuesOf(in[3]), in[4], tb)};
                   };
                   k.metric = k.cudaMetric = Metric::Norm;
                   k.cudaVariants = tensorCoreRuns(dtype);
                   return k;
                 }});
  return cases;
}

LLMC_CONFORMANCE_CASES(QatGroupedMatmulFp8, forwardCases);
LLMC_CONFORMANCE_CASES(QatGroupedMatmulWeightGradFp8, weightGradCases);

/// Offsets that do not cut the rows into groups (decreasing) make every
/// output NaN, started from finite values.
TEST(GroupedMatmulFp8, InvalidOffsetsMakeEveryOutputNaN) {
  Buffer x = Buffer::of(randomCodes({6, 4}, 1, kE4M3), DType::U8);
  Buffer dy = Buffer::of(randomCodes({6, 3}, 2, kE5M2), DType::U8);
  Buffer w = Buffer::of(randomCodes({2, 4, 3}, 3, kE4M3), DType::U8);
  Buffer one = Buffer::of(RefTensor{{1}, {1.0}}, DType::F32);
  Buffer offsets = Buffer::of(RefTensor{{3}, {0, 5, 2}}, DType::I32);
  Buffer y = Buffer::of(randomTensor({6, 3}, 4), DType::F32);
  Buffer dw = Buffer::of(randomTensor({2, 4, 3}, 5), DType::F32);
  ASSERT_TRUE(runKernel("qat_grouped_matmul_fp8", {&x, &one, &offsets, &w, &one}, {&y},
                        attrs({}, {{"x_format", kE4M3}, {"w_format", kE4M3}})));
  ASSERT_TRUE(runKernel("qat_grouped_matmul_weight_grad_fp8", {&x, &one, &dy, &one, &offsets},
                        {&dw}, attrs({}, {{"x_format", kE4M3}, {"dy_format", kE5M2}})));
  for (double v : y.toRef().data) EXPECT_TRUE(std::isnan(v));
  for (double v : dw.toRef().data) EXPECT_TRUE(std::isnan(v));
}

TEST(GroupedMatmulFp8, BindingErrors) {
  auto u8 = [](std::vector<int64_t> s) { return typeOnly(DType::U8, std::move(s)); };
  auto f32 = [](std::vector<int64_t> s) { return typeOnly(DType::F32, std::move(s)); };
  auto i32 = [](std::vector<int64_t> s) { return typeOnly(DType::I32, std::move(s)); };
  KernelAttrs e4e4 = attrs({}, {{"x_format", kE4M3}, {"w_format", kE4M3}});
  const char *fwd = "qat_grouped_matmul_fp8", *grad = "qat_grouped_matmul_weight_grad_fp8";
  EXPECT_EQ(bindError(fwd, {u8({6, 4}), f32({1}), i32({3}), u8({2, 4, 3}), f32({1})}, {f32({6, 3})},
                      attrs({}, {{"x_format", kE5M2}, {"w_format", kE5M2}})),
            "qat_grouped_matmul_fp8: both operands are E5M2, which no fp8 tensor core multiplies");
  EXPECT_EQ(bindError(fwd, {u8({6, 4}), f32({3}), i32({3}), u8({2, 4, 3}), f32({1})}, {f32({6, 3})},
                      e4e4),
            "qat_grouped_matmul_fp8: x_scale must be [1] or one per group ([2]), got f32[3]");
  EXPECT_EQ(bindError(fwd, {u8({6, 4}), f32({1}), i32({3}), u8({3, 4, 3}), f32({1})}, {f32({6, 3})},
                      e4e4),
            "qat_grouped_matmul_fp8: weights u8[3x4x3] do not match x u8[6x4] and 2 groups "
            "(stacked weights are [G, K, F])");
  EXPECT_EQ(bindError(fwd, {f32({6, 4}), f32({1}), i32({3}), u8({2, 4, 3}), f32({1})},
                      {f32({6, 3})}, e4e4),
            "qat_grouped_matmul_fp8: x must be u8, got f32[6x4]");
  EXPECT_EQ(bindError(grad, {u8({6, 4}), f32({1}), u8({5, 3}), f32({1}), i32({3})},
                      {f32({2, 4, 3})}, attrs({}, {{"x_format", kE4M3}, {"dy_format", kE5M2}})),
            "qat_grouped_matmul_weight_grad_fp8: dy u8[5x3] must have as many rows as x u8[6x4]");
}

} // namespace
} // namespace llmc::test
