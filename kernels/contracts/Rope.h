//===- Rope.h - binding contract of rope ------------------------*- C++ -*-===//
//
// The checks and attributes of rope (rotary position embedding of x[B, T, H,
// D] at positions 0..T−1 or at given positions[B, T], or its inverse,
// optionally with Llama 3's frequency scaling), shared by the CPU factory
// (kernels/cpu/rope.cpp) and the CUDA one (kernels/cuda/rope.cu).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_ROPE_H
#define LLMC_KERNELS_CONTRACTS_ROPE_H

#include "common/RopeScaling.h"
#include "kernels/Kernel.h"
#include "kernels/Validator.h"

#include <cmath>
#include <string>
#include <vector>

namespace llmc {
class Validator;
}

namespace llmc::contracts {

/// rope(x[, positions]) -> out, attributes theta, inverse and optionally
/// position_limit and the Llama 3 scaling (scaling_factor, low_freq_factor,
/// high_freq_factor, original_max_positions: all four or none).
struct RopeBinding {
  DType dtype = DType::F32;
  bool positions = false; ///< the positions input is present (i32 or i64)
  double theta = 0;
  bool inverse = false;
  /// Positions are in [0, rows): the cos/sin table's rows, attribute
  /// `position_limit` when given (a decode step's positions run past its
  /// T), else T.
  int64_t rows = 0;
  RopeScaling scaling; ///< unscaled unless the scaling attributes are given
};
inline bool bindRope(const KernelArgs &args, std::string &error, RopeBinding *out);

/// The rotation's attributes as rope reads them (theta and the Llama 3
/// scaling), for kernels that rotate their inputs as rope would
/// (attention_rope); sets `theta` and `scaling`, leaves the rest.
inline bool bindRotation(Validator &v, RopeBinding *out);

/// The cos and sin of every angle a bound rope rotates by, each [rows, D/2]
/// (sin negated when inverse): computed in double, rounded to fp32, the
/// same table on both backends.
inline void ropeTables(const RopeBinding &b, int64_t headDim, float *cosTable, float *sinTable);

//===----------------------------------------------------------------------===//
// Definitions
//===----------------------------------------------------------------------===//

inline bool bindRotation(Validator &v, RopeBinding *out) {
  if (!v.floatAttr("theta", &out->theta))
    return false;
  if (!(out->theta > 0.0))
    return v.fail("attribute 'theta' must be positive");
  // Llama 3 scaling: the four attributes together, or none (unscaled).
  const KernelAttrs &a = v.attrs();
  const int given = a.hasFloat("scaling_factor") + a.hasFloat("low_freq_factor") +
                    a.hasFloat("high_freq_factor") + a.hasInt("original_max_positions");
  if (given != 0 && given != 4)
    return v.fail("attributes 'scaling_factor', 'low_freq_factor', 'high_freq_factor' and "
                  "'original_max_positions' go together (Llama 3 scaling)");
  if (given == 4) {
    RopeScaling &s = out->scaling;
    if (!v.floatAttr("scaling_factor", &s.factor) ||
        !v.floatAttr("low_freq_factor", &s.lowFreqFactor) ||
        !v.floatAttr("high_freq_factor", &s.highFreqFactor) ||
        !v.intAttr("original_max_positions", &s.originalMaxPositions, 0))
      return false;
    if (!(s.factor > 0))
      return v.fail("attribute 'scaling_factor' must be positive");
    if (!(s.lowFreqFactor > 0 && s.highFreqFactor > s.lowFreqFactor))
      return v.fail("attributes 'low_freq_factor' (" + std::to_string(s.lowFreqFactor) +
                    ") and 'high_freq_factor' (" + std::to_string(s.highFreqFactor) +
                    ") must satisfy 0 < low < high");
    if (s.originalMaxPositions < 1)
      return v.fail("attribute 'original_max_positions' must be at least 1");
  }
  return true;
}

inline bool bindRope(const KernelArgs &args, std::string &error, RopeBinding *out) {
  Validator v("rope", args, error);
  bool inverse;
  if (!v.arity(1, 2, 1) || !v.flagAttr("inverse", &inverse))
    return false;
  const TensorView &x = v.in(0);
  if (!v.isFloat(x, "x") || !v.hasRank(x, "x", 4))
    return false;
  if (x.dim(3) % 2 != 0)
    return v.fail("x head dim D must be even, got " + x.describe());
  if (!bindRotation(v, out))
    return false;
  if (!v.hasType(v.out(0), "out", x.dtype, x.shape))
    return false;
  out->positions = args.inputs.size() > 1;
  if (out->positions && (!v.isIndex(v.in(1), "positions") ||
                         !v.hasType(v.in(1), "positions", v.in(1).dtype, {x.dim(0), x.dim(1)})))
    return false;
  out->rows = args.attrs.getInt("position_limit", x.dim(1));
  if (out->rows < x.dim(1))
    return v.fail("attribute 'position_limit' (" + std::to_string(out->rows) +
                  ") must be at least T = " + std::to_string(x.dim(1)));
  out->dtype = x.dtype;
  out->inverse = inverse;
  return true;
}

inline void ropeTables(const RopeBinding &b, int64_t headDim, float *cosTable, float *sinTable) {
  const int64_t half = headDim / 2;
  std::vector<double> rate(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) rate[i] = ropeInverseFrequency(b.theta, i, headDim, b.scaling);
  for (int64_t t = 0; t < b.rows; ++t)
    for (int64_t i = 0; i < half; ++i) {
      double angle = static_cast<double>(t) * rate[i];
      cosTable[t * half + i] = static_cast<float>(std::cos(angle));
      sinTable[t * half + i] = static_cast<float>(b.inverse ? -std::sin(angle) : std::sin(angle));
    }
}

} // namespace llmc::contracts

#endif
