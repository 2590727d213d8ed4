//===- norm_test.cpp - layernorm, rmsnorm and their gradients -------------===//
//
// Every kernel here against its reference, and on a GPU CUDA against the
// CPU, as conformance cases (Conformance.h).
//
// The residual forms (add_layernorm, add_rmsnorm, layernorm_grad_add,
// rmsnorm_grad_add) also against the CPU's own
// add and norm kernels, which they must equal bit for bit in every dtype
// (also in place: the sum over a or b, dx over the addend, as the planner
// puts them): that is what makes `--fuse add-norm` train to the unfused losses.
// add_layernorm with a bias equals the bias add, the residual add and the
// norm the same way.

#include "Conformance.h"

#include <limits>

namespace llmc::test {
namespace {

const std::vector<std::vector<int64_t>> kShapes = {{7}, {13, 33}, {2, 7, 128}, {300, 65}};

/// The conformance shapes (rows x C): the above, odd sizes, one wide row, a
/// GPT-2 layer's, and rows whose C is a multiple of a 16-byte pack (4 f32,
/// 8 bf16/f16), which the CUDA kernels move in packs (RowPack.cuh): one
/// pack per row, a few, one per thread of a 256-thread block and one more,
/// several per thread.
const std::vector<std::vector<int64_t>> kCaseShapes = {
    {7},       {13, 33},       {2, 7, 128}, {300, 65}, {1, 1},  {3, 7},    {37, 129}, {2, 3, 1000},
    {1, 5000}, {4, 1024, 768}, {2, 8},      {3, 12},   {5, 24}, {2, 2056}, {3, 8192}, {16, 768}};

/// The operands of one norm call, stored in `dtype`, by role.
struct NormOperands {
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t seed;
  RefTensor x() const { return randomTensor(shape, seed, 2.0, 0.5); }
  RefTensor addend() const { return randomTensor(shape, seed + 1); }
  RefTensor gamma() const { return randomTensor({shape.back()}, seed + 2, 0.5, 1.0); }
  RefTensor beta() const { return randomTensor({shape.back()}, seed + 3, 0.2); }
  RefTensor bias() const { return randomTensor({shape.back()}, seed + 4, 3.0); }
  RefTensor dy() const { return randomTensor(shape, seed + 5); }
  std::vector<int64_t> row() const { return {shape.back()}; }
};

std::string labelOf(const NormOperands &o) {
  return std::string(dtypeName(o.dtype)) + "_" + shapeLabel(o.shape);
}

/// A gradient call's tolerances against the reference. A row of one
/// element normalizes to a constant, so dx is a cancellation down to the
/// size of epsilon, too ill-conditioned for a relative check of fp32
/// against double: it is left to the CUDA half, which compares it with the
/// CPU's.
std::vector<double> gradTolerances(const NormOperands &o) {
  if (o.shape.back() != 1)
    return {};
  return {std::numeric_limits<double>::infinity(), tolerance(o.dtype)};
}

/// layernorm's output x̂·γ + β cancels where x̂·γ ≈ −β, and its gradients
/// are differences of row means or sums over rows: norm metric. On the GPU
/// an output near zero carries the row mean's rounding, summed in another
/// order (a few units in the last place of the row's scale).
void addLayerNormCases(std::vector<ConformanceCase> &cases, const NormOperands &o) {
  const double eps = 1e-5;
  auto base = [=] {
    KernelCall k;
    k.attrs = attrs({{"epsilon", eps}});
    k.metric = k.cudaMetric = Metric::Norm;
    return k;
  };
  cases.push_back({"layernorm", labelOf(o), [=] {
                     KernelCall k = base();
                     k.input(o.x(), o.dtype), k.input(o.gamma(), o.dtype);
                     k.input(o.beta(), o.dtype);
                     k.output(o.dtype, o.shape);
                     k.reference = [=](const std::vector<RefTensor> &in) {
                       return std::vector<RefTensor>{ref::layernorm(in[0], in[1], in[2], eps)};
                     };
                     return k;
                   }});
  cases.push_back({"layernorm_grad", labelOf(o), [=] {
                     KernelCall k = base();
                     k.input(o.x(), o.dtype), k.input(o.gamma(), o.dtype);
                     k.input(o.dy(), o.dtype);
                     k.output(o.dtype, o.shape), k.output(o.dtype, o.row());
                     k.output(o.dtype, o.row());
                     k.reference = [=](const std::vector<RefTensor> &in) {
                       return ref::layernormGrad(in[0], in[1], in[2], eps);
                     };
                     k.tolerances = gradTolerances(o);
                     return k;
                   }});
  // The residual forms: {a + b, layernorm(a + b)} (with a bias of b: a +
  // (b + bias), two roundings), and {dx + addend, dγ, dβ}.
  for (bool withBias : {false, true})
    cases.push_back({"add_layernorm", labelOf(o) + (withBias ? "_bias" : ""), [=] {
                       KernelCall k = base();
                       k.input(o.x(), o.dtype), k.input(o.addend(), o.dtype);
                       k.input(o.gamma(), o.dtype), k.input(o.beta(), o.dtype);
                       if (withBias)
                         k.input(o.bias(), o.dtype);
                       k.output(o.dtype, o.shape), k.output(o.dtype, o.shape);
                       k.reference = [=](const std::vector<RefTensor> &in) {
                         return ref::addLayernorm(in[0], in[1], in[2], in[3], eps,
                                                  withBias ? &in[4] : nullptr);
                       };
                       return k;
                     }});
  cases.push_back({"layernorm_grad_add", labelOf(o), [=] {
                     KernelCall k = base();
                     k.input(o.x(), o.dtype), k.input(o.gamma(), o.dtype);
                     k.input(o.dy(), o.dtype), k.input(o.addend(), o.dtype);
                     k.output(o.dtype, o.shape), k.output(o.dtype, o.row());
                     k.output(o.dtype, o.row());
                     k.reference = [=](const std::vector<RefTensor> &in) {
                       return ref::layernormGradAdd(in[0], in[1], in[2], in[3], eps);
                     };
                     k.tolerances = gradTolerances(o);
                     return k;
                   }});
}

/// gamma, or under `unit_offset` (Gemma) the 1 + gamma the kernels scale by.
RefTensor scaleOf(const RefTensor &gamma, bool unitOffset) {
  RefTensor g = gamma;
  if (unitOffset)
    for (double &v : g.data) v += 1.0;
  return g;
}

/// rmsnorm's output is a product (elementwise metric); its gradients are
/// sums (norm metric). With `unitOffset` the four kernels scale by 1 + gamma.
void addRmsNormCases(std::vector<ConformanceCase> &cases, const NormOperands &o,
                     bool unitOffset = false) {
  const double eps = 1e-6;
  const std::string label = labelOf(o) + (unitOffset ? "_unit_offset" : "");
  auto base = [=](Metric metric) {
    KernelCall k;
    k.attrs = attrs({{"epsilon", eps}}, {{"unit_offset", unitOffset ? 1 : 0}});
    k.metric = k.cudaMetric = metric;
    return k;
  };
  cases.push_back({"rmsnorm", label, [=] {
                     KernelCall k = base(Metric::Elementwise);
                     k.input(o.x(), o.dtype), k.input(o.gamma(), o.dtype);
                     k.output(o.dtype, o.shape);
                     k.reference = [=](const std::vector<RefTensor> &in) {
                       return std::vector<RefTensor>{
                           ref::rmsnorm(in[0], scaleOf(in[1], unitOffset), eps)};
                     };
                     return k;
                   }});
  cases.push_back({"rmsnorm_grad", label, [=] {
                     KernelCall k = base(Metric::Norm);
                     k.input(o.x(), o.dtype), k.input(o.gamma(), o.dtype);
                     k.input(o.dy(), o.dtype);
                     k.output(o.dtype, o.shape), k.output(o.dtype, o.row());
                     k.reference = [=](const std::vector<RefTensor> &in) {
                       return ref::rmsnormGrad(in[0], scaleOf(in[1], unitOffset), in[2], eps);
                     };
                     k.tolerances = gradTolerances(o);
                     return k;
                   }});
  cases.push_back({"add_rmsnorm", label, [=] {
                     KernelCall k = base(Metric::Elementwise);
                     k.input(o.x(), o.dtype), k.input(o.addend(), o.dtype);
                     k.input(o.gamma(), o.dtype);
                     k.output(o.dtype, o.shape), k.output(o.dtype, o.shape);
                     k.reference = [=](const std::vector<RefTensor> &in) {
                       return ref::addRmsnorm(in[0], in[1], scaleOf(in[2], unitOffset), eps);
                     };
                     return k;
                   }});
  cases.push_back({"rmsnorm_grad_add", label, [=] {
                     KernelCall k = base(Metric::Norm);
                     k.input(o.x(), o.dtype), k.input(o.gamma(), o.dtype);
                     k.input(o.dy(), o.dtype), k.input(o.addend(), o.dtype);
                     k.output(o.dtype, o.shape), k.output(o.dtype, o.row());
                     k.reference = [=](const std::vector<RefTensor> &in) {
                       return ref::rmsnormGradAdd(in[0], scaleOf(in[1], unitOffset), in[2], in[3],
                                                  eps);
                     };
                     k.tolerances = gradTolerances(o);
                     return k;
                   }});
}

std::vector<ConformanceCase> normCases() {
  std::vector<ConformanceCase> cases;
  uint64_t seed = 9100;
  for (DType dtype : kFloatTypes)
    for (const std::vector<int64_t> &shape : kCaseShapes) {
      addLayerNormCases(cases, {dtype, shape, seed += 10});
      addRmsNormCases(cases, {dtype, shape, seed += 10});
      addRmsNormCases(cases, {dtype, shape, seed += 10}, /*unitOffset=*/true);
    }
  return cases;
}

LLMC_CONFORMANCE_CASES(Norm, normCases);

/// The operands of a residual norm case: a, b (the sum's addends), gamma,
/// beta, dy and the residual stream's gradient, stored in `dtype`.
struct ResidualCase {
  Buffer a, b, gamma, beta, dy, dres;
  ResidualCase(const std::vector<int64_t> &shape, DType dtype, uint64_t seed)
      : a(Buffer::of(randomTensor(shape, seed, 2.0, 0.5), dtype)),
        b(Buffer::of(randomTensor(shape, seed + 1), dtype)),
        gamma(Buffer::of(randomTensor({shape.back()}, seed + 2, 0.5, 1.0), dtype)),
        beta(Buffer::of(randomTensor({shape.back()}, seed + 3), dtype)),
        dy(Buffer::of(randomTensor(shape, seed + 4), dtype)),
        dres(Buffer::of(randomTensor(shape, seed + 5), dtype)) {}
};

TEST(NormKernels, AddLayerNormEqualsAddThenLayerNormExactly) {
  uint64_t seed = 320;
  for (DType dtype : kFloatTypes)
    for (const auto &shape : kShapes) {
      int64_t c = shape.back();
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + shapeString(shape));
      ResidualCase k(shape, dtype, seed += 10);
      KernelAttrs a = attrs({{"epsilon", 1e-5}});
      Buffer sum(dtype, shape), y(dtype, shape);
      ASSERT_TRUE(runKernel("add", {&k.a, &k.b}, {&sum}));
      ASSERT_TRUE(runKernel("layernorm", {&sum, &k.gamma, &k.beta}, {&y}, a));
      Buffer fusedSum(dtype, shape), fusedY(dtype, shape);
      fusedSum.poison(), fusedY.poison();
      ASSERT_TRUE(
          runKernel("add_layernorm", {&k.a, &k.b, &k.gamma, &k.beta}, {&fusedSum, &fusedY}, a));
      EXPECT_EQ(fusedSum.toRef().data, sum.toRef().data);
      EXPECT_EQ(fusedY.toRef().data, y.toRef().data);
      std::vector<RefTensor> expected =
          ref::addLayernorm(k.a.toRef(), k.b.toRef(), k.gamma.toRef(), k.beta.toRef(), 1e-5);
      EXPECT_CLOSE(fusedSum.toRef(), expected[0], Metric::Elementwise, tolerance(dtype));

      // The backward at x = the sum, plus the stream's gradient.
      Buffer dx(dtype, shape), dgamma(dtype, {c}), dbeta(dtype, {c}), d(dtype, shape);
      ASSERT_TRUE(runKernel("layernorm_grad", {&sum, &k.gamma, &k.dy}, {&dx, &dgamma, &dbeta}, a));
      ASSERT_TRUE(runKernel("add", {&k.dres, &dx}, {&d}));
      Buffer fusedD(dtype, shape), fusedDgamma(dtype, {c}), fusedDbeta(dtype, {c});
      fusedD.poison(), fusedDgamma.poison(), fusedDbeta.poison();
      ASSERT_TRUE(runKernel("layernorm_grad_add", {&sum, &k.gamma, &k.dy, &k.dres},
                            {&fusedD, &fusedDgamma, &fusedDbeta}, a));
      EXPECT_EQ(fusedD.toRef().data, d.toRef().data);
      EXPECT_EQ(fusedDgamma.toRef().data, dgamma.toRef().data);
      EXPECT_EQ(fusedDbeta.toRef().data, dbeta.toRef().data);
      std::vector<RefTensor> grads =
          ref::layernormGradAdd(sum.toRef(), k.gamma.toRef(), k.dy.toRef(), k.dres.toRef(), 1e-5);
      EXPECT_CLOSE(fusedD.toRef(), grads[0], Metric::Norm, tolerance(dtype));

      // In place, as the planner places them where a and the addend die:
      // the sum over a, dx over the addend.
      Buffer sumOverA = Buffer::of(k.a.toRef(), dtype),
             dOverAddend = Buffer::of(k.dres.toRef(), dtype);
      ASSERT_TRUE(runKernel("add_layernorm", {&sumOverA, &k.b, &k.gamma, &k.beta},
                            {&sumOverA, &fusedY}, a));
      EXPECT_EQ(sumOverA.toRef().data, sum.toRef().data);
      EXPECT_EQ(fusedY.toRef().data, y.toRef().data);
      Buffer sumOverB = Buffer::of(k.b.toRef(), dtype);
      ASSERT_TRUE(runKernel("add_layernorm", {&k.a, &sumOverB, &k.gamma, &k.beta},
                            {&sumOverB, &fusedY}, a));
      EXPECT_EQ(sumOverB.toRef().data, sum.toRef().data);
      ASSERT_TRUE(runKernel("layernorm_grad_add", {&sum, &k.gamma, &k.dy, &dOverAddend},
                            {&dOverAddend, &fusedDgamma, &fusedDbeta}, a));
      EXPECT_EQ(dOverAddend.toRef().data, d.toRef().data);
    }
}

/// add_layernorm with a bias of b (tensor parallelism's row-parallel
/// projection, added after the all-reduce) equals add(b, bias), add and
/// layernorm bit for bit, also with the sum over b.
TEST(NormKernels, AddLayerNormWithBiasEqualsTheThreeOpsExactly) {
  uint64_t seed = 370;
  for (DType dtype : kFloatTypes)
    for (const auto &shape : kShapes) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + shapeString(shape));
      ResidualCase k(shape, dtype, seed += 10);
      Buffer bias = Buffer::of(randomTensor({shape.back()}, seed + 7, 3.0), dtype);
      KernelAttrs a = attrs({{"epsilon", 1e-5}});
      Buffer biased(dtype, shape), sum(dtype, shape), y(dtype, shape);
      ASSERT_TRUE(runKernel("add", {&k.b, &bias}, {&biased}));
      ASSERT_TRUE(runKernel("add", {&k.a, &biased}, {&sum}));
      ASSERT_TRUE(runKernel("layernorm", {&sum, &k.gamma, &k.beta}, {&y}, a));
      Buffer fusedSum(dtype, shape), fusedY(dtype, shape);
      fusedSum.poison(), fusedY.poison();
      ASSERT_TRUE(runKernel("add_layernorm", {&k.a, &k.b, &k.gamma, &k.beta, &bias},
                            {&fusedSum, &fusedY}, a));
      EXPECT_EQ(fusedSum.toRef().data, sum.toRef().data);
      EXPECT_EQ(fusedY.toRef().data, y.toRef().data);
      RefTensor biasRef = bias.toRef();
      std::vector<RefTensor> expected = ref::addLayernorm(k.a.toRef(), k.b.toRef(), k.gamma.toRef(),
                                                          k.beta.toRef(), 1e-5, &biasRef);
      // Norm-wise: the three addends cancel to near zero in places, where a
      // half type's two roundings are large relative errors.
      EXPECT_CLOSE(fusedSum.toRef(), expected[0], Metric::Norm, tolerance(dtype));
      EXPECT_CLOSE(fusedY.toRef(), expected[1], Metric::Norm, tolerance(dtype));
      Buffer sumOverB = Buffer::of(k.b.toRef(), dtype);
      ASSERT_TRUE(runKernel("add_layernorm", {&k.a, &sumOverB, &k.gamma, &k.beta, &bias},
                            {&sumOverB, &fusedY}, a));
      EXPECT_EQ(sumOverB.toRef().data, sum.toRef().data);
      EXPECT_EQ(fusedY.toRef().data, y.toRef().data);
    }
  // A bias of the wrong width names itself.
  EXPECT_NE(
      bindError("add_layernorm",
                {typeOnly(DType::F32, {4, 8}), typeOnly(DType::F32, {4, 8}),
                 typeOnly(DType::F32, {8}), typeOnly(DType::F32, {8}), typeOnly(DType::F32, {7})},
                {typeOnly(DType::F32, {4, 8}), typeOnly(DType::F32, {4, 8})},
                attrs({{"epsilon", 1e-5}}))
          .find("bias"),
      std::string::npos);
}

TEST(NormKernels, AddRmsNormEqualsAddThenRmsNormExactly) {
  uint64_t seed = 420;
  for (DType dtype : kFloatTypes)
    for (const auto &shape : kShapes) {
      int64_t c = shape.back();
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + shapeString(shape));
      ResidualCase k(shape, dtype, seed += 10);
      KernelAttrs a = attrs({{"epsilon", 1e-6}});
      Buffer sum(dtype, shape), y(dtype, shape);
      ASSERT_TRUE(runKernel("add", {&k.a, &k.b}, {&sum}));
      ASSERT_TRUE(runKernel("rmsnorm", {&sum, &k.gamma}, {&y}, a));
      Buffer fusedSum(dtype, shape), fusedY(dtype, shape);
      fusedSum.poison(), fusedY.poison();
      ASSERT_TRUE(runKernel("add_rmsnorm", {&k.a, &k.b, &k.gamma}, {&fusedSum, &fusedY}, a));
      EXPECT_EQ(fusedSum.toRef().data, sum.toRef().data);
      EXPECT_EQ(fusedY.toRef().data, y.toRef().data);
      std::vector<RefTensor> expected =
          ref::addRmsnorm(k.a.toRef(), k.b.toRef(), k.gamma.toRef(), 1e-6);
      EXPECT_CLOSE(fusedY.toRef(), expected[1], Metric::Elementwise, tolerance(dtype));

      Buffer dx(dtype, shape), dgamma(dtype, {c}), d(dtype, shape);
      ASSERT_TRUE(runKernel("rmsnorm_grad", {&sum, &k.gamma, &k.dy}, {&dx, &dgamma}, a));
      ASSERT_TRUE(runKernel("add", {&dx, &k.dres}, {&d}));
      Buffer fusedD(dtype, shape), fusedDgamma(dtype, {c});
      fusedD.poison(), fusedDgamma.poison();
      ASSERT_TRUE(runKernel("rmsnorm_grad_add", {&sum, &k.gamma, &k.dy, &k.dres},
                            {&fusedD, &fusedDgamma}, a));
      EXPECT_EQ(fusedD.toRef().data, d.toRef().data);
      EXPECT_EQ(fusedDgamma.toRef().data, dgamma.toRef().data);
      std::vector<RefTensor> grads =
          ref::rmsnormGradAdd(sum.toRef(), k.gamma.toRef(), k.dy.toRef(), k.dres.toRef(), 1e-6);
      EXPECT_CLOSE(fusedD.toRef(), grads[0], Metric::Norm, tolerance(dtype));

      Buffer sumOverA = Buffer::of(k.a.toRef(), dtype),
             dOverAddend = Buffer::of(k.dres.toRef(), dtype);
      ASSERT_TRUE(runKernel("add_rmsnorm", {&sumOverA, &k.b, &k.gamma}, {&sumOverA, &fusedY}, a));
      EXPECT_EQ(sumOverA.toRef().data, sum.toRef().data);
      EXPECT_EQ(fusedY.toRef().data, y.toRef().data);
      Buffer sumOverB = Buffer::of(k.b.toRef(), dtype);
      ASSERT_TRUE(runKernel("add_rmsnorm", {&k.a, &sumOverB, &k.gamma}, {&sumOverB, &fusedY}, a));
      EXPECT_EQ(sumOverB.toRef().data, sum.toRef().data);
      ASSERT_TRUE(runKernel("rmsnorm_grad_add", {&sum, &k.gamma, &k.dy, &dOverAddend},
                            {&dOverAddend, &fusedDgamma}, a));
      EXPECT_EQ(dOverAddend.toRef().data, d.toRef().data);
    }
}

TEST(NormKernels, ResidualBindingErrorsNameTheOperand) {
  KernelAttrs a = attrs({{"epsilon", 1e-5}});
  TensorView x = typeOnly(DType::F32, {4, 8}), c = typeOnly(DType::F32, {8});
  TensorView narrow = typeOnly(DType::F32, {4, 7}), half = typeOnly(DType::BF16, {4, 8});
  EXPECT_EQ(bindError("add_layernorm", {x, narrow, c, c}, {x, x}, a),
            "add_layernorm: b must be f32[4x8], got f32[4x7]");
  EXPECT_EQ(bindError("add_layernorm", {x, x, c, c}, {x, half}, a),
            "add_layernorm: y must be f32[4x8], got bf16[4x8]");
  EXPECT_EQ(bindError("add_rmsnorm", {x, x, c}, {x}, a), "add_rmsnorm: expected 2 outputs, got 1");
  EXPECT_EQ(bindError("layernorm_grad_add", {x, c, x, narrow}, {x, c, c}, a),
            "layernorm_grad_add: addend must be f32[4x8], got f32[4x7]");
  EXPECT_EQ(bindError("rmsnorm_grad_add", {x, c, x, x}, {x, c}, {}),
            "rmsnorm_grad_add: missing float attribute 'epsilon'");
}

} // namespace
} // namespace llmc::test
