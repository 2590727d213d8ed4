//===- ModelStates.h - ZeRO's model-state accounting of a plan --*- C++ -*-===//
//
// The ZeRO paper (Rajbhandari et al.) counts per-rank "model states" —
// parameters, gradients, optimizer state — for Ψ parameters of p, g and K
// bytes each, sharded over N data-parallel ranks:
//
//   stage 0: (p+g+K)Ψ      stage 1: (p+g)Ψ + KΨ/N
//   stage 2: pΨ + (g+K)Ψ/N stage 3: (p+g+K)Ψ/N
//
// with mixed-precision Adam's p = g = 2, K = 12 (fp32 master, m, v):
// 16Ψ, 4Ψ+12Ψ/N, 2Ψ+14Ψ/N, 16Ψ/N. This prints that formula as published
// (fp32 and 8-bit Adam get their own p, g, K, labelled as such) beside what
// the compiled plan holds, and explains every byte the plan holds beyond
// the formula term by term: tensors not sharded, 8-bit block maxima,
// gradient buckets, fp32 gradients or gradient copies, partial sums alive
// together.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_MODELSTATES_H
#define LLMC_RUNTIME_MODELSTATES_H

#include "runtime/Artifact.h"

#include <cstdint>
#include <string>
#include <vector>

namespace llmc {

struct ModelStates {
  int stage = 0;          ///< ZeRO stage
  int64_t groupSize = 1;  ///< N: ranks the state is sharded over
  int64_t psi = 0;        ///< Ψ: trainable parameters per model-parallel rank
  /// The published accounting for the run's precision and optimizer.
  int paramBytes = 4, gradBytes = 4, optimizerBytes = 8; ///< p, g, K
  /// Bytes per gradient the plan holds: 4 for mixed precision's fp32
  /// gradients, whose 2 beyond g are itemized, not folded into g.
  int heldGradBytes = 4;
  std::string policy; ///< where p, g, K come from, in words
  /// What the plan holds on this rank: persistent parameters, the most
  /// gradient bytes live at once, persistent optimizer state.
  uint64_t plannedParams = 0, plannedGradients = 0, plannedOptimizer = 0;
  /// Frozen parameters (LoRA's base, QLoRA's NF4 storage): held, but outside
  /// the paper's Ψ, which counts what is trained.
  uint64_t plannedFrozen = 0;

  /// One reason the plan holds more (or less) than the formula.
  struct Extra {
    std::string state; ///< parameters | gradients | optimizer
    std::string what;  ///< the reason, with the tensors it concerns
    double bytes = 0;
  };
  std::vector<Extra> extras;

  double formulaParams() const;
  double formulaGradients() const;
  double formulaOptimizer() const;
  /// "2Ψ + 14Ψ/N" for this stage and these byte counts.
  std::string formula() const;
  /// planned − formula − the itemized extras of `state`: what no item
  /// explains (zero when the plan is fully accounted for).
  double unexplained(const std::string &state) const;
};

/// The model-state accounting of `artifact`'s role (from its metadata,
/// parameter table, persistent buffers and memory plan).
ModelStates modelStates(const Artifact &artifact);

} // namespace llmc

#endif
