//===- FusedElementwise.h - contract of the generated elementwise op -*- C++ -*-===//
//
// fused_elementwise: inputs of any float dtype, each with the outputs'
// shape or a suffix of it (repeated over the leading dimensions); outputs
// of one shape; attributes `program` and `yields` as
// common/ElementwiseProgram.h defines them, checked against the operand
// dtypes. With `global_shape` and `offsets` (the outputs are one rank's
// piece of a larger tensor) every dropout instruction's mask index is the
// element's index in the global tensor, as llm.dropout's is. Both backends
// bind through here.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_FUSEDELEMENTWISE_H
#define LLMC_KERNELS_CONTRACTS_FUSEDELEMENTWISE_H

#include "common/ElementwiseProgram.h"
#include "kernels/Kernel.h"
#include "kernels/Validator.h"
#include "kernels/contracts/Dropout.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace llmc::contracts {

struct FusedElementwiseBinding {
  int64_t numel = 0;               ///< elements of every output
  std::vector<int64_t> inputNumel; ///< per input: numel, or the repeated suffix's
  std::vector<int64_t> program, yields;
  /// The global index of the first element of each output row (a row = the
  /// last dimension), for dropout's mask; empty when the outputs are the
  /// whole tensor.
  std::vector<uint64_t> rowStarts;
};
inline bool bindFusedElementwise(const KernelArgs &args, std::string &error,
                                 FusedElementwiseBinding *out);

//===----------------------------------------------------------------------===//
// Definitions
//===----------------------------------------------------------------------===//

inline bool bindFusedElementwise(const KernelArgs &args, std::string &error,
                                 FusedElementwiseBinding *out) {
  Validator v("fused_elementwise", args, error);
  FusedElementwiseBinding b;
  if (!v.intsAttr("program", &b.program) || !v.intsAttr("yields", &b.yields))
    return false;
  if (args.outputs.empty())
    return v.fail("needs at least one output");
  const std::vector<int64_t> &shape = v.out(0).shape;
  std::vector<int64_t> inputDtypes, outputDtypes;
  for (size_t i = 0; i < args.outputs.size(); ++i) {
    const TensorView &o = v.out(i);
    if (!v.isFloat(o, "output"))
      return false;
    if (o.shape != shape)
      return v.fail("output " + std::to_string(i) + " " + o.describe() +
                    " must have output 0's shape");
    outputDtypes.push_back(static_cast<int64_t>(o.dtype));
  }
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    const TensorView &in = v.in(i);
    if (!v.isFloat(in, "input"))
      return false;
    bool suffix = in.shape.size() <= shape.size() &&
                  std::equal(in.shape.begin(), in.shape.end(),
                             shape.end() - static_cast<std::ptrdiff_t>(in.shape.size()));
    if (!suffix)
      return v.fail("input " + std::to_string(i) + " " + in.describe() +
                    " must have the outputs' shape or a suffix of it");
    inputDtypes.push_back(static_cast<int64_t>(in.dtype));
    b.inputNumel.push_back(in.numel());
  }
  std::string problem = ew::validateProgram(b.program, b.yields, inputDtypes, outputDtypes);
  if (!problem.empty())
    return v.fail(problem);
  if (!bindDropoutPiece(v, shape, &b.rowStarts))
    return false;
  if (!b.rowStarts.empty() &&
      !ew::usesOpcode(b.program.data(), b.program.size(), ew::Opcode::Dropout))
    return v.fail("global_shape and offsets place dropout's mask, but the program has no dropout");
  b.numel = v.out(0).numel();
  *out = std::move(b);
  return true;
}

} // namespace llmc::contracts

#endif
