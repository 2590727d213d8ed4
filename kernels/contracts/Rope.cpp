//===- Rope.cpp - binding contract of rope --------------------------------===//
//
// Part of llmc: see Rope.h.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/Rope.h"
#include "kernels/Validator.h"

#include <cmath>
#include <vector>

namespace llmc::contracts {

bool bindRotation(Validator &v, RopeBinding *out) {
  if (!v.floatAttr("theta", &out->theta)) return false;
  if (!(out->theta > 0.0)) return v.fail("attribute 'theta' must be positive");
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
    if (!(s.factor > 0)) return v.fail("attribute 'scaling_factor' must be positive");
    if (!(s.lowFreqFactor > 0 && s.highFreqFactor > s.lowFreqFactor))
      return v.fail("attributes 'low_freq_factor' (" + std::to_string(s.lowFreqFactor) +
                    ") and 'high_freq_factor' (" + std::to_string(s.highFreqFactor) +
                    ") must satisfy 0 < low < high");
    if (s.originalMaxPositions < 1)
      return v.fail("attribute 'original_max_positions' must be at least 1");
  }
  return true;
}

bool bindRope(const KernelArgs &args, std::string &error, RopeBinding *out) {
  Validator v("rope", args, error);
  bool inverse;
  if (!v.arity(1, 2, 1) || !v.flagAttr("inverse", &inverse)) return false;
  const TensorView &x = v.in(0);
  if (!v.isFloat(x, "x") || !v.hasRank(x, "x", 4)) return false;
  if (x.dim(3) % 2 != 0) return v.fail("x head dim D must be even, got " + x.describe());
  if (!bindRotation(v, out)) return false;
  if (!v.hasType(v.out(0), "out", x.dtype, x.shape)) return false;
  out->positions = args.inputs.size() > 1;
  if (out->positions &&
      (!v.isIndex(v.in(1), "positions") ||
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

void ropeTables(const RopeBinding &b, int64_t headDim, float *cosTable, float *sinTable) {
  const int64_t half = headDim / 2;
  std::vector<double> rate(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i)
    rate[i] = ropeInverseFrequency(b.theta, i, headDim, b.scaling);
  for (int64_t t = 0; t < b.rows; ++t)
    for (int64_t i = 0; i < half; ++i) {
      double angle = static_cast<double>(t) * rate[i];
      cosTable[t * half + i] = static_cast<float>(std::cos(angle));
      sinTable[t * half + i] = static_cast<float>(b.inverse ? -std::sin(angle) : std::sin(angle));
    }
}

} // namespace llmc::contracts
