//===- Gptq.h - GPTQ: quantization with second-order error feedback -*- C++ -*-===//
//
// GPTQ (Frantar et al., "GPTQ: Accurate Post-Training Quantization for
// Generative Pre-trained Transformers", 2022) quantizes a linear layer's
// weight one input column at a time and moves each column's rounding error
// onto the columns not yet quantized, weighted by the inverse Hessian of
// the layer's output error, H = 2·XᵀX / n over calibration inputs X. It
// minimises ||XWᵀ − XQᵀ|| where round-to-nearest minimises ||W − Q||.
//
// This is the core on one weight, given H; runtime/quant/GptqCalibration.h
// collects H from a compiled model. The stored form is QuantizedTensor's,
// for every format, granularity and symmetry quantize() supports, so the
// result is written and loaded exactly as a round-to-nearest one is.
//
// Groups and their ranges. A group's range (its scale, zero point) is
// fixed when the first of its elements is quantized, from the group's
// current values — the updated weights, as the reference implementation
// takes a block group's range when it reaches the group's first column.
// Per tensor and per channel that is before any update (the original
// weights' ranges); blocks along the input dimension get the ranges of
// the updated weights; blocks along the output dimension (a [K, N] weight
// blocked over N) are quantized one input column at a time, so each takes
// the range of exactly the values it stores. With act-order the same rule
// applies in the permuted order, so the stored groups stay the file
// format's consecutive ones (no group index is needed). As in the
// reference, columns outside the current lazy batch are seen without the
// batch's pending updates when a group's range is taken.
//
// NF4 with double quantization: GPTQ works against each group's fp32
// absmax; the absmax values are then double-quantized as quantize() does
// and the codes rechosen against the reconstruction, so the stored tensor
// is GPTQ's to within that reconstruction.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_QUANT_GPTQ_H
#define LLMC_RUNTIME_QUANT_GPTQ_H

#include "runtime/quant/QuantizedTensor.h"

#include <cstdint>
#include <string>
#include <vector>

namespace llmc::quant {

struct GptqOptions {
  /// λ = dampening · mean(diag H) is added to H's diagonal before it is
  /// inverted (the paper's 1 %), which keeps a Hessian of few or
  /// correlated samples invertible.
  double dampening = 0.01;
  /// Columns per lazy batch: updates inside a batch are immediate, the
  /// rest of the matrix gets them once per batch (one rank-B update).
  int64_t blockSize = 128;
  /// Quantize columns in order of descending diag H (the paper's
  /// "act-order"): the columns with the largest inputs first, while the
  /// most columns remain to absorb their error.
  bool actOrder = false;
};

struct GptqStats {
  int64_t deadColumns = 0; ///< input columns whose diag H is 0 (their weights become 0)
  /// H was not positive definite after dampening (the error says so too):
  /// more data, a larger dampening, or no GPTQ for this weight.
  bool notPositiveDefinite = false;
};

/// What GPTQ settles on before anything is stored: the values handed to
/// the grid, in the weight's layout, and each group's range as
/// quantizeWithRanges takes it. Storing them with that function gives
/// gptqQuantize's tensor; a stack of experts concatenates its slices'.
struct GptqSolution {
  std::vector<float> values;
  std::vector<float> negMin, max; ///< per group of the scheme on the weight's shape
};

/// GPTQ's solution for the 2-D weight `w`, as gptqQuantize takes it (the
/// scheme must already fit the shape). Returns an empty string, or why not.
std::string gptqSolve(const float *w, const std::vector<int64_t> &shape, int64_t inputAxis,
                      std::vector<double> hessian, const Scheme &s, const GptqOptions &options,
                      GptqSolution &out, GptqStats *stats = nullptr);

/// Quantizes the 2-D weight `w` (row-major `shape`), whose dimension
/// `inputAxis` (0 or 1) is contracted with the layer's input, against
/// `hessian` (row-major K × K, K = shape[inputAxis], symmetric). Returns an
/// empty string, or why it cannot (a scheme that does not fit the shape, a
/// Hessian of the wrong size, one not positive definite after damping).
std::string gptqQuantize(const float *w, const std::vector<int64_t> &shape, int64_t inputAxis,
                         std::vector<double> hessian, const Scheme &s, const StorageFormat &storage,
                         const GptqOptions &options, QuantizedTensor &out,
                         GptqStats *stats = nullptr);

/// Accumulates rows of a layer input into a running Hessian: with `x` the
/// [rows, K] inputs of one batch and `samples` the rows seen so far,
/// H ← H · samples / (samples + rows) + 2 · xᵀx / (samples + rows), the
/// mean over every row seen (the reference's running form). `samples`
/// grows by `rows`.
void accumulateHessian(const float *x, int64_t rows, int64_t K, std::vector<double> &hessian,
                       int64_t &samples);

} // namespace llmc::quant

#endif
