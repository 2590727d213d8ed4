//===- FakeQuant.h - binding contract of the qat kernels --------*- C++ -*-===//
//
// The checks and derived numbers of qat_observe, qat_fake_quant,
// qat_fake_quant_grad and qat_ema, shared by the CPU factories
// (kernels/cpu/fake_quant.cpp) and the CUDA ones (kernels/cuda/fake_quant.cu),
// so both backends accept the same inputs with the same messages. The
// scheme's groups are derived here too, as the [outer, groups, inner] view of
// x that both backends' kernels walk.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_FAKEQUANT_H
#define LLMC_KERNELS_CONTRACTS_FAKEQUANT_H

#include "common/QuantScheme.h"
#include "kernels/Kernel.h"
#include "kernels/Validator.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

namespace llmc::contracts {

/// A scheme's groups as the [outer, groups, inner] view of x: element i is
/// in group (i / inner) % groups.
struct QuantGroupLayout {
  int64_t outer = 1, groups = 1, inner = 1, numel = 0;
};

/// qat_observe(x[, columns]) -> range.
struct QatObserveBinding {
  DType dtype = DType::F32; ///< x's
  quant::Scheme scheme;
  QuantGroupLayout layout;
};
inline bool bindQatObserve(const KernelArgs &args, std::string &error, QatObserveBinding *out);

/// qat_fake_quant(x, range[, columns]) -> y and
/// qat_fake_quant_grad(x, range, dy[, columns]) -> dx.
struct QatFakeQuantBinding {
  DType dtype = DType::F32; ///< x's
  quant::Scheme scheme;
  QuantGroupLayout layout;
};
inline bool bindQatFakeQuant(const KernelArgs &args, std::string &error, QatFakeQuantBinding *out);
inline bool bindQatFakeQuantGrad(const KernelArgs &args, std::string &error,
                                 QatFakeQuantBinding *out);

/// qat_ema(state, observed) -> new_state.
struct QatEmaBinding {
  double momentum = 0;
  int64_t groups = 0;
};
inline bool bindQatEma(const KernelArgs &args, std::string &error, QatEmaBinding *out);

//===----------------------------------------------------------------------===//
// Definitions
//===----------------------------------------------------------------------===//

namespace fake_quant_impl {

using quant::Format;
using quant::Granularity;
using quant::Scheme;

inline QuantGroupLayout layoutOf(const Scheme &s, const std::vector<int64_t> &shape) {
  QuantGroupLayout l;
  l.numel = product(shape);
  switch (s.granularity) {
  case Granularity::Tensor: l.inner = l.numel; break;
  case Granularity::Channel:
    l.outer = product(shape, 0, static_cast<size_t>(s.axis));
    l.groups = shape[s.axis];
    l.inner = product(shape, static_cast<size_t>(s.axis) + 1, shape.size());
    break;
  case Granularity::Block:
    l.groups = l.numel / s.block;
    l.inner = s.block;
    break;
  }
  if (l.groups == 1)
    l.outer = 1, l.inner = l.numel; // one group: one run
  l.inner = std::max<int64_t>(l.inner, 1);
  return l;
}

/// x: float, rank ≥ 1.
inline bool checkX(Validator &v, const TensorView &x) {
  if (!v.isFloat(x, "x"))
    return false;
  if (x.rank() < 1)
    return v.fail("x must have rank 1 or more, got " + x.describe());
  return true;
}

/// Reads `granularity`, `axis`, `block` (and, with `withFormat`, the
/// required `format` and `symmetric`) and checks them against x.
inline bool readScheme(Validator &v, const TensorView &x, bool withFormat, Scheme *s) {
  const KernelAttrs &a = v.attrs();
  int64_t format = 0, granularity, axis, block, symmetric = 1;
  if (withFormat) {
    if (!a.hasInt("format") && !a.hasFloat("format"))
      return v.fail("missing int attribute 'format'");
    if (!v.intAttr("format", &format, 0))
      return false;
    if (format < 0 || format > static_cast<int64_t>(Format::Int3))
      return v.fail("attribute 'format' = " + std::to_string(format) +
                    " is not a format (0 int8, 1 int4, 2 fp8_e4m3, 3 fp8_e5m2, 4 nf4, 5 int3)");
    if (!v.intAttr("symmetric", &symmetric, 1))
      return false;
    if (symmetric != 0 && symmetric != 1)
      return v.fail("attribute 'symmetric' must be 0 or 1, got " + std::to_string(symmetric));
  }
  if (!v.intAttr("granularity", &granularity, 0) || !v.intAttr("axis", &axis, 0) ||
      !v.intAttr("block", &block, 0))
    return false;
  if (granularity < 0 || granularity > static_cast<int64_t>(Granularity::Block))
    return v.fail("attribute 'granularity' = " + std::to_string(granularity) +
                  " is not a granularity (0 tensor, 1 channel, 2 block)");
  s->format = static_cast<Format>(format);
  s->granularity = static_cast<Granularity>(granularity);
  s->axis = axis;
  s->block = block;
  s->symmetric = symmetric != 0;
  double outlier = 0.0;
  if ((a.hasFloat("outlier") || a.hasInt("outlier")) && !v.floatAttr("outlier", &outlier))
    return false;
  if (!(outlier >= 0.0 && std::isfinite(outlier)))
    return v.fail("attribute 'outlier' must be finite and >= 0 (0: none), got " +
                  std::to_string(outlier));
  s->outlier = outlier;
  if (outlier > 0.0 && s->granularity == Granularity::Block)
    return v.fail("attribute 'outlier' (outlier columns) needs tensor or channel granularity");
  if (withFormat && outlier > 0.0 && !quant::isInteger(s->format))
    return v.fail(std::string("attribute 'outlier' (outlier columns) is for integer formats "
                              "only, got format ") +
                  quant::formatName(s->format));
  if (!s->symmetric && !quant::isInteger(s->format))
    return v.fail(std::string("attribute 'symmetric' = 0 (asymmetric) is for integer formats "
                              "only, got format ") +
                  quant::formatName(s->format));
  if (s->granularity == Granularity::Channel && (axis < 0 || axis >= x.rank()))
    return v.fail("attribute 'axis' = " + std::to_string(axis) + " is out of range for x " +
                  x.describe());
  if (s->granularity == Granularity::Block) {
    if (block <= 0)
      return v.fail("attribute 'block' must be positive, got " + std::to_string(block));
    if (x.dim(-1) % block != 0)
      return v.fail("attribute 'block' = " + std::to_string(block) +
                    " does not divide the last dim of x " + x.describe());
  }
  return true;
}

/// range: f32[G, 2] for the scheme's G.
inline bool checkRange(Validator &v, const TensorView &range, const char *what, const Scheme &s,
                       const TensorView &x) {
  return v.hasType(range, what, DType::F32, {quant::groupCount(s, x.shape), 2});
}

/// The optional `columns` input (input `index`): present exactly with an
/// outlier threshold, f32[C, 2] for x's last dimension C.
inline bool checkColumns(Validator &v, const Scheme &s, size_t index, const TensorView &x,
                         size_t inputs) {
  if (s.outlier > 0.0 && inputs <= index)
    return v.fail("attribute 'outlier' needs the columns input (per-column ranges [C, 2])");
  if (s.outlier <= 0.0 && inputs > index)
    return v.fail("a columns input needs attribute 'outlier' > 0");
  return inputs <= index || v.hasType(v.in(index), "columns", DType::F32, {x.dim(-1), 2});
}

} // namespace fake_quant_impl
using namespace fake_quant_impl;

inline bool bindQatObserve(const KernelArgs &args, std::string &error, QatObserveBinding *out) {
  Validator v("qat_observe", args, error);
  Scheme s;
  if (!v.arity(1, 2, 1) || !checkX(v, v.in(0)) || !readScheme(v, v.in(0), false, &s) ||
      !checkColumns(v, s, 1, v.in(0), args.inputs.size()) ||
      !checkRange(v, v.out(0), "range", s, v.in(0)))
    return false;
  out->dtype = v.in(0).dtype;
  out->scheme = s;
  out->layout = layoutOf(s, v.in(0).shape);
  return true;
}

namespace fake_quant_impl {

inline bool bindFakeQuant(const char *name, bool grad, const KernelArgs &args, std::string &error,
                          QatFakeQuantBinding *out) {
  Validator v(name, args, error);
  Scheme s;
  const size_t inputs = grad ? 3 : 2; // then the optional columns
  if (!v.arity(inputs, inputs + 1, 1) || !checkX(v, v.in(0)) || !readScheme(v, v.in(0), true, &s) ||
      !checkRange(v, v.in(1), "range", s, v.in(0)) ||
      !checkColumns(v, s, inputs, v.in(0), args.inputs.size()))
    return false;
  const TensorView &x = v.in(0);
  if (grad && !v.hasType(v.in(2), "dy", x.dtype, x.shape))
    return false;
  if (!v.hasType(v.out(0), grad ? "dx" : "y", x.dtype, x.shape))
    return false;
  out->dtype = x.dtype;
  out->scheme = s;
  out->layout = layoutOf(s, x.shape);
  return true;
}

} // namespace fake_quant_impl

inline bool bindQatFakeQuant(const KernelArgs &args, std::string &error, QatFakeQuantBinding *out) {
  return bindFakeQuant("qat_fake_quant", false, args, error, out);
}

inline bool bindQatFakeQuantGrad(const KernelArgs &args, std::string &error,
                                 QatFakeQuantBinding *out) {
  return bindFakeQuant("qat_fake_quant_grad", true, args, error, out);
}

inline bool bindQatEma(const KernelArgs &args, std::string &error, QatEmaBinding *out) {
  Validator v("qat_ema", args, error);
  double momentum;
  if (!v.arity(2, 1) || !v.floatAttr("momentum", &momentum))
    return false;
  if (!(momentum >= 0.0 && momentum <= 1.0))
    return v.fail("attribute 'momentum' must be in [0, 1], got " + std::to_string(momentum));
  const TensorView &state = v.in(0);
  if (state.dtype != DType::F32 || state.rank() != 2 || state.dim(1) != 2)
    return v.fail("state must be f32[Gx2], got " + state.describe());
  if (!v.hasType(v.in(1), "observed", DType::F32, state.shape) ||
      !v.hasType(v.out(0), "new_state", DType::F32, state.shape))
    return false;
  out->momentum = momentum;
  out->groups = state.dim(0);
  return true;
}

} // namespace llmc::contracts

#endif
