//===- ModelStates.h - ZeRO's model-state accounting of a plan --*- C++ -*-===//
//
// The ZeRO paper (Rajbhandari et al.) counts per-rank "model states" —
// parameters, gradients, optimizer state — for Ψ parameters of p, g and K
// bytes each, sharded over N data-parallel ranks:
//
//   stage 0: (p+g+K)Ψ      stage 1: (p+g)Ψ + KΨ/N
//   stage 2: pΨ + (g+K)Ψ/N stage 3: (p+g+K)Ψ/N
//
// (mixed precision: p = g = 2, K = 12: 16Ψ, 4Ψ+12Ψ/N, 2Ψ+14Ψ/N, 16Ψ/N). This
// reads both sides off an artifact: what the compiled plan actually holds
// per rank, and the formula for the model's real parameter count.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_MODELSTATES_H
#define LLMC_RUNTIME_MODELSTATES_H

#include "runtime/Artifact.h"

#include <cstdint>
#include <string>

namespace llmc {

struct ModelStates {
  int stage = 0;      ///< ZeRO stage
  int64_t groupSize = 1;  ///< N: ranks the state is sharded over
  int64_t psi = 0;    ///< Ψ: trainable parameters per model-parallel rank
  int paramBytes = 4, gradBytes = 4, optimizerBytes = 8; ///< p, g, K
  /// What the plan holds on this rank: persistent parameters, the gradients
  /// the optimizer step consumes, persistent optimizer state.
  uint64_t plannedParams = 0, plannedGradients = 0, plannedOptimizer = 0;
  /// Frozen parameters (LoRA's base, QLoRA's NF4 storage): held, but outside
  /// the paper's Ψ, which counts what is trained.
  uint64_t plannedFrozen = 0;

  double formulaParams() const;
  double formulaGradients() const;
  double formulaOptimizer() const;
  /// "2Ψ + 14Ψ/N" for this stage and these byte counts.
  std::string formula() const;
};

/// The model-state accounting of `artifact`'s role (from its metadata,
/// parameter table and train_step program).
ModelStates modelStates(const Artifact &artifact);

} // namespace llmc

#endif
