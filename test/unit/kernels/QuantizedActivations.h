//===- QuantizedActivations.h - references for int8-quantized x -*- C++ -*-===//
//
// matmul_int's decode path (kernels/cpu/DecodeGemvInt8.h) quantizes x to
// int8 per 32 elements before its integer dots. These are its references:
// x quantized the same way, the product over the quantized x, and the
// bound on how far that may be from the fp32-activation product; and which
// bindings take that path.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_TEST_UNIT_KERNELS_QUANTIZEDACTIVATIONS_H
#define LLMC_TEST_UNIT_KERNELS_QUANTIZEDACTIVATIONS_H

#include "IntWeightCases.h"

#include <algorithm>
#include <cmath>

namespace llmc::test {

/// Whether matmul_int quantizes x: few rows (m <= 16) of x times Wᵀ [n, k],
/// symmetric codes, K and the run of one scale whole blocks of 32.
inline bool quantizesActivations(int64_t m, int64_t n, int64_t k, const Grouping &g,
                                 bool transposeB, bool asymmetric) {
  const int64_t run = g.block > 0          ? g.block
                      : g.channelAxis == 0 ? k
                      : g.channelAxis == 1 ? 0
                                           : n * k;
  return m <= 16 && transposeB && !asymmetric && k % 32 == 0 && run > 0 && run % 32 == 0;
}

/// x [m, k] quantized as the integer dots do (Q8_0): per 32 elements,
/// d = amax / 127 and q = round-to-nearest-even(x / d), in fp32.
struct QuantizedRef {
  RefTensor q, d; // q [m, k] (the codes), d [m, k / 32]
};

inline QuantizedRef quantizeQ8(const RefTensor &x) {
  const int64_t m = x.shape[0], k = x.shape[1], blocks = k / 32;
  QuantizedRef r{RefTensor::zeros({m, k}), RefTensor::zeros({m, blocks})};
  for (int64_t i = 0; i < m; ++i)
    for (int64_t b = 0; b < blocks; ++b) {
      const double *xb = x.data.data() + i * k + b * 32;
      float amax = 0.0f;
      for (int e = 0; e < 32; ++e) amax = std::max(amax, std::fabs(static_cast<float>(xb[e])));
      const float d = amax / 127.0f, inv = d != 0.0f ? 1.0f / d : 0.0f;
      r.d.data[i * blocks + b] = d;
      for (int e = 0; e < 32; ++e)
        r.q.data[i * k + b * 32 + e] = std::nearbyint(static_cast<float>(xb[e]) * inv);
    }
  return r;
}

/// y = x · Wᵀ with x quantized: Σ_blocks d · Σ q · W, in double.
inline RefTensor productQuantized(const QuantizedRef &x, const RefTensor &w) {
  const int64_t m = x.q.shape[0], k = x.q.shape[1], n = w.shape[0];
  RefTensor y = RefTensor::zeros({m, n});
  for (int64_t i = 0; i < m; ++i)
    for (int64_t r = 0; r < n; ++r)
      for (int64_t b = 0; b < k / 32; ++b) {
        double sum = 0.0;
        for (int64_t c = b * 32; c < b * 32 + 32; ++c)
          sum += x.q.data[i * k + c] * w.data[r * k + c];
        y.data[i * n + r] += x.d.data[i * (k / 32) + b] * sum;
      }
  return y;
}

/// Whether every element of y is within the int8 rounding bound of the
/// fp32-activation product: Σ_blocks d/2 · Σ_block |W|, widened by 1e-6
/// relative, plus 1e-5 · Σ |x| |W| for the fp32 sums. With `exact`, W is
/// the weights the dots multiply and `exact` the stored ones (NF4's
/// levels in 127ths): the bound grows by Σ |x| · |W − exact| and y is
/// compared with x · exactᵀ.
inline ::testing::AssertionResult withinRoundingBound(const RefTensor &y, const RefTensor &x,
                                                      const QuantizedRef &q, const RefTensor &w,
                                                      const RefTensor *exactW = nullptr) {
  const int64_t m = x.shape[0], k = x.shape[1], n = w.shape[0];
  const RefTensor &stored = exactW ? *exactW : w;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t r = 0; r < n; ++r) {
      double exact = 0.0, bound = 0.0, magnitude = 0.0;
      for (int64_t c = 0; c < k; ++c) {
        const double wc = w.data[r * k + c], xc = x.data[i * k + c];
        const double sc = stored.data[r * k + c];
        exact += xc * sc;
        magnitude += std::fabs(xc * sc);
        bound += q.d.data[i * (k / 32) + c / 32] / 2 * std::fabs(wc) + std::fabs(xc * (wc - sc));
      }
      bound = bound * (1 + 1e-6) + 1e-5 * magnitude;
      const double err = std::fabs(y.data[i * n + r] - exact);
      if (!(err <= bound))
        return ::testing::AssertionFailure()
               << "y[" << i << ", " << r << "] = " << y.data[i * n + r] << ", fp32 product "
               << exact << ": error " << err << " > bound " << bound;
    }
  return ::testing::AssertionSuccess();
}

} // namespace llmc::test

#endif
