//===- SplitMix.h - SplitMix64's finalizer ----------------------*- C++ -*-===//
//
// Maps a 64-bit key to a well-mixed one (Steele, Lea and Flood's
// SplitMix64 output function): adjacent seeds, ids or counters give
// unrelated values. Parameter initialisation and per-request sampling seeds
// derive their streams with it.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_SUPPORT_SPLITMIX_H
#define LLMC_RUNTIME_SUPPORT_SPLITMIX_H

#include <cstdint>

namespace llmc {

inline uint64_t splitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

} // namespace llmc

#endif
