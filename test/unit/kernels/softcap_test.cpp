//===- softcap_test.cpp - attention with soft-capped scores ---------------===//
//
// The `softcap` attribute of attention, attention_grad, attention_rope,
// attention_packed and paged_attention (Gemma 2's attn_logit_softcapping):
// each score s = scale·q·k becomes c·tanh(s / c) before the masks and the
// softmax, and the backward multiplies dS by 1 − tanh². Inputs are spread
// so that the raw scores reach several times the cap (the saturated tails,
// where an uncapped kernel would be far off), alone and with a sliding
// window, GQA, MQA and segment ids. CPU against the reference; CUDA
// against the CPU. The reference backward with a cap is checked against
// finite differences of its forward.
//
//===----------------------------------------------------------------------===//

#include "MaskedAttentionCases.h"

namespace llmc::test {
namespace {

constexpr double kCap = 2.0;

/// Queries spread 3× so |s| reaches ~4 caps.
const std::vector<MaskedAttention> kCaps = {
    {2, 33, 4, 4, 8, 0, false, kCap, 3.0},   // multi-head, no window
    {2, 70, 4, 2, 16, 5, false, kCap, 3.0},  // GQA with Gemma's window
    {1, 150, 2, 1, 32, 64, false, kCap, 3.0}, // MQA, the window one CPU tile wide
    {2, 90, 2, 2, 8, 0, true, kCap, 3.0},    // packed documents
};

/// attention_packed: q, k, v as column blocks of one qkv.
ConformanceCase packedCase(DType dtype, const MaskedAttention &c, uint64_t seed) {
  return {"attention_packed", maskedLabel("packed", dtype, c), [=] {
            KernelCall k;
            const int64_t width = (c.h + 2 * c.kv) * c.d;
            k.input(randomTensor({c.b, c.t, width}, seed, 3.0), dtype);
            k.output(dtype, {c.b, c.t, c.h, c.d});
            k.output(DType::F32, {c.b, c.h, c.t});
            k.attrs = maskedAttrs(c);
            k.attrs.setInt("heads", c.h);
            k.attrs.setInt("kv_heads", c.kv);
            k.reference = [=](const std::vector<RefTensor> &in) {
              auto block = [&](int64_t offset, int64_t heads) {
                RefTensor piece = ref::slice(in[0], {0, 0, offset}, {c.b, c.t, heads * c.d});
                piece.shape = {c.b, c.t, heads, c.d};
                return piece;
              };
              return ref::attention(block(0, c.h), block(c.h * c.d, c.kv),
                                    block((c.h + c.kv) * c.d, c.kv), nullptr, c.scale(), true,
                                    c.window, c.softcap);
            };
            maskedTolerances(k, dtype, 2);
            return k;
          }};
}

/// paged_attention over two sequences, queried at their last `t` positions.
ConformanceCase pagedCase(DType dtype, int64_t t, int64_t window, uint64_t seed) {
  std::string name = std::string("paged_") + dtypeName(dtype) + "_t" + std::to_string(t) + "_w" +
                     std::to_string(window);
  MaskedAttention shape{0, t, 4, 2, 16, window, false, kCap, 3.0};
  return maskedPagedCase(dtype, shape, {100, 37}, 16, 0.25, name, seed);
}

std::vector<ConformanceCase> softcapAttentionCases() {
  std::vector<ConformanceCase> cases;
  uint64_t seed = 7700;
  for (DType dtype : {DType::F32, DType::BF16}) {
    for (const MaskedAttention &c : kCaps) {
      cases.push_back(maskedForwardCase(dtype, c, seed += 10));
      cases.push_back(maskedBackwardCase(dtype, c, seed += 10));
      if (!c.segments) {
        cases.push_back(maskedRopeCase(dtype, c, seed += 10));
        cases.push_back(packedCase(dtype, c, seed += 10));
      }
    }
    cases.push_back(pagedCase(dtype, 8, 0, seed += 10));  // a prefill chunk part way in
    cases.push_back(pagedCase(dtype, 1, 20, seed += 10)); // decode, windowed
  }
  return cases;
}

LLMC_CONFORMANCE_CASES(SoftcapAttention, softcapAttentionCases);

/// The cap must change these outputs by far more than the tolerance, or
/// the cases above prove nothing.
TEST(SoftcapAttention, CapMattersOnTheseInputs) {
  const MaskedAttention &c = kCaps[1];
  RefTensor q = maskedQueries(c, 1), k = randomTensor({c.b, c.t, c.kv, c.d}, 2),
            v = randomTensor({c.b, c.t, c.kv, c.d}, 3);
  RefTensor capped = ref::attention(q, k, v, nullptr, c.scale(), true, c.window, c.softcap)[0];
  RefTensor plain = ref::attention(q, k, v, nullptr, c.scale(), true, c.window)[0];
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < plain.numel(); ++i) {
    diff += (capped.data[i] - plain.data[i]) * (capped.data[i] - plain.data[i]);
    norm += plain.data[i] * plain.data[i];
  }
  EXPECT_GT(std::sqrt(diff / norm), 0.05);
}

/// The reference backward under a cap against central differences of its
/// forward (the derivative 1 − tanh²), with and without a window.
TEST(SoftcapAttention, ReferenceGradientMatchesFiniteDifferences) {
  for (int64_t window : {0, 3}) {
    SCOPED_TRACE("window " + std::to_string(window));
    const double scale = 0.7, cap = 1.5;
    RefTensor q = randomTensor({1, 6, 4, 4}, 1101, 2.0), k = randomTensor({1, 6, 2, 4}, 1102),
              v = randomTensor({1, 6, 2, 4}, 1103), w = randomTensor({1, 6, 4, 4}, 1104);
    std::vector<RefTensor> fwd = ref::attention(q, k, v, nullptr, scale, true, window, cap);
    std::vector<RefTensor> grads =
        ref::attentionGrad(q, k, v, fwd[0], fwd[1], w, nullptr, scale, true, window, cap);
    auto loss = [&](const RefTensor &qq, const RefTensor &kk, const RefTensor &vv) {
      return dot(ref::attention(qq, kk, vv, nullptr, scale, true, window, cap)[0], w);
    };
    EXPECT_LT(finiteDifferenceError(q, grads[0], [&](const RefTensor &t) { return loss(t, k, v); }),
              1e-6);
    EXPECT_LT(finiteDifferenceError(k, grads[1], [&](const RefTensor &t) { return loss(q, t, v); }),
              1e-6);
    EXPECT_LT(finiteDifferenceError(v, grads[2], [&](const RefTensor &t) { return loss(q, k, t); }),
              1e-6);
  }
}

/// softcap and GeGLU references against finite differences.
TEST(SoftcapAttention, SoftcapAndGegluReferenceGradients) {
  RefTensor x = randomTensor({33}, 1111, 3.0), up = randomTensor({33}, 1112),
            w = randomTensor({33}, 1113);
  EXPECT_LT(finiteDifferenceError(x, ref::softcapGrad(x, w, 2.0),
                                  [&](const RefTensor &t) { return dot(ref::softcap(t, 2.0), w); }),
            1e-6);
  std::vector<RefTensor> grads = ref::gegluGrad(x, up, w);
  EXPECT_LT(finiteDifferenceError(x, grads[0],
                                  [&](const RefTensor &t) { return dot(ref::geglu(t, up), w); }),
            1e-6);
  EXPECT_LT(finiteDifferenceError(up, grads[1],
                                  [&](const RefTensor &t) { return dot(ref::geglu(x, t), w); }),
            1e-6);
}

/// The cap is checked where the kernels bind.
TEST(SoftcapAttention, BindingErrors) {
  TensorView q = typeOnly(DType::F32, {1, 8, 2, 4}), k = typeOnly(DType::F32, {1, 8, 2, 4});
  TensorView out = typeOnly(DType::F32, {1, 8, 2, 4}), lse = typeOnly(DType::F32, {1, 2, 8});
  expectBindErrorsMention("attention",
                          {{{q, k, k},
                            {out, lse},
                            attrs({{"scale", 0.5}, {"softcap", -1.0}}, {{"causal", 1}}),
                            "attribute 'softcap' must be >= 0"}});
  expectBindErrorsMention("softcap",
                          {{{q}, {out}, attrs({{"cap", 0.0}}), "attribute 'cap' must be > 0"},
                           {{q}, {out}, attrs(), "missing float attribute 'cap'"}});
}

} // namespace
} // namespace llmc::test
