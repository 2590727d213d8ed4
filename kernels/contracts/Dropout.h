//===- Dropout.h - binding contract of dropout -------------------*- C++ -*-===//
//
// What both backends check and derive when they bind dropout: the rate and
// seed, and, for one rank's piece of a larger tensor (`global_shape` and
// `offsets`), the global index of the first element of each local row. The
// CPU and CUDA factories call bindDropout and add only what is specific to
// their backend (the CUDA kernel uploads the row starts).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_DROPOUT_H
#define LLMC_KERNELS_CONTRACTS_DROPOUT_H

#include "kernels/Kernel.h"

#include <cstdint>
#include <string>
#include <vector>

namespace llmc {
class Validator;
}

namespace llmc::contracts {

struct DropoutBinding {
  DType dtype = DType::F32; ///< of x and out
  double rate = 0;
  int64_t seed = 0;
  /// The global index of the first element of each local row (a row = the
  /// last dimension); empty when x is the whole tensor.
  std::vector<uint64_t> rowStarts;
};
bool bindDropout(const KernelArgs &args, std::string &error, DropoutBinding *out);

/// The global index of the first element of each row of a piece of shape
/// `local`, read from the attributes `global_shape` and `offsets` when the
/// kernel has them (`starts` is left empty when it has neither: the local
/// index is the global one). Shared by dropout and fused_elementwise,
/// whose dropout instructions draw the same mask.
bool bindDropoutPiece(Validator &v, const std::vector<int64_t> &local,
                      std::vector<uint64_t> *starts);

} // namespace llmc::contracts

#endif
