//===- norm_test.cpp - layernorm, rmsnorm and their gradients -------------===//
//
// rmsnorm's output is a product (elementwise metric); layernorm's,
// x̂·γ + β, cancels where x̂·γ ≈ −β, and gradients are differences of row
// means or sums over rows: norm metric for those.
//
// The residual forms (add_layernorm, add_rmsnorm, layernorm_grad_add,
// rmsnorm_grad_add) against their references, and against the CPU's own
// add and norm kernels, which they must equal bit for bit in every dtype
// (also in place: the sum over a or b, dx over the addend, as the planner
// puts them): that is what makes `--fuse add-norm` train to the unfused losses.
// add_layernorm with a bias equals the bias add, the residual add and the
// norm the same way.

#include "KernelTest.h"

namespace llmc::test {
namespace {

const std::vector<std::vector<int64_t>> kShapes = {{7}, {13, 33}, {2, 7, 128}, {300, 65}};

TEST(NormKernels, LayerNormAndGradMatchReference) {
  const double eps = 1e-5;
  for (DType dtype : kFloatTypes)
    for (const auto &shape : kShapes) {
      int64_t c = shape.back();
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " C " + std::to_string(c));
      RefTensor x = roundTo(randomTensor(shape, 301, 2.0, 0.5), dtype);
      RefTensor gamma = roundTo(randomTensor({c}, 302, 0.5, 1.0), dtype);
      RefTensor beta = roundTo(randomTensor({c}, 303), dtype);
      RefTensor dy = roundTo(randomTensor(shape, 304), dtype);
      Buffer xb = Buffer::of(x, dtype), gb = Buffer::of(gamma, dtype), bb = Buffer::of(beta, dtype),
             dyb = Buffer::of(dy, dtype);
      Buffer out(dtype, shape), dx(dtype, shape), dgamma(dtype, {c}), dbeta(dtype, {c});
      out.poison(), dx.poison(), dgamma.poison(), dbeta.poison();
      KernelAttrs a = attrs({{"epsilon", eps}});
      ASSERT_TRUE(runKernel("layernorm", {&xb, &gb, &bb}, {&out}, a));
      EXPECT_CLOSE(out.toRef(), ref::layernorm(x, gamma, beta, eps), Metric::Norm,
                   tolerance(dtype));
      ASSERT_TRUE(runKernel("layernorm_grad", {&xb, &gb, &dyb}, {&dx, &dgamma, &dbeta}, a));
      std::vector<RefTensor> expected = ref::layernormGrad(x, gamma, dy, eps);
      EXPECT_CLOSE(dx.toRef(), expected[0], Metric::Norm, tolerance(dtype));
      EXPECT_CLOSE(dgamma.toRef(), expected[1], Metric::Norm, tolerance(dtype));
      EXPECT_CLOSE(dbeta.toRef(), expected[2], Metric::Norm, tolerance(dtype));
    }
}

TEST(NormKernels, RmsNormAndGradMatchReference) {
  const double eps = 1e-6;
  for (DType dtype : kFloatTypes)
    for (const auto &shape : kShapes) {
      int64_t c = shape.back();
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " C " + std::to_string(c));
      RefTensor x = roundTo(randomTensor(shape, 311, 2.0), dtype);
      RefTensor gamma = roundTo(randomTensor({c}, 312, 0.5, 1.0), dtype);
      RefTensor dy = roundTo(randomTensor(shape, 314), dtype);
      Buffer xb = Buffer::of(x, dtype), gb = Buffer::of(gamma, dtype), dyb = Buffer::of(dy, dtype);
      Buffer out(dtype, shape), dx(dtype, shape), dgamma(dtype, {c});
      out.poison(), dx.poison(), dgamma.poison();
      KernelAttrs a = attrs({{"epsilon", eps}});
      ASSERT_TRUE(runKernel("rmsnorm", {&xb, &gb}, {&out}, a));
      EXPECT_CLOSE(out.toRef(), ref::rmsnorm(x, gamma, eps), Metric::Elementwise, tolerance(dtype));
      ASSERT_TRUE(runKernel("rmsnorm_grad", {&xb, &gb, &dyb}, {&dx, &dgamma}, a));
      std::vector<RefTensor> expected = ref::rmsnormGrad(x, gamma, dy, eps);
      EXPECT_CLOSE(dx.toRef(), expected[0], Metric::Norm, tolerance(dtype));
      EXPECT_CLOSE(dgamma.toRef(), expected[1], Metric::Norm, tolerance(dtype));
    }
}

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
      ASSERT_TRUE(runKernel("add_layernorm", {&k.a, &k.b, &k.gamma, &k.beta},
                            {&fusedSum, &fusedY}, a));
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
      std::vector<RefTensor> grads = ref::layernormGradAdd(sum.toRef(), k.gamma.toRef(),
                                                           k.dy.toRef(), k.dres.toRef(), 1e-5);
      EXPECT_CLOSE(fusedD.toRef(), grads[0], Metric::Norm, tolerance(dtype));

      // In place, as the planner places them where a and the addend die:
      // the sum over a, dx over the addend.
      Buffer sumOverA = Buffer::of(k.a.toRef(), dtype), dOverAddend = Buffer::of(k.dres.toRef(), dtype);
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
      std::vector<RefTensor> expected = ref::addLayernorm(
          k.a.toRef(), k.b.toRef(), k.gamma.toRef(), k.beta.toRef(), 1e-5, &biasRef);
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
  EXPECT_NE(bindError("add_layernorm",
                      {typeOnly(DType::F32, {4, 8}), typeOnly(DType::F32, {4, 8}),
                       typeOnly(DType::F32, {8}), typeOnly(DType::F32, {8}),
                       typeOnly(DType::F32, {7})},
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

      Buffer sumOverA = Buffer::of(k.a.toRef(), dtype), dOverAddend = Buffer::of(k.dres.toRef(), dtype);
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
  EXPECT_EQ(bindError("add_rmsnorm", {x, x, c}, {x}, a),
            "add_rmsnorm: expected 2 outputs, got 1");
  EXPECT_EQ(bindError("layernorm_grad_add", {x, c, x, narrow}, {x, c, c}, a),
            "layernorm_grad_add: addend must be f32[4x8], got f32[4x7]");
  EXPECT_EQ(bindError("rmsnorm_grad_add", {x, c, x, x}, {x, c}, {}),
            "rmsnorm_grad_add: missing float attribute 'epsilon'");
}

} // namespace
} // namespace llmc::test
