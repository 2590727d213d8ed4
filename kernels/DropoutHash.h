//===- DropoutHash.h - the dropout mask, shared by every backend ----------===//
//
// Dropout's mask is a pure function of (seed, training step, flat element
// index), so the backward is the same op applied to the upstream gradient
// and no mask is ever stored. The reference, the CPU kernel and the CUDA
// kernel must agree bit for bit, so they all include this one header: only
// integer arithmetic, plus one exact double comparison.
//
// Element `index` is dropped iff dropoutHash(seed, step, index) / 2^32 < rate.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_DROPOUTHASH_H
#define LLMC_KERNELS_DROPOUTHASH_H

#include "common/HostDevice.h"

#include <cstdint>

namespace llmc {

/// The splitmix64 finaliser: a bijection on 64-bit words with full avalanche.
LLMC_HOST_DEVICE inline uint64_t dropoutMix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// 32 uniform bits for one element. The (seed, step) key is mixed first (a
/// loop over indices hoists it), then the index is added with a Weyl step and
/// mixed again, so neighbouring indices and neighbouring steps decorrelate.
LLMC_HOST_DEVICE inline uint32_t dropoutHash(uint64_t seed, uint64_t step, uint64_t index) {
  uint64_t key = dropoutMix64(seed * 0x9E3779B97F4A7C15ull ^
                              (step + 0x632BE59BD9B4E019ull) * 0xC2B2AE3D27D4EB4Full);
  return static_cast<uint32_t>(dropoutMix64(key + index * 0x9E3779B97F4A7C15ull) >> 32);
}

/// The smallest hash value that is kept: ceil(rate · 2^32). Kernels compare
/// integers against it; rate in [0, 1).
LLMC_HOST_DEVICE inline uint64_t dropoutThreshold(double rate) {
  double scaled = rate * 4294967296.0; // exact: a power-of-two scaling
  uint64_t floor = static_cast<uint64_t>(scaled);
  return static_cast<double>(floor) == scaled ? floor : floor + 1;
}

/// Whether element `index` survives: hash / 2^32 >= rate.
LLMC_HOST_DEVICE inline bool dropoutKeep(uint64_t seed, uint64_t step, uint64_t index,
                                         double rate) {
  return dropoutHash(seed, step, index) >= dropoutThreshold(rate);
}

} // namespace llmc

#endif
