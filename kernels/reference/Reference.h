//===- Reference.h - naive double-precision kernel references -------------===//
//
// The oracle: one textbook function per kernel of docs/kernels.md, in
// double, written for obviousness rather than speed (attention materialises
// the full score matrix, softmax is a plain stable log-sum-exp). The kernel
// tests compare every backend against these, and the compiler's IR
// interpreter evaluates llm ops with them (finite-difference checks of the
// autodiff pass).
//
// One source per concept, named as in kernels/cpu and kernels/cuda
// (reference/activation.cpp defines what cpu/activation.cpp and
// cuda/activation.cu compute); this one header declares them all, grouped
// by that file, since together they need nothing beyond the standard
// library and common/QuantScheme.h.
//
// No dependency beyond the standard library: no OpenMP, BLAS or MLIR.
// Integer tensors (ids, targets, segment ids) are held as doubles with
// integral values. Arguments are assumed verified (the llm op verifiers);
// an inconsistent call prints the reason and aborts, because the compiler
// links this without exceptions.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_REFERENCE_REFERENCE_H
#define LLMC_KERNELS_REFERENCE_REFERENCE_H

#include "common/QuantScheme.h"
#include "common/RopeScaling.h"

#include <cstdint>
#include <vector>

namespace llmc::ref {

//===- RefTensor.cpp ------------------------------------------------------===//

/// A dense row-major tensor of doubles.
struct RefTensor {
  std::vector<int64_t> shape;
  std::vector<double> data;

  /// A zero tensor of `shape`.
  static RefTensor zeros(std::vector<int64_t> shape);

  int64_t numel() const;
};

//===- matmul.cpp ---------------------------------------------------------===//

/// c = a·b over the last two dims; a 2-D b is shared by every leading index
/// of a, otherwise b has a's leading dims. `transposeX` swaps the last two
/// dims of that operand.
RefTensor matmul(const RefTensor &a, const RefTensor &b, bool transposeA, bool transposeB);

//===- matmul_nf4.cpp -----------------------------------------------------===//

/// The weight of `shape` that NF4 storage holds (common/QuantScheme.h):
/// `codes` and `absmaxQ` hold byte values (an absmax level is the byte read
/// as int8, or as an E4M3 number with `absmaxFormat` Fp8E4M3), in blocks of
/// `block` elements of the last dimension.
RefTensor dequantizeNf4(const RefTensor &codes, const RefTensor &absmaxQ,
                        const RefTensor &absmaxScale, double absmaxMean,
                        const std::vector<int64_t> &shape, int64_t block,
                        quant::AbsmaxFormat absmaxFormat = quant::AbsmaxFormat::Int8);
/// x · W, or x · Wᵀ with `transposeB`, W = dequantizeNf4(..., weightShape,
/// block, absmaxFormat): x is [..., K], the result [..., N].
RefTensor matmulNf4(const RefTensor &x, const RefTensor &codes, const RefTensor &absmaxQ,
                    const RefTensor &absmaxScale, double absmaxMean,
                    const std::vector<int64_t> &weightShape, int64_t block, bool transposeB,
                    quant::AbsmaxFormat absmaxFormat = quant::AbsmaxFormat::Int8);

//===- matmul_int.cpp -----------------------------------------------------===//

/// The weight of `shape` ([rows, cols]) that int8/int4/fp8 storage holds
/// (kernels/IntWeight.h): `codes` holds byte values, `bits` 8 or 4 (with
/// `fp8`, 8-bit E4M3 bit patterns); one scale (and zero point, when
/// `zeroPoint` has data) per `block` elements of the last dimension
/// (block > 0), per index of `channelAxis` (>= 0), or for all of it.
RefTensor dequantizeInt(const RefTensor &codes, const RefTensor &scale, const RefTensor &zeroPoint,
                        const std::vector<int64_t> &shape, int bits, int64_t block,
                        int64_t channelAxis, bool fp8 = false);
/// x · W, or x · Wᵀ with `transposeB`, W = dequantizeInt(...).
RefTensor matmulInt(const RefTensor &x, const RefTensor &codes, const RefTensor &scale,
                    const RefTensor &zeroPoint, const std::vector<int64_t> &weightShape, int bits,
                    int64_t block, int64_t channelAxis, bool transposeB, bool fp8 = false);
/// The value of OCP E4M3 ("FN") code `byte`, from the format's definition
/// (sign, 4 exponent bits of bias 7, 3 mantissa bits; S.1111.111 is NaN).
double e4m3Value(int64_t byte);

//===- binary.cpp ---------------------------------------------------------===//

/// lhs + broadcast(rhs); rhs's shape is a suffix of lhs's.
RefTensor add(const RefTensor &lhs, const RefTensor &rhs);
/// lhs · broadcast(rhs); rhs's shape is a suffix of lhs's.
RefTensor mul(const RefTensor &lhs, const RefTensor &rhs);
RefTensor scale(const RefTensor &x, double factor);

//===- activation.cpp -----------------------------------------------------===//

/// GELU, tanh approximation (GPT-2).
RefTensor gelu(const RefTensor &x);
RefTensor geluGrad(const RefTensor &x, const RefTensor &dy);
RefTensor silu(const RefTensor &x);
RefTensor siluGrad(const RefTensor &x, const RefTensor &dy);
/// 1 / (1 + exp(−x)) and its derivative σ(1 − σ) times dy.
RefTensor sigmoid(const RefTensor &x);
RefTensor sigmoidGrad(const RefTensor &x, const RefTensor &dy);
/// silu(gate) · up.
RefTensor swiglu(const RefTensor &gate, const RefTensor &up);
/// {dgate, dup}.
std::vector<RefTensor> swigluGrad(const RefTensor &gate, const RefTensor &up, const RefTensor &dy);
/// gelu(gate) · up (Gemma's MLP) and its {dgate, dup}.
RefTensor geglu(const RefTensor &gate, const RefTensor &up);
std::vector<RefTensor> gegluGrad(const RefTensor &gate, const RefTensor &up, const RefTensor &dy);
/// cap·tanh(x / cap) (Gemma 2's final logit soft-cap) and its backward
/// dy·(1 − tanh²(x / cap)).
RefTensor softcap(const RefTensor &x, double cap);
RefTensor softcapGrad(const RefTensor &x, const RefTensor &dy, double cap);

//===- dropout.cpp --------------------------------------------------------===//

/// Inverted dropout with the mask of kernels/DropoutHash.h. With
/// `globalShape` (and `offsets`, where x starts in it) non-empty, an
/// element's mask index is its index in the global tensor.
RefTensor dropout(const RefTensor &x, double rate, int64_t seed, int64_t step,
                  const std::vector<int64_t> &globalShape = {},
                  const std::vector<int64_t> &offsets = {});

//===- fused_elementwise.cpp ----------------------------------------------===//

/// The results of a common/ElementwiseProgram.h program over `shape`:
/// each input has `shape` or a suffix of it; `step` keys dropout's mask,
/// and `globalShape` and `offsets` (empty: `shape` is the whole tensor)
/// place its element index as dropout's do.
std::vector<RefTensor> fusedElementwise(const std::vector<RefTensor> &inputs,
                                        const std::vector<int64_t> &shape,
                                        const std::vector<int64_t> &program,
                                        const std::vector<int64_t> &yields, int64_t step,
                                        const std::vector<int64_t> &globalShape = {},
                                        const std::vector<int64_t> &offsets = {});

//===- layernorm.cpp ------------------------------------------------------===//

RefTensor layernorm(const RefTensor &x, const RefTensor &gamma, const RefTensor &beta, double eps);
/// {dx, dgamma, dbeta}.
std::vector<RefTensor> layernormGrad(const RefTensor &x, const RefTensor &gamma,
                                     const RefTensor &dy, double eps);
/// add_layernorm: {a + b, layernorm(a + b)}; with `bias` ([C]) the sum is
/// a + (b + bias).
std::vector<RefTensor> addLayernorm(const RefTensor &a, const RefTensor &b, const RefTensor &gamma,
                                    const RefTensor &beta, double eps,
                                    const RefTensor *bias = nullptr);
/// layernorm_grad_add: {dx + addend, dgamma, dbeta}.
std::vector<RefTensor> layernormGradAdd(const RefTensor &x, const RefTensor &gamma,
                                        const RefTensor &dy, const RefTensor &addend, double eps);

//===- rmsnorm.cpp --------------------------------------------------------===//

RefTensor rmsnorm(const RefTensor &x, const RefTensor &gamma, double eps);
/// {dx, dgamma}.
std::vector<RefTensor> rmsnormGrad(const RefTensor &x, const RefTensor &gamma, const RefTensor &dy,
                                   double eps);
/// add_rmsnorm: {a + b, rmsnorm(a + b)}.
std::vector<RefTensor> addRmsnorm(const RefTensor &a, const RefTensor &b, const RefTensor &gamma,
                                  double eps);
/// rmsnorm_grad_add: {dx + addend, dgamma}.
std::vector<RefTensor> rmsnormGradAdd(const RefTensor &x, const RefTensor &gamma,
                                      const RefTensor &dy, const RefTensor &addend, double eps);

//===- embedding.cpp ------------------------------------------------------===//

/// Rows of table [V, C] picked by ids (any shape S): S × [C]. With
/// `vocabSize` > 0 the table is rows [rowOffset, rowOffset + V) of a
/// vocabulary of that size and other ids give zero rows.
RefTensor embedding(const RefTensor &table, const RefTensor &ids, int64_t rowOffset = 0,
                    int64_t vocabSize = 0);
/// dtable [rows, C]: zeros, then the rows of dy scatter-added at ids (only
/// ids of this shard's rows when vocabSize > 0).
RefTensor embeddingGrad(const RefTensor &ids, const RefTensor &dy, int64_t rows,
                        int64_t rowOffset = 0, int64_t vocabSize = 0);

//===- rope.cpp -----------------------------------------------------------===//

/// Rotary embedding of x [B, T, H, D], half-split pairs (i, i + D/2) rotated
/// by t·theta^(−2i/D), that rate rescaled by `scaling` when it is set
/// (Llama 3, common/RopeScaling.h), t = positions[b, t] when given (may be
/// null; outside [0, T): NaN); `inverse` negates the angle.
RefTensor rope(const RefTensor &x, const RefTensor *positions, double theta, bool inverse,
               const RopeScaling &scaling = {});

//===- attention.cpp ------------------------------------------------------===//

/// softmax(scale·q·kᵀ + mask)·v with q [B,T,H,D], k, v [B,S,KV,D]; query head
/// h reads kv head h/(H/KV). Returns {out [B,T,H,D], lse [B,H,T]}.
/// `segmentIds` [B,T] (may be null) restricts keys to equal ids; `causal`
/// to keys j <= i, and a `window` > 0 further to i − window < j. A
/// `softcap` c > 0 makes each score s = scale·q·k into c·tanh(s / c).
std::vector<RefTensor> attention(const RefTensor &q, const RefTensor &k, const RefTensor &v,
                                 const RefTensor *segmentIds, double scale, bool causal,
                                 int64_t window = 0, double softcap = 0.0);
/// {dq, dk, dv}, using the given forward `out` and `lse` as the kernels do:
/// P = exp(scale·q·kᵀ − lse), dS = P ∘ (dout·vᵀ − rowsum(dout ∘ out))
/// (capped: P of the capped scores, dS times 1 − tanh²).
std::vector<RefTensor> attentionGrad(const RefTensor &q, const RefTensor &k, const RefTensor &v,
                                     const RefTensor &out, const RefTensor &lse,
                                     const RefTensor &dout, const RefTensor *segmentIds,
                                     double scale, bool causal, int64_t window = 0,
                                     double softcap = 0.0);

//===- paged_attention.cpp ------------------------------------------------===//
//
// A paged KV cache: pools [NB, P, KV, D] of pages of P tokens, a block table
// [B, M] naming the pages of each sequence, positions [B, T] naming each
// token's place in its sequence (negative: padding). Token position p of
// sequence b lives at page block_table[b, p/P], slot p % P; a position whose
// page lies past the table (p/P >= M) or outside the pool is unaddressable.

/// cache with the rows of new [B,T,KV,D] written at their tokens' slots;
/// padding and unaddressable positions write nothing.
RefTensor kvCacheWrite(const RefTensor &cache, const RefTensor &fresh, const RefTensor &blockTable,
                       const RefTensor &positions);
/// {codes, scales}: kvCacheWrite into a cache of `format`'s codes (Int8
/// or Fp8E4M3), codes [NB,P,KV,D] held as their values (int8: integers in
/// [-127, 127]; fp8_e4m3: E4M3 numbers) and scales [NB,P,KV]: each written
/// row of D values x gets s = absmax(x) / 127 (/ 448) and codes the
/// rounding of x / s, in fp32 as the kernels compute them
/// (common/KvCacheCodes.h; s = 0 and codes 0 for an all-zero row).
std::vector<RefTensor> kvCacheWriteCodes(const RefTensor &codes, const RefTensor &scales,
                                         const RefTensor &fresh, const RefTensor &blockTable,
                                         const RefTensor &positions, quant::Format format);
/// The values a cache of codes holds: code value · scale per slot and kv
/// head, the fp32 product the kernels take.
RefTensor dequantizeCache(const RefTensor &codes, const RefTensor &scales);
/// out [B,T,H,D]: query (b, t, h) at position p >= 0 attends to the keys of
/// sequence b at positions 0..p (with a `window` > 0, p − window + 1..p;
/// unaddressable ones left out), kv head h/(H/KV): softmax(scale·q·kᵀ)·v
/// (scores soft-capped as attention's with `softcap` > 0). Rows at p < 0
/// are 0.
RefTensor pagedAttention(const RefTensor &q, const RefTensor &kCache, const RefTensor &vCache,
                         const RefTensor &blockTable, const RefTensor &positions, double scale,
                         int64_t window = 0, double softcap = 0.0);

//===- cross_entropy.cpp --------------------------------------------------===//

/// Mean −log softmax(logits)[target] over targets != ignoreIndex (0 if none);
/// shape {}. With numClasses > 0 only the first numClasses columns are
/// classes: the rest (a padded vocabulary) are left out and get gradient 0.
RefTensor crossEntropy(const RefTensor &logits, const RefTensor &targets, int64_t ignoreIndex,
                       int64_t numClasses = 0);
RefTensor crossEntropyGrad(const RefTensor &logits, const RefTensor &targets, double dloss,
                           int64_t ignoreIndex, int64_t numClasses = 0);

//===- linear_cross_entropy.cpp -------------------------------------------===//

/// The LM head and its loss: {loss} of logits = h·wᵀ (transposeB, w [V, D])
/// or h·w (w [D, V]); with dloss also {loss, dh, dw}. numClasses as in
/// crossEntropy.
std::vector<RefTensor> linearCrossEntropy(const RefTensor &h, const RefTensor &w,
                                          const RefTensor &targets, bool transposeB,
                                          int64_t ignoreIndex, const double *dloss,
                                          int64_t numClasses = 0);
/// A vocabulary shard's head (w holds classes [classOffset, classOffset + V)
/// of numClasses): {max, Σ exp(logit − max), the target's logit or 0} per
/// row, reduce_max and crossEntropyPartial on the shard's logits.
std::vector<RefTensor> linearCrossEntropyPartial(const RefTensor &h, const RefTensor &w,
                                                 const RefTensor &targets, bool transposeB,
                                                 int64_t classOffset, int64_t numClasses,
                                                 int64_t ignoreIndex);
/// Its backward: {dh, dw} of crossEntropyPartialGrad on the shard's logits.
std::vector<RefTensor> linearCrossEntropyPartialGrad(
    const RefTensor &h, const RefTensor &w, const RefTensor &targets, const RefTensor &shift,
    const RefTensor &dsumexp, const RefTensor &dtargetLogit, bool transposeB,
    int64_t classOffset, int64_t numClasses, int64_t ignoreIndex);

//===- linear.cpp ---------------------------------------------------------===//

/// The matmul with its epilogue: {x·w + bias + residual} (transposeB:
/// x·wᵀ), each term where given (null: absent), with gelu {gelu(x·w +
/// bias), x·w + bias}; x [..., K], bias [N], residual [..., N].
std::vector<RefTensor> linear(const RefTensor &x, const RefTensor &w, const RefTensor *bias,
                              const RefTensor *residual, bool transposeB, bool gelu);
/// The weight and bias gradients of x·w + bias: {xᵀ·dy [K, N], dy's rows
/// summed [N]}; x [..., K] and dy [..., N] with as many rows.
std::vector<RefTensor> linearWeightGrad(const RefTensor &x, const RefTensor &dy);

//===- reduce_max.cpp -----------------------------------------------------===//

/// Maximum over the last dimension.
/// Row maxima over the last dimension; with numClasses > 0, x holds classes
/// [classOffset, classOffset + n) and those past numClasses are padding.
RefTensor reduceMax(const RefTensor &x, int64_t classOffset = 0, int64_t numClasses = 0);

//===- cross_entropy_sharded.cpp ------------------------------------------===//

/// One vocabulary shard (classes [classOffset, classOffset + V) of
/// numClasses) of a cross-entropy: {Σ_j exp(logits_j − shift), the
/// target's logit or 0}, per row.
std::vector<RefTensor> crossEntropyPartial(const RefTensor &logits, const RefTensor &targets,
                                           const RefTensor &shift, int64_t classOffset,
                                           int64_t numClasses, int64_t ignoreIndex);
RefTensor crossEntropyPartialGrad(const RefTensor &logits, const RefTensor &targets,
                                  const RefTensor &shift, const RefTensor &dsumexp,
                                  const RefTensor &dtargetLogit, int64_t classOffset,
                                  int64_t numClasses, int64_t ignoreIndex);
/// Mean over non-ignored rows of log(sumexp) + shift − targetLogit; shape {}.
RefTensor crossEntropyFinish(const RefTensor &sumexp, const RefTensor &shift,
                             const RefTensor &targetLogit, const RefTensor &targets,
                             int64_t ignoreIndex);
/// {dsumexp, dshift, dtargetLogit}.
std::vector<RefTensor> crossEntropyFinishGrad(const RefTensor &sumexp, const RefTensor &targets,
                                              double dloss, int64_t ignoreIndex);

//===- shape.cpp ----------------------------------------------------------===//

/// out dim i = x dim permutation[i].
RefTensor transpose(const RefTensor &x, const std::vector<int64_t> &permutation);
RefTensor slice(const RefTensor &x, const std::vector<int64_t> &offsets,
                const std::vector<int64_t> &sizes);
/// Zeros of `shape` with x placed at `offsets`.
RefTensor pad(const RefTensor &x, const std::vector<int64_t> &offsets,
              const std::vector<int64_t> &shape);
/// Joined along `dim` (negative counts from the back).
RefTensor concat(const std::vector<RefTensor> &xs, int64_t dim);
/// Sum over the leading dims of x down to the suffix `shape`.
RefTensor reduceSum(const RefTensor &x, const std::vector<int64_t> &shape);

//===- global_norm.cpp ----------------------------------------------------===//

/// √(Σ x²) over every element of every input; shape {}.
RefTensor globalNorm(const std::vector<RefTensor> &xs);

//===- adamw.cpp ----------------------------------------------------------===//

/// One AdamW step (see llm.adamw); `gradNorm` may be null. `lossScale` is
/// the factor g and gradNorm carry (fp16 loss scaling). {p', m', v'}.
std::vector<RefTensor> adamw(const RefTensor &p, const RefTensor &g, const RefTensor &m,
                             const RefTensor &v, double lr, double step, const double *gradNorm,
                             double beta1, double beta2, double eps, double weightDecay,
                             double maxGradNorm, double lossScale = 1.0);

/// multi_tensor_adamw: adamw() on each tensor i of `params` (weight decay
/// `weightDecay` where decay[i], else 0), then the updated parameters of
/// `castOf` again (a cast is exact in double). Results as the kernel's
/// outputs: the p's, the m's, the v's, the casts.
std::vector<RefTensor> multiTensorAdamw(const std::vector<RefTensor> &params,
                                        const std::vector<RefTensor> &grads,
                                        const std::vector<RefTensor> &ms,
                                        const std::vector<RefTensor> &vs, double lr,
                                        double step, const double *gradNorm, double beta1,
                                        double beta2, double eps, double weightDecay,
                                        double maxGradNorm, double lossScale,
                                        const std::vector<int64_t> &decay,
                                        const std::vector<int64_t> &castOf);

//===- adamw8bit.cpp ------------------------------------------------------===//

/// One 8-bit AdamW step (see llm.adamw8bit and common/Adam8bit.h). Codes
/// are integral doubles. The stored state is decoded as the contract
/// defines it (table · absmax in fp32), the update is adamw() above in
/// double, and each new code is the nearest table entry to the exact
/// ratio m'/absmax' (ties to the lower index): the ideal code, from which a
/// kernel deciding on its fp32 ratio may differ by one step only where the
/// ratio lies within rounding of a midpoint. absmax' is left in double.
/// {p', m_codes', m_absmax', v_codes', v_absmax'}.
std::vector<RefTensor> adamw8bit(const RefTensor &p, const RefTensor &g, const RefTensor &mCodes,
                                 const RefTensor &mAbsmax, const RefTensor &vCodes,
                                 const RefTensor &vAbsmax, double lr, double step,
                                 const double *gradNorm, double beta1, double beta2, double eps,
                                 double weightDecay, double maxGradNorm,
                                 double lossScale = 1.0);

//===- fake_quant.cpp -----------------------------------------------------===//
//
// Quantization-aware training; the contract is common/QuantScheme.h.

/// Per group of `s`, [−min, max] over its elements: shape [G, 2]. A group
/// without elements observes [−inf, −inf] (the identity of the max that
/// combines ranges). With an outlier threshold in `s`, `columns` [C, 2]
/// (C = x's last dimension) is required and elements of outlier columns
/// are left out.
RefTensor quantObserve(const RefTensor &x, const quant::Scheme &s,
                       const RefTensor *columns = nullptr);
/// Quantize-dequantize of x with the per-group ranges `range` [G, 2]; the
/// grid (scale, zero point, x / scale) is decided in fp32 as the contract
/// says, so the result is the fp32 value, held in a double. Outlier columns
/// (with a threshold in `s`, from `columns`) are x unchanged.
RefTensor fakeQuant(const RefTensor &x, const RefTensor &range, const quant::Scheme &s,
                    const RefTensor *columns = nullptr);
/// dy where x is not clipped, 0 where it is (straight-through estimator);
/// dy throughout outlier columns.
RefTensor fakeQuantGrad(const RefTensor &x, const RefTensor &range, const RefTensor &dy,
                        const quant::Scheme &s, const RefTensor *columns = nullptr);
/// The value of fp8 `format` nearest v (v within the format's range, or
/// NaN); of two at the same distance, the one whose mantissa is even.
double nearestFp8(float v, quant::Format format);
/// Per group: observed where state is (0, 0), else
/// momentum·state + (1 − momentum)·observed. All [G, 2].
RefTensor quantEma(const RefTensor &state, const RefTensor &observed, double momentum);

//===- matmul_fp8.cpp -----------------------------------------------------===//

/// An fp8 GEMM operand: x's values in fp8 `format` and the scale they
/// multiply (values · scale is fakeQuant's per-tensor result).
struct Fp8Operand {
  RefTensor values;
  double scale = 0;
};
/// x quantized to `format` per tensor with the range [1, 2] of
/// qat.observe: scale = amax / fmax in fp32, values nearest x / scale
/// (saturated; all 0 when amax is not > 0).
Fp8Operand quantizeFp8(const RefTensor &x, const RefTensor &range, quant::Format format);
/// An fp8 operand with one scale per slice of its dimension 0 (or one).
struct Fp8Slices {
  RefTensor values;
  std::vector<double> scales;
};
/// x quantized to `format` as quantizeFp8 does, slice by slice of its
/// dimension 0 with range [G, 2] (G = 1: the whole tensor).
Fp8Slices quantizeFp8Slices(const RefTensor &x, const RefTensor &range, quant::Format format);
/// x [M, K] quantized as quantizeFp8 does, group by group of rows
/// (offsets [G + 1]) with range [G, 2]; rows past offsets[G] are 0.
Fp8Slices quantizeFp8RowGroups(const RefTensor &x, const RefTensor &range, const RefTensor &offsets,
                               quant::Format format);
/// The value of OCP E5M2 code `byte`, from the format's definition (sign,
/// 5 exponent bits of bias 15, 2 mantissa bits; exponent 31 is inf or NaN).
double e5m2Value(int64_t byte);
/// matmul(a.values, b.values) · a.scale · b.scale.
RefTensor matmulFp8(const Fp8Operand &a, const Fp8Operand &b, bool transposeA, bool transposeB);

//===- row_groups.cpp -----------------------------------------------------===//

/// Each group's range [G, 2]: the elementwise max of its rows' ranges
/// (rows [M, 2]); [0, 0] for an empty group; rows past offsets[G] left out.
RefTensor groupRanges(const RefTensor &rows, const RefTensor &offsets);
/// Each row's range [M, 2]: its group's (groups [G, 2]); [0, 0] past
/// offsets[G].
RefTensor rowRanges(const RefTensor &groups, const RefTensor &offsets, int64_t rows);

//===- delayed_scaling.cpp ------------------------------------------------===//

/// fp8 delayed scaling (common/DelayedScaling.h): the [1, 2] range a tensor
/// with current range `observed` ([1, 2]) is quantized with, from `state`
/// ([N + 1]: the range, then N amaxes) of a format whose largest value is
/// `fmax`; with G histories (`state` [G, N + 1], `observed` [G, 2]) the
/// [G, 2] ranges, history by history.
RefTensor delayedRange(const RefTensor &state, const RefTensor &observed, double fmax);
/// The state after recording `observed`'s amax (each history its row's).
RefTensor amaxHistory(const RefTensor &state, const RefTensor &observed, int64_t margin,
                      bool mostRecent);
/// `candidate` where `norm` is finite, else `state`.
RefTensor commitState(const RefTensor &state, const RefTensor &candidate, double norm);

//===- moe.cpp ------------------------------------------------------------===//

/// moe_route's scoring: softmax, or sigmoid with an optional bias [E]
/// (the choice only); the weights times `scale` either way.
struct RouterScoring {
  bool sigmoid = false;
  double scale = 1.0;
  const RefTensor *bias = nullptr;
};
/// llm.moe_route of logits [N, E]: weights, experts, positions, offsets,
/// prob_sum, counts, z_sum (dialects/LLM/MoEOps.td).
std::vector<RefTensor> moeRoute(const RefTensor &logits, int64_t k, bool normalize,
                                const RouterScoring &scoring = {});
/// dlogits of moe_route from the gradients of weights, prob_sum and z_sum.
RefTensor moeRouteGrad(const RefTensor &logits, const RefTensor &experts, const RefTensor &dweights,
                       const RefTensor &dprobSum, double dzSum, bool normalize,
                       const RouterScoring &scoring = {});
/// out[positions[n, j]] = weights[n, j]·x[n] (weights may be null: 1).
RefTensor moeDispatch(const RefTensor &x, const RefTensor &positions, const RefTensor *weights);
/// y[n] = Σ_j weights[n, j]·ys[positions[n, j]] (weights may be null: 1).
RefTensor moeCombine(const RefTensor &ys, const RefTensor &positions, const RefTensor *weights);
/// dw[n, j] = ⟨ys[positions[n, j]], dy[n]⟩.
RefTensor moeCombineWeightGrad(const RefTensor &ys, const RefTensor &positions,
                               const RefTensor &dy);
/// auxScale·Σₑ counts·probSum + zScale·zSum, a scalar.
RefTensor routerLoss(const RefTensor &probSum, const RefTensor &counts, double zSum,
                     double auxScale, double zScale);
//===- grouped_matmul.cpp -------------------------------------------------===//

/// Rows [offsets[g], offsets[g+1]) of x times slice g of the stacked
/// weights ([G, K, F], or [G, F, K] with transposeB); rows past offsets[G]
/// are zero.
RefTensor groupedMatmul(const RefTensor &x, const RefTensor &offsets, const RefTensor &weights,
                        bool transposeB);
/// Per group, stacked [G, K, F]: xᵀ·dy, or [G, F, K] dyᵀ·x with transposeB;
/// zeros for an empty group.
RefTensor groupedMatmulWeightGrad(const RefTensor &x, const RefTensor &dy, const RefTensor &offsets,
                                  bool transposeB);
/// groupedMatmul of fp8 values, group g's rows scaled by xScales[g] ·
/// wScales[g] (a one-element list scales every group).
RefTensor groupedMatmulFp8(const RefTensor &x, const std::vector<double> &xScales,
                           const RefTensor &offsets, const RefTensor &weights,
                           const std::vector<double> &wScales, bool transposeB);
/// groupedMatmulWeightGrad of fp8 values, group g's gradient scaled by
/// xScales[g] · dyScales[g].
RefTensor groupedMatmulWeightGradFp8(const RefTensor &x, const std::vector<double> &xScales,
                                     const RefTensor &dy, const std::vector<double> &dyScales,
                                     const RefTensor &offsets, bool transposeB);

//===- moe_exchange.cpp ---------------------------------------------------===//
// Expert parallelism's row copies around the all-to-all (P ranks, El
// experts each, slots of S rows; dialects/LLM/MoEOps.td). Invalid offsets
// or counts give NaN rows (and pack's kept, regroup's local_offsets as the
// ops define them).

/// llm.moe_pack: packed [P·S, C] and kept [P, El] for `ranks` slots of
/// `slotRows` rows; capacity 0: every row. With `groupCounts` [D, E] the
/// capacity is the batch's: this rank, at `groupPosition` among the D,
/// keeps what the ranks before it left.
std::vector<RefTensor> moePack(const RefTensor &xs, const RefTensor &offsets, int64_t ranks,
                               int64_t slotRows, int64_t capacity,
                               const RefTensor *groupCounts = nullptr, int64_t groupPosition = 0);
/// llm.moe_unpack: y [rows, F].
RefTensor moeUnpack(const RefTensor &packed, const RefTensor &offsets, const RefTensor &kept,
                    int64_t rows);
/// llm.moe_regroup: grouped [P·S, C] and local_offsets [El + 1].
std::vector<RefTensor> moeRegroup(const RefTensor &recv, const RefTensor &counts);
/// llm.moe_ungroup: y [P·S, F].
RefTensor moeUngroup(const RefTensor &grouped, const RefTensor &counts);

} // namespace llmc::ref

#endif
