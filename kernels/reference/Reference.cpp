//===- Reference.cpp - naive double-precision kernel references -----------===//
//
// Plain loops in double, one function per kernel, in the order of
// docs/kernels.md. Nothing here is tiled, fused or parallel: these functions
// define what the fast kernels must compute.
//
//===----------------------------------------------------------------------===//

#include "kernels/reference/Reference.h"

#include "kernels/Adam8bit.h"
#include "kernels/DropoutHash.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>

namespace llmc::ref {

namespace {

/// The references run inside the compiler, which is built without
/// exceptions: a call that breaks its contract is a bug in the caller.
[[noreturn]] void fail(const char *fn, const std::string &why) {
  std::fprintf(stderr, "llmc::ref::%s: %s\n", fn, why.c_str());
  std::abort();
}

void require(bool ok, const char *fn, const char *why) {
  if (!ok) fail(fn, why);
}

int64_t product(const std::vector<int64_t> &shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) n *= shape[i];
  return n;
}

int64_t product(const std::vector<int64_t> &shape) { return product(shape, 0, shape.size()); }

RefTensor like(const RefTensor &x) { return RefTensor::zeros(x.shape); }

bool isSuffix(const std::vector<int64_t> &suffix, const std::vector<int64_t> &shape) {
  if (suffix.size() > shape.size()) return false;
  return std::equal(suffix.begin(), suffix.end(), shape.end() - suffix.size());
}

/// Row-major strides of `shape`.
std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

/// Calls fn(index) for every multi-index of `shape`, in row-major order.
template <typename Fn> void forEachIndex(const std::vector<int64_t> &shape, Fn fn) {
  if (product(shape) == 0) return;
  std::vector<int64_t> index(shape.size(), 0);
  while (true) {
    fn(index);
    int64_t d = static_cast<int64_t>(shape.size()) - 1;
    for (; d >= 0; --d) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

/// An id held in a double: must be integral and in [0, bound).
int64_t toId(double value, int64_t bound, const char *fn) {
  int64_t id = static_cast<int64_t>(value);
  if (static_cast<double>(id) != value || id < 0 || id >= bound)
    fail(fn, "id " + std::to_string(value) + " is outside [0, " + std::to_string(bound) + ")");
  return id;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

constexpr double kGeluC = 0.79788456080286535588; // √(2/π)
constexpr double kGeluA = 0.044715;

} // namespace

RefTensor RefTensor::zeros(std::vector<int64_t> shape) {
  RefTensor t;
  t.data.assign(static_cast<size_t>(product(shape)), 0.0);
  t.shape = std::move(shape);
  return t;
}

int64_t RefTensor::numel() const { return product(shape); }

//===----------------------------------------------------------------------===//
// Linear algebra and elementwise
//===----------------------------------------------------------------------===//

RefTensor matmul(const RefTensor &a, const RefTensor &b, bool transposeA, bool transposeB) {
  size_t ra = a.shape.size(), rb = b.shape.size();
  require(ra >= 2 && rb >= 2, "matmul", "operands must have rank >= 2");
  int64_t m = transposeA ? a.shape[ra - 1] : a.shape[ra - 2];
  int64_t k = transposeA ? a.shape[ra - 2] : a.shape[ra - 1];
  int64_t kb = transposeB ? b.shape[rb - 1] : b.shape[rb - 2];
  int64_t n = transposeB ? b.shape[rb - 2] : b.shape[rb - 1];
  require(k == kb, "matmul", "contraction dims differ");
  bool shared = rb == 2;
  require(shared || (rb == ra && std::equal(a.shape.begin(), a.shape.end() - 2, b.shape.begin())),
          "matmul", "a batched b must have a's leading dims");

  std::vector<int64_t> shape(a.shape.begin(), a.shape.end() - 2);
  int64_t batch = product(shape);
  shape.push_back(m);
  shape.push_back(n);
  RefTensor c = RefTensor::zeros(shape);
  for (int64_t t = 0; t < batch; ++t) {
    const double *pa = a.data.data() + t * m * k;
    const double *pb = b.data.data() + (shared ? 0 : t * k * n);
    double *pc = c.data.data() + t * m * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0.0;
        for (int64_t p = 0; p < k; ++p) {
          double x = transposeA ? pa[p * m + i] : pa[i * k + p];
          double y = transposeB ? pb[j * k + p] : pb[p * n + j];
          sum += x * y;
        }
        pc[i * n + j] = sum;
      }
  }
  return c;
}

RefTensor add(const RefTensor &lhs, const RefTensor &rhs) {
  require(isSuffix(rhs.shape, lhs.shape), "add", "rhs shape must be a suffix of lhs shape");
  RefTensor out = like(lhs);
  int64_t inner = rhs.numel();
  for (int64_t i = 0; i < lhs.numel(); ++i) out.data[i] = lhs.data[i] + rhs.data[i % inner];
  return out;
}

RefTensor mul(const RefTensor &lhs, const RefTensor &rhs) {
  require(isSuffix(rhs.shape, lhs.shape), "mul", "rhs shape must be a suffix of lhs shape");
  RefTensor out = like(lhs);
  int64_t inner = rhs.numel();
  for (int64_t i = 0; i < lhs.numel(); ++i) out.data[i] = lhs.data[i] * rhs.data[i % inner];
  return out;
}

RefTensor scale(const RefTensor &x, double factor) {
  RefTensor out = like(x);
  for (int64_t i = 0; i < x.numel(); ++i) out.data[i] = factor * x.data[i];
  return out;
}

RefTensor gelu(const RefTensor &x) {
  RefTensor out = like(x);
  for (int64_t i = 0; i < x.numel(); ++i) {
    double v = x.data[i];
    out.data[i] = 0.5 * v * (1.0 + std::tanh(kGeluC * (v + kGeluA * v * v * v)));
  }
  return out;
}

RefTensor geluGrad(const RefTensor &x, const RefTensor &dy) {
  require(x.shape == dy.shape, "geluGrad", "x and dy shapes differ");
  RefTensor dx = like(x);
  for (int64_t i = 0; i < x.numel(); ++i) {
    double v = x.data[i];
    double th = std::tanh(kGeluC * (v + kGeluA * v * v * v));
    double du = kGeluC * (1.0 + 3.0 * kGeluA * v * v);
    dx.data[i] = dy.data[i] * (0.5 * (1.0 + th) + 0.5 * v * (1.0 - th * th) * du);
  }
  return dx;
}

RefTensor silu(const RefTensor &x) {
  RefTensor out = like(x);
  for (int64_t i = 0; i < x.numel(); ++i) out.data[i] = x.data[i] * sigmoid(x.data[i]);
  return out;
}

RefTensor siluGrad(const RefTensor &x, const RefTensor &dy) {
  require(x.shape == dy.shape, "siluGrad", "x and dy shapes differ");
  RefTensor dx = like(x);
  for (int64_t i = 0; i < x.numel(); ++i) {
    double s = sigmoid(x.data[i]);
    dx.data[i] = dy.data[i] * s * (1.0 + x.data[i] * (1.0 - s));
  }
  return dx;
}

RefTensor swiglu(const RefTensor &gate, const RefTensor &up) {
  require(gate.shape == up.shape, "swiglu", "gate and up shapes differ");
  RefTensor out = like(gate);
  for (int64_t i = 0; i < gate.numel(); ++i)
    out.data[i] = gate.data[i] * sigmoid(gate.data[i]) * up.data[i];
  return out;
}

std::vector<RefTensor> swigluGrad(const RefTensor &gate, const RefTensor &up, const RefTensor &dy) {
  require(gate.shape == up.shape && gate.shape == dy.shape, "swigluGrad", "shapes differ");
  RefTensor dgate = like(gate), dup = like(up);
  for (int64_t i = 0; i < gate.numel(); ++i) {
    double g = gate.data[i], s = sigmoid(g);
    dgate.data[i] = dy.data[i] * up.data[i] * s * (1.0 + g * (1.0 - s));
    dup.data[i] = dy.data[i] * g * s;
  }
  return {dgate, dup};
}

RefTensor dropout(const RefTensor &x, double rate, int64_t seed, int64_t step,
                  const std::vector<int64_t> &globalShape, const std::vector<int64_t> &offsets) {
  require(rate >= 0.0 && rate < 1.0, "dropout", "rate must be in [0, 1)");
  bool global = !globalShape.empty();
  require(!global || (globalShape.size() == x.shape.size() && offsets.size() == x.shape.size()),
          "dropout", "global_shape and offsets need one entry per dimension");
  RefTensor out = like(x);
  size_t rank = x.shape.size();
  for (int64_t i = 0; i < x.numel(); ++i) {
    // Local multi-index of element i, then its flat index in the global tensor.
    uint64_t index = static_cast<uint64_t>(i);
    if (global) {
      int64_t rest = i, flat = 0, stride = 1;
      for (size_t d = rank; d-- > 0;) {
        int64_t coord = rest % x.shape[d] + offsets[d];
        rest /= x.shape[d];
        flat += coord * stride;
        stride *= globalShape[d];
      }
      index = static_cast<uint64_t>(flat);
    }
    out.data[i] = dropoutKeep(static_cast<uint64_t>(seed), static_cast<uint64_t>(step), index,
                              rate)
                      ? x.data[i] / (1.0 - rate)
                      : 0.0;
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Normalization, embedding, position
//===----------------------------------------------------------------------===//

RefTensor layernorm(const RefTensor &x, const RefTensor &gamma, const RefTensor &beta, double eps) {
  require(!x.shape.empty(), "layernorm", "x must have rank >= 1");
  int64_t c = x.shape.back(), rows = x.numel() / std::max<int64_t>(c, 1);
  require(gamma.numel() == c && beta.numel() == c, "layernorm", "gamma/beta must be [C]");
  RefTensor out = like(x);
  for (int64_t r = 0; r < rows; ++r) {
    const double *row = x.data.data() + r * c;
    double mean = 0.0, var = 0.0;
    for (int64_t i = 0; i < c; ++i) mean += row[i];
    mean /= c;
    for (int64_t i = 0; i < c; ++i) var += (row[i] - mean) * (row[i] - mean);
    var /= c;
    double rstd = 1.0 / std::sqrt(var + eps);
    for (int64_t i = 0; i < c; ++i)
      out.data[r * c + i] = (row[i] - mean) * rstd * gamma.data[i] + beta.data[i];
  }
  return out;
}

std::vector<RefTensor> layernormGrad(const RefTensor &x, const RefTensor &gamma,
                                     const RefTensor &dy, double eps) {
  require(!x.shape.empty() && x.shape == dy.shape, "layernormGrad", "x and dy shapes differ");
  int64_t c = x.shape.back(), rows = x.numel() / std::max<int64_t>(c, 1);
  require(gamma.numel() == c, "layernormGrad", "gamma must be [C]");
  RefTensor dx = like(x), dgamma = like(gamma), dbeta = like(gamma);
  std::vector<double> xhat(c), dyg(c);
  for (int64_t r = 0; r < rows; ++r) {
    const double *row = x.data.data() + r * c, *drow = dy.data.data() + r * c;
    double mean = 0.0, var = 0.0;
    for (int64_t i = 0; i < c; ++i) mean += row[i];
    mean /= c;
    for (int64_t i = 0; i < c; ++i) var += (row[i] - mean) * (row[i] - mean);
    var /= c;
    double rstd = 1.0 / std::sqrt(var + eps);
    double meanDyg = 0.0, meanDygXhat = 0.0;
    for (int64_t i = 0; i < c; ++i) {
      xhat[i] = (row[i] - mean) * rstd;
      dyg[i] = drow[i] * gamma.data[i];
      meanDyg += dyg[i];
      meanDygXhat += dyg[i] * xhat[i];
      dgamma.data[i] += drow[i] * xhat[i];
      dbeta.data[i] += drow[i];
    }
    meanDyg /= c;
    meanDygXhat /= c;
    for (int64_t i = 0; i < c; ++i)
      dx.data[r * c + i] = rstd * (dyg[i] - meanDyg - xhat[i] * meanDygXhat);
  }
  return {dx, dgamma, dbeta};
}

RefTensor rmsnorm(const RefTensor &x, const RefTensor &gamma, double eps) {
  require(!x.shape.empty(), "rmsnorm", "x must have rank >= 1");
  int64_t c = x.shape.back(), rows = x.numel() / std::max<int64_t>(c, 1);
  require(gamma.numel() == c, "rmsnorm", "gamma must be [C]");
  RefTensor out = like(x);
  for (int64_t r = 0; r < rows; ++r) {
    const double *row = x.data.data() + r * c;
    double ms = 0.0;
    for (int64_t i = 0; i < c; ++i) ms += row[i] * row[i];
    double rstd = 1.0 / std::sqrt(ms / c + eps);
    for (int64_t i = 0; i < c; ++i) out.data[r * c + i] = row[i] * rstd * gamma.data[i];
  }
  return out;
}

std::vector<RefTensor> rmsnormGrad(const RefTensor &x, const RefTensor &gamma, const RefTensor &dy,
                                   double eps) {
  require(!x.shape.empty() && x.shape == dy.shape, "rmsnormGrad", "x and dy shapes differ");
  int64_t c = x.shape.back(), rows = x.numel() / std::max<int64_t>(c, 1);
  require(gamma.numel() == c, "rmsnormGrad", "gamma must be [C]");
  RefTensor dx = like(x), dgamma = like(gamma);
  for (int64_t r = 0; r < rows; ++r) {
    const double *row = x.data.data() + r * c, *drow = dy.data.data() + r * c;
    double ms = 0.0;
    for (int64_t i = 0; i < c; ++i) ms += row[i] * row[i];
    double rstd = 1.0 / std::sqrt(ms / c + eps);
    double meanDygXhat = 0.0;
    for (int64_t i = 0; i < c; ++i) {
      meanDygXhat += drow[i] * gamma.data[i] * row[i] * rstd;
      dgamma.data[i] += drow[i] * row[i] * rstd;
    }
    meanDygXhat /= c;
    for (int64_t i = 0; i < c; ++i)
      dx.data[r * c + i] = rstd * (drow[i] * gamma.data[i] - row[i] * rstd * meanDygXhat);
  }
  return {dx, dgamma};
}

RefTensor embedding(const RefTensor &table, const RefTensor &ids, int64_t rowOffset,
                    int64_t vocabSize) {
  require(table.shape.size() == 2, "embedding", "table must be [V, C]");
  int64_t rows = table.shape[0], c = table.shape[1];
  int64_t vocab = vocabSize > 0 ? vocabSize : rows;
  std::vector<int64_t> shape = ids.shape;
  shape.push_back(c);
  RefTensor out = RefTensor::zeros(shape);
  for (int64_t n = 0; n < ids.numel(); ++n) {
    int64_t row = toId(ids.data[n], vocab, "embedding") - rowOffset;
    if (row < 0 || row >= rows) continue; // another shard's row
    for (int64_t i = 0; i < c; ++i) out.data[n * c + i] = table.data[row * c + i];
  }
  return out;
}

RefTensor embeddingGrad(const RefTensor &ids, const RefTensor &dy, int64_t rows,
                        int64_t rowOffset, int64_t vocabSize) {
  require(dy.shape.size() == ids.shape.size() + 1 &&
              std::equal(ids.shape.begin(), ids.shape.end(), dy.shape.begin()),
          "embeddingGrad", "dy must be ids.shape x [C]");
  int64_t c = dy.shape.back(), vocab = vocabSize > 0 ? vocabSize : rows;
  RefTensor dtable = RefTensor::zeros({rows, c});
  for (int64_t n = 0; n < ids.numel(); ++n) {
    int64_t row = toId(ids.data[n], vocab, "embeddingGrad") - rowOffset;
    if (row < 0 || row >= rows) continue;
    for (int64_t i = 0; i < c; ++i) dtable.data[row * c + i] += dy.data[n * c + i];
  }
  return dtable;
}

RefTensor rope(const RefTensor &x, double theta, bool inverse) {
  require(x.shape.size() == 4 && x.shape[3] % 2 == 0, "rope", "x must be [B, T, H, D], D even");
  int64_t b = x.shape[0], t = x.shape[1], h = x.shape[2], d = x.shape[3], half = d / 2;
  RefTensor out = like(x);
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t ti = 0; ti < t; ++ti)
      for (int64_t hi = 0; hi < h; ++hi) {
        const double *in = x.data.data() + ((bi * t + ti) * h + hi) * d;
        double *o = out.data.data() + ((bi * t + ti) * h + hi) * d;
        for (int64_t i = 0; i < half; ++i) {
          double angle = static_cast<double>(ti) * std::pow(theta, -2.0 * i / d);
          if (inverse) angle = -angle;
          double c = std::cos(angle), s = std::sin(angle);
          o[i] = in[i] * c - in[i + half] * s;
          o[i + half] = in[i + half] * c + in[i] * s;
        }
      }
  return out;
}

//===----------------------------------------------------------------------===//
// Attention and loss
//===----------------------------------------------------------------------===//

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

bool visible(const AttentionDims &dims, const RefTensor *segmentIds, bool causal, int64_t b,
             int64_t i, int64_t j) {
  if (causal && j > i) return false;
  if (segmentIds && segmentIds->data[b * dims.t + i] != segmentIds->data[b * dims.t + j])
    return false;
  return true;
}

} // namespace

std::vector<RefTensor> attention(const RefTensor &q, const RefTensor &k, const RefTensor &v,
                                 const RefTensor *segmentIds, double scale, bool causal) {
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
          scores[i * n.s + j] = visible(n, segmentIds, causal, b, i, j)
                                    ? scale * dot
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
                                     double scale, bool causal) {
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
          if (!visible(n, segmentIds, causal, b, i, j)) {
            p[i * n.s + j] = ds[i * n.s + j] = 0.0;
            continue;
          }
          double dot = 0.0, dp = 0.0;
          for (int64_t e = 0; e < n.d; ++e) {
            dot += q.data[qi + e] * k.data[kj + e];
            dp += dout.data[qi + e] * v.data[kj + e];
          }
          p[i * n.s + j] = std::exp(scale * dot - lse.data[(b * n.h + h) * n.t + i]);
          ds[i * n.s + j] = p[i * n.s + j] * (dp - rowDot);
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

RefTensor crossEntropy(const RefTensor &logits, const RefTensor &targets, int64_t ignoreIndex) {
  require(!logits.shape.empty() &&
              std::vector<int64_t>(logits.shape.begin(), logits.shape.end() - 1) == targets.shape,
          "crossEntropy", "targets must be logits.shape minus the last dim");
  int64_t vocab = logits.shape.back(), rows = targets.numel();
  double total = 0.0;
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (targets.data[r] == static_cast<double>(ignoreIndex)) continue;
    int64_t target = toId(targets.data[r], vocab, "crossEntropy");
    const double *row = logits.data.data() + r * vocab;
    double m = *std::max_element(row, row + vocab), sum = 0.0;
    for (int64_t j = 0; j < vocab; ++j) sum += std::exp(row[j] - m);
    total += m + std::log(sum) - row[target];
    ++count;
  }
  return RefTensor{{}, {count ? total / count : 0.0}};
}

RefTensor crossEntropyGrad(const RefTensor &logits, const RefTensor &targets, double dloss,
                           int64_t ignoreIndex) {
  require(!logits.shape.empty() &&
              std::vector<int64_t>(logits.shape.begin(), logits.shape.end() - 1) == targets.shape,
          "crossEntropyGrad", "targets must be logits.shape minus the last dim");
  int64_t vocab = logits.shape.back(), rows = targets.numel(), count = 0;
  for (int64_t r = 0; r < rows; ++r) count += targets.data[r] != static_cast<double>(ignoreIndex);
  RefTensor dlogits = like(logits);
  for (int64_t r = 0; r < rows; ++r) {
    if (targets.data[r] == static_cast<double>(ignoreIndex)) continue;
    int64_t target = toId(targets.data[r], vocab, "crossEntropyGrad");
    const double *row = logits.data.data() + r * vocab;
    double m = *std::max_element(row, row + vocab), sum = 0.0;
    for (int64_t j = 0; j < vocab; ++j) sum += std::exp(row[j] - m);
    for (int64_t j = 0; j < vocab; ++j)
      dlogits.data[r * vocab + j] =
          (std::exp(row[j] - m) / sum - (j == target ? 1.0 : 0.0)) * dloss / count;
  }
  return dlogits;
}

RefTensor reduceMax(const RefTensor &x) {
  require(!x.shape.empty() && x.shape.back() > 0, "reduceMax", "x must have a last dimension");
  int64_t n = x.shape.back(), rows = x.numel() / n;
  RefTensor out = RefTensor::zeros(std::vector<int64_t>(x.shape.begin(), x.shape.end() - 1));
  for (int64_t r = 0; r < rows; ++r)
    out.data[r] = *std::max_element(x.data.begin() + r * n, x.data.begin() + (r + 1) * n);
  return out;
}

namespace {
/// The column of `target` in a shard of classes [offset, offset + n), or -1.
int64_t shardColumn(double target, int64_t ignoreIndex, int64_t offset, int64_t n,
                    int64_t numClasses, const char *fn) {
  if (target == static_cast<double>(ignoreIndex)) return -1;
  int64_t column = toId(target, numClasses, fn) - offset;
  return column >= 0 && column < n ? column : -1;
}
} // namespace

std::vector<RefTensor> crossEntropyPartial(const RefTensor &logits, const RefTensor &targets,
                                           const RefTensor &shift, int64_t classOffset,
                                           int64_t numClasses, int64_t ignoreIndex) {
  int64_t n = logits.shape.back(), rows = targets.numel();
  require(shift.numel() == rows && logits.numel() == rows * n, "crossEntropyPartial",
          "logits must be rows x [V], targets and shift rows");
  RefTensor sumexp = like(shift), target = like(shift);
  for (int64_t r = 0; r < rows; ++r) {
    const double *row = logits.data.data() + r * n;
    for (int64_t j = 0; j < n; ++j) sumexp.data[r] += std::exp(row[j] - shift.data[r]);
    int64_t column = shardColumn(targets.data[r], ignoreIndex, classOffset, n, numClasses,
                                 "crossEntropyPartial");
    if (column >= 0) target.data[r] = row[column];
  }
  return {sumexp, target};
}

RefTensor crossEntropyPartialGrad(const RefTensor &logits, const RefTensor &targets,
                                  const RefTensor &shift, const RefTensor &dsumexp,
                                  const RefTensor &dtargetLogit, int64_t classOffset,
                                  int64_t numClasses, int64_t ignoreIndex) {
  int64_t n = logits.shape.back(), rows = targets.numel();
  RefTensor dlogits = like(logits);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n; ++j)
      dlogits.data[r * n + j] =
          dsumexp.data[r] * std::exp(logits.data[r * n + j] - shift.data[r]);
    int64_t column = shardColumn(targets.data[r], ignoreIndex, classOffset, n, numClasses,
                                 "crossEntropyPartialGrad");
    if (column >= 0) dlogits.data[r * n + column] += dtargetLogit.data[r];
  }
  return dlogits;
}

RefTensor crossEntropyFinish(const RefTensor &sumexp, const RefTensor &shift,
                             const RefTensor &targetLogit, const RefTensor &targets,
                             int64_t ignoreIndex) {
  double total = 0.0;
  int64_t count = 0;
  for (int64_t r = 0; r < targets.numel(); ++r) {
    if (targets.data[r] == static_cast<double>(ignoreIndex)) continue;
    total += std::log(sumexp.data[r]) + shift.data[r] - targetLogit.data[r];
    ++count;
  }
  return RefTensor{{}, {count ? total / count : 0.0}};
}

std::vector<RefTensor> crossEntropyFinishGrad(const RefTensor &sumexp, const RefTensor &targets,
                                              double dloss, int64_t ignoreIndex) {
  int64_t count = 0;
  for (int64_t r = 0; r < targets.numel(); ++r)
    count += targets.data[r] != static_cast<double>(ignoreIndex);
  RefTensor ds = like(sumexp), dshift = like(sumexp), dt = like(sumexp);
  for (int64_t r = 0; r < targets.numel(); ++r) {
    if (targets.data[r] == static_cast<double>(ignoreIndex)) continue;
    double g = dloss / count;
    ds.data[r] = g / sumexp.data[r];
    dshift.data[r] = g;
    dt.data[r] = -g;
  }
  return {ds, dshift, dt};
}

//===----------------------------------------------------------------------===//
// Shape
//===----------------------------------------------------------------------===//

RefTensor transpose(const RefTensor &x, const std::vector<int64_t> &permutation) {
  size_t rank = x.shape.size();
  require(permutation.size() == rank, "transpose", "permutation length must equal rank");
  std::vector<bool> seen(rank, false);
  std::vector<int64_t> shape(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t p = permutation[i];
    require(p >= 0 && p < static_cast<int64_t>(rank) && !seen[p], "transpose", "not a permutation");
    seen[p] = true;
    shape[i] = x.shape[p];
  }
  std::vector<int64_t> xStrides = stridesOf(x.shape);
  RefTensor out = RefTensor::zeros(shape);
  int64_t flat = 0;
  forEachIndex(shape, [&](const std::vector<int64_t> &index) {
    int64_t src = 0;
    for (size_t i = 0; i < rank; ++i) src += index[i] * xStrides[permutation[i]];
    out.data[flat++] = x.data[src];
  });
  return out;
}

RefTensor slice(const RefTensor &x, const std::vector<int64_t> &offsets,
                const std::vector<int64_t> &sizes) {
  size_t rank = x.shape.size();
  require(offsets.size() == rank && sizes.size() == rank, "slice", "offsets/sizes must match rank");
  for (size_t i = 0; i < rank; ++i)
    require(offsets[i] >= 0 && sizes[i] >= 0 && offsets[i] + sizes[i] <= x.shape[i], "slice",
            "box is outside x");
  std::vector<int64_t> xStrides = stridesOf(x.shape);
  RefTensor out = RefTensor::zeros(sizes);
  int64_t flat = 0;
  forEachIndex(sizes, [&](const std::vector<int64_t> &index) {
    int64_t src = 0;
    for (size_t i = 0; i < rank; ++i) src += (offsets[i] + index[i]) * xStrides[i];
    out.data[flat++] = x.data[src];
  });
  return out;
}

RefTensor pad(const RefTensor &x, const std::vector<int64_t> &offsets,
              const std::vector<int64_t> &shape) {
  size_t rank = x.shape.size();
  require(offsets.size() == rank && shape.size() == rank, "pad", "offsets/shape must match rank");
  for (size_t i = 0; i < rank; ++i)
    require(offsets[i] >= 0 && offsets[i] + x.shape[i] <= shape[i], "pad", "x does not fit");
  std::vector<int64_t> outStrides = stridesOf(shape);
  RefTensor out = RefTensor::zeros(shape);
  int64_t flat = 0;
  forEachIndex(x.shape, [&](const std::vector<int64_t> &index) {
    int64_t dst = 0;
    for (size_t i = 0; i < rank; ++i) dst += (offsets[i] + index[i]) * outStrides[i];
    out.data[dst] = x.data[flat++];
  });
  return out;
}

RefTensor concat(const std::vector<RefTensor> &xs, int64_t dim) {
  require(!xs.empty(), "concat", "needs at least one input");
  int64_t rank = static_cast<int64_t>(xs[0].shape.size());
  if (dim < 0) dim += rank;
  require(dim >= 0 && dim < rank, "concat", "dim out of range");
  std::vector<int64_t> shape = xs[0].shape;
  shape[dim] = 0;
  for (const RefTensor &x : xs) {
    require(static_cast<int64_t>(x.shape.size()) == rank, "concat", "ranks differ");
    for (int64_t i = 0; i < rank; ++i)
      require(i == dim || x.shape[i] == xs[0].shape[i], "concat", "non-joined dims differ");
    shape[dim] += x.shape[dim];
  }
  RefTensor out = RefTensor::zeros(shape);
  int64_t outer = product(shape, 0, dim), outInner = product(shape, dim, rank);
  int64_t at = 0; // offset of the current input inside an output row
  for (const RefTensor &x : xs) {
    int64_t inner = product(x.shape, dim, rank);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) out.data[o * outInner + at + i] = x.data[o * inner + i];
    at += inner;
  }
  return out;
}

RefTensor reduceSum(const RefTensor &x, const std::vector<int64_t> &shape) {
  require(isSuffix(shape, x.shape), "reduceSum", "shape must be a suffix of x's shape");
  RefTensor out = RefTensor::zeros(shape);
  int64_t inner = out.numel();
  for (int64_t i = 0; i < x.numel(); ++i) out.data[i % inner] += x.data[i];
  return out;
}

RefTensor globalNorm(const std::vector<RefTensor> &xs) {
  double sum = 0.0;
  for (const RefTensor &x : xs)
    for (double v : x.data) sum += v * v;
  return RefTensor{{}, {std::sqrt(sum)}};
}

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

std::vector<RefTensor> adamw(const RefTensor &p, const RefTensor &g, const RefTensor &m,
                             const RefTensor &v, double lr, double step, const double *gradNorm,
                             double beta1, double beta2, double eps, double weightDecay,
                             double maxGradNorm) {
  require(g.shape == p.shape && m.shape == p.shape && v.shape == p.shape, "adamw",
          "param, grad, m and v shapes differ");
  double clip = 1.0;
  if (gradNorm && maxGradNorm > 0.0) clip = std::min(1.0, maxGradNorm / (*gradNorm + 1e-6));
  double bias1 = 1.0 - std::pow(beta1, step), bias2 = 1.0 - std::pow(beta2, step);
  RefTensor p1 = like(p), m1 = like(m), v1 = like(v);
  for (int64_t i = 0; i < p.numel(); ++i) {
    double grad = g.data[i] * clip;
    m1.data[i] = beta1 * m.data[i] + (1.0 - beta1) * grad;
    v1.data[i] = beta2 * v.data[i] + (1.0 - beta2) * grad * grad;
    double update = (m1.data[i] / bias1) / (std::sqrt(v1.data[i] / bias2) + eps);
    p1.data[i] = p.data[i] - lr * (update + weightDecay * p.data[i]);
  }
  return {p1, m1, v1};
}

namespace {

/// Block-quantized state (kernels/Adam8bit.h) decoded: table[code] · absmax
/// of the element's block, the product in fp32 as the contract defines it.
RefTensor decodeAdam8bit(const std::array<float, 256> &table, const RefTensor &codes,
                         const RefTensor &absmax) {
  RefTensor x = like(codes);
  for (int64_t i = 0; i < x.numel(); ++i) {
    float scale = static_cast<float>(absmax.data[i / adam8bit::kBlock]);
    x.data[i] = table[static_cast<size_t>(codes.data[i])] * scale;
  }
  return x;
}

/// {codes, absmax} of x: per block, absmax = max |x| and each code the index
/// of the table entry nearest to x / absmax (a plain scan, ties to the
/// lower index), 0 where absmax is 0.
std::vector<RefTensor> encodeAdam8bit(const std::array<float, 256> &table, const RefTensor &x) {
  RefTensor codes = like(x), absmax = RefTensor::zeros({adam8bit::blockCount(x.numel())});
  for (int64_t i = 0; i < x.numel(); ++i) {
    double &scale = absmax.data[i / adam8bit::kBlock];
    scale = std::max(scale, std::abs(x.data[i]));
  }
  for (int64_t i = 0; i < x.numel(); ++i) {
    double scale = absmax.data[i / adam8bit::kBlock];
    if (scale == 0.0) continue;
    double ratio = x.data[i] / scale, best = std::numeric_limits<double>::infinity();
    for (size_t k = 0; k < table.size(); ++k) {
      double distance = std::abs(table[k] - ratio);
      if (distance < best) best = distance, codes.data[i] = static_cast<double>(k);
    }
  }
  return {codes, absmax};
}

} // namespace

std::vector<RefTensor> adamw8bit(const RefTensor &p, const RefTensor &g, const RefTensor &mCodes,
                                 const RefTensor &mAbsmax, const RefTensor &vCodes,
                                 const RefTensor &vAbsmax, double lr, double step,
                                 const double *gradNorm, double beta1, double beta2, double eps,
                                 double weightDecay, double maxGradNorm) {
  std::vector<int64_t> blocks = {adam8bit::blockCount(p.numel())};
  require(mCodes.shape == p.shape && vCodes.shape == p.shape, "adamw8bit",
          "m_codes and v_codes must have param's shape");
  require(mAbsmax.shape == blocks && vAbsmax.shape == blocks, "adamw8bit",
          "m_absmax and v_absmax must have one element per block");
  const std::array<float, 256> &mTable = adam8bit::signedTable();
  const std::array<float, 256> &vTable = adam8bit::unsignedTable();
  std::vector<RefTensor> updated =
      adamw(p, g, decodeAdam8bit(mTable, mCodes, mAbsmax), decodeAdam8bit(vTable, vCodes, vAbsmax),
            lr, step, gradNorm, beta1, beta2, eps, weightDecay, maxGradNorm);
  std::vector<RefTensor> m = encodeAdam8bit(mTable, updated[1]);
  std::vector<RefTensor> v = encodeAdam8bit(vTable, updated[2]);
  return {updated[0], m[0], m[1], v[0], v[1]};
}

//===----------------------------------------------------------------------===//
// Quantization
//===----------------------------------------------------------------------===//
//
// Written from kernels/QuantScheme.h, not from the kernels, and as plainly
// as possible: an element's group comes from its multi-index, fp8 rounding
// picks the nearest of the values the format's 256 bit patterns decode to,
// NF4 scans its 16 levels. Only what the contract fixes in fp32 (scale,
// zero point, x / scale, the final level · scale) is computed in float, so
// that a rounding tie is decided on the same fp32 value the kernels see.

namespace {

/// Aborts unless the groups of `s` fit a tensor of `shape` (as the kernels'
/// factories check).
void requireScheme(const std::vector<int64_t> &shape, const quant::Scheme &s, const char *fn) {
  require(!shape.empty(), fn, "x must have rank >= 1");
  int64_t rank = static_cast<int64_t>(shape.size());
  if (s.granularity == quant::Granularity::Channel)
    require(s.axis >= 0 && s.axis < rank, fn, "channel axis out of range");
  if (s.granularity == quant::Granularity::Block)
    require(s.block > 0 && shape.back() % s.block == 0, fn,
            "block must be positive and divide the last dim");
}

/// The number of groups of `s` on a tensor of `shape`.
int64_t quantGroupCount(const std::vector<int64_t> &shape, const quant::Scheme &s) {
  switch (s.granularity) {
  case quant::Granularity::Tensor: return 1;
  case quant::Granularity::Channel: return shape[s.axis];
  case quant::Granularity::Block: return product(shape) / s.block;
  }
  return 0;
}

/// The group of every element, in row-major order, from its multi-index:
/// its channel index, or its row and block within the row.
std::vector<int64_t> quantGroups(const std::vector<int64_t> &shape, const quant::Scheme &s) {
  std::vector<int64_t> groups;
  int64_t blocksPerRow = s.block > 0 ? shape.back() / s.block : 0;
  forEachIndex(shape, [&](const std::vector<int64_t> &index) {
    switch (s.granularity) {
    case quant::Granularity::Tensor: groups.push_back(0); break;
    case quant::Granularity::Channel: groups.push_back(index[s.axis]); break;
    case quant::Granularity::Block: {
      int64_t row = 0;
      for (size_t d = 0; d + 1 < shape.size(); ++d) row = row * shape[d] + index[d];
      groups.push_back(row * blocksPerRow + index.back() / s.block);
      break;
    }
    }
  });
  return groups;
}

void requireRange(const RefTensor &range, const RefTensor &x, const quant::Scheme &s,
                  const char *fn) {
  require(range.shape == std::vector<int64_t>{quantGroupCount(x.shape, s), 2}, fn,
          "range must be [G, 2] for the scheme's G");
}

/// A finite value of an fp8 format and its mantissa field.
struct Fp8Value {
  double value;
  int mantissa;
};

/// Every finite value of an fp8 format, decoded from all 256 bit patterns:
/// e4m3 is the OCP "FN" variant (bias 7, no infinities, S.1111.111 is NaN),
/// e5m2 is IEEE-like (bias 15, exponent field 31 is inf/NaN).
std::vector<Fp8Value> decodeFp8(quant::Format format) {
  bool e4m3 = format == quant::Format::Fp8E4M3;
  int exponentBits = e4m3 ? 4 : 5, mantissaBits = 7 - exponentBits, bias = e4m3 ? 7 : 15;
  int exponentAll = (1 << exponentBits) - 1, mantissaAll = (1 << mantissaBits) - 1;
  std::vector<Fp8Value> values;
  for (int code = 0; code < 256; ++code) {
    bool negative = (code >> 7) != 0;
    int exponent = (code >> mantissaBits) & exponentAll, mantissa = code & mantissaAll;
    if (e4m3 ? (exponent == exponentAll && mantissa == mantissaAll) : exponent == exponentAll)
      continue;
    double magnitude = exponent == 0 ? mantissa * std::pow(2.0, 1 - bias - mantissaBits)
                                     : (1.0 + mantissa / std::pow(2.0, mantissaBits)) *
                                           std::pow(2.0, exponent - bias);
    values.push_back({negative ? -magnitude : magnitude, mantissa});
  }
  return values;
}

/// The value of `format` nearest v; of two at the same distance, the one
/// whose mantissa field is even.
double nearestFp8(float v, quant::Format format) {
  static const std::vector<Fp8Value> e4m3 = decodeFp8(quant::Format::Fp8E4M3);
  static const std::vector<Fp8Value> e5m2 = decodeFp8(quant::Format::Fp8E5M2);
  const std::vector<Fp8Value> &values = format == quant::Format::Fp8E4M3 ? e4m3 : e5m2;
  if (std::isnan(v)) return v;
  const Fp8Value *best = nullptr;
  double bestDistance = std::numeric_limits<double>::infinity();
  for (const Fp8Value &candidate : values) {
    double distance = std::abs(static_cast<double>(v) - candidate.value);
    bool tieWinner = distance == bestDistance && candidate.mantissa % 2 == 0;
    if (distance < bestDistance || tieWinner) {
      best = &candidate;
      bestDistance = distance;
    }
  }
  return best->value;
}

/// The NF4 level nearest c; of two at the same distance, the lower.
double nearestNf4(float c) {
  int best = 0;
  for (int i = 1; i < 16; ++i)
    if (std::abs(static_cast<double>(c) - quant::kNf4Levels[i]) <
        std::abs(static_cast<double>(c) - quant::kNf4Levels[best]))
      best = i;
  return quant::kNf4Levels[best];
}

/// Quantize-dequantize of one element with its group's range
/// [negMin, max] = [−min, max]: the fp32 result and whether x was clipped.
struct Quantized {
  float y;
  bool clipped;
};

Quantized quantizeOne(float x, float negMin, float max, const quant::Scheme &s) {
  if (!s.symmetric) {
    float qmax = static_cast<float>(quant::integerMax(s.format)), qmin = -(qmax + 1.0f);
    float lo = std::min(-negMin, 0.0f), hi = std::max(max, 0.0f);
    if (!(hi - lo > 0.0f)) return {0.0f, x != 0.0f};
    float scale = (hi - lo) / (qmax - qmin);
    float zeroPoint = std::min(std::max(std::nearbyint(qmin - lo / scale), qmin), qmax);
    float q = std::nearbyint(x / scale) + zeroPoint;
    float kept = std::min(std::max(q, qmin), qmax);
    return {(kept - zeroPoint) * scale, q < qmin || q > qmax};
  }
  float amax = std::max(negMin, max);
  if (!(amax > 0.0f)) return {0.0f, x != 0.0f};
  switch (s.format) {
  case quant::Format::Int8:
  case quant::Format::Int4: {
    float qmax = static_cast<float>(quant::integerMax(s.format));
    float scale = amax / qmax;
    float q = std::nearbyint(x / scale);
    float kept = std::min(std::max(q, -qmax), qmax);
    return {kept * scale, std::abs(q) > qmax};
  }
  case quant::Format::Fp8E4M3:
  case quant::Format::Fp8E5M2: {
    float fmax = static_cast<float>(quant::fp8Max(s.format));
    float scale = amax / fmax;
    float v = x / scale;
    float kept = std::min(std::max(v, -fmax), fmax);
    return {static_cast<float>(nearestFp8(kept, s.format)) * scale, std::abs(x) > amax};
  }
  case quant::Format::Nf4: {
    float v = x / amax;
    float kept = std::min(std::max(v, -1.0f), 1.0f);
    return {static_cast<float>(nearestNf4(kept)) * amax, std::abs(v) > 1.0f};
  }
  }
  fail("fakeQuant", "unknown format");
}

/// Whether each element of x lies in an outlier column of `s` (all false
/// without a threshold): its last index c has max(columns[c]) > threshold.
std::vector<bool> outlierElements(const RefTensor &x, const quant::Scheme &s,
                                  const RefTensor *columns, const char *fn) {
  std::vector<bool> outlier;
  require((s.outlier > 0) == (columns != nullptr), fn,
          "columns must be given exactly when the scheme has an outlier threshold");
  require(std::isfinite(s.outlier) && s.outlier >= 0, fn, "outlier threshold must be >= 0");
  if (columns) {
    require(quant::isInteger(s.format) && s.granularity != quant::Granularity::Block, fn,
            "outlier columns need an integer format and tensor or channel granularity");
    require(columns->shape == std::vector<int64_t>{x.shape.back(), 2}, fn,
            "columns must be [C, 2] for x's last dimension C");
  }
  forEachIndex(x.shape, [&](const std::vector<int64_t> &index) {
    if (!columns) {
      outlier.push_back(false);
      return;
    }
    // Read as fp32, as the kernels hold them.
    float negMin = static_cast<float>(columns->data[2 * index.back()]);
    float max = static_cast<float>(columns->data[2 * index.back() + 1]);
    outlier.push_back(static_cast<double>(std::max(negMin, max)) > s.outlier);
  });
  return outlier;
}

/// quantizeOne for every element of x.
std::vector<Quantized> quantizeAll(const RefTensor &x, const RefTensor &range,
                                   const quant::Scheme &s) {
  std::vector<int64_t> groups = quantGroups(x.shape, s);
  std::vector<Quantized> out;
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t g = groups[i];
    float negMin = static_cast<float>(range.data[2 * g]);
    float max = static_cast<float>(range.data[2 * g + 1]);
    out.push_back(quantizeOne(static_cast<float>(x.data[i]), negMin, max, s));
  }
  return out;
}

} // namespace

RefTensor quantObserve(const RefTensor &x, const quant::Scheme &s, const RefTensor *columns) {
  requireScheme(x.shape, s, "quantObserve");
  std::vector<bool> outlier = outlierElements(x, s, columns, "quantObserve");
  int64_t groupCount = quantGroupCount(x.shape, s);
  RefTensor range = RefTensor::zeros({groupCount, 2});
  std::fill(range.data.begin(), range.data.end(), -std::numeric_limits<double>::infinity());
  std::vector<int64_t> groups = quantGroups(x.shape, s);
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (outlier[i]) continue;
    double &negMin = range.data[2 * groups[i]], &max = range.data[2 * groups[i] + 1];
    negMin = std::max(negMin, -x.data[i]);
    max = std::max(max, x.data[i]);
  }
  return range;
}

RefTensor fakeQuant(const RefTensor &x, const RefTensor &range, const quant::Scheme &s,
                    const RefTensor *columns) {
  requireScheme(x.shape, s, "fakeQuant");
  requireRange(range, x, s, "fakeQuant");
  require(s.symmetric || quant::isInteger(s.format), "fakeQuant",
          "asymmetric quantization is for integer formats only");
  std::vector<bool> outlier = outlierElements(x, s, columns, "fakeQuant");
  std::vector<Quantized> q = quantizeAll(x, range, s);
  RefTensor y = like(x);
  for (int64_t i = 0; i < x.numel(); ++i) y.data[i] = outlier[i] ? x.data[i] : q[i].y;
  return y;
}

RefTensor fakeQuantGrad(const RefTensor &x, const RefTensor &range, const RefTensor &dy,
                        const quant::Scheme &s, const RefTensor *columns) {
  requireScheme(x.shape, s, "fakeQuantGrad");
  requireRange(range, x, s, "fakeQuantGrad");
  require(s.symmetric || quant::isInteger(s.format), "fakeQuantGrad",
          "asymmetric quantization is for integer formats only");
  require(dy.shape == x.shape, "fakeQuantGrad", "dy must have x's shape");
  std::vector<bool> outlier = outlierElements(x, s, columns, "fakeQuantGrad");
  std::vector<Quantized> q = quantizeAll(x, range, s);
  RefTensor dx = like(x);
  for (int64_t i = 0; i < x.numel(); ++i)
    dx.data[i] = q[i].clipped && !outlier[i] ? 0.0 : dy.data[i];
  return dx;
}

RefTensor quantEma(const RefTensor &state, const RefTensor &observed, double momentum) {
  require(state.shape.size() == 2 && state.shape[1] == 2, "quantEma", "state must be [G, 2]");
  require(observed.shape == state.shape, "quantEma", "observed must have state's shape");
  RefTensor out = like(state);
  for (int64_t g = 0; g < state.shape[0]; ++g) {
    bool neverObserved = state.data[2 * g] == 0.0 && state.data[2 * g + 1] == 0.0;
    for (int64_t j = 2 * g; j < 2 * g + 2; ++j)
      out.data[j] = neverObserved ? observed.data[j]
                                  : momentum * state.data[j] + (1.0 - momentum) * observed.data[j];
  }
  return out;
}

} // namespace llmc::ref
