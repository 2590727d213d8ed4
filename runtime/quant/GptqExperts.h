//===- GptqExperts.h - GPTQ of a mixture of experts' stacked weights -*- C++ -*-===//
//
// A mixture of experts' stacked weight [G, ...] is G linear layers, each
// multiplying only the rows the router sent to it (llm.grouped_matmul's
// group e: rows [offsets[e], offsets[e+1]) of its input). GPTQ treats
// each expert as its own problem, as GPTQModel and AutoGPTQ do (a hook on
// each expert's Linear collects that expert's inputs): expert e's Hessian
// H_e = 2·X_eᵀX_e / n_e is built from its routed rows alone, unweighted by
// the routing weight (which multiplies the expert's output after its last
// product, not its inputs), and expert e's slice is quantized against H_e
// alone. So an expert's result is exactly GPTQ's on a dense layer fed
// that expert's rows.
//
// An expert with no calibration rows has no Hessian (every input dead:
// GPTQ would zero the whole expert), and one with too few may leave H not
// positive definite after dampening. Each such expert is rounded to
// nearest instead — GPTQModel's "failsafe" for uneven MoE routing — and
// the caller is told which.
//
// The stored form is the stacked scheme's (`:stacked`, one range per
// expert's group): each slice's values and ranges, concatenated, go
// through quantizeWithRanges once, so NF4's double quantization spans the
// stack exactly as round-to-nearest's does.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_QUANT_GPTQEXPERTS_H
#define LLMC_RUNTIME_QUANT_GPTQEXPERTS_H

#include "runtime/quant/Gptq.h"

#include <cstdint>
#include <string>
#include <vector>

namespace llmc::quant {

/// Running Hessians of a stack's experts: H[e] and the rows seen, as
/// accumulateHessian keeps them for one layer.
struct ExpertHessians {
  std::vector<std::vector<double>> H;
  std::vector<int64_t> samples;
};

/// Folds one grouped matmul input into the experts' Hessians: `x` [M, K],
/// `offsets` [G + 1] (group e is rows [offsets[e], offsets[e+1]); rows
/// past offsets[G] belong to no expert). Returns an empty string, or why
/// the offsets are not valid for x.
std::string accumulateExpertHessians(const float *x, int64_t rows, int64_t K,
                                     const std::vector<int64_t> &offsets, ExpertHessians &h);

/// An expert GPTQ left to round-to-nearest, and why.
struct ExpertFallback {
  int64_t expert = 0;
  std::string why;
};

struct GptqExpertStats {
  std::vector<GptqStats> experts;         ///< per expert (zeros where rounded to nearest)
  std::vector<ExpertFallback> fallbacks; ///< in expert order
};

/// Quantizes the stacked weight `w` (row-major `shape` [G, A, B]) with the
/// stacked scheme `s`, each expert's slice [A, B] by GPTQ against
/// `hessians.H[e]` (its dimension `inputAxis`, 0 or 1, is the input).
/// Returns an empty string, or why it cannot (a scheme or Hessian that
/// does not fit).
std::string gptqQuantizeExperts(const float *w, const std::vector<int64_t> &shape,
                                int64_t inputAxis, const ExpertHessians &hessians, const Scheme &s,
                                const StorageFormat &storage, const GptqOptions &options,
                                QuantizedTensor &out, GptqExpertStats *stats = nullptr);

/// The scheme of one expert's slice of a stacked scheme (its channel axis
/// counted within the slice).
Scheme sliceScheme(const Scheme &stacked);

} // namespace llmc::quant

#endif
