//===- Arena.cpp - the one allocation of a run ----------------------------===//

#include "runtime/Arena.h"
#include "runtime/support/Error.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <unistd.h>

namespace llmc {
namespace {

/// The kernel's estimate of memory available without swapping
/// (/proc/meminfo's MemAvailable, in bytes); 0 where it does not say.
size_t availableMemory() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  size_t kib = 0;
  while (meminfo >> key) {
    if (key == "MemAvailable:" && meminfo >> kib)
      return kib * 1024;
    meminfo.ignore(256, '\n');
  }
  return 0;
}

std::string gib(size_t bytes) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(2) << static_cast<double>(bytes) / (1 << 30) << " GiB";
  return os.str();
}

} // namespace

std::string arenaMemoryShortfall(size_t bytes, size_t available, size_t physical) {
  std::ostringstream os;
  if (physical > 0 && bytes > physical)
    os << "the plan's arena of " << bytes << " bytes is larger than this machine's " << physical
       << " bytes of memory";
  else if (available > 0 && bytes > available)
    os << "the plan's arena of " << bytes << " bytes (" << gib(bytes)
       << ") is more than the memory available on this machine now (" << gib(available) << " of "
       << gib(physical)
       << "); stop what else holds memory, or plan for less (more ranks, --zero, a smaller "
          "batch or context)";
  return os.str();
}

Arena::Arena(size_t bytes) : size_(bytes) {
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGE_SIZE);
  size_t physical =
      pages > 0 && pageSize > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(pageSize) : 0;
  if (std::string why = arenaMemoryShortfall(bytes, availableMemory(), physical); !why.empty())
    fail(why);
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
