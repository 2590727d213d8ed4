//===- DequantizeNf4.cpp - binding contract of qat_dequantize_nf4 ---------===//
//
// Part of llmc: see DequantizeNf4.h.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/DequantizeNf4.h"
#include "common/QuantScheme.h"
#include "kernels/Validator.h"

namespace llmc::contracts {

bool bindDequantizeNf4(const KernelArgs &args, std::string &error, DequantizeNf4Binding *out) {
  Validator v("qat_dequantize_nf4", args, error);
  int64_t block = 0;
  if (!v.arity(4, 1) || !v.intAttr("block", &block, 0)) return false;
  const TensorView &result = v.out(0);
  if (!v.isFloat(result, "result")) return false;
  if (block < 1 || result.rank() < 1 || result.shape.back() % block != 0)
    return v.fail("attribute 'block' (" + std::to_string(block) +
                  ") must divide the last dimension of the result " + result.describe());
  int64_t n = result.numel(), groups = n / block;
  int64_t scales = quant::nf4ScaleCount(groups);
  if (!v.hasType(v.in(0), "codes", DType::U8, {(n + 1) / 2}) ||
      !v.hasType(v.in(1), "absmax_q", DType::U8, {groups}) ||
      !v.hasType(v.in(2), "absmax_scale", DType::F32, {scales}) ||
      !v.isF32Scalar(v.in(3), "absmax_mean"))
    return false;
  out->dtype = result.dtype;
  out->block = block;
  out->numel = n;
  out->groups = groups;
  out->scales = scales;
  return true;
}

} // namespace llmc::contracts
