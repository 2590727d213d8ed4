//===- AdamW.h - binding contract of adamw ----------------------*- C++ -*-===//
//
// What both backends check and derive when they bind adamw: the
// hyperparameter attributes (shared with adamw8bit) and an f32 or bf16
// param with grad, m and v of its type, f32 scalars lr and step, an
// optional f32 scalar norm for gradient clipping and, after it, an optional
// f32 scalar loss scale (fp16) the gradients and norm are multiplied by. The CPU and CUDA factories
// call bindAdamW and add only what is specific to their backend.
// multi_tensor_adamw (llmc-fuse's multi-tensor-adamw) is adamw over a list
// of tensors, each with an optional cast of its updated parameter.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_ADAMW_H
#define LLMC_KERNELS_CONTRACTS_ADAMW_H

#include "kernels/Kernel.h"
#include "kernels/Validator.h"

#include <cstdint>
#include <string>
#include <vector>

namespace llmc {
class Validator;
} // namespace llmc

namespace llmc::contracts {

/// `beta1`, `beta2`, `epsilon`, `weight_decay`, `max_grad_norm`: the
/// attributes of both AdamW kernels.
struct AdamWHyperparams {
  double beta1 = 0, beta2 = 0, epsilon = 0, weightDecay = 0, maxGradNorm = 0;
};
/// Reads and checks the AdamW attributes; false (with the validator's error
/// set) when one is missing or bad.
inline bool readAdamWHyperparams(Validator &v, AdamWHyperparams *out);

struct AdamWBinding {
  DType dtype = DType::F32; ///< of param, grad, m and v
  int64_t numel = 0;
  bool hasNorm = false; ///< the optional seventh input is bound
  bool hasLossScale = false; ///< the optional eighth input is bound
  AdamWHyperparams hyper;
};
inline bool bindAdamW(const KernelArgs &args, std::string &error, AdamWBinding *out);

/// One tensor of a multi_tensor_adamw call: adamw's param, grad, m, v and
/// results, and where its cast goes.
struct MultiTensorAdamWTensor {
  DType param = DType::F32; ///< of param, m, v and their results
  DType grad = DType::F32; ///< any float type (read as its widening to f32)
  int64_t numel = 0;
  bool decay = true; ///< weight_decay applies (else 0)
  int64_t cast = -1; ///< output index of its cast, or -1
  DType castTo = DType::F32;
};

/// multi_tensor_adamw: inputs params[N], grads[N], m[N], v[N], lr, step,
/// optional norm, optional loss_scale (`operand_segments` says which, as
/// the llm op's operand segments); outputs params'[N], m'[N], v'[N], then
/// the casts of `cast_of`; attributes adamw's, with `decay` (0/1 per
/// tensor) and `cast_of`.
struct MultiTensorAdamWBinding {
  std::vector<MultiTensorAdamWTensor> tensors;
  bool hasNorm = false, hasLossScale = false;
  AdamWHyperparams hyper; ///< weightDecay: that of the tensors with decay
  /// Input indices of lr, step and the optional scalars.
  size_t lr = 0, step = 0, norm = 0, lossScale = 0;
};
inline bool bindMultiTensorAdamW(const KernelArgs &args, std::string &error,
                                 MultiTensorAdamWBinding *out);

//===----------------------------------------------------------------------===//
// Definitions
//===----------------------------------------------------------------------===//

inline bool readAdamWHyperparams(Validator &v, AdamWHyperparams *out) {
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

inline bool bindAdamW(const KernelArgs &args, std::string &error, AdamWBinding *out) {
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

namespace adam_w_impl {

/// The operand segments of multi_tensor_adamw: N of each of the four
/// tensor lists, lr, step, and 0/1 norm and loss scale.
inline bool readSegments(Validator &v, size_t inputs, int64_t *n, bool *norm, bool *lossScale) {
  std::vector<int64_t> segments;
  if (!v.intsAttr("operand_segments", &segments))
    return false;
  if (segments.size() != 8 || segments[0] < 1 || segments[1] != segments[0] ||
      segments[2] != segments[0] || segments[3] != segments[0] || segments[4] != 1 ||
      segments[5] != 1 || segments[6] < 0 || segments[6] > 1 || segments[7] < 0 ||
      segments[7] > segments[6])
    return v.fail("attribute 'operand_segments' must be [N, N, N, N, 1, 1, norm 0/1, "
                  "loss_scale 0/1 (only with norm)] with N >= 1");
  int64_t total = 0;
  for (int64_t s : segments) total += s;
  if (static_cast<size_t>(total) != inputs)
    return v.fail("attribute 'operand_segments' counts " + std::to_string(total) +
                  " inputs, the call has " + std::to_string(inputs));
  *n = segments[0];
  *norm = segments[6] == 1;
  *lossScale = segments[7] == 1;
  return true;
}

} // namespace adam_w_impl
using namespace adam_w_impl;

inline bool bindMultiTensorAdamW(const KernelArgs &args, std::string &error,
                                 MultiTensorAdamWBinding *out) {
  Validator v("multi_tensor_adamw", args, error);
  MultiTensorAdamWBinding b;
  int64_t n = 0;
  if (!readSegments(v, args.inputs.size(), &n, &b.hasNorm, &b.hasLossScale) ||
      !readAdamWHyperparams(v, &b.hyper))
    return false;
  std::vector<int64_t> decay, castOf;
  if (!v.intsAttr("decay", &decay) || !v.intsAttr("cast_of", &castOf))
    return false;
  if (decay.size() != static_cast<size_t>(n))
    return v.fail("attribute 'decay' must hold one 0 or 1 per tensor (" + std::to_string(n) + ")");
  if (args.outputs.size() != static_cast<size_t>(3 * n) + castOf.size())
    return v.fail("expects " + std::to_string(3 * n + castOf.size()) +
                  " outputs (params', m', v' of " + std::to_string(n) + " tensors and " +
                  std::to_string(castOf.size()) + " casts), got " +
                  std::to_string(args.outputs.size()));
  b.lr = static_cast<size_t>(4 * n);
  b.step = b.lr + 1;
  b.norm = b.step + 1;
  b.lossScale = b.norm + 1;
  if (!v.isF32Scalar(v.in(b.lr), "lr") || !v.isF32Scalar(v.in(b.step), "step") ||
      (b.hasNorm && !v.isF32Scalar(v.in(b.norm), "norm")) ||
      (b.hasLossScale && !v.isF32Scalar(v.in(b.lossScale), "loss_scale")))
    return false;
  for (int64_t i = 0; i < n; ++i) {
    const std::string at = " " + std::to_string(i);
    const TensorView &p = v.in(i);
    const std::string param = "param" + at, grad = "grad" + at, m = "m" + at, vv = "v" + at;
    const std::string param1 = "param'" + at, m1 = "m'" + at, v1 = "v'" + at;
    const TensorView &g = v.in(n + i);
    if (!v.isFloat(p, param.c_str()) || !v.isFloat(g, grad.c_str()) ||
        !v.hasType(g, grad.c_str(), g.dtype, p.shape) ||
        !v.hasType(v.in(2 * n + i), m.c_str(), p.dtype, p.shape) ||
        !v.hasType(v.in(3 * n + i), vv.c_str(), p.dtype, p.shape) ||
        !v.hasType(v.out(i), param1.c_str(), p.dtype, p.shape) ||
        !v.hasType(v.out(n + i), m1.c_str(), p.dtype, p.shape) ||
        !v.hasType(v.out(2 * n + i), v1.c_str(), p.dtype, p.shape))
      return false;
    if (decay[i] != 0 && decay[i] != 1)
      return v.fail("attribute 'decay' must hold one 0 or 1 per tensor (" + std::to_string(n) +
                    ")");
    b.tensors.push_back({p.dtype, g.dtype, p.numel(), decay[i] == 1, -1, DType::F32});
  }
  for (size_t k = 0; k < castOf.size(); ++k) {
    int64_t i = castOf[k];
    if (i < 0 || i >= n || (k > 0 && i <= castOf[k - 1]))
      return v.fail("attribute 'cast_of' must list increasing tensor indices below " +
                    std::to_string(n));
    MultiTensorAdamWTensor &t = b.tensors[static_cast<size_t>(i)];
    const TensorView &c = v.out(static_cast<size_t>(3 * n) + k);
    const std::string what = "cast " + std::to_string(k);
    if (!v.isFloat(c, what.c_str()) || !v.hasType(c, what.c_str(), c.dtype, v.in(i).shape))
      return false;
    if (t.param != DType::F32)
      return v.fail(what + ": only an f32 parameter (a master) is cast, tensor " +
                    std::to_string(i) + " is " + dtypeName(t.param));
    t.cast = 3 * n + static_cast<int64_t>(k);
    t.castTo = c.dtype;
  }
  *out = std::move(b);
  return true;
}

} // namespace llmc::contracts

#endif
