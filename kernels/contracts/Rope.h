//===- Rope.h - binding contract of rope ------------------------*- C++ -*-===//
//
// The checks and attributes of rope (rotary position embedding of x[B, T, H,
// D] at positions 0..T−1 or at given positions[B, T], or its inverse), shared by the CPU factory (kernels/cpu/rope.cpp) and
// the CUDA one (kernels/cuda/rope.cu).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_ROPE_H
#define LLMC_KERNELS_CONTRACTS_ROPE_H

#include "kernels/Kernel.h"

#include <string>

namespace llmc::contracts {

/// rope(x[, positions]) -> out, attributes theta, inverse and optionally
/// position_limit.
struct RopeBinding {
  DType dtype = DType::F32;
  bool positions = false; ///< the positions input is present (i32 or i64)
  double theta = 0;
  bool inverse = false;
  /// Positions are in [0, rows): the cos/sin table's rows, attribute
  /// `position_limit` when given (a decode step's positions run past its
  /// T), else T.
  int64_t rows = 0;
};
bool bindRope(const KernelArgs &args, std::string &error, RopeBinding *out);

} // namespace llmc::contracts

#endif
