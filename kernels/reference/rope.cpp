//===- rope.cpp - rotary position embedding reference ---------------------===//
//
// The pair (x[i], x[i + D/2]) of each head at position t rotated by
// t·θ^(−2i/D), the angle computed afresh with pow for every element (the
// kernels use a table); the inverse rotation is the backward.
//
//===----------------------------------------------------------------------===//

#include "kernels/reference/Common.h"

namespace llmc::ref {

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

} // namespace llmc::ref
