//===- StoredWeights.h - the weights programs read in quantized storage -*- C++ -*-===//
//
// An artifact's quantized products (matmul_int, matmul_nf4, their grouped
// forms over a mixture of experts, and QLoRA's qat_dequantize_nf4) read a
// weight W through its storage parameters, `W.qweight` the codes first.
// These say which kernel input holds the codes and the shape of the whole
// weight that storage holds, for `--weights` (the file's record must
// match) and `llmc inspect` (the model's weights counted at full shape).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_QUANT_STOREDWEIGHTS_H
#define LLMC_RUNTIME_QUANT_STOREDWEIGHTS_H

#include "common/Mesh.h"
#include "runtime/Artifact.h"

#include <cstdint>
#include <string>
#include <vector>

namespace llmc {

/// Whether kernel `name` reads int8/int4/fp8 storage (else NF4's).
bool readsIntStorage(const std::string &name);

/// Whether kernel `name` reads a mixture of experts' stacked weights.
bool readsExperts(const std::string &name);

/// The input of kernel `inst` that is a weight's quantized codes
/// (`<weight>.qweight`), or -1 for a kernel that reads none.
int codesInput(const ProgramInfo &program, const InstructionInfo &inst);

/// The shape of the whole weight whose storage `inst` reads through its
/// codes, input `codes`, over every rank of `mesh`: the file's weight (a
/// stack of experts [G, A, B]; QLoRA's expansion of a split stack its view
/// [G · A, B]; a padded head's real rows).
std::vector<int64_t> storedWeightShape(const ProgramInfo &program, const InstructionInfo &inst,
                                       int codes, const Mesh &mesh);

} // namespace llmc

#endif
