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
#include <memory>

namespace llmc {

class Arena {
public:
  explicit Arena(size_t bytes);
  ~Arena();
  Arena(const Arena &) = delete;
  Arena &operator=(const Arena &) = delete;

  uint8_t *base() const { return base_; }
  size_t size() const { return size_; }

  /// Every byte starts as this pattern (deterministic, so nothing depends
  /// on what memory held before; distinct, so written bytes can be found).
  static constexpr uint8_t kPattern = 0xA5;
  /// One past the highest byte that differs from the pattern: how much of
  /// the arena the run has written (measured, to compare with the plan).
  size_t highWaterMark() const;

private:
  uint8_t *base_ = nullptr;
  size_t size_ = 0;
};

} // namespace llmc

#endif
