//===- moe_exchange.cpp - expert-parallel row copies, references ----------===//
//
// moe_pack, moe_unpack, moe_regroup and moe_ungroup in float64, written
// from their definitions in dialects/LLM/MoEOps.td: each walks the ranks
// and experts in the order the op defines and copies rows one by one.
//
//===----------------------------------------------------------------------===//

#include "kernels/reference/Common.h"
#include "kernels/reference/Evaluator.h"

namespace llmc::ref {
namespace {

void copyRow(const RefTensor &from, int64_t fromRow, RefTensor &to, int64_t toRow) {
  const int64_t c = from.shape[1];
  std::copy_n(from.data.begin() + fromRow * c, c, to.data.begin() + toRow * c);
}

void fillNaN(RefTensor &t) { std::fill(t.data.begin(), t.data.end(), std::nan("")); }

/// offsets[0] = 0, offsets[E] = rows, never decreasing.
bool offsetsValid(const RefTensor &offsets, int64_t rows) {
  const std::vector<double> &o = offsets.data;
  if (o.front() != 0 || o.back() != static_cast<double>(rows))
    return false;
  return std::is_sorted(o.begin(), o.end());
}

/// Row count n_e of expert e.
int64_t expertRows(const RefTensor &offsets, int64_t e) {
  return static_cast<int64_t>(offsets.data[e + 1] - offsets.data[e]);
}

/// Whether every group count [D, E] is an integer in [0, 2³¹) and row
/// `position` holds this rank's row counts.
bool groupCountsValid(const RefTensor &groupCounts, const RefTensor &offsets, int64_t position) {
  const int64_t experts = groupCounts.shape[1];
  for (int64_t i = 0; i < groupCounts.numel(); ++i) {
    const double c = groupCounts.data[i];
    if (!(c >= 0 && c < 2147483648.0) || c != std::floor(c))
      return false;
  }
  for (int64_t e = 0; e < experts; ++e)
    if (groupCounts.data[position * experts + e] != static_cast<double>(expertRows(offsets, e)))
      return false;
  return true;
}

/// Whether counts [P, El] are ≥ 0 and each rank's sum is at most S.
bool slotsFit(const RefTensor &counts, int64_t slotRows) {
  const int64_t ranks = counts.shape[0], local = counts.shape[1];
  for (int64_t q = 0; q < ranks; ++q) {
    double sum = 0;
    for (int64_t j = 0; j < local; ++j) {
      const double c = counts.data[q * local + j];
      if (c < 0)
        return false;
      sum += c;
    }
    if (sum > static_cast<double>(slotRows))
      return false;
  }
  return true;
}

/// Calls visit(e, slotRow, n) for expert e = p·El + j and the first row
/// of its `kept` rows in slot p.
template <typename Visit> void walkSlots(const RefTensor &kept, int64_t slotRows, Visit visit) {
  const int64_t ranks = kept.shape[0], local = kept.shape[1];
  for (int64_t p = 0; p < ranks; ++p) {
    int64_t row = p * slotRows;
    for (int64_t j = 0; j < local; ++j) {
      const int64_t e = p * local + j, n = static_cast<int64_t>(kept.data[e]);
      visit(e, row, n);
      row += n;
    }
  }
}

/// Calls visit(sourceRow, groupedRow, n) for each (expert j, source q) in
/// the expert-major order of moe_regroup.
template <typename Visit>
int64_t walkGroups(const RefTensor &counts, int64_t slotRows, std::vector<double> *groupStarts,
                   Visit visit) {
  const int64_t ranks = counts.shape[0], local = counts.shape[1];
  int64_t grouped = 0;
  for (int64_t j = 0; j < local; ++j) {
    if (groupStarts)
      (*groupStarts)[j] = static_cast<double>(grouped);
    for (int64_t q = 0; q < ranks; ++q) {
      int64_t source = q * slotRows;
      for (int64_t before = 0; before < j; ++before)
        source += static_cast<int64_t>(counts.data[q * local + before]);
      const int64_t n = static_cast<int64_t>(counts.data[q * local + j]);
      visit(source, grouped, n);
      grouped += n;
    }
  }
  return grouped;
}

} // namespace

std::vector<RefTensor> moePack(const RefTensor &xs, const RefTensor &offsets, int64_t ranks,
                               int64_t slotRows, int64_t capacity, const RefTensor *groupCounts,
                               int64_t groupPosition) {
  const int64_t experts = offsets.numel() - 1;
  require(ranks > 0 && experts % ranks == 0, "moePack", "E must be a multiple of P");
  RefTensor packed = RefTensor::zeros({ranks * slotRows, xs.shape[1]});
  RefTensor kept = RefTensor::zeros({ranks, experts / ranks});
  if (!offsetsValid(offsets, xs.shape[0]) ||
      (groupCounts && !groupCountsValid(*groupCounts, offsets, groupPosition))) {
    fillNaN(packed);
    return {packed, kept};
  }
  for (int64_t e = 0; e < experts; ++e) {
    const double n = static_cast<double>(expertRows(offsets, e));
    double room = capacity > 0 ? static_cast<double>(capacity) : n;
    for (int64_t q = 0; groupCounts && q < groupPosition; ++q)
      room -= groupCounts->data[q * experts + e];
    kept.data[e] = std::clamp(room, 0.0, n);
  }
  if (!slotsFit(kept, slotRows)) {
    fillNaN(packed);
    return {packed, RefTensor::zeros(kept.shape)};
  }
  walkSlots(kept, slotRows, [&](int64_t e, int64_t slotRow, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
      copyRow(xs, static_cast<int64_t>(offsets.data[e]) + i, packed, slotRow + i);
  });
  return {packed, kept};
}

RefTensor moeUnpack(const RefTensor &packed, const RefTensor &offsets, const RefTensor &kept,
                    int64_t rows) {
  const int64_t ranks = kept.shape[0], slotRows = packed.shape[0] / ranks;
  RefTensor y = RefTensor::zeros({rows, packed.shape[1]});
  bool valid = offsetsValid(offsets, rows) && slotsFit(kept, slotRows);
  for (int64_t e = 0; valid && e < kept.numel(); ++e)
    valid = kept.data[e] <= static_cast<double>(expertRows(offsets, e));
  if (!valid) {
    fillNaN(y);
    return y;
  }
  walkSlots(kept, slotRows, [&](int64_t e, int64_t slotRow, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
      copyRow(packed, slotRow + i, y, static_cast<int64_t>(offsets.data[e]) + i);
  });
  return y;
}

std::vector<RefTensor> moeRegroup(const RefTensor &recv, const RefTensor &counts) {
  const int64_t ranks = counts.shape[0], local = counts.shape[1];
  const int64_t slotRows = recv.shape[0] / ranks;
  RefTensor grouped = RefTensor::zeros(recv.shape), localOffsets = RefTensor::zeros({local + 1});
  if (!slotsFit(counts, slotRows)) {
    fillNaN(grouped);
    localOffsets.data[local] = static_cast<double>(recv.shape[0]);
    return {grouped, localOffsets};
  }
  const int64_t total =
      walkGroups(counts, slotRows, &localOffsets.data, [&](int64_t source, int64_t to, int64_t n) {
        for (int64_t i = 0; i < n; ++i) copyRow(recv, source + i, grouped, to + i);
      });
  localOffsets.data[local] = static_cast<double>(total);
  return {grouped, localOffsets};
}

RefTensor moeUngroup(const RefTensor &grouped, const RefTensor &counts) {
  const int64_t slotRows = grouped.shape[0] / counts.shape[0];
  RefTensor y = RefTensor::zeros(grouped.shape);
  if (!slotsFit(counts, slotRows)) {
    fillNaN(y);
    return y;
  }
  walkGroups(counts, slotRows, nullptr, [&](int64_t source, int64_t from, int64_t n) {
    for (int64_t i = 0; i < n; ++i) copyRow(grouped, from + i, y, source + i);
  });
  return y;
}

//===----------------------------------------------------------------------===//
// Evaluators (kernels/reference/Evaluator.h): P and S of pack from its
// results' shapes, R of unpack from its result's.
//===----------------------------------------------------------------------===//

LLMC_REGISTER_EVALUATOR("llm.moe_pack", [](const RefCall &c) -> Results {
  const int64_t ranks = c.resultShapes[1][0];
  const std::vector<int64_t> position = c.array("group_position");
  return moePack(c.in(0), c.in(1), ranks, c.resultShapes[0][0] / ranks, c.integer("capacity"),
                 c.optional(2), position.empty() ? 0 : position[0]);
});
LLMC_REGISTER_EVALUATOR("llm.moe_unpack", [](const RefCall &c) -> Results {
  return {moeUnpack(c.in(0), c.in(1), c.in(2), c.resultShapes[0][0])};
});
LLMC_REGISTER_EVALUATOR("llm.moe_regroup",
                        [](const RefCall &c) -> Results { return moeRegroup(c.in(0), c.in(1)); });
LLMC_REGISTER_EVALUATOR("llm.moe_ungroup",
                        [](const RefCall &c) -> Results { return {moeUngroup(c.in(0), c.in(1))}; });

} // namespace llmc::ref
