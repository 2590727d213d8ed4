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

#include "kernels/Kernel.h"

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
bool bindFusedElementwise(const KernelArgs &args, std::string &error,
                          FusedElementwiseBinding *out);

} // namespace llmc::contracts

#endif
