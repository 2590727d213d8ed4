//===- ArenaPlacement.cpp - offsets for buffers with known lifetimes ------===//

#include "passes/lib/ArenaPlacement.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace llmc::arena {

namespace {

bool liveTogether(const Interval &a, const Interval &b) {
  return a.start <= b.end && b.start <= a.end;
}

/// One buffer already given an offset.
struct Placed {
  int64_t offset, size;
  size_t index;
};

/// The lowest offset where `size` bytes fit between `placed` (sorted by
/// offset; they may overlap one another); above all of them if no gap fits.
int64_t firstFit(const std::vector<Placed> &placed, int64_t size) {
  int64_t candidate = 0;
  for (const Placed &p : placed) {
    if (candidate + size <= p.offset)
      break;
    candidate = std::max(candidate, p.offset + p.size);
  }
  return candidate;
}

/// The start of the smallest gap that holds `size` bytes (the lowest among
/// equal gaps); above all of `placed` if none does.
int64_t bestFit(const std::vector<Placed> &placed, int64_t size) {
  int64_t top = 0, best = -1, bestGap = std::numeric_limits<int64_t>::max();
  for (const Placed &p : placed) {
    int64_t gap = p.offset - top;
    if (gap >= size && gap < bestGap) {
      best = top;
      bestGap = gap;
    }
    top = std::max(top, p.offset + p.size);
  }
  return best >= 0 ? best : top;
}

std::vector<int64_t> firstFitByStart(const std::vector<Interval> &intervals, int64_t alignment) {
  std::vector<size_t> order(intervals.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return intervals[a].start < intervals[b].start; });
  std::vector<int64_t> offsets(intervals.size(), 0);
  // Everything in `live` is live at the current start, so no two of them
  // share bytes and their offsets are distinct.
  std::vector<Placed> live;
  for (size_t i : order) {
    const Interval &it = intervals[i];
    live.erase(std::remove_if(live.begin(), live.end(),
                              [&](const Placed &p) { return intervals[p.index].end < it.start; }),
               live.end());
    std::sort(live.begin(), live.end(),
              [](const Placed &a, const Placed &b) { return a.offset < b.offset; });
    int64_t size = alignedSize(it.bytes, alignment);
    offsets[i] = firstFit(live, size);
    live.push_back({offsets[i], size, i});
  }
  return offsets;
}

std::vector<int64_t> greedyBySize(const std::vector<Interval> &intervals, int64_t alignment,
                                  bool best) {
  std::vector<size_t> order(intervals.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    int64_t sa = alignedSize(intervals[a].bytes, alignment);
    int64_t sb = alignedSize(intervals[b].bytes, alignment);
    if (sa != sb)
      return sa > sb;
    return intervals[a].start < intervals[b].start;
  });
  std::vector<int64_t> offsets(intervals.size(), 0);
  std::vector<Placed> placed; // sorted by (offset, index)
  std::vector<Placed> conflicting;
  for (size_t i : order) {
    const Interval &it = intervals[i];
    int64_t size = alignedSize(it.bytes, alignment);
    conflicting.clear();
    for (const Placed &p : placed)
      if (liveTogether(intervals[p.index], it))
        conflicting.push_back(p);
    offsets[i] = best ? bestFit(conflicting, size) : firstFit(conflicting, size);
    Placed mine{offsets[i], size, i};
    auto at =
        std::upper_bound(placed.begin(), placed.end(), mine, [](const Placed &a, const Placed &b) {
          return a.offset != b.offset ? a.offset < b.offset : a.index < b.index;
        });
    placed.insert(at, mine);
  }
  return offsets;
}

} // namespace

const char *strategyName(Strategy strategy) {
  switch (strategy) {
  case Strategy::FirstFitByStart: return "first-fit by start";
  case Strategy::GreedyBySize: return "greedy by size";
  case Strategy::GreedyBySizeBestFit: return "greedy by size, best fit";
  }
  return "unknown";
}

int64_t alignedSize(int64_t bytes, int64_t alignment) {
  bytes = std::max<int64_t>(bytes, 1);
  return (bytes + alignment - 1) / alignment * alignment;
}

std::vector<int64_t> place(const std::vector<Interval> &intervals, Strategy strategy,
                           int64_t alignment) {
  switch (strategy) {
  case Strategy::FirstFitByStart: return firstFitByStart(intervals, alignment);
  case Strategy::GreedyBySize: return greedyBySize(intervals, alignment, /*best=*/false);
  case Strategy::GreedyBySizeBestFit: return greedyBySize(intervals, alignment, /*best=*/true);
  }
  return {};
}

int64_t extent(const std::vector<Interval> &intervals, const std::vector<int64_t> &offsets,
               int64_t alignment) {
  int64_t top = 0;
  for (size_t i = 0; i < intervals.size(); ++i)
    top = std::max(top, offsets[i] + alignedSize(intervals[i].bytes, alignment));
  return top;
}

int64_t liveBytesBound(const std::vector<Interval> &intervals, int64_t alignment) {
  // (time, change): a buffer joins at its start and leaves after its end;
  // at one time the departures come first (the pair sorts them so).
  std::vector<std::pair<int64_t, int64_t>> events;
  events.reserve(2 * intervals.size());
  for (const Interval &it : intervals) {
    int64_t size = alignedSize(it.bytes, alignment);
    events.push_back({it.start, size});
    events.push_back({it.end + 1, -size});
  }
  std::sort(events.begin(), events.end());
  int64_t live = 0, most = 0;
  for (auto [time, change] : events) {
    live += change;
    most = std::max(most, live);
  }
  return most;
}

std::optional<std::pair<size_t, size_t>> findConflict(const std::vector<Interval> &intervals,
                                                      const std::vector<int64_t> &offsets,
                                                      int64_t alignment) {
  std::vector<size_t> order(intervals.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return intervals[a].start < intervals[b].start; });
  for (size_t x = 0; x < order.size(); ++x) {
    size_t i = order[x];
    for (size_t y = x + 1; y < order.size() && intervals[order[y]].start <= intervals[i].end; ++y) {
      size_t j = order[y];
      int64_t si = alignedSize(intervals[i].bytes, alignment);
      int64_t sj = alignedSize(intervals[j].bytes, alignment);
      if (offsets[i] < offsets[j] + sj && offsets[j] < offsets[i] + si)
        return std::make_pair(std::min(i, j), std::max(i, j));
    }
  }
  return std::nullopt;
}

Plan planArena(const std::vector<Interval> &intervals, int64_t alignment) {
  Plan plan;
  bool first = true;
  for (Strategy strategy : kStrategies) {
    std::vector<int64_t> offsets = place(intervals, strategy, alignment);
    int64_t top = extent(intervals, offsets, alignment);
    if (first || top < plan.extent) {
      plan = {std::move(offsets), top, strategy};
      first = false;
    }
  }
  return plan;
}

} // namespace llmc::arena
