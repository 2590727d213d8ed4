//===- AdamW.cpp - binding contract of adamw ------------------------------===//
//
// The checks and derivations kernels/cpu/adamw.cpp and kernels/cuda/adamw.cu
// share, and the attributes adamw8bit reads the same way.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/AdamW.h"

#include "kernels/Validator.h"

namespace llmc::contracts {

bool readAdamWHyperparams(Validator &v, AdamWHyperparams *out) {
  AdamWHyperparams c;
  if (!v.floatAttr("beta1", &c.beta1) || !v.floatAttr("beta2", &c.beta2) ||
      !v.floatAttr("epsilon", &c.epsilon) || !v.floatAttr("weight_decay", &c.weightDecay) ||
      !v.floatAttr("max_grad_norm", &c.maxGradNorm))
    return false;
  if (!(c.beta1 >= 0.0 && c.beta1 < 1.0) || !(c.beta2 >= 0.0 && c.beta2 < 1.0))
    return v.fail("attributes 'beta1' and 'beta2' must be in [0, 1)");
  *out = c;
  return true;
}

bool bindAdamW(const KernelArgs &args, std::string &error, AdamWBinding *out) {
  Validator v("adamw", args, error);
  AdamWHyperparams c;
  if (!v.arity(6, 8, 3) || !readAdamWHyperparams(v, &c))
    return false;
  const TensorView &p = v.in(0);
  if (!v.isFloat(p, "param") || !v.hasType(v.in(1), "grad", p.dtype, p.shape) ||
      !v.hasType(v.in(2), "m", p.dtype, p.shape) || !v.hasType(v.in(3), "v", p.dtype, p.shape) ||
      !v.isF32Scalar(v.in(4), "lr") || !v.isF32Scalar(v.in(5), "step") ||
      (args.inputs.size() > 6 && !v.isF32Scalar(v.in(6), "norm")) ||
      (args.inputs.size() > 7 && !v.isF32Scalar(v.in(7), "loss_scale")) ||
      !v.hasType(v.out(0), "param'", p.dtype, p.shape) ||
      !v.hasType(v.out(1), "m'", p.dtype, p.shape) || !v.hasType(v.out(2), "v'", p.dtype, p.shape))
    return false;
  *out = {p.dtype, p.numel(), args.inputs.size() > 6, args.inputs.size() > 7, c};
  return true;
}

} // namespace llmc::contracts
