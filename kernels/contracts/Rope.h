//===- Rope.h - binding contract of rope ------------------------*- C++ -*-===//
//
// The checks and attributes of rope (rotary position embedding of x[B, T, H,
// D] at positions 0..T−1 or at given positions[B, T], or its inverse,
// optionally with Llama 3's frequency scaling), shared by the CPU factory
// (kernels/cpu/rope.cpp) and the CUDA one (kernels/cuda/rope.cu).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_ROPE_H
#define LLMC_KERNELS_CONTRACTS_ROPE_H

#include "common/RopeScaling.h"
#include "kernels/Kernel.h"

#include <string>

namespace llmc {
class Validator;
}

namespace llmc::contracts {

/// rope(x[, positions]) -> out, attributes theta, inverse and optionally
/// position_limit and the Llama 3 scaling (scaling_factor, low_freq_factor,
/// high_freq_factor, original_max_positions: all four or none).
struct RopeBinding {
  DType dtype = DType::F32;
  bool positions = false; ///< the positions input is present (i32 or i64)
  double theta = 0;
  bool inverse = false;
  /// Positions are in [0, rows): the cos/sin table's rows, attribute
  /// `position_limit` when given (a decode step's positions run past its
  /// T), else T.
  int64_t rows = 0;
  RopeScaling scaling; ///< unscaled unless the scaling attributes are given
};
bool bindRope(const KernelArgs &args, std::string &error, RopeBinding *out);

/// The rotation's attributes as rope reads them (theta and the Llama 3
/// scaling), for kernels that rotate their inputs as rope would
/// (attention_rope); sets `theta` and `scaling`, leaves the rest.
bool bindRotation(Validator &v, RopeBinding *out);

/// The cos and sin of every angle a bound rope rotates by, each [rows, D/2]
/// (sin negated when inverse): computed in double, rounded to fp32, the
/// same table on both backends.
void ropeTables(const RopeBinding &b, int64_t headDim, float *cosTable, float *sinTable);

} // namespace llmc::contracts

#endif
