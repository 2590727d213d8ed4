//===- MatmulNf4.cpp - binding contract of matmul_nf4 ---------------------===//
//
// Part of llmc: see MatmulNf4.h.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/MatmulNf4.h"
#include "kernels/QuantScheme.h"
#include "kernels/Validator.h"

#include <vector>

namespace llmc::contracts {

bool bindMatmulNf4(const KernelArgs &args, std::string &error, MatmulNf4Binding *out) {
  Validator v("matmul_nf4", args, error);
  MatmulNf4Binding d;
  std::vector<int64_t> w;
  if (!v.arity(5, 1) || !v.intAttr("block", &d.block, 0) || !v.intsAttr("weight_shape", &w) ||
      !v.flagAttr("transpose_b", &d.transposeB))
    return false;
  const TensorView &x = v.in(0), &y = v.out(0);
  if (!v.isFloat(x, "x")) return false;
  if (x.rank() < 1) return v.fail("x must have rank >= 1, got " + x.describe());
  if (w.size() != 2 || w[0] < 1 || w[1] < 1)
    return v.fail("attribute 'weight_shape' must be two positive sizes");
  if (d.block < 1 || w[1] % d.block != 0)
    return v.fail("attribute 'block' (" + std::to_string(d.block) +
                  ") must divide the weight's last dimension (" + std::to_string(w[1]) + ")");
  d.k = d.transposeB ? w[1] : w[0];
  d.n = d.transposeB ? w[0] : w[1];
  if (x.dim(-1) != d.k)
    return v.fail("x " + x.describe() + " must end in the weight's K = " + std::to_string(d.k));
  int64_t numel = w[0] * w[1], groups = numel / d.block;
  if (!v.hasType(v.in(1), "codes", DType::U8, {(numel + 1) / 2}) ||
      !v.hasType(v.in(2), "absmax_q", DType::U8, {groups}) ||
      !v.hasType(v.in(3), "absmax_scale", DType::F32, {quant::nf4ScaleCount(groups)}) ||
      !v.isF32Scalar(v.in(4), "absmax_mean"))
    return false;
  std::vector<int64_t> shape(x.shape.begin(), x.shape.end() - 1);
  shape.push_back(d.n);
  if (!v.hasType(y, "y", x.dtype, shape) || !v.fitsInt(x, "x") || !v.fitsInt(y, "y"))
    return false;
  d.m = x.numel() / d.k;
  d.dtype = x.dtype;
  *out = d;
  return true;
}

} // namespace llmc::contracts
