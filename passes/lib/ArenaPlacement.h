//===- ArenaPlacement.h - offsets for buffers with known lifetimes -*- C++ -*-===//
//
// Static offset assignment: every buffer has a size and an inclusive
// lifetime [start, end] over a program's instructions; two buffers whose
// lifetimes intersect must not share bytes. The smallest extent is NP-hard
// (dynamic storage allocation), so the planner runs greedy heuristics and
// keeps the smallest result:
//
//  - first-fit by start: a sweep in program order, each buffer at the
//    lowest aligned offset free among the buffers live when it starts;
//  - greedy by size (Pisarchyk & Lee 2020, "Efficient Memory Management
//    for Deep Neural Net Inference"; TFLite's planner): the largest buffer
//    first, each at the lowest offset (or, in the best-fit variant, in the
//    smallest gap) that does not intersect an already placed buffer whose
//    lifetime intersects its own.
//
// First-fit fragments when short-lived buffers settle low and a large
// buffer that starts later must go above them; placing the large buffers
// first avoids that. No heuristic wins everywhere, hence the minimum. The
// live-bytes bound (the most bytes live at one instruction) is what no
// placement beats. Plain C++: the lowering places its alias classes with
// it, and unit tests check plans over hand-made lifetimes.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_PASSES_LIB_ARENAPLACEMENT_H
#define LLMC_PASSES_LIB_ARENAPLACEMENT_H

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace llmc::arena {

/// One buffer: live from instruction `start` through `end` (inclusive),
/// `bytes` long (rounded up to the alignment, at least one unit).
struct Interval {
  int64_t start = 0, end = 0, bytes = 0;
};

enum class Strategy { FirstFitByStart, GreedyBySize, GreedyBySizeBestFit };

/// Every strategy, in the order ties are broken (the first wins).
inline constexpr Strategy kStrategies[] = {Strategy::FirstFitByStart, Strategy::GreedyBySize,
                                           Strategy::GreedyBySizeBestFit};

/// "first-fit by start", "greedy by size", "greedy by size, best fit".
const char *strategyName(Strategy strategy);

/// Bytes a buffer occupies: `bytes` rounded up to `alignment`, at least one
/// alignment unit.
int64_t alignedSize(int64_t bytes, int64_t alignment);

/// Offsets (multiples of `alignment`) for `intervals`, in their order.
/// Deterministic: ties go to the earlier interval.
std::vector<int64_t> place(const std::vector<Interval> &intervals, Strategy strategy,
                           int64_t alignment);

/// The bytes a placement spans: the highest offset + aligned size.
int64_t extent(const std::vector<Interval> &intervals, const std::vector<int64_t> &offsets,
               int64_t alignment);

/// The most aligned bytes live at one instruction: no placement has a
/// smaller extent.
int64_t liveBytesBound(const std::vector<Interval> &intervals, int64_t alignment);

/// Two buffers whose lifetimes and byte ranges both intersect, if any (the
/// lower index first); nullopt for a valid placement.
std::optional<std::pair<size_t, size_t>> findConflict(const std::vector<Interval> &intervals,
                                                      const std::vector<int64_t> &offsets,
                                                      int64_t alignment);

struct Plan {
  std::vector<int64_t> offsets;
  int64_t extent = 0;
  Strategy strategy = Strategy::FirstFitByStart;
};

/// Runs every strategy and keeps the smallest extent (the first on a tie).
Plan planArena(const std::vector<Interval> &intervals, int64_t alignment);

} // namespace llmc::arena

#endif // LLMC_PASSES_LIB_ARENAPLACEMENT_H
