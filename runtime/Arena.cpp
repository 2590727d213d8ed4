//===- Arena.cpp - the one allocation of a run ----------------------------===//

#include "runtime/Arena.h"
#include "runtime/support/Error.h"

#include <cstdlib>
#include <cstring>

namespace llmc {

Arena::Arena(size_t bytes) : size_(bytes) {
  size_t rounded = (bytes + 4095) / 4096 * 4096;
  base_ = static_cast<uint8_t *>(std::aligned_alloc(4096, rounded ? rounded : 4096));
  if (!base_)
    fail("cannot allocate the ", bytes, "-byte arena");
  // Touch every page now: the first step should not pay for page faults, and
  // uninitialised memory must never leak into results.
  std::memset(base_, 0, rounded);
}

Arena::~Arena() { std::free(base_); }

} // namespace llmc
