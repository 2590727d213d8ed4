//===- RopeScaling.h - RoPE's rotation rates, scaled or not -----*- C++ -*-===//
//
// Pair i of a D-wide head rotates by θ^(−2i/D) radians per position. Llama
// 3.1 rescales these rates by wavelength (Hugging Face `"rope_type":
// "llama3"`, transformers' `_compute_llama3_parameters`): with L the
// original context, a wavelength 2π/rate longer than L / low_freq_factor is
// stretched `factor` times (its rate divided by it), one shorter than
// L / high_freq_factor is kept, and those between blend the two by
// smooth = (L / wavelength − low) / (high − low).
//
// The CPU and CUDA rope kernels build their cos/sin tables from this
// function at bind time and the reference calls it per element, so all
// three rotate by the same angles. It computes in double; transformers
// computes the rates in fp32, which agrees to fp32 rounding except for a
// wavelength within that rounding of a band edge.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMMON_ROPESCALING_H
#define LLMC_COMMON_ROPESCALING_H

#include <cmath>
#include <cstdint>

namespace llmc {

/// Llama 3's frequency-dependent RoPE scaling; `factor` 0: unscaled.
struct RopeScaling {
  double factor = 0;
  double lowFreqFactor = 0, highFreqFactor = 0;
  int64_t originalMaxPositions = 0; ///< L, the context the rates were trained for
  bool scaled() const { return factor != 0; }
};

/// Linear scaling (Hugging Face `"rope_type": "linear"`, transformers'
/// `_compute_linear_scaling_rope_parameters`: every rate divided by
/// `factor`, as if positions were) is the llama3 scaling whose stretched
/// band holds every wavelength: with L = 1 and low_freq_factor = 1 it is
/// every wavelength above 1, and a wavelength 2π/rate is at least 2π
/// whenever theta >= 1. So the rope ops, kernels and reference carry it
/// unchanged.
inline RopeScaling linearRopeScaling(double factor) { return {factor, 1.0, 2.0, 1}; }

/// The angle per position of pair `i` of a `d`-wide head.
inline double ropeInverseFrequency(double theta, int64_t i, int64_t d,
                                   const RopeScaling &s = {}) {
  const double rate = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(d));
  if (!s.scaled())
    return rate;
  const double kTwoPi = 6.283185307179586476925;
  const double wavelength = kTwoPi / rate;
  const double original = static_cast<double>(s.originalMaxPositions);
  if (wavelength > original / s.lowFreqFactor)
    return rate / s.factor;
  if (wavelength < original / s.highFreqFactor)
    return rate;
  const double smooth =
      (original / wavelength - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
  return (1 - smooth) * rate / s.factor + smooth * rate;
}

} // namespace llmc

#endif
