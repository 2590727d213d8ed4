//===- MoE.h - binding contract of the mixture-of-experts kernels -*- C++ -*-===//
//
// What both backends check and derive when they bind moe_route,
// moe_route_grad, moe_dispatch, moe_combine, moe_combine_weight_grad and
// router_loss (dialects/LLM/MoEOps.td): N tokens, E experts, k copies per token, C
// columns. The CPU and CUDA factories call the bind functions and add only
// what is specific to their backend.
//
// Also here, so both backends compute them alike:
//  - the order in which moe_route picks experts (`routeBeats`): by logit
//    (softmax is monotone, so this is the order of the probabilities
//    without their rounding), NaN as −∞, ties to the lower expert index —
//    a strict total order, so a sequential scan and a warp's tree of
//    comparisons pick the same experts;
//    With sigmoid scores and a bias the order is that of σ(logit) + bias
//    (`routeKey`), each backend's σ in float from its own expf, so an
//    exact tie between two experts' keys may fall differently on CPU and
//    CUDA where their expf differ in the last bit;
//  - the order of moe_route's sums over tokens (prob_sum, z_sum):
//    chunks of kMoeRouteChunk tokens, each summed in token order from 0,
//    then the chunks' sums in chunk order from 0. Sums over tokens never
//    depend on the thread count; the backends differ only in the
//    probabilities they add (their exp), not in the order.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_MOE_H
#define LLMC_KERNELS_CONTRACTS_MOE_H

#include "common/HostDevice.h"
#include "common/RouterScore.h"
#include "kernels/Kernel.h"
#include "kernels/Validator.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace llmc::contracts {

/// moe_route and moe_route_grad: logits [tokens × experts], topK copies.
struct MoeRouteBinding {
  DType dtype = DType::F32; ///< of the logits (and dlogits)
  int64_t tokens = 0, experts = 0, topK = 0;
  bool normalize = false;
  RouterScore score = RouterScore::Softmax;
  double scale = 1.0; ///< the weights' factor (routed_scaling_factor)
  bool biased = false; ///< moe_route: a bias [experts] input is given
};
inline bool bindMoeRoute(const KernelArgs &args, std::string &error, MoeRouteBinding *out);
inline bool bindMoeRouteGrad(const KernelArgs &args, std::string &error, MoeRouteBinding *out);

/// moe_dispatch, moe_combine, moe_combine_weight_grad: tokens × topK copies
/// of rows of `width` columns.
struct MoeRowsBinding {
  DType dtype = DType::F32; ///< of x (dispatch) or ys (combine, weight grad)
  int64_t tokens = 0, topK = 0, width = 0;
  bool weighted = false; ///< a weights input is given
};
inline bool bindMoeDispatch(const KernelArgs &args, std::string &error, MoeRowsBinding *out);
inline bool bindMoeCombine(const KernelArgs &args, std::string &error, MoeRowsBinding *out);
inline bool bindMoeCombineWeightGrad(const KernelArgs &args, std::string &error,
                                     MoeRowsBinding *out);

/// router_loss: prob_sum and counts [experts], the two scales. Both
/// backends add the experts' products in order, in double, and round once.
struct RouterLossBinding {
  int64_t experts = 0;
  double auxScale = 0, zScale = 0;
};
inline bool bindRouterLoss(const KernelArgs &args, std::string &error, RouterLossBinding *out);

/// σ(x) in float, as both backends score a sigmoid router's experts.
LLMC_HOST_DEVICE inline float routerSigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

/// Tokens per chunk of moe_route's sums over tokens (see the file comment).
inline constexpr int64_t kMoeRouteChunk = 64;

/// Whether expert `a` (logit `la`) is picked before expert `b` (logit `lb`).
LLMC_HOST_DEVICE inline bool routeBeats(float la, int64_t a, float lb, int64_t b) {
  const float lo = -std::numeric_limits<float>::infinity();
  la = la == la ? la : lo;
  lb = lb == lb ? lb : lo;
  return la > lb || (la == lb && a < b);
}

//===----------------------------------------------------------------------===//
// Definitions
//===----------------------------------------------------------------------===//

namespace moe_impl {

/// Positions address the N·k copies as i32 (moe_route's outputs).
inline bool copiesFitI32(Validator &v, int64_t tokens, int64_t topK) {
  if (tokens * topK <= std::numeric_limits<int32_t>::max())
    return true;
  return v.fail(std::to_string(tokens) + " tokens × " + std::to_string(topK) +
                " copies exceed the i32 positions");
}

/// positions [tokens, k] of ids and, when given, weights f32 of its shape.
inline bool checkRouting(Validator &v, const TensorView &positions, const char *what,
                         int64_t tokens, const TensorView *weights, int64_t *topK) {
  if (!v.isIndex(positions, what) || !v.hasRank(positions, what, 2) ||
      !v.hasType(positions, what, positions.dtype, {tokens, positions.dim(1)}))
    return false;
  *topK = positions.dim(1);
  if (weights && !v.hasType(*weights, "weights", DType::F32, positions.shape))
    return false;
  return copiesFitI32(v, tokens, *topK);
}

/// ys [N·k, C] float for positions [N, k] (of ids); fills `out`.
inline bool checkCopies(Validator &v, const TensorView &ys, const TensorView &positions,
                        MoeRowsBinding *out) {
  if (!v.isFloat(ys, "ys") || !v.hasRank(ys, "ys", 2) || !v.isIndex(positions, "positions") ||
      !v.hasRank(positions, "positions", 2))
    return false;
  const int64_t tokens = positions.dim(0), topK = positions.dim(1);
  if (!v.hasType(ys, "ys", ys.dtype, {tokens * topK, ys.dim(1)}))
    return false;
  *out = {ys.dtype, tokens, topK, ys.dim(1), false};
  return copiesFitI32(v, tokens, topK);
}

/// logits [N, E] float; fills the shape and the scoring of `out`.
inline bool checkLogits(Validator &v, MoeRouteBinding *out) {
  const TensorView &logits = v.in(0);
  int64_t score = 0;
  if (!v.isFloat(logits, "logits") || !v.hasRank(logits, "logits", 2) ||
      !v.flagAttr("normalize", &out->normalize) || !v.intAttr("score", &score, 0) ||
      !v.floatAttr("scale", &out->scale, 1.0))
    return false;
  if (score != static_cast<int64_t>(RouterScore::Softmax) &&
      score != static_cast<int64_t>(RouterScore::Sigmoid))
    return v.fail("attribute 'score' must be 0 (softmax) or 1 (sigmoid), got " +
                  std::to_string(score));
  if (!(out->scale > 0) || out->scale > std::numeric_limits<double>::max())
    return v.fail("attribute 'scale' must be a finite number > 0, got " +
                  std::to_string(out->scale));
  out->score = static_cast<RouterScore>(score);
  out->dtype = logits.dtype;
  out->tokens = logits.dim(0);
  out->experts = logits.dim(1);
  return true;
}

/// moe_route's optional bias [E] (f32), which needs sigmoid scores.
inline bool checkBias(Validator &v, const KernelArgs &args, MoeRouteBinding *out) {
  out->biased = args.inputs.size() == 2;
  if (!out->biased)
    return true;
  if (out->score != RouterScore::Sigmoid)
    return v.fail("a bias needs attribute 'score' = 1 (sigmoid)");
  return v.hasType(v.in(1), "bias", DType::F32, {out->experts});
}

} // namespace moe_impl
using namespace moe_impl;

inline bool bindMoeRoute(const KernelArgs &args, std::string &error, MoeRouteBinding *out) {
  Validator v("moe_route", args, error);
  if (!v.arity(1, 2, 7) || !checkLogits(v, out) || !checkBias(v, args, out))
    return false;
  const int64_t n = out->tokens, e = out->experts;
  if (!v.attrs().hasInt("top_k"))
    return v.fail("missing int attribute 'top_k'");
  if (!v.intAttr("top_k", &out->topK, 0))
    return false;
  const int64_t k = out->topK;
  if (k < 1 || k > e)
    return v.fail("attribute 'top_k' must be in [1, " + std::to_string(e) + "] for " +
                  std::to_string(e) + " experts, got " + std::to_string(k));
  return copiesFitI32(v, n, k) && v.hasType(v.out(0), "weights", DType::F32, {n, k}) &&
         v.hasType(v.out(1), "experts", DType::I32, {n, k}) &&
         v.hasType(v.out(2), "positions", DType::I32, {n, k}) &&
         v.hasType(v.out(3), "offsets", DType::I32, {e + 1}) &&
         v.hasType(v.out(4), "prob_sum", DType::F32, {e}) &&
         v.hasType(v.out(5), "counts", DType::F32, {e}) && v.isF32Scalar(v.out(6), "z_sum");
}

inline bool bindMoeRouteGrad(const KernelArgs &args, std::string &error, MoeRouteBinding *out) {
  Validator v("moe_route_grad", args, error);
  if (!v.arity(5, 1) || !checkLogits(v, out))
    return false;
  const TensorView &logits = v.in(0);
  return checkRouting(v, v.in(1), "experts", out->tokens, nullptr, &out->topK) &&
         v.hasType(v.in(2), "dweights", DType::F32, v.in(1).shape) &&
         v.hasType(v.in(3), "dprob_sum", DType::F32, {out->experts}) &&
         v.isF32Scalar(v.in(4), "dz_sum") &&
         v.hasType(v.out(0), "dlogits", logits.dtype, logits.shape);
}

inline bool bindMoeDispatch(const KernelArgs &args, std::string &error, MoeRowsBinding *out) {
  Validator v("moe_dispatch", args, error);
  if (!v.arity(2, 3, 1))
    return false;
  const TensorView &x = v.in(0);
  const TensorView *weights = args.inputs.size() == 3 ? &v.in(2) : nullptr;
  if (!v.isFloat(x, "x") || !v.hasRank(x, "x", 2))
    return false;
  int64_t topK;
  if (!checkRouting(v, v.in(1), "positions", x.dim(0), weights, &topK))
    return false;
  *out = {x.dtype, x.dim(0), topK, x.dim(1), weights != nullptr};
  return v.hasType(v.out(0), "out", x.dtype, {x.dim(0) * topK, x.dim(1)});
}

inline bool bindMoeCombine(const KernelArgs &args, std::string &error, MoeRowsBinding *out) {
  Validator v("moe_combine", args, error);
  if (!v.arity(2, 3, 1) || !checkCopies(v, v.in(0), v.in(1), out))
    return false;
  out->weighted = args.inputs.size() == 3;
  if (out->weighted && !v.hasType(v.in(2), "weights", DType::F32, v.in(1).shape))
    return false;
  return v.hasType(v.out(0), "y", out->dtype, {out->tokens, out->width});
}

inline bool bindMoeCombineWeightGrad(const KernelArgs &args, std::string &error,
                                     MoeRowsBinding *out) {
  Validator v("moe_combine_weight_grad", args, error);
  return v.arity(3, 1) && checkCopies(v, v.in(0), v.in(1), out) &&
         v.hasType(v.in(2), "dy", out->dtype, {out->tokens, out->width}) &&
         v.hasType(v.out(0), "dweights", DType::F32, v.in(1).shape);
}

inline bool bindRouterLoss(const KernelArgs &args, std::string &error, RouterLossBinding *out) {
  Validator v("router_loss", args, error);
  if (!v.arity(3, 1) || !v.hasRank(v.in(0), "prob_sum", 1))
    return false;
  const int64_t e = v.in(0).dim(0);
  if (!v.hasType(v.in(0), "prob_sum", DType::F32, {e}) ||
      !v.hasType(v.in(1), "counts", DType::F32, {e}) || !v.isF32Scalar(v.in(2), "z_sum") ||
      !v.isF32Scalar(v.out(0), "loss") || !v.floatAttr("aux_scale", &out->auxScale) ||
      !v.floatAttr("z_scale", &out->zScale))
    return false;
  out->experts = e;
  return true;
}

} // namespace llmc::contracts

#endif
