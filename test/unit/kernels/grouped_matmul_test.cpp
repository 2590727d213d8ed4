//===- grouped_matmul_test.cpp - grouped_matmul and its weight gradient ---===//
//
// grouped_matmul's and grouped_matmul_weight_grad's cases (Conformance.h),
// run on the CPU against the reference and on a GPU against the CPU. Norm
// metric, as matmul's: each element is a dot product that can cancel to
// near zero; 1e-5 in f32, 1e-2 where the outputs are stored in 16 bits.
// The group layouts: one group; four with an empty one; empty groups first
// and last; every row in one of four; groups that start and end inside
// the CUDA kernels' 64-row tiles; rows past the last group (an
// expert-parallel buffer's tail: zeros in y, unread by the gradient); i64
// offsets; K = 0 (zeros, exactly); a decode step's groups of one to four
// rows (the CPU's row dots over a transposed weight) beside one of five
// (its GEMM), at a K that leaves a remainder past whole steps of 32.
//
// Invalid offsets are data: each case starts the outputs from finite
// values and expects every element NaN afterwards, so a kernel that bails
// out without writing fails. Here also: the binding errors, whole.

#include "Conformance.h"

#include <limits>

namespace llmc::test {
namespace {

struct Groups {
  std::string name;
  int64_t k, f;
  std::vector<int64_t> offsets; ///< [G + 1]; M = offsets.back() unless `rows`
  int64_t rows = -1;            ///< M where it is not offsets.back()
  int64_t m() const { return rows >= 0 ? rows : offsets.back(); }
  int64_t groups() const { return static_cast<int64_t>(offsets.size()) - 1; }
};

RefTensor offsetsTensor(const std::vector<int64_t> &offsets) {
  RefTensor t = RefTensor::zeros({static_cast<int64_t>(offsets.size())});
  for (size_t i = 0; i < offsets.size(); ++i) t.data[i] = static_cast<double>(offsets[i]);
  return t;
}

RefTensor nanTensor(std::vector<int64_t> shape) {
  RefTensor t = RefTensor::zeros(std::move(shape));
  std::fill(t.data.begin(), t.data.end(), std::numeric_limits<double>::quiet_NaN());
  return t;
}

std::string label(DType dtype, const Groups &g, int tb, DType index) {
  return std::string(dtypeName(dtype)) + "_" + g.name + "_m" + std::to_string(g.m()) + "k" +
         std::to_string(g.k) + "f" + std::to_string(g.f) + (tb ? "_tb" : "") +
         (index == DType::I64 ? "_i64" : "");
}

/// A valid layout's products against the reference; an invalid one's
/// outputs, started from finite values, all NaN.
void expectations(KernelCall &k, const Groups &g, bool valid) {
  k.metric = k.cudaMetric = Metric::Norm;
  if (g.k == 0) // no products: zeros, exactly
    k.metric = k.cudaMetric = Metric::Elementwise, k.tolerances = k.cudaTolerances = {0.0};
  if (!valid) {
    k.keepOutputs = true;
    k.metric = k.cudaMetric = Metric::Elementwise;
  }
}

ConformanceCase forwardCase(DType dtype, const Groups &g, int tb, DType index, bool valid,
                            uint64_t seed) {
  return {"grouped_matmul", label(dtype, g, tb, index), [=] {
            KernelCall k;
            const int64_t m = g.m();
            const std::vector<int64_t> wShape = tb ? std::vector<int64_t>{g.groups(), g.f, g.k}
                                                   : std::vector<int64_t>{g.groups(), g.k, g.f};
            k.input(randomTensor({m, g.k}, seed), dtype);
            k.input(Buffer::of(offsetsTensor(g.offsets), index));
            k.input(randomTensor(wShape, seed + 1), dtype);
            k.output(Buffer::of(randomTensor({m, g.f}, seed + 99), dtype));
            k.attrs = attrs({}, {{"transpose_b", tb}});
            k.reference = [=](const std::vector<RefTensor> &in) {
              if (!valid)
                return std::vector<RefTensor>{nanTensor({m, g.f})};
              return std::vector<RefTensor>{ref::groupedMatmul(in[0], in[1], in[2], tb)};
            };
            expectations(k, g, valid);
            return k;
          }};
}

ConformanceCase weightGradCase(DType dtype, const Groups &g, int tb, DType index, bool valid,
                               uint64_t seed) {
  return {"grouped_matmul_weight_grad", label(dtype, g, tb, index), [=] {
            KernelCall k;
            const int64_t m = g.m();
            const std::vector<int64_t> dwShape = tb ? std::vector<int64_t>{g.groups(), g.f, g.k}
                                                    : std::vector<int64_t>{g.groups(), g.k, g.f};
            k.input(randomTensor({m, g.k}, seed), dtype);
            k.input(randomTensor({m, g.f}, seed + 1), dtype);
            k.input(Buffer::of(offsetsTensor(g.offsets), index));
            k.output(Buffer::of(randomTensor(dwShape, seed + 2), dtype));
            k.attrs = attrs({}, {{"transpose_b", tb}});
            k.reference = [=](const std::vector<RefTensor> &in) {
              if (!valid)
                return std::vector<RefTensor>{nanTensor(dwShape)};
              return std::vector<RefTensor>{ref::groupedMatmulWeightGrad(in[0], in[1], in[2], tb)};
            };
            expectations(k, g, valid);
            return k;
          }};
}

/// Layouts of valid offsets: G = 1; G = 4 with an empty group; odd sizes
/// over several 64-row tiles, groups starting and ending inside them,
/// empty groups first and last; every row in one group of four; K = 0;
/// an MoE layer's experts (8 of them, 256 token copies); rows past the
/// last group, inside a tile and over whole tiles; a decode step's groups.
std::vector<Groups> validLayouts() {
  return {
      {"one_group", 13, 5, {0, 7}},
      {"four_one_empty", 13, 33, {0, 10, 10, 29, 37}},
      {"odd_tiles", 70, 129, {0, 0, 3, 67, 67, 130, 131, 131}},
      {"all_in_one", 9, 17, {0, 0, 0, 45, 45}},
      {"k0", 0, 6, {0, 4, 4, 9}},
      {"moe8", 64, 96, {0, 31, 64, 64, 100, 165, 190, 250, 256}},
      {"tail", 13, 9, {0, 10, 20, 36}, 37},
      {"tail_tiles", 20, 70, {0, 5, 5, 40}, 200},
      {"decode_rows", 100, 70, {0, 1, 1, 3, 7, 8, 13}},
  };
}

/// Offsets a kernel must refuse: decreasing, offsets[0] ≠ 0 (negative),
/// offsets[G] beyond M.
std::vector<Groups> invalidLayouts() {
  return {
      {"decreasing", 13, 9, {0, 20, 10, 37}, 37},
      {"negative_first", 13, 9, {-3, 10, 20, 37}, 37},
      {"beyond_m", 13, 9, {0, 10, 40, 40}, 37},
  };
}

std::vector<ConformanceCase> groupedMatmulCases() {
  std::vector<ConformanceCase> cases;
  uint64_t seed = 7100;
  for (DType dtype : kFloatTypes)
    for (int tb = 0; tb < 2; ++tb)
      for (const Groups &g : validLayouts()) {
        cases.push_back(forwardCase(dtype, g, tb, DType::I32, true, seed += 20));
        cases.push_back(weightGradCase(dtype, g, tb, DType::I32, true, seed += 20));
      }
  const Groups wide = validLayouts()[1];
  cases.push_back(forwardCase(DType::F32, wide, 1, DType::I64, true, seed += 20));
  cases.push_back(weightGradCase(DType::BF16, wide, 0, DType::I64, true, seed += 20));
  for (DType dtype : {DType::F32, DType::BF16})
    for (const Groups &g : invalidLayouts()) {
      cases.push_back(forwardCase(dtype, g, 0, DType::I32, false, seed += 20));
      cases.push_back(weightGradCase(dtype, g, 1, DType::I32, false, seed += 20));
    }
  return cases;
}

LLMC_CONFORMANCE_CASES(GroupedMatmul, groupedMatmulCases);

TensorView f32(std::vector<int64_t> shape) { return typeOnly(DType::F32, std::move(shape)); }
TensorView i32(std::vector<int64_t> shape) { return typeOnly(DType::I32, std::move(shape)); }

TEST(GroupedMatmulKernels, BindingErrorsNameTheOperand) {
  KernelAttrs tb = attrs({}, {{"transpose_b", 1}});
  expectBindErrorsMention(
      "grouped_matmul",
      {
          {{f32({7, 13}), i32({3})}, {f32({7, 5})}, {}, "grouped_matmul: expected 3 inputs, got 2"},
          {{f32({7, 13}), i32({1}), f32({0, 13, 5})},
           {f32({7, 5})},
           {},
           "grouped_matmul: offsets must be [G + 1] for G >= 1 groups, got i32[1]"},
          {{f32({7, 13}), i32({4}), f32({2, 13, 5})},
           {f32({7, 5})},
           {},
           "grouped_matmul: weights f32[2x13x5] do not match x f32[7x13] and 3 groups (stacked "
           "weights are [G, K, F])"},
          {{f32({7, 13}), f32({2}), f32({1, 13, 5})},
           {f32({7, 5})},
           {},
           "grouped_matmul: offsets must be i32 or i64, got f32[2]"},
          {{typeOnly(DType::I32, {7, 13}), i32({2}), f32({1, 13, 5})},
           {f32({7, 5})},
           {},
           "grouped_matmul: x must be f32, bf16 or f16, got i32[7x13]"},
          {{f32({2, 7, 13}), i32({2}), f32({1, 13, 5})},
           {f32({14, 5})},
           {},
           "grouped_matmul: x must have rank 2, got f32[2x7x13]"},
          {{f32({7, 13}), i32({2}), typeOnly(DType::BF16, {1, 13, 5})},
           {f32({7, 5})},
           {},
           "grouped_matmul: weights must be f32, got bf16[1x13x5]"},
          {{f32({7, 13}), i32({2}), f32({13, 5})},
           {f32({7, 5})},
           {},
           "grouped_matmul: weights must have rank 3, got f32[13x5]"},
          {{f32({7, 13}), i32({2}), f32({1, 12, 5})},
           {f32({7, 5})},
           {},
           "grouped_matmul: weights f32[1x12x5] do not match x f32[7x13] and 1 groups (stacked "
           "weights are [G, K, F])"},
          {{f32({7, 13}), i32({2}), f32({1, 13, 5})},
           {f32({7, 13})},
           tb,
           "grouped_matmul: weights f32[1x13x5] do not match x f32[7x13] and 1 groups (stacked "
           "weights are [G, F, K] with transpose_b)"},
          {{f32({7, 13}), i32({2}), f32({1, 13, 5})},
           {f32({7, 6})},
           {},
           "grouped_matmul: y must be f32[7x5], got f32[7x6]"},
          {{f32({7, 13}), i32({2}), f32({1, 13, 5})},
           {f32({7, 5})},
           attrs({}, {{"transpose_b", 2}}),
           "grouped_matmul: attribute 'transpose_b' must be 0 or 1, got 2"},
      });
  expectBindErrorsMention(
      "grouped_matmul_weight_grad",
      {
          {{f32({7, 13}), f32({7, 5}), i32({3})},
           {},
           {},
           "grouped_matmul_weight_grad: expected 1 output, got 0"},
          {{f32({7, 13}), f32({7, 5}), i32({3}), i32({3})},
           {f32({2, 13, 5})},
           {},
           "grouped_matmul_weight_grad: expected 3 inputs, got 4"},
          {{f32({7, 13}), f32({7, 5}), i32({3})},
           {f32({3, 13, 5})},
           {},
           "grouped_matmul_weight_grad: dw must be f32[2x13x5], got f32[3x13x5]"},
          {{f32({7, 13}), f32({6, 5}), i32({3})},
           {f32({2, 13, 5})},
           {},
           "grouped_matmul_weight_grad: dy f32[6x5] must have as many rows as x f32[7x13]"},
          {{f32({7, 13}), typeOnly(DType::BF16, {7, 5}), i32({3})},
           {f32({2, 13, 5})},
           {},
           "grouped_matmul_weight_grad: dy must be f32, got bf16[7x5]"},
          {{f32({7, 13}), f32({7, 5}), i32({3})},
           {f32({2, 13, 5})},
           tb,
           "grouped_matmul_weight_grad: dw must be f32[2x5x13], got f32[2x13x5]"},
      });
}

} // namespace
} // namespace llmc::test
