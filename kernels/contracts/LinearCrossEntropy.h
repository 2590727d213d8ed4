//===- LinearCrossEntropy.h - contract of the fused head + loss -*- C++ -*-===//
//
// linear_cross_entropy: inputs h [rows × D] (any leading shape), w [V, D]
// (transpose_b) or [D, V], targets (one i32/i64 per row); outputs the f32
// scalar loss and the f32 scratch [chunk_rows, V]. linear_cross_entropy_train
// adds the f32 scalar dloss input and the dh (h's type) and dw (w's type)
// outputs before the scratch. h, w, dh and dw share one float type (f32,
// bf16 or f16: the logits and their gradient are then rounded to it where
// the unfused matmul and cross_entropy_grad store them). Both backends bind
// through here.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_LINEARCROSSENTROPY_H
#define LLMC_KERNELS_CONTRACTS_LINEARCROSSENTROPY_H

#include "kernels/Kernel.h"

#include <cstdint>
#include <string>

namespace llmc::contracts {

struct LinearCrossEntropyBinding {
  int64_t rows = 0, width = 0, vocab = 0, chunkRows = 0, ignoreIndex = -1;
  bool transposeB = false, train = false;
  DType dtype = DType::F32; ///< h's, w's, dh's and dw's (the scratch and loss are fp32)
};
/// "linear_cross_entropy" or "linear_cross_entropy_train": the kernel's
/// registry name, which its errors start with.
inline const char *linearCrossEntropyName(bool train) {
  return train ? "linear_cross_entropy_train" : "linear_cross_entropy";
}
bool bindLinearCrossEntropy(const KernelArgs &args, bool train, std::string &error,
                            LinearCrossEntropyBinding *out);

} // namespace llmc::contracts

#endif
