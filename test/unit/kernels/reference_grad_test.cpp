//===- reference_grad_test.cpp - reference backwards vs finite differences =//
//
// The references are the oracle for every backend, so their backward
// functions are checked against central differences (h = 1e-6, in double)
// of their own forwards: for L = Σ forward(x)·w, the analytic gradient from
// the *_grad reference (or the composition autodiff would emit: transposed
// matmuls, reduce_sum for broadcasts, pad for slice, inverse rope) must
// agree to ~1e-6 in the norm-relative metric.

#include "KernelTest.h"

#include <cmath>

namespace llmc::test {
namespace {

constexpr double kFdTolerance = 1e-6;

TEST(ReferenceGradients, LayerNorm) {
  const double eps = 1e-5;
  RefTensor x = randomTensor({3, 7}, 1001, 1.5, 0.3), gamma = randomTensor({7}, 1002, 0.5, 1.0),
            beta = randomTensor({7}, 1003), w = randomTensor({3, 7}, 1004);
  std::vector<RefTensor> grads = ref::layernormGrad(x, gamma, w, eps);
  EXPECT_LT(finiteDifferenceError(
                x, grads[0],
                [&](const RefTensor &t) { return dot(ref::layernorm(t, gamma, beta, eps), w); }),
            kFdTolerance);
  EXPECT_LT(finiteDifferenceError(
                gamma, grads[1],
                [&](const RefTensor &t) { return dot(ref::layernorm(x, t, beta, eps), w); }),
            kFdTolerance);
  EXPECT_LT(finiteDifferenceError(
                beta, grads[2],
                [&](const RefTensor &t) { return dot(ref::layernorm(x, gamma, t, eps), w); }),
            kFdTolerance);
}

TEST(ReferenceGradients, RmsNorm) {
  const double eps = 1e-6;
  RefTensor x = randomTensor({3, 13}, 1011), gamma = randomTensor({13}, 1012, 0.5, 1.0),
            w = randomTensor({3, 13}, 1013);
  std::vector<RefTensor> grads = ref::rmsnormGrad(x, gamma, w, eps);
  EXPECT_LT(
      finiteDifferenceError(
          x, grads[0], [&](const RefTensor &t) { return dot(ref::rmsnorm(t, gamma, eps), w); }),
      kFdTolerance);
  EXPECT_LT(
      finiteDifferenceError(gamma, grads[1],
                            [&](const RefTensor &t) { return dot(ref::rmsnorm(x, t, eps), w); }),
      kFdTolerance);
}

TEST(ReferenceGradients, Activations) {
  RefTensor x = randomTensor({33}, 1021, 2.0), up = randomTensor({33}, 1022),
            w = randomTensor({33}, 1023);
  EXPECT_LT(finiteDifferenceError(x, ref::geluGrad(x, w),
                                  [&](const RefTensor &t) { return dot(ref::gelu(t), w); }),
            kFdTolerance);
  EXPECT_LT(finiteDifferenceError(x, ref::siluGrad(x, w),
                                  [&](const RefTensor &t) { return dot(ref::silu(t), w); }),
            kFdTolerance);
  std::vector<RefTensor> grads = ref::swigluGrad(x, up, w);
  EXPECT_LT(finiteDifferenceError(x, grads[0],
                                  [&](const RefTensor &t) { return dot(ref::swiglu(t, up), w); }),
            kFdTolerance);
  EXPECT_LT(finiteDifferenceError(up, grads[1],
                                  [&](const RefTensor &t) { return dot(ref::swiglu(x, t), w); }),
            kFdTolerance);
}

TEST(ReferenceGradients, RopeInverseIsTheBackward) {
  RefTensor x = randomTensor({2, 5, 3, 8}, 1031), w = randomTensor({2, 5, 3, 8}, 1032);
  EXPECT_LT(
      finiteDifferenceError(x, ref::rope(w, nullptr, 100.0, true),
                            [&](const RefTensor &t) { return dot(ref::rope(t, nullptr, 100.0, false), w); }),
      kFdTolerance);
  // Under Llama 3 scaling (D = 8, θ = 100: a kept, a blended and two
  // stretched pairs) the backward is the inverse with the same scaling.
  const RopeScaling scaling{4.0, 1.0, 4.0, 40};
  auto forward = [&](const RefTensor &t) {
    return dot(ref::rope(t, nullptr, 100.0, false, scaling), w);
  };
  EXPECT_LT(finiteDifferenceError(x, ref::rope(w, nullptr, 100.0, true, scaling), forward),
            kFdTolerance);
}

struct FdAttentionCase {
  int64_t b, t, s, h, kv, d;
  bool causal, segments;
};

TEST(ReferenceGradients, Attention) {
  const FdAttentionCase cases[] = {
      {1, 5, 5, 4, 2, 4, true, false},  // GQA, causal
      {2, 6, 6, 2, 1, 3, false, true},  // MQA, packed segments
      {1, 6, 6, 2, 2, 3, true, true},   // causal and segments
      {1, 3, 5, 2, 2, 4, false, false}, // S != T
  };
  uint64_t seed = 1040;
  for (const FdAttentionCase &c : cases) {
    SCOPED_TRACE("H" + std::to_string(c.h) + " KV" + std::to_string(c.kv) +
                 (c.causal ? " causal" : "") + (c.segments ? " segments" : ""));
    RefTensor q = randomTensor({c.b, c.t, c.h, c.d}, ++seed),
              k = randomTensor({c.b, c.s, c.kv, c.d}, ++seed),
              v = randomTensor({c.b, c.s, c.kv, c.d}, ++seed),
              w = randomTensor({c.b, c.t, c.h, c.d}, ++seed);
    RefTensor seg = RefTensor::zeros({c.b, c.t});
    for (int64_t i = 0; i < seg.numel(); ++i) seg.data[i] = (i % c.t) < c.t / 2 ? 0.0 : 1.0;
    const RefTensor *segPtr = c.segments ? &seg : nullptr;
    double scale = 0.7;
    std::vector<RefTensor> fwd = ref::attention(q, k, v, segPtr, scale, c.causal);
    std::vector<RefTensor> grads =
        ref::attentionGrad(q, k, v, fwd[0], fwd[1], w, segPtr, scale, c.causal);
    auto loss = [&](const RefTensor &qq, const RefTensor &kk, const RefTensor &vv) {
      return dot(ref::attention(qq, kk, vv, segPtr, scale, c.causal)[0], w);
    };
    EXPECT_LT(finiteDifferenceError(q, grads[0], [&](const RefTensor &t) { return loss(t, k, v); }),
              kFdTolerance);
    EXPECT_LT(finiteDifferenceError(k, grads[1], [&](const RefTensor &t) { return loss(q, t, v); }),
              kFdTolerance);
    EXPECT_LT(finiteDifferenceError(v, grads[2], [&](const RefTensor &t) { return loss(q, k, t); }),
              kFdTolerance);
  }
}

TEST(ReferenceGradients, CrossEntropy) {
  RefTensor logits = randomTensor({2, 3, 7}, 1051, 2.0);
  RefTensor targets{{2, 3}, {1, -1, 6, 0, 3, -1}};
  const double dloss = 0.8;
  EXPECT_LT(finiteDifferenceError(logits, ref::crossEntropyGrad(logits, targets, dloss, -1),
                                  [&](const RefTensor &t) {
                                    return dloss * ref::crossEntropy(t, targets, -1).data[0];
                                  }),
            kFdTolerance);
}

TEST(ReferenceGradients, Embedding) {
  RefTensor table = randomTensor({6, 5}, 1061), ids{{2, 3}, {1, 4, 1, 0, 4, 4}},
            w = randomTensor({2, 3, 5}, 1062);
  EXPECT_LT(
      finiteDifferenceError(table, ref::embeddingGrad(ids, w, 6),
                            [&](const RefTensor &t) { return dot(ref::embedding(t, ids), w); }),
      kFdTolerance);
}

/// moe_route's differentiable outputs (weights, prob_sum, z_sum) for the
/// forward's choice of experts, which steps of h do not change.
TEST(ReferenceGradients, MoeRoute) {
  const int64_t topK = 3;
  const RefTensor logits = randomTensor({6, 5}, 1101, 2.0), dw = randomTensor({6, topK}, 1102),
                  dprobSum = randomTensor({5}, 1103);
  const double dz = 0.7;
  for (bool normalize : {false, true}) {
    SCOPED_TRACE(normalize ? "normalize" : "softmax weights");
    const RefTensor experts = ref::moeRoute(logits, topK, normalize)[1];
    auto loss = [&](const RefTensor &t) {
      std::vector<RefTensor> out = ref::moeRoute(t, topK, normalize);
      EXPECT_EQ(out[1].data, experts.data) << "a step changed the experts chosen";
      return dot(out[0], dw) + dot(out[4], dprobSum) + dz * out[6].data[0];
    };
    EXPECT_LT(finiteDifferenceError(
                  logits, ref::moeRouteGrad(logits, experts, dw, dprobSum, dz, normalize), loss),
              kFdTolerance);
  }
}

/// moe_combine's backward: moe_dispatch of dy (weighted) for ys,
/// moe_combine_weight_grad for the weights.
TEST(ReferenceGradients, MoeCombine) {
  const RefTensor ys = randomTensor({8, 3}, 1111), weights = randomTensor({4, 2}, 1112),
                  dy = randomTensor({4, 3}, 1113);
  const RefTensor positions{{4, 2}, {5, 0, 7, 2, 1, 6, 3, 4}};
  EXPECT_LT(finiteDifferenceError(ys, ref::moeDispatch(dy, positions, &weights),
                                  [&](const RefTensor &t) {
                                    return dot(ref::moeCombine(t, positions, &weights), dy);
                                  }),
            kFdTolerance);
  EXPECT_LT(finiteDifferenceError(
                weights, ref::moeCombineWeightGrad(ys, positions, dy),
                [&](const RefTensor &t) { return dot(ref::moeCombine(ys, positions, &t), dy); }),
            kFdTolerance);
}

TEST(ReferenceGradients, MatmulThroughTransposedMatmulsAndReduceSum) {
  uint64_t seed = 1070;
  for (bool batchedB : {false, true})
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        SCOPED_TRACE(std::string(batchedB ? "batched" : "shared") + " ta " + std::to_string(ta) +
                     " tb " + std::to_string(tb));
        const int64_t batch = 2, m = 3, k = 4, n = 5;
        RefTensor a = randomTensor({batch, ta ? k : m, ta ? m : k}, ++seed);
        RefTensor b = batchedB ? randomTensor({batch, tb ? n : k, tb ? k : n}, ++seed)
                               : randomTensor({tb ? n : k, tb ? k : n}, ++seed);
        RefTensor w = randomTensor({batch, m, n}, ++seed);
        // What autodiff emits for c = op(a)·op(b): d op(a) = w·op(b)ᵀ, d op(b) = op(a)ᵀ·w,
        // transposed back when the operand was transposed; a shared b sums over the batch.
        RefTensor da = ref::matmul(w, b, false, !tb);
        if (ta) da = ref::transpose(da, {0, 2, 1});
        RefTensor db = tb ? ref::matmul(w, a, true, ta) : ref::matmul(a, w, !ta, false);
        if (!batchedB) db = ref::reduceSum(db, b.shape);
        auto loss = [&](const RefTensor &aa, const RefTensor &bb) {
          return dot(ref::matmul(aa, bb, ta, tb), w);
        };
        EXPECT_LT(finiteDifferenceError(a, da, [&](const RefTensor &t) { return loss(t, b); }),
                  kFdTolerance);
        EXPECT_LT(finiteDifferenceError(b, db, [&](const RefTensor &t) { return loss(a, t); }),
                  kFdTolerance);
      }
}

TEST(ReferenceGradients, BroadcastSliceTransposeAndNorm) {
  RefTensor lhs = randomTensor({3, 4, 5}, 1081), rhs = randomTensor({4, 5}, 1082),
            w = randomTensor({3, 4, 5}, 1083);
  EXPECT_LT(finiteDifferenceError(rhs, ref::reduceSum(w, rhs.shape),
                                  [&](const RefTensor &t) { return dot(ref::add(lhs, t), w); }),
            kFdTolerance);
  EXPECT_LT(finiteDifferenceError(rhs, ref::reduceSum(ref::mul(w, lhs), rhs.shape),
                                  [&](const RefTensor &t) { return dot(ref::mul(lhs, t), w); }),
            kFdTolerance);
  RefTensor ws = randomTensor({2, 2, 3}, 1084);
  EXPECT_LT(finiteDifferenceError(lhs, ref::pad(ws, {1, 1, 2}, lhs.shape),
                                  [&](const RefTensor &t) {
                                    return dot(ref::slice(t, {1, 1, 2}, {2, 2, 3}), ws);
                                  }),
            kFdTolerance);
  RefTensor wt = randomTensor({5, 3, 4}, 1085);
  EXPECT_LT(finiteDifferenceError(lhs, ref::transpose(wt, {1, 2, 0}),
                                  [&](const RefTensor &t) {
                                    return dot(ref::transpose(t, {2, 0, 1}), wt);
                                  }),
            kFdTolerance);
  double norm = ref::globalNorm({lhs}).data[0];
  EXPECT_LT(finiteDifferenceError(lhs, ref::scale(lhs, 1.0 / norm),
                                  [&](const RefTensor &t) { return ref::globalNorm({t}).data[0]; }),
            kFdTolerance);
}

} // namespace
} // namespace llmc::test
