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
  // what the memory held before must never leak into results.
  std::memset(base_, kPattern, rounded);
}

size_t Arena::highWaterMark() const {
  size_t end = size_;
  while (end > 0 && base_[end - 1] == kPattern) --end;
  return end;
}

Arena::~Arena() { std::free(base_); }

} // namespace llmc
