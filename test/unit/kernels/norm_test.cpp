//===- norm_test.cpp - layernorm, rmsnorm and their gradients -------------===//
//
// rmsnorm's output is a product (elementwise metric); layernorm's,
// x̂·γ + β, cancels where x̂·γ ≈ −β, and gradients are differences of row
// means or sums over rows: norm metric for those.

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

} // namespace
} // namespace llmc::test
