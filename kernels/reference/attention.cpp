//===- attention.cpp - attention reference and its backward ---------------===//
//
// softmax(scale·q·kᵀ + mask)·v with grouped kv heads, causal and segment
// masks, written the textbook way: the full T×S score matrix of each head is
// materialised (the kernels tile it and never hold it). The backward takes
// the forward's out and lse, as the kernels do, so it checks the same
// recomputation.
//
//===----------------------------------------------------------------------===//

#include "kernels/reference/Common.h"
#include "kernels/reference/Evaluator.h"

namespace llmc::ref {

namespace {

struct AttentionDims {
  int64_t b, t, h, d, s, kv, group;
};

AttentionDims attentionDims(const RefTensor &q, const RefTensor &k, const RefTensor &v,
                            const RefTensor *segmentIds, bool causal, const char *fn) {
  require(q.shape.size() == 4 && k.shape.size() == 4 && k.shape == v.shape, fn,
          "q must be [B,T,H,D] and k, v [B,S,KV,D]");
  AttentionDims dims{q.shape[0], q.shape[1], q.shape[2], q.shape[3], k.shape[1], k.shape[2], 0};
  require(k.shape[0] == dims.b && k.shape[3] == dims.d, fn, "k/v batch or head dim differ from q");
  require(dims.kv > 0 && dims.h % dims.kv == 0, fn, "H must be a multiple of KV");
  require(!causal || dims.s == dims.t, fn, "causal attention needs S == T");
  require(!segmentIds ||
              (dims.s == dims.t && segmentIds->shape == std::vector<int64_t>{dims.b, dims.t}),
          fn, "segment ids must be [B, T] with S == T");
  dims.group = dims.h / dims.kv;
  return dims;
}

/// Gemma 2's soft-cap c·tanh(s / c) (s itself when c is 0).
double capScore(double s, double softcap) {
  return softcap > 0 ? softcap * std::tanh(s / softcap) : s;
}

bool visible(const AttentionDims &dims, const RefTensor *segmentIds, bool causal, int64_t window,
             int64_t b, int64_t i, int64_t j) {
  if (causal && j > i) return false;
  if (window > 0 && j <= i - window)
    return false;
  if (segmentIds && segmentIds->data[b * dims.t + i] != segmentIds->data[b * dims.t + j])
    return false;
  return true;
}

} // namespace

std::vector<RefTensor> attention(const RefTensor &q, const RefTensor &k, const RefTensor &v,
                                 const RefTensor *segmentIds, double scale, bool causal,
                                 int64_t window, double softcap) {
  AttentionDims n = attentionDims(q, k, v, segmentIds, causal, "attention");
  RefTensor out = like(q), lse = RefTensor::zeros({n.b, n.h, n.t});
  auto qAt = [&](int64_t b, int64_t i, int64_t h) {
    return &q.data[((b * n.t + i) * n.h + h) * n.d];
  };
  auto kvAt = [&](const RefTensor &x, int64_t b, int64_t j, int64_t g) {
    return &x.data[((b * n.s + j) * n.kv + g) * n.d];
  };
  std::vector<double> scores(n.t * n.s);
  for (int64_t b = 0; b < n.b; ++b)
    for (int64_t h = 0; h < n.h; ++h) {
      int64_t g = h / n.group;
      // The full T×S score matrix of this head.
      for (int64_t i = 0; i < n.t; ++i)
        for (int64_t j = 0; j < n.s; ++j) {
          double dot = 0.0;
          for (int64_t e = 0; e < n.d; ++e) dot += qAt(b, i, h)[e] * kvAt(k, b, j, g)[e];
          scores[i * n.s + j] = visible(n, segmentIds, causal, window, b, i, j)
                                    ? capScore(scale * dot, softcap)
                                    : -std::numeric_limits<double>::infinity();
        }
      for (int64_t i = 0; i < n.t; ++i) {
        const double *row = &scores[i * n.s];
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < n.s; ++j) m = std::max(m, row[j]);
        double *o = &out.data[((b * n.t + i) * n.h + h) * n.d];
        double &l = lse.data[(b * n.h + h) * n.t + i];
        if (m == -std::numeric_limits<double>::infinity()) { // no visible key
          l = m;
          continue;
        }
        double sum = 0.0;
        for (int64_t j = 0; j < n.s; ++j) sum += std::exp(row[j] - m);
        l = m + std::log(sum);
        for (int64_t j = 0; j < n.s; ++j) {
          double p = std::exp(row[j] - l);
          for (int64_t e = 0; e < n.d; ++e) o[e] += p * kvAt(v, b, j, g)[e];
        }
      }
    }
  return {out, lse};
}

std::vector<RefTensor> attentionGrad(const RefTensor &q, const RefTensor &k, const RefTensor &v,
                                     const RefTensor &out, const RefTensor &lse,
                                     const RefTensor &dout, const RefTensor *segmentIds,
                                     double scale, bool causal, int64_t window, double softcap) {
  AttentionDims n = attentionDims(q, k, v, segmentIds, causal, "attentionGrad");
  require(out.shape == q.shape && dout.shape == q.shape, "attentionGrad",
          "out and dout must have q's shape");
  require(lse.shape == std::vector<int64_t>{n.b, n.h, n.t}, "attentionGrad", "lse must be [B,H,T]");
  RefTensor dq = like(q), dk = like(k), dv = like(v);
  auto at = [&](const RefTensor &x, int64_t len, int64_t heads, int64_t b, int64_t i, int64_t h) {
    return ((b * len + i) * heads + h) * n.d;
  };
  std::vector<double> p(n.t * n.s), ds(n.t * n.s);
  for (int64_t b = 0; b < n.b; ++b)
    for (int64_t h = 0; h < n.h; ++h) {
      int64_t g = h / n.group;
      // Probabilities and score gradients of this head, T×S each.
      for (int64_t i = 0; i < n.t; ++i) {
        size_t qi = at(q, n.t, n.h, b, i, h);
        double rowDot = 0.0; // rowsum(dout ∘ out)
        for (int64_t e = 0; e < n.d; ++e) rowDot += dout.data[qi + e] * out.data[qi + e];
        for (int64_t j = 0; j < n.s; ++j) {
          size_t kj = at(k, n.s, n.kv, b, j, g);
          if (!visible(n, segmentIds, causal, window, b, i, j)) {
            p[i * n.s + j] = ds[i * n.s + j] = 0.0;
            continue;
          }
          double dot = 0.0, dp = 0.0;
          for (int64_t e = 0; e < n.d; ++e) {
            dot += q.data[qi + e] * k.data[kj + e];
            dp += dout.data[qi + e] * v.data[kj + e];
          }
          double score = capScore(scale * dot, softcap);
          p[i * n.s + j] = std::exp(score - lse.data[(b * n.h + h) * n.t + i]);
          // d capped / d raw = 1 − tanh² = 1 − (capped / c)².
          double slope = softcap > 0 ? 1.0 - (score / softcap) * (score / softcap) : 1.0;
          ds[i * n.s + j] = p[i * n.s + j] * (dp - rowDot) * slope;
        }
      }
      for (int64_t i = 0; i < n.t; ++i)
        for (int64_t j = 0; j < n.s; ++j) {
          size_t qi = at(q, n.t, n.h, b, i, h), kj = at(k, n.s, n.kv, b, j, g);
          double pij = p[i * n.s + j], dsij = ds[i * n.s + j];
          for (int64_t e = 0; e < n.d; ++e) {
            dq.data[qi + e] += scale * dsij * k.data[kj + e];
            dk.data[kj + e] += scale * dsij * q.data[qi + e];
            dv.data[kj + e] += pij * dout.data[qi + e];
          }
        }
    }
  return {dq, dk, dv};
}

//===----------------------------------------------------------------------===//
// Evaluators of the ops these references define (kernels/reference/Evaluator.h)
//===----------------------------------------------------------------------===//
namespace {

/// q [B, T, H, D], k and v [B, T, KV, D]: the column blocks of a packed
/// qkv [B, T, (H + 2·KV)·D].
Results unpackQkv(const RefTensor &qkv, int64_t heads, int64_t kvHeads) {
  const int64_t b = qkv.shape[0], t = qkv.shape[1], d = qkv.shape[2] / (heads + 2 * kvHeads);
  Results pieces;
  int64_t offset = 0;
  for (int64_t n : {heads, kvHeads, kvHeads}) {
    RefTensor piece = slice(qkv, {0, 0, offset}, {b, t, n * d});
    piece.shape = {b, t, n, d};
    pieces.push_back(std::move(piece));
    offset += n * d;
  }
  return pieces;
}

} // namespace

LLMC_REGISTER_EVALUATOR("llm.attention", [](const RefCall &c) -> Results {
  return attention(c.in(0), c.in(1), c.in(2), c.optional(3), c.real("scale"), c.flag("causal"),
                   c.integer("window", 0), c.real("softcap", 0.0));
});
LLMC_REGISTER_EVALUATOR("llm.attention_grad", [](const RefCall &c) -> Results {
  return attentionGrad(c.in(0), c.in(1), c.in(2), c.in(3), c.in(4), c.in(5), c.optional(6),
                       c.real("scale"), c.flag("causal"), c.integer("window", 0),
                       c.real("softcap", 0.0));
});
// The packed forms: the same references on qkv's column blocks.
LLMC_REGISTER_EVALUATOR("llm.attention_packed", [](const RefCall &c) -> Results {
  Results qkv = unpackQkv(c.in(0), c.integer("heads"), c.integer("kv_heads"));
  return attention(qkv[0], qkv[1], qkv[2], c.optional(1), c.real("scale"), c.flag("causal"),
                   c.integer("window", 0), c.real("softcap", 0.0));
});
LLMC_REGISTER_EVALUATOR("llm.attention_packed_grad", [](const RefCall &c) -> Results {
  Results qkv = unpackQkv(c.in(0), c.integer("heads"), c.integer("kv_heads"));
  Results grads = attentionGrad(qkv[0], qkv[1], qkv[2], c.in(1), c.in(2), c.in(3), c.optional(4),
                                c.real("scale"), c.flag("causal"), c.integer("window", 0),
                                c.real("softcap", 0.0));
  for (RefTensor &g : grads) g.shape = {g.shape[0], g.shape[1], g.shape[2] * g.shape[3]};
  return {concat(grads, -1)};
});

} // namespace llmc::ref
