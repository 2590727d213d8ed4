//===- Arena.cpp - the one allocation of a run ----------------------------===//

#include "runtime/Arena.h"
#include "runtime/support/Error.h"

#include <cstdlib>
#include <cstring>
#include <unistd.h>

namespace llmc {

Arena::Arena(size_t bytes) : size_(bytes) {
  // Every page is touched below, so an arena larger than the machine would
  // be killed by the OOM killer instead of failing here with a message.
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && pageSize > 0 &&
      bytes > static_cast<size_t>(pages) * static_cast<size_t>(pageSize))
    fail("the plan's arena of ", bytes, " bytes is larger than this machine's ",
         static_cast<size_t>(pages) * static_cast<size_t>(pageSize), " bytes of memory");
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
