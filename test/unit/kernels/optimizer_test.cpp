//===- optimizer_test.cpp - global_norm and adamw -------------------------===//
//
// The norm is one scalar. adamw: p' and v' (a sum of positive terms) use
// the elementwise metric; m' = β1·m + (1−β1)·g can cancel, so norm metric.
// A non-finite norm skips the step: the outputs are the inputs, bit for bit.

#include "KernelTest.h"

#include <limits>

namespace llmc::test {
namespace {

TEST(GlobalNormKernel, MatchesReferenceOverManyInputs) {
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtypeName(dtype));
    std::vector<RefTensor> xs = {roundTo(randomTensor({7}, 801), dtype),
                                 roundTo(randomTensor({13, 33}, 802), dtype),
                                 roundTo(randomTensor({300, 301}, 803), dtype)};
    std::vector<Buffer> buffers;
    for (const RefTensor &x : xs) buffers.push_back(Buffer::of(x, dtype));
    std::vector<Buffer *> inputs;
    for (Buffer &b : buffers) inputs.push_back(&b);
    Buffer norm(DType::F32, {});
    norm.poison();
    ASSERT_TRUE(runKernel("global_norm", inputs, {&norm}));
    EXPECT_CLOSE(norm.toRef(), ref::globalNorm(xs), Metric::Elementwise, 1e-6);
  }
}

TEST(GlobalNormKernel, MixedDTypes) {
  RefTensor a = randomTensor({5}, 811), b = roundTo(randomTensor({9}, 812), DType::BF16);
  Buffer ab = Buffer::of(a, DType::F32), bb = Buffer::of(b, DType::BF16), norm(DType::F32, {});
  ASSERT_TRUE(runKernel("global_norm", {&ab, &bb}, {&norm}));
  EXPECT_CLOSE(norm.toRef(), ref::globalNorm({roundTo(a, DType::F32), b}), Metric::Elementwise,
               1e-6);
}

TEST(GlobalNormKernel, SquaredAndSqrtCombineShards) {
  // Σ‖shard‖² over two "ranks", then √: the norm of the whole.
  RefTensor a = randomTensor({64}, 821), b = randomTensor({64}, 822);
  Buffer ab = Buffer::of(a, DType::F32), bb = Buffer::of(b, DType::F32);
  Buffer sa(DType::F32, {}), sb(DType::F32, {}), root(DType::F32, {});
  KernelAttrs squared;
  squared.setInt("squared", 1);
  ASSERT_TRUE(runKernel("global_norm", {&ab}, {&sa}, squared));
  ASSERT_TRUE(runKernel("global_norm", {&bb}, {&sb}, squared));
  Buffer total = Buffer::of(RefTensor{{}, {sa.toRef().data[0] + sb.toRef().data[0]}}, DType::F32);
  ASSERT_TRUE(runKernel("sqrt", {&total}, {&root}));
  EXPECT_CLOSE(root.toRef(), ref::globalNorm({a, b}), Metric::Elementwise, 1e-6);
}

struct AdamWCase {
  double step, maxGradNorm;
  bool withNorm, inPlace;
};

TEST(AdamWKernel, MatchesReferenceWithClippingAndInPlace) {
  const AdamWCase cases[] = {{1, 1.0, true, false},
                             {10, 1.0, true, true},
                             {3, 0.0, true, false},
                             {7, 1.0, false, true},
                             {2, 100.0, true, false}};
  const double lr = 3e-3, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, wd = 0.1;
  uint64_t seed = 820;
  for (DType dtype : kFloatTypes)
    for (const AdamWCase &c : cases) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " step " + std::to_string(c.step) +
                   (c.withNorm ? " norm" : "") + (c.inPlace ? " in place" : ""));
      std::vector<int64_t> shape = {33, 7};
      RefTensor p = roundTo(randomTensor(shape, ++seed), dtype);
      RefTensor g = roundTo(randomTensor(shape, ++seed, 0.3), dtype);
      RefTensor m = roundTo(randomTensor(shape, ++seed, 0.1), dtype);
      RefTensor root = randomTensor(shape, ++seed, 0.1);
      RefTensor v = roundTo(ref::mul(root, root), dtype); // second moments are >= 0
      double gradNorm = ref::globalNorm({g}).data[0];
      Buffer pb = Buffer::of(p, dtype), gb = Buffer::of(g, dtype), mb = Buffer::of(m, dtype),
             vb = Buffer::of(v, dtype);
      Buffer lrb = Buffer::of(RefTensor{{}, {lr}}, DType::F32),
             stepb = Buffer::of(RefTensor{{}, {c.step}}, DType::F32),
             normb = Buffer::of(RefTensor{{}, {gradNorm}}, DType::F32);
      Buffer p1(dtype, shape), m1(dtype, shape), v1(dtype, shape);
      p1.poison(), m1.poison(), v1.poison();
      std::vector<Buffer *> inputs = {&pb, &gb, &mb, &vb, &lrb, &stepb};
      if (c.withNorm) inputs.push_back(&normb);
      std::vector<Buffer *> outputs =
          c.inPlace ? std::vector<Buffer *>{&pb, &mb, &vb} : std::vector<Buffer *>{&p1, &m1, &v1};
      ASSERT_TRUE(runKernel("adamw", inputs, outputs,
                            attrs({{"beta1", beta1},
                                   {"beta2", beta2},
                                   {"epsilon", eps},
                                   {"weight_decay", wd},
                                   {"max_grad_norm", c.maxGradNorm}})));
      float normF = static_cast<float>(gradNorm); // the kernel sees an f32 scalar
      double normSeen = normF;
      std::vector<RefTensor> expected =
          ref::adamw(p, g, m, v, lr, c.step, c.withNorm ? &normSeen : nullptr, beta1, beta2, eps,
                     wd, c.maxGradNorm);
      EXPECT_CLOSE(outputs[0]->toRef(), expected[0], Metric::Elementwise, tolerance(dtype));
      EXPECT_CLOSE(outputs[1]->toRef(), expected[1], Metric::Norm, tolerance(dtype));
      EXPECT_CLOSE(outputs[2]->toRef(), expected[2], Metric::Elementwise, tolerance(dtype));
    }
}

TEST(AdamWKernel, NonFiniteNormKeepsEveryValueBitForBit) {
  const std::vector<int64_t> shape = {33, 7};
  const double bad[] = {std::numeric_limits<double>::quiet_NaN(),
                        std::numeric_limits<double>::infinity()};
  for (DType dtype : kFloatTypes)
    for (double norm : bad)
      for (double maxGradNorm : {1.0, 0.0}) // clipping on or off: the verdict is the same
        for (bool inPlace : {false, true}) {
          SCOPED_TRACE(std::string(dtypeName(dtype)) + " norm " + std::to_string(norm) +
                       " max_grad_norm " + std::to_string(maxGradNorm) +
                       (inPlace ? " in place" : ""));
          Buffer pb = Buffer::of(randomTensor(shape, 901), dtype),
                 gb = Buffer::of(randomTensor(shape, 902, 0.3), dtype),
                 mb = Buffer::of(randomTensor(shape, 903, 0.1), dtype),
                 root = Buffer::of(randomTensor(shape, 904, 0.1), dtype);
          Buffer vb = Buffer::of(ref::mul(root.toRef(), root.toRef()), dtype);
          const std::vector<uint64_t> p0 = pb.storage, m0 = mb.storage, v0 = vb.storage;
          Buffer lrb = Buffer::of(RefTensor{{}, {1e-3}}, DType::F32),
                 stepb = Buffer::of(RefTensor{{}, {5}}, DType::F32),
                 normb = Buffer::of(RefTensor{{}, {norm}}, DType::F32);
          Buffer p1(dtype, shape), m1(dtype, shape), v1(dtype, shape);
          p1.poison(), m1.poison(), v1.poison();
          std::vector<Buffer *> outputs =
              inPlace ? std::vector<Buffer *>{&pb, &mb, &vb} : std::vector<Buffer *>{&p1, &m1, &v1};
          ASSERT_TRUE(runKernel("adamw", {&pb, &gb, &mb, &vb, &lrb, &stepb, &normb}, outputs,
                                attrs({{"beta1", 0.9},
                                       {"beta2", 0.95},
                                       {"epsilon", 1e-8},
                                       {"weight_decay", 0.1},
                                       {"max_grad_norm", maxGradNorm}})));
          EXPECT_EQ(outputs[0]->storage, p0);
          EXPECT_EQ(outputs[1]->storage, m0);
          EXPECT_EQ(outputs[2]->storage, v0);
        }
}

// fp16 loss scaling: gradients and their norm scaled by a power of two S,
// unscaled by the loss_scale input, give the unscaled step bit for bit
// (dividing a power of two out of the clip factor is exact).
TEST(AdamWKernel, LossScaleUnscalesExactly) {
  const std::vector<int64_t> shape = {33, 7};
  for (double maxGradNorm : {1.0, 100.0, 0.0})
    for (double scale : {1.0, 1024.0, 65536.0}) {
      SCOPED_TRACE("max_grad_norm " + std::to_string(maxGradNorm) + " scale " +
                   std::to_string(scale));
      RefTensor g = roundTo(randomTensor(shape, 912, 0.3), DType::F32);
      RefTensor scaled = ref::scale(g, scale);
      double norm = static_cast<float>(ref::globalNorm({g}).data[0]);
      auto step = [&](const RefTensor &grad, double gradNorm, const double *lossScale) {
        Buffer pb = Buffer::of(randomTensor(shape, 911), DType::F32),
               gb = Buffer::of(grad, DType::F32),
               mb = Buffer::of(randomTensor(shape, 913, 0.1), DType::F32),
               vb = Buffer::of(ref::mul(randomTensor(shape, 914, 0.1),
                                        randomTensor(shape, 914, 0.1)),
                               DType::F32);
        Buffer lrb = Buffer::of(RefTensor{{}, {1e-3}}, DType::F32),
               stepb = Buffer::of(RefTensor{{}, {3}}, DType::F32),
               normb = Buffer::of(RefTensor{{}, {gradNorm}}, DType::F32),
               scaleb = Buffer::of(RefTensor{{}, {lossScale ? *lossScale : 1.0}}, DType::F32);
        std::vector<Buffer *> inputs = {&pb, &gb, &mb, &vb, &lrb, &stepb, &normb};
        if (lossScale) inputs.push_back(&scaleb);
        EXPECT_TRUE(runKernel("adamw", inputs, {&pb, &mb, &vb},
                              attrs({{"beta1", 0.9},
                                     {"beta2", 0.95},
                                     {"epsilon", 1e-8},
                                     {"weight_decay", 0.1},
                                     {"max_grad_norm", maxGradNorm}})));
        return std::vector<std::vector<uint64_t>>{pb.storage, mb.storage, vb.storage};
      };
      auto plain = step(g, norm, nullptr);
      auto unscaled = step(scaled, norm * scale, &scale);
      EXPECT_EQ(unscaled, plain);
      // The reference agrees on the unscaling.
      std::vector<RefTensor> a = ref::adamw(g, g, g, ref::mul(g, g), 1e-3, 3, &norm, 0.9, 0.95,
                                            1e-8, 0.1, maxGradNorm);
      double scaledNorm = norm * scale;
      std::vector<RefTensor> b = ref::adamw(g, scaled, g, ref::mul(g, g), 1e-3, 3, &scaledNorm,
                                            0.9, 0.95, 1e-8, 0.1, maxGradNorm, scale);
      EXPECT_CLOSE(b[0], a[0], Metric::Elementwise, 1e-12);
    }
}

} // namespace
} // namespace llmc::test
