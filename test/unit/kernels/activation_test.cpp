//===- activation_test.cpp - activations, dropout, cast -------------------===//
//
// gelu, silu, swiglu, geglu, softcap, their gradients, dropout and cast are conformance
// cases (Conformance.h), run against the reference and, on a GPU, CUDA
// against the CPU; cast exactly (tolerance 0), with its ties and special
// encodings checked bit for bit by the CastKernel tests below. Forward activations use the
// elementwise metric (each output is a well-conditioned function of one input). Gradients cross
// zero (gelu' at x ≈ −0.75), where an elementwise ratio measures nothing useful, so they use the
// norm metric.

#include "Conformance.h"

#include "kernels/DropoutHash.h"

#include <cmath>
#include <cstring>

namespace llmc::test {
namespace {

const std::vector<std::vector<int64_t>> kShapes = {{1},      {7},        {13, 33},      {3, 7, 65},
                                                   {3, 129}, {64, 1031}, {2, 128, 3072}};

using Unary = RefTensor (*)(const RefTensor &);
using UnaryGrad = RefTensor (*)(const RefTensor &, const RefTensor &);

std::string labelOf(DType dtype, const std::vector<int64_t> &shape) {
  return std::string(dtypeName(dtype)) + "_" + shapeLabel(shape);
}

/// `name`(x) and, with a gradient, `name`_grad(x, dy): x spread over
/// [-7.5, 7.5] so both tails and the bend are sampled.
void addUnary(std::vector<ConformanceCase> &cases, const std::string &name, Unary forward,
              UnaryGrad grad, DType dtype, const std::vector<int64_t> &shape, uint64_t seed) {
  cases.push_back({name, labelOf(dtype, shape), [=] {
                     KernelCall k;
                     k.input(randomTensor(shape, seed, 2.5), dtype);
                     k.output(dtype, shape);
                     k.reference = [forward](const std::vector<RefTensor> &in) {
                       return std::vector<RefTensor>{forward(in[0])};
                     };
                     return k;
                   }});
  cases.push_back({name + "_grad", labelOf(dtype, shape), [=] {
                     KernelCall k;
                     k.input(randomTensor(shape, seed, 2.5), dtype);
                     k.input(randomTensor(shape, seed + 1), dtype);
                     k.output(dtype, shape);
                     k.reference = [grad](const std::vector<RefTensor> &in) {
                       return std::vector<RefTensor>{grad(in[0], in[1])};
                     };
                     k.metric = k.cudaMetric = Metric::Norm;
                     return k;
                   }});
}

using Gated = RefTensor (*)(const RefTensor &, const RefTensor &);
using GatedGrad = std::vector<RefTensor> (*)(const RefTensor &, const RefTensor &,
                                             const RefTensor &);

/// swiglu or geglu (`name`) and its gradient.
void addGated(std::vector<ConformanceCase> &cases, const std::string &name, Gated forward,
              GatedGrad grad, DType dtype, const std::vector<int64_t> &shape, uint64_t seed) {
  cases.push_back({name, labelOf(dtype, shape), [=] {
                     KernelCall k;
                     k.input(randomTensor(shape, seed, 2.0), dtype);
                     k.input(randomTensor(shape, seed + 1), dtype);
                     k.output(dtype, shape);
                     k.reference = [forward](const std::vector<RefTensor> &in) {
                       return std::vector<RefTensor>{forward(in[0], in[1])};
                     };
                     return k;
                   }});
  cases.push_back({name + "_grad", labelOf(dtype, shape), [=] {
                     KernelCall k;
                     k.input(randomTensor(shape, seed, 2.0), dtype);
                     k.input(randomTensor(shape, seed + 1), dtype);
                     k.input(randomTensor(shape, seed + 2), dtype);
                     k.output(dtype, shape);
                     k.output(dtype, shape);
                     k.reference = [grad](const std::vector<RefTensor> &in) {
                       return grad(in[0], in[1], in[2]);
                     };
                     k.metric = k.cudaMetric = Metric::Norm;
                     return k;
                   }});
}

/// softcap(x) and softcap_grad(x, dy) at cap 5: x over [-7.5, 7.5] reaches
/// well into the saturated tails.
void addSoftcap(std::vector<ConformanceCase> &cases, DType dtype, const std::vector<int64_t> &shape,
                uint64_t seed) {
  const double cap = 5.0;
  cases.push_back({"softcap", labelOf(dtype, shape), [=] {
                     KernelCall k;
                     k.input(randomTensor(shape, seed, 2.5), dtype);
                     k.output(dtype, shape);
                     k.attrs = attrs({{"cap", cap}});
                     k.reference = [cap](const std::vector<RefTensor> &in) {
                       return std::vector<RefTensor>{ref::softcap(in[0], cap)};
                     };
                     return k;
                   }});
  cases.push_back({"softcap_grad", labelOf(dtype, shape), [=] {
                     KernelCall k;
                     k.input(randomTensor(shape, seed, 2.5), dtype);
                     k.input(randomTensor(shape, seed + 1), dtype);
                     k.output(dtype, shape);
                     k.attrs = attrs({{"cap", cap}});
                     k.reference = [cap](const std::vector<RefTensor> &in) {
                       return std::vector<RefTensor>{ref::softcapGrad(in[0], in[1], cap)};
                     };
                     k.metric = k.cudaMetric = Metric::Norm;
                     return k;
                   }});
}

std::vector<ConformanceCase> activationCases() {
  std::vector<ConformanceCase> cases;
  uint64_t seed = 9400;
  for (DType dtype : kFloatTypes)
    for (const std::vector<int64_t> &shape : kShapes) {
      addUnary(cases, "gelu", ref::gelu, ref::geluGrad, dtype, shape, seed += 3);
      addUnary(cases, "silu", ref::silu, ref::siluGrad, dtype, shape, seed += 3);
      addGated(cases, "swiglu", ref::swiglu, ref::swigluGrad, dtype, shape, seed += 3);
      addGated(cases, "geglu", ref::geglu, ref::gegluGrad, dtype, shape, seed += 3);
      addSoftcap(cases, dtype, shape, seed += 3);
    }
  // Qwen-MoE's shared-expert gate; seeded apart so the cases above keep theirs.
  uint64_t sigmoidSeed = 9900;
  for (DType dtype : kFloatTypes)
    for (const std::vector<int64_t> &shape : kShapes)
      addUnary(cases, "sigmoid", ref::sigmoid, ref::sigmoidGrad, dtype, shape, sigmoidSeed += 3);
  return cases;
}

/// Inverted dropout: the mask is shared code (kernels/DropoutHash.h) and
/// the kept values one multiply, so CUDA must equal the CPU exactly; a
/// mask differing from the reference's shows as a relative error of 1.
ConformanceCase dropoutCase(DType dtype, const std::vector<int64_t> &shape, double rate,
                            int64_t step, bool inPlace, uint64_t seed) {
  std::string label = labelOf(dtype, shape) + "_rate" + std::to_string(int(rate * 100)) + "_step" +
                      std::to_string(step) + (inPlace ? "_in_place" : "");
  return {"dropout", label, [=] {
            KernelCall k;
            size_t x = k.input(randomTensor(shape, seed), dtype);
            k.outputMaybeInPlace(inPlace, x, dtype, shape);
            k.attrs = attrs({{"rate", rate}}, {{"seed", 1234}});
            k.step = step;
            k.reference = [rate, step](const std::vector<RefTensor> &in) {
              return std::vector<RefTensor>{ref::dropout(in[0], rate, 1234, step)};
            };
            k.cudaTolerances = {0.0};
            return k;
          }};
}

std::vector<ConformanceCase> dropoutCases() {
  std::vector<ConformanceCase> cases;
  uint64_t seed = 9600;
  for (DType dtype : kFloatTypes)
    for (const std::vector<int64_t> &shape : {std::vector<int64_t>{7}, {13, 331}, {37, 1000}}) {
      for (double rate : {0.0, 0.1, 0.5})
        cases.push_back(dropoutCase(dtype, shape, rate, 5, false, ++seed));
      cases.push_back(dropoutCase(dtype, shape, 0.3, 8, true, ++seed));
    }
  return cases;
}

/// cast between every pair of float types: rounding to nearest even is
/// exact arithmetic, so both the reference (the stored input rounded to
/// `to`) and the CUDA kernel must agree bit for bit (tolerance 0). Values
/// spread over [-300, 300] stay inside f16's range.
std::vector<ConformanceCase> castCases() {
  std::vector<ConformanceCase> cases;
  uint64_t seed = 9700;
  for (DType from : kFloatTypes)
    for (DType to : kFloatTypes)
      for (const std::vector<int64_t> &shape :
           {std::vector<int64_t>{1}, {7}, {13, 33}, {3, 7, 65}, {37, 1000}}) {
        std::string label =
            std::string(dtypeName(from)) + "_to_" + dtypeName(to) + "_" + shapeLabel(shape);
        cases.push_back({"cast", label, [=, caseSeed = ++seed] {
                           KernelCall k;
                           k.input(randomTensor(shape, caseSeed, 100.0), from);
                           k.output(to, shape);
                           k.reference = [to](const std::vector<RefTensor> &in) {
                             return std::vector<RefTensor>{roundTo(in[0], to)};
                           };
                           k.tolerances = k.cudaTolerances = {0.0};
                           return k;
                         }});
      }
  return cases;
}

LLMC_CONFORMANCE_CASES(Activation, activationCases);
LLMC_CONFORMANCE_CASES(Dropout, dropoutCases);
LLMC_CONFORMANCE_CASES(Cast, castCases);

TEST(ActivationKernels, ExtremeInputsStayFinite) {
  RefTensor x{{8}, {-200.0, -90.0, -30.0, -1e-8, 0.0, 1e-8, 30.0, 200.0}};
  for (const char *name : {"gelu", "silu", "sigmoid"}) {
    SCOPED_TRACE(name);
    Buffer xb = Buffer::of(x, DType::F32), out(DType::F32, {8});
    ASSERT_TRUE(runKernel(name, {&xb}, {&out}));
    const std::string op = name;
    RefTensor expected = op == "gelu"   ? ref::gelu(x)
                         : op == "silu" ? ref::silu(x)
                                        : ref::sigmoid(x);
    RefTensor got = out.toRef();
    for (int i = 0; i < 8; ++i)
      EXPECT_NEAR(got.data[i], expected.data[i], 1e-6 * (1 + std::abs(expected.data[i])));
  }
}

TEST(DropoutKernel, PiecesOfATensorDrawItsGlobalMask) {
  // The whole tensor's mask, then each box of a 2 x 3 x 2 split along every
  // dimension, drawn with global_shape/offsets, must be that box of it.
  const std::vector<int64_t> global = {4, 6, 10}, pieces = {2, 3, 2};
  RefTensor x = randomTensor(global, 33);
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtypeName(dtype));
    RefTensor rounded = roundTo(x, dtype);
    Buffer xb = Buffer::of(rounded, dtype), whole(dtype, global);
    ASSERT_TRUE(runKernel("dropout", {&xb}, {&whole}, attrs({{"rate", 0.3}}, {{"seed", 9}}), 4));
    RefTensor expectedWhole = whole.toRef();
    std::vector<int64_t> local = {global[0] / pieces[0], global[1] / pieces[1],
                                  global[2] / pieces[2]};
    for (int64_t a = 0; a < pieces[0]; ++a)
      for (int64_t b = 0; b < pieces[1]; ++b)
        for (int64_t c = 0; c < pieces[2]; ++c) {
          std::vector<int64_t> offsets = {a * local[0], b * local[1], c * local[2]};
          RefTensor box = ref::slice(rounded, offsets, local);
          Buffer pb = Buffer::of(box, dtype), out(dtype, local);
          out.poison();
          KernelAttrs at = attrs({{"rate", 0.3}}, {{"seed", 9}});
          at.setInts("global_shape", global);
          at.setInts("offsets", offsets);
          ASSERT_TRUE(runKernel("dropout", {&pb}, {&out}, at, 4));
          EXPECT_CLOSE(out.toRef(), ref::slice(expectedWhole, offsets, local), Metric::Elementwise,
                       0.0);
          EXPECT_CLOSE(out.toRef(), ref::dropout(box, 0.3, 9, 4, global, offsets),
                       Metric::Elementwise, tolerance(dtype));
        }
  }
  KernelAttrs bad = attrs({{"rate", 0.3}}, {{"seed", 9}});
  bad.setInts("global_shape", {4, 6, 10});
  bad.setInts("offsets", {3, 0, 0});
  EXPECT_NE(bindError("dropout", {typeOnly(DType::F32, {2, 6, 10})},
                      {typeOnly(DType::F32, {2, 6, 10})}, bad)
                .find("dimension 0: a piece of 2 at offset 3 does not fit in 4"),
            std::string::npos);
}

TEST(DropoutKernel, MaskDependsOnSeedAndStepAndHasTheRightRate) {
  const int64_t n = 1 << 16;
  RefTensor ones{{n}, std::vector<double>(n, 1.0)};
  Buffer x = Buffer::of(ones, DType::F32);
  auto mask = [&](int64_t seed, int64_t step) {
    Buffer out(DType::F32, {n});
    EXPECT_TRUE(
        runKernel("dropout", {&x}, {&out}, attrs({{"rate", 0.25}}, {{"seed", seed}}), step));
    return out.toRef().data;
  };
  std::vector<double> a = mask(1, 1), again = mask(1, 1), otherStep = mask(1, 2),
                      otherSeed = mask(2, 1);
  EXPECT_EQ(a, again);
  EXPECT_NE(a, otherStep);
  EXPECT_NE(a, otherSeed);
  int64_t dropped = 0;
  for (double v : a) {
    dropped += v == 0.0;
    if (v != 0.0) {
      ASSERT_FLOAT_EQ(v, 1.0f / 0.75f);
    }
  }
  EXPECT_NEAR(static_cast<double>(dropped) / n, 0.25, 0.01);
}

TEST(DropoutHash, ThresholdIsExact) {
  EXPECT_EQ(dropoutThreshold(0.0), 0u);
  EXPECT_EQ(dropoutThreshold(0.5), 1ull << 31);
  EXPECT_EQ(dropoutThreshold(0.1), 429496730u); // ceil(0.1 · 2^32)
  EXPECT_TRUE(dropoutKeep(3, 4, 5, 0.0));
}

float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(CastKernel, F32ToBf16RoundsToNearestEven) {
  // 1 + 2^-8 is halfway between two bf16 values: ties go to the even one (1.0);
  // 1 + 3·2^-8 ties up to 1 + 2^-6.
  std::vector<float> values = {
      1.0f, 1.0f + 1.0f / 256, 1.0f + 3.0f / 256, -2.5f, bitsToFloat(0x7fc00001u), 3.0e38f, 1e-40f,
      -0.0f};
  Buffer in(DType::F32, {8}), out(DType::BF16, {8});
  std::memcpy(in.storage.data(), values.data(), 32);
  ASSERT_TRUE(runKernel("cast", {&in}, {&out}));
  const uint16_t *bits = out.view().as<uint16_t>();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(bits[i], floatToBf16(values[i])) << "element " << i;
  EXPECT_EQ(bits[1], 0x3f80);
  EXPECT_EQ(bits[2], 0x3f82);
  EXPECT_TRUE(std::isnan(bf16ToFloat(bits[4])));
}

TEST(CastKernel, RoundTripsAndF16) {
  RefTensor x = randomTensor({7, 13}, 41, 100.0);
  Buffer f32 = Buffer::of(x, DType::F32), b16(DType::BF16, x.shape), h16(DType::F16, x.shape),
         back(DType::F32, x.shape);
  ASSERT_TRUE(runKernel("cast", {&f32}, {&b16}));
  ASSERT_TRUE(runKernel("cast", {&b16}, {&back}));
  EXPECT_CLOSE(back.toRef(), roundTo(x, DType::BF16), Metric::Elementwise, 0.0);
  ASSERT_TRUE(runKernel("cast", {&f32}, {&h16}));
  back.poison();
  ASSERT_TRUE(runKernel("cast", {&h16}, {&back}));
  EXPECT_CLOSE(back.toRef(), roundTo(x, DType::F32), Metric::Elementwise,
               1.0 / 2048); // f16: 11 bits
  // Known f16 encodings: 1, -2, 65504 (max), 2^-24 (smallest subnormal), 65520 → inf, ties to even.
  std::vector<float> values = {
      1.0f, -2.0f, 65504.0f, 5.9604645e-8f, 65520.0f, 1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048, 0.0f};
  std::vector<uint16_t> expected = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x7c00, 0x3c00, 0x3c02, 0x0000};
  Buffer in(DType::F32, {8}), out(DType::F16, {8});
  std::memcpy(in.storage.data(), values.data(), 32);
  ASSERT_TRUE(runKernel("cast", {&in}, {&out}));
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(out.view().as<uint16_t>()[i], expected[i]) << "element " << i;
}

} // namespace
} // namespace llmc::test
