//===- CorrelatedInputs.h - GPTQ tests' calibration inputs -----*- C++ -*-===//
//
// GPTQ only differs from rounding to nearest where the inputs' features
// are correlated and of unequal scale, so its tests draw such inputs: a
// random mix of independent normals, every `loudEvery`-th feature three
// times as loud.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_TEST_UNIT_RUNTIME_CORRELATEDINPUTS_H
#define LLMC_TEST_UNIT_RUNTIME_CORRELATEDINPUTS_H

#include <cstdint>
#include <random>
#include <vector>

namespace llmc::test {

/// Rows [n, K] with correlated features of unequal scale.
inline std::vector<float> correlatedInputs(int64_t n, int64_t K, uint32_t seed, int64_t loudEvery) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> mix(K * K), z(n * K), x(n * K, 0.0f);
  for (float &v : mix) v = normal(rng) * 0.3f;
  for (int64_t i = 0; i < K; ++i) mix[i * K + i] += 1.0f + 2.0f * (i % loudEvery == 0);
  for (float &v : z) v = normal(rng);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < K; ++i)
      for (int64_t j = 0; j < K; ++j) x[r * K + j] += z[r * K + i] * mix[i * K + j];
  return x;
}

} // namespace llmc::test

#endif
