//===- Gptq.cpp - GPTQ: quantization with second-order error feedback -----===//
//
// Algorithm 1 of the paper, in double precision for H and the weights being
// updated (the quantized values themselves are computed in fp32 by the same
// encode/decode QuantizedTensor stores with, so the error fed back is the
// error the stored tensor has).
//
//===----------------------------------------------------------------------===//

#include "runtime/quant/Gptq.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace llmc::quant {
namespace {

/// Lower Cholesky factor of the K × K matrix `a` in place (the upper
/// triangle is left as zeros). False when `a` is not positive definite.
bool cholesky(std::vector<double> &a, int64_t K) {
  for (int64_t j = 0; j < K; ++j) {
    double d = a[j * K + j];
    for (int64_t k = 0; k < j; ++k) d -= a[j * K + k] * a[j * K + k];
    if (!(d > 0.0)) return false;
    d = std::sqrt(d);
    a[j * K + j] = d;
    for (int64_t i = j + 1; i < K; ++i) {
      double v = a[i * K + j];
      for (int64_t k = 0; k < j; ++k) v -= a[i * K + k] * a[j * K + k];
      a[i * K + j] = v / d;
    }
    for (int64_t i = 0; i < j; ++i) a[i * K + j] = 0.0;
  }
  return true;
}

/// U, upper triangular with H⁻¹ = UᵀU, from the lower Cholesky factor L of
/// H: H⁻¹ = L⁻ᵀL⁻¹, whose own Cholesky factor is taken explicitly (the
/// reference's cholesky_inverse followed by cholesky(upper=True)).
bool inverseUpperFactor(const std::vector<double> &L, int64_t K, std::vector<double> &U) {
  // L⁻¹ by forward substitution, column by column.
  std::vector<double> inv(K * K, 0.0);
  for (int64_t j = 0; j < K; ++j) {
    inv[j * K + j] = 1.0 / L[j * K + j];
    for (int64_t i = j + 1; i < K; ++i) {
      double v = 0.0;
      for (int64_t k = j; k < i; ++k) v -= L[i * K + k] * inv[k * K + j];
      inv[i * K + j] = v / L[i * K + i];
    }
  }
  // H⁻¹ = (L⁻¹)ᵀ L⁻¹.
  std::vector<double> hinv(K * K, 0.0);
  for (int64_t i = 0; i < K; ++i)
    for (int64_t j = 0; j <= i; ++j) {
      double v = 0.0;
      for (int64_t k = i; k < K; ++k) v += inv[k * K + i] * inv[k * K + j];
      hinv[i * K + j] = hinv[j * K + i] = v;
    }
  if (!cholesky(hinv, K)) return false;
  U.assign(K * K, 0.0);
  for (int64_t i = 0; i < K; ++i)
    for (int64_t j = i; j < K; ++j) U[i * K + j] = hinv[j * K + i];
  return true;
}

} // namespace

std::string gptqQuantize(const float *w, const std::vector<int64_t> &shape, int64_t inputAxis,
                         std::vector<double> H, const Scheme &s, const StorageFormat &storage,
                         const GptqOptions &options, QuantizedTensor &out, GptqStats *stats) {
  if (shape.size() == 2 && (groupCount(s, shape) == 0 || (!s.symmetric && !isInteger(s.format))))
    return quantize(w, shape, s, storage, out); // says why the scheme does not fit
  GptqSolution solution;
  if (std::string why = gptqSolve(w, shape, inputAxis, std::move(H), s, options, solution, stats);
      !why.empty())
    return why;
  return quantizeWithRanges(solution.values.data(), shape, s, storage, solution.negMin,
                            solution.max, out);
}

std::string gptqSolve(const float *w, const std::vector<int64_t> &shape, int64_t inputAxis,
                      std::vector<double> H, const Scheme &s, const GptqOptions &options,
                      GptqSolution &out, GptqStats *stats) {
  if (shape.size() != 2 || (inputAxis != 0 && inputAxis != 1))
    return "GPTQ quantizes 2-D weights with input dimension 0 or 1";
  const int64_t K = shape[inputAxis], R = shape[1 - inputAxis];
  if (static_cast<int64_t>(H.size()) != K * K)
    return "the Hessian has " + std::to_string(H.size()) + " entries, expected " +
           std::to_string(K) + "x" + std::to_string(K);
  if (options.blockSize <= 0)
    return "the lazy batch size must be positive";
  if (!(options.dampening >= 0.0))
    return "the dampening must be >= 0";
  if (groupCount(s, shape) == 0 || (!s.symmetric && !isInteger(s.format)))
    return "the scheme " + schemeString(s) + " does not fit a " + std::to_string(shape[0]) + "x" +
           std::to_string(shape[1]) + " weight";

  // Work matrix W[r, c]: row r an output channel, column c the input
  // feature perm[c]; `flat` maps it back to the weight's element.
  std::vector<int64_t> perm(K);
  std::iota(perm.begin(), perm.end(), 0);
  if (options.actOrder)
    std::stable_sort(perm.begin(), perm.end(),
                     [&](int64_t a, int64_t b) { return H[a * K + a] > H[b * K + b]; });
  auto flat = [&](int64_t r, int64_t c) {
    return inputAxis == 0 ? perm[c] * R + r : r * K + perm[c];
  };

  // A dead input (always 0 in calibration) contributes nothing to the
  // output: its weights are set to 0 and its diagonal to 1 so H inverts.
  std::vector<double> Hp(K * K);
  int64_t dead = 0;
  std::vector<double> W(R * K);
  for (int64_t c = 0; c < K; ++c) {
    bool isDead = H[perm[c] * K + perm[c]] == 0.0;
    dead += isDead;
    for (int64_t r = 0; r < R; ++r) W[r * K + c] = isDead ? 0.0 : w[flat(r, c)];
    for (int64_t j = 0; j < K; ++j) Hp[c * K + j] = H[perm[c] * K + perm[j]];
    if (isDead) Hp[c * K + c] = 1.0;
  }
  if (stats) stats->deadColumns = dead;
  double meanDiag = 0.0;
  for (int64_t c = 0; c < K; ++c) meanDiag += Hp[c * K + c];
  meanDiag /= static_cast<double>(K);
  for (int64_t c = 0; c < K; ++c) Hp[c * K + c] += options.dampening * meanDiag;
  std::vector<double> U;
  if (!cholesky(Hp, K) || !inverseUpperFactor(Hp, K, U)) {
    if (stats)
      stats->notPositiveDefinite = true;
    return "the Hessian is not positive definite after dampening " +
           std::to_string(options.dampening) + " (more calibration data or a larger --damp)";
  }

  // Each group: its elements (work indices) and, once taken, its range.
  const int64_t groups = groupCount(s, shape);
  std::vector<int64_t> groupAt(R * K);
  std::vector<std::vector<int64_t>> members(groups);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < K; ++c) {
      int64_t g = groupOf(s, shape, flat(r, c));
      groupAt[r * K + c] = g;
      members[g].push_back(r * K + c);
    }
  std::vector<float> negMin(groups), max(groups);
  std::vector<GroupGrid> grid(groups);
  std::vector<char> taken(groups, 0);
  auto takeRange = [&](int64_t g) {
    float lo = -INFINITY, hi = -INFINITY;
    for (int64_t m : members[g]) {
      float v = static_cast<float>(W[m]);
      lo = std::max(lo, -v);
      hi = std::max(hi, v);
    }
    negMin[g] = lo;
    max[g] = hi;
    grid[g] = groupGrid(s, lo, hi);
    taken[g] = 1;
  };

  // The values handed to the grid, in the weight's layout: stored through
  // quantizeWithRanges with the same ranges they reproduce GPTQ's Q.
  std::vector<float> stored(R * K);
  const int64_t B = options.blockSize;
  std::vector<double> err;
  for (int64_t i1 = 0; i1 < K; i1 += B) {
    const int64_t i2 = std::min(i1 + B, K), count = i2 - i1;
    err.assign(R * count, 0.0);
    for (int64_t c = i1; c < i2; ++c) {
      const double d = U[c * K + c];
      for (int64_t r = 0; r < R; ++r) {
        int64_t g = groupAt[r * K + c];
        if (!taken[g]) takeRange(g);
        float x = static_cast<float>(W[r * K + c]);
        stored[flat(r, c)] = x;
        float q = decodeValue(encodeValue(x, s, grid[g]), s, grid[g]);
        double e = (W[r * K + c] - static_cast<double>(q)) / d;
        err[r * count + (c - i1)] = e;
        // Immediate update of the rest of this lazy batch.
        double *row = &W[r * K];
        const double *u = &U[c * K];
        for (int64_t j = c + 1; j < i2; ++j) row[j] -= e * u[j];
      }
    }
    // The batch's updates to every later column at once.
    for (int64_t r = 0; r < R; ++r) {
      double *row = &W[r * K];
      for (int64_t t = 0; t < count; ++t) {
        double e = err[r * count + t];
        if (e == 0.0) continue;
        const double *u = &U[(i1 + t) * K];
        for (int64_t j = i2; j < K; ++j) row[j] -= e * u[j];
      }
    }
  }
  out.values = std::move(stored);
  out.negMin = std::move(negMin);
  out.max = std::move(max);
  return "";
}

void accumulateHessian(const float *x, int64_t rows, int64_t K, std::vector<double> &H,
                       int64_t &samples) {
  if (static_cast<int64_t>(H.size()) != K * K) H.assign(K * K, 0.0);
  if (rows <= 0) return;
  // xᵀx of this batch in fp32 (the upper triangle), then folded in double.
  std::vector<float> batch(K * K, 0.0f);
  for (int64_t n = 0; n < rows; ++n) {
    const float *row = x + n * K;
    for (int64_t i = 0; i < K; ++i) {
      const float xi = row[i];
      if (xi == 0.0f) continue;
      float *out = &batch[i * K];
      for (int64_t j = i; j < K; ++j) out[j] += xi * row[j];
    }
  }
  const double total = static_cast<double>(samples + rows);
  const double keep = static_cast<double>(samples) / total, add = 2.0 / total;
  for (int64_t i = 0; i < K; ++i)
    for (int64_t j = i; j < K; ++j) {
      double v = H[i * K + j] * keep + add * batch[i * K + j];
      H[i * K + j] = H[j * K + i] = v;
    }
  samples += rows;
}

} // namespace llmc::quant
