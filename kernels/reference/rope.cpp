//===- rope.cpp - rotary position embedding reference ---------------------===//
//
// The pair (x[i], x[i + D/2]) of each head at position t (or positions[b,t])
// rotated by t·θ^(−2i/D) (the rate under Llama 3 scaling when given), the
// angle computed afresh for every element (the kernels use a table); the
// inverse rotation is the backward.
// A position outside [0, T) makes its row NaN, as the kernels do.
//
//===----------------------------------------------------------------------===//

#include "kernels/reference/Common.h"
#include "kernels/reference/Evaluator.h"

namespace llmc::ref {

RefTensor rope(const RefTensor &x, const RefTensor *positions, double theta, bool inverse,
               const RopeScaling &scaling) {
  require(x.shape.size() == 4 && x.shape[3] % 2 == 0, "rope", "x must be [B, T, H, D], D even");
  int64_t b = x.shape[0], t = x.shape[1], h = x.shape[2], d = x.shape[3], half = d / 2;
  require(!positions || positions->shape == std::vector<int64_t>{b, t}, "rope",
          "positions must be [B, T]");
  RefTensor out = like(x);
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t ti = 0; ti < t; ++ti)
      for (int64_t hi = 0; hi < h; ++hi) {
        const double *in = x.data.data() + ((bi * t + ti) * h + hi) * d;
        double *o = out.data.data() + ((bi * t + ti) * h + hi) * d;
        for (int64_t i = 0; i < half; ++i) {
          double pos = positions ? positions->data[bi * t + ti] : static_cast<double>(ti);
          double angle =
              pos >= 0 && pos < t ? pos * ropeInverseFrequency(theta, i, d, scaling) : NAN;
          if (inverse) angle = -angle;
          double c = std::cos(angle), s = std::sin(angle);
          o[i] = in[i] * c - in[i + half] * s;
          o[i + half] = in[i + half] * c + in[i] * s;
        }
      }
  return out;
}

//===----------------------------------------------------------------------===//
// Evaluators of the ops these references define (kernels/reference/Evaluator.h)
//===----------------------------------------------------------------------===//
namespace {

/// The Llama 3 scaling of a rope or attention_rope op (unscaled without it).
RopeScaling scalingOf(const RefCall &c) {
  if (!c.has("scaling_factor"))
    return {};
  return {c.real("scaling_factor"), c.real("low_freq_factor"), c.real("high_freq_factor"),
          c.integer("original_max_positions")};
}

} // namespace

LLMC_REGISTER_EVALUATOR("llm.rope", [](const RefCall &c) -> Results {
  return {rope(c.in(0), c.optional(1), c.real("theta"), c.flag("inverse"), scalingOf(c))};
});
// attention_rope(_grad) (operands q, k, v[, out, lse, dout], positions?,
// segment_ids?): the references of rope, attention(_grad) and the inverse
// rope in turn.
LLMC_REGISTER_EVALUATOR("llm.attention_rope", [](const RefCall &c) -> Results {
  const RefTensor *positions = c.optional(3);
  double theta = c.real("theta");
  return attention(rope(c.in(0), positions, theta, false, scalingOf(c)),
                   rope(c.in(1), positions, theta, false, scalingOf(c)), c.in(2), c.optional(4),
                   c.real("scale"), c.flag("causal"), c.integer("window", 0),
                   c.real("softcap", 0.0));
});
LLMC_REGISTER_EVALUATOR("llm.attention_rope_grad", [](const RefCall &c) -> Results {
  const RefTensor *positions = c.optional(6);
  double theta = c.real("theta");
  Results grads = attentionGrad(rope(c.in(0), positions, theta, false, scalingOf(c)),
                                rope(c.in(1), positions, theta, false, scalingOf(c)), c.in(2),
                                c.in(3), c.in(4), c.in(5), c.optional(7), c.real("scale"),
                                c.flag("causal"), c.integer("window", 0), c.real("softcap", 0.0));
  for (int i = 0; i < 2; ++i) grads[i] = rope(grads[i], positions, theta, true, scalingOf(c));
  return grads;
});

} // namespace llmc::ref
