//===- Arena.h - the one allocation of a run --------------------*- C++ -*-===//
//
// The compiler planned every byte; the runtime allocates the arena once and
// never again during training.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_ARENA_H
#define LLMC_RUNTIME_ARENA_H

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace llmc {

/// Why an arena of `bytes` cannot be allocated on a machine with
/// `physical` bytes of memory of which `available` are available
/// (MemAvailable: free, or held by caches the kernel can drop), or empty
/// when it can. Every page of an arena is touched when it is allocated, so
/// one beyond what is available would push other memory out or bring the
/// OOM killer, instead of failing with a message.
std::string arenaMemoryShortfall(size_t bytes, size_t available, size_t physical);

class Arena {
public:
  /// Allocates `bytes` and touches every page from `zeroPrefix` on; throws
  /// when the machine's memory, or what of it is available now, cannot hold
  /// them. The first `zeroPrefix` bytes (the persistent state, which
  /// initialisation sets) start zero and untouched, so the pages of a
  /// parameter read from outside (placeOutside) are never resident.
  explicit Arena(size_t bytes, size_t zeroPrefix = 0);
  ~Arena();
  Arena(const Arena &) = delete;
  Arena &operator=(const Arena &) = delete;

  uint8_t *base() const { return base_; }
  size_t size() const { return size_; }

  /// Every byte past the zero prefix starts as this pattern (deterministic,
  /// so nothing depends on what memory held before; distinct, so written
  /// bytes can be found).
  static constexpr uint8_t kPattern = 0xA5;
  /// One past the highest byte that differs from the pattern: how much of
  /// the arena the run has written (measured, to compare with the plan).
  size_t highWaterMark() const { return highWaterMark(size_); }
  /// The same within the arena's first `end` bytes.
  size_t highWaterMark(size_t end) const;

  /// Lets the bytes [offset, offset + bytes) be read from `data` instead (a
  /// parameter used in place from a mapped weights file, which must outlive
  /// every program bound to it) and hands the arena's own whole pages in
  /// that range back to the system. Throws when the range leaves the arena
  /// or overlaps one placed before.
  void placeOutside(size_t offset, size_t bytes, const uint8_t *data);
  /// Where [offset, offset + bytes) lives when it was placed outside, or
  /// null when it is in the arena. Throws when the range covers part of a
  /// placed one: no buffer may straddle it.
  const uint8_t *outside(size_t offset, size_t bytes) const;
  /// The bytes placed outside.
  size_t bytesOutside() const;

private:
  uint8_t *base_ = nullptr;
  size_t size_ = 0, mapped_ = 0;
  struct OutsideRange {
    size_t bytes;
    const uint8_t *data;
  };
  std::map<size_t, OutsideRange> outside_; ///< by arena offset
};

} // namespace llmc

#endif
