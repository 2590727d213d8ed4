//===- binary_test.cpp - add, mul, scale, sqrt: conformance cases ---------===//
//
// Elementwise metric throughout: every output element is one rounding of a
// well-conditioned sum or product, one fp32 operation on both backends, so
// CUDA agrees with the CPU to the last bit for f32 and to one rounding for
// bf16 and f16 (the usual tolerances leave room for neither to matter).

#include "Conformance.h"

#include <cmath>

namespace llmc::test {
namespace {

struct BroadcastCase {
  std::vector<int64_t> lhs, rhs;
};

// Full-size, scalar (rank 0 and [1]) and suffix right-hand sides, odd
// widths, rows fewer than the CPU kernel's row split, and a bias over
// GPT-2's activations and logits.
const std::vector<BroadcastCase> kBroadcasts = {
    {{3, 7, 13}, {13}},
    {{3, 7, 13}, {7, 13}},
    {{3, 7, 13}, {3, 7, 13}},
    {{3, 7, 13}, {}},
    {{2, 33}, {33}},
    {{70, 600}, {600}},
    {{1, 40000}, {40000}},
    {{5, 1}, {1}},
    {{1}, {1}},
    {{7}, {}},
    {{37, 129}, {129}},
    {{3, 1000}, {}},
    {{4, 64, 768}, {768}},
    {{3, 50257}, {50257}},
};

const std::vector<std::vector<int64_t>> kScaleShapes = {{1},       {7},        {7, 13, 3},
                                                        {37, 129}, {3, 50257}, {}};

RefTensor (*referenceOf(const std::string &name))(const RefTensor &, const RefTensor &) {
  return name == "add" ? ref::add : ref::mul;
}

/// lhs op rhs, out of place; with `inPlace`, into lhs.
ConformanceCase broadcastCase(const std::string &name, DType dtype, const BroadcastCase &c,
                              bool inPlace, uint64_t seed) {
  std::string label = std::string(dtypeName(dtype)) + "_" + shapeLabel(c.lhs) + "_by_" +
                      shapeLabel(c.rhs) + (inPlace ? "_in_place" : "");
  return {name, label, [=] {
            KernelCall k;
            size_t lhs = k.input(randomTensor(c.lhs, seed), dtype);
            k.input(randomTensor(c.rhs, seed + 1), dtype);
            k.outputMaybeInPlace(inPlace, lhs, dtype, c.lhs);
            auto fn = referenceOf(name);
            k.reference = [fn](const std::vector<RefTensor> &in) {
              return std::vector<RefTensor>{fn(in[0], in[1])};
            };
            return k;
          }};
}

ConformanceCase scaleCase(DType dtype, const std::vector<int64_t> &shape, double factor,
                          bool inPlace, uint64_t seed) {
  std::string label =
      std::string(dtypeName(dtype)) + "_" + shapeLabel(shape) + (inPlace ? "_in_place" : "");
  return {"scale", label, [=] {
            KernelCall k;
            size_t x = k.input(randomTensor(shape, seed), dtype);
            k.outputMaybeInPlace(inPlace, x, dtype, shape);
            k.attrs = attrs({{"factor", factor}});
            k.reference = [factor](const std::vector<RefTensor> &in) {
              return std::vector<RefTensor>{ref::scale(in[0], factor)};
            };
            return k;
          }};
}

std::vector<ConformanceCase> binaryCases() {
  std::vector<ConformanceCase> cases;
  uint64_t seed = 500;
  for (DType dtype : kFloatTypes) {
    for (const BroadcastCase &c : kBroadcasts) {
      for (const char *name : {"add", "mul"})
        cases.push_back(broadcastCase(name, dtype, c, false, seed += 2));
      cases.push_back(broadcastCase("add", dtype, c, true, seed += 2));
    }
    for (const std::vector<int64_t> &shape : kScaleShapes) {
      cases.push_back(scaleCase(dtype, shape, -0.37, false, ++seed));
      cases.push_back(scaleCase(dtype, shape, 1.0 / 3.0, true, ++seed));
    }
  }
  return cases;
}

/// sqrt (f32 only, as its contract says) of magnitudes with an exact 0;
/// IEEE sqrt is correctly rounded on both backends.
ConformanceCase sqrtCase(const std::vector<int64_t> &shape, bool inPlace, uint64_t seed) {
  return {"sqrt", shapeLabel(shape) + (inPlace ? "_in_place" : ""), [=] {
            KernelCall k;
            RefTensor values = randomTensor(shape, seed, 10.0);
            for (double &v : values.data) v = std::abs(v);
            values.data[0] = 0.0;
            size_t x = k.input(values, DType::F32);
            k.outputMaybeInPlace(inPlace, x, DType::F32, shape);
            k.reference = [](const std::vector<RefTensor> &in) {
              RefTensor out = in[0];
              for (double &v : out.data) v = std::sqrt(v);
              return std::vector<RefTensor>{out};
            };
            k.tolerances = k.cudaTolerances = {1e-7};
            return k;
          }};
}

std::vector<ConformanceCase> sqrtCases() {
  std::vector<ConformanceCase> cases;
  uint64_t seed = 800;
  for (std::vector<int64_t> shape : {std::vector<int64_t>{1}, {7}, {37, 129}, {3, 50257}})
    for (bool inPlace : {false, true}) cases.push_back(sqrtCase(shape, inPlace, ++seed));
  return cases;
}

LLMC_CONFORMANCE_CASES(Binary, binaryCases);
LLMC_CONFORMANCE_CASES(Sqrt, sqrtCases);

} // namespace
} // namespace llmc::test
