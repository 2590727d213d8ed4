//===- ActivationMemory.h - activations per layer vs Korthikanti -*- C++ -*-===//
//
// Korthikanti et al., "Reducing Activation Recomputation in Large
// Transformer Models" (2022), count the bytes a GPT layer keeps for its
// backward, with 16-bit activations and 1-byte dropout masks, for sequence
// s, microbatch b, hidden h, heads a and tensor parallelism t:
//
//   no parallelism              sbh(34 + 5as/h)
//   tensor parallel             sbh(10 + 24/t + 5as/(ht))
//   tensor + sequence parallel  sbh/t (34 + 5as/h)
//   selective recomputation     drops the 5as/h (or 5as/(ht)) term
//   full recomputation          2sbh (2sbh/t with sequence parallelism)
//
// This reads the compiled plan's bytes per layer next to the formula for
// the same layout.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_ACTIVATIONMEMORY_H
#define LLMC_RUNTIME_ACTIVATIONMEMORY_H

#include "runtime/Artifact.h"

#include <cstdint>
#include <map>
#include <string>

namespace llmc {

struct ActivationShape {
  int64_t s = 0, b = 0, h = 0, a = 0; ///< per rank and microbatch (b)
  int64_t t = 1;                      ///< tensor-parallel ranks
  bool sequenceParallel = false;
  int elementBytes = 4; ///< of activations: 4 (fp32) or 2 (bf16)
  bool gptLayer = false; ///< the formula's op set (GPT-2 family)
  double sbh() const { return static_cast<double>(s) * b * h; }
};

/// The shape of `artifact`'s activations (from its metadata and mesh); s,
/// b, h or a stay 0 when the metadata does not say.
ActivationShape activationShape(const Artifact &artifact);

/// Korthikanti et al.'s bytes per layer for `shape` under recompute `mode`
/// (none | selective | full, each optionally "+offload", or offload), at
/// 16-bit activations; offloading does not change them.
double korthikantiBytes(const ActivationShape &shape, const std::string &mode);

/// The formula that korthikantiBytes evaluates, e.g. "sbh(10 + 24/t)".
std::string korthikantiFormula(const ActivationShape &shape, const std::string &mode);

/// Each layer's recompute mode, from the `recompute` and
/// `recompute.layers` metadata ("h.0=full,h.1=selective"), with "+offload"
/// (or "offload" for none) where the layer's activations live in host
/// memory (--offload activations, or chosen by a budget).
std::map<std::string, std::string> recomputeModes(const Artifact &artifact);

} // namespace llmc

#endif
