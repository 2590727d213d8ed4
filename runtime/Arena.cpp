//===- Arena.cpp - the one allocation of a run ----------------------------===//

#include "runtime/Arena.h"
#include "runtime/support/Error.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iterator>
#include <sstream>
#include <sys/mman.h>
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

Arena::Arena(size_t bytes, size_t zeroPrefix) : size_(bytes) {
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGE_SIZE);
  size_t physical =
      pages > 0 && pageSize > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(pageSize) : 0;
  if (std::string why = arenaMemoryShortfall(bytes, availableMemory(), physical); !why.empty())
    fail(why);
  mapped_ = std::max<size_t>((bytes + 4095) / 4096 * 4096, 4096);
  // Fresh anonymous pages read zero until first written.
  void *memory = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED)
    fail("cannot allocate the ", bytes, "-byte arena");
  base_ = static_cast<uint8_t *>(memory);
  // Touch every other page now: the first step should not pay for page
  // faults, and what the memory held before must never leak into results.
  zeroPrefix = std::min(zeroPrefix, mapped_);
  std::memset(base_ + zeroPrefix, kPattern, mapped_ - zeroPrefix);
}

size_t Arena::highWaterMark(size_t end) const {
  end = std::min(end, size_);
  while (end > 0 && base_[end - 1] == kPattern) --end;
  return end;
}

Arena::~Arena() { munmap(base_, mapped_); }

void Arena::placeOutside(size_t offset, size_t bytes, const uint8_t *data) {
  if (offset + bytes > size_ || bytes == 0)
    fail("arena: cannot place bytes [", offset, ", ", offset + bytes, ") outside: the arena holds ",
         size_);
  auto next = outside_.lower_bound(offset);
  bool overlapsNext = next != outside_.end() && next->first < offset + bytes;
  bool overlapsPrevious =
      next != outside_.begin() && std::prev(next)->first + std::prev(next)->second.bytes > offset;
  if (overlapsNext || overlapsPrevious)
    fail("arena: bytes [", offset, ", ", offset + bytes, ") overlap a range placed outside before");
  outside_.emplace(offset, OutsideRange{bytes, data});
  // The arena's pages wholly inside the range are no longer read.
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGE_SIZE));
  const uintptr_t start = reinterpret_cast<uintptr_t>(base_ + offset);
  const uintptr_t first = (start + page - 1) / page * page, last = (start + bytes) / page * page;
  if (last > first)
    madvise(reinterpret_cast<void *>(first), last - first, MADV_DONTNEED);
}

const uint8_t *Arena::outside(size_t offset, size_t bytes) const {
  auto it = outside_.upper_bound(offset);
  if (it != outside_.end() && it->first < offset + bytes)
    fail("arena: bytes [", offset, ", ", offset + bytes, ") cover part of the range at ", it->first,
         " that is read from outside the arena");
  if (it == outside_.begin())
    return nullptr;
  --it;
  const size_t end = it->first + it->second.bytes;
  if (offset >= end)
    return nullptr;
  if (offset + bytes > end)
    fail("arena: bytes [", offset, ", ", offset + bytes, ") cover part of the range [", it->first,
         ", ", end, ") that is read from outside the arena");
  return it->second.data + (offset - it->first);
}

size_t Arena::bytesOutside() const {
  size_t total = 0;
  for (const auto &[offset, range] : outside_) total += range.bytes;
  return total;
}

} // namespace llmc
