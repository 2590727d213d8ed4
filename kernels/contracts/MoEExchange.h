//===- MoEExchange.h - contract of the expert-parallel row copies -*- C++ -*-===//
//
// moe_pack, moe_unpack, moe_regroup and moe_ungroup (dialects/LLM/MoEOps.td)
// move mixture-of-experts rows between the layouts around an expert-parallel
// all-to-all: P ranks, El experts each (E = P·El), one slot of S rows per
// rank.
//
//  - moe_pack: xs [R, C] (float), offsets [E + 1] (i32/i64), optionally
//    group_counts [D, E] (f32) → packed [P·S, C] (xs's dtype), kept
//    [P, El] (i32); attributes `capacity` (optional, ≥ 0, 0: unlimited;
//    > 0 with group_counts) and `group_position` (optional, an int or one
//    element, in [0, D), default 0; a rank offset may have moved it).
//  - moe_unpack: packed [P·S, F], offsets [E + 1], kept [P, El] (i32/i64)
//    → y [R, F] (packed's dtype).
//  - moe_regroup: recv [P·S, C], counts [P, El] (i32/i64) → grouped
//    [P·S, C], local_offsets [El + 1] (i32).
//  - moe_ungroup: grouped [P·S, F], counts [P, El] → y [P·S, F].
//
// Each op is a set of runs of consecutive rows, one per (rank, expert),
// copied from its input to its output; output rows no run covers are zero.
// Both backends derive the runs with the same single-threaded plan (below,
// LLMC_HOST_DEVICE: the CUDA kernels run it on the device, never reading
// counts or offsets on the host, so a captured CUDA graph stays valid) and
// find each output row's run by the same binary search, so they agree bit
// for bit. Offsets and counts are data: on invalid ones the plan fails,
// and the float output is all NaN (pack's kept all 0, regroup's
// local_offsets {0, …, 0, P·S}) rather than anything read or written
// outside a tensor.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_MOEEXCHANGE_H
#define LLMC_KERNELS_CONTRACTS_MOEEXCHANGE_H

#include "common/HostDevice.h"
#include "kernels/Kernel.h"
#include "kernels/Validator.h"

#include <cstdint>
#include <limits>
#include <string>

namespace llmc::contracts {

/// Which of the four ops a binding is for.
enum class MoeExchangeOp { Pack, Unpack, Regroup, Ungroup };

/// The dimensions every exchange op derives.
struct MoeExchangeBinding {
  MoeExchangeOp op = MoeExchangeOp::Pack;
  DType dtype = DType::F32; ///< of the float input and output
  int64_t ranks = 0, localExperts = 0, slotRows = 0; ///< P, El, S
  int64_t rows = 0;     ///< R: expert-sorted rows (pack's input, unpack's output)
  int64_t width = 0;    ///< columns of the float rows
  int64_t capacity = 0; ///< pack only: rows kept per expert, 0: all
  /// pack only: D, the ranks group_counts [D, E] count the batch over
  /// (0: no group_counts), and this rank's position q among them.
  int64_t groupRanks = 0, groupPosition = 0;
  LLMC_HOST_DEVICE int64_t experts() const { return ranks * localExperts; }
  LLMC_HOST_DEVICE int64_t packedRows() const { return ranks * slotRows; }
  /// Rows of the float output.
  LLMC_HOST_DEVICE int64_t outputRows() const {
    return op == MoeExchangeOp::Unpack ? rows : packedRows();
  }
  /// Rows of the float input.
  LLMC_HOST_DEVICE int64_t inputRows() const {
    return op == MoeExchangeOp::Pack ? rows : packedRows();
  }
};

inline bool bindMoePack(const KernelArgs &args, std::string &error, MoeExchangeBinding *out);
inline bool bindMoeUnpack(const KernelArgs &args, std::string &error, MoeExchangeBinding *out);
inline bool bindMoeRegroup(const KernelArgs &args, std::string &error, MoeExchangeBinding *out);
inline bool bindMoeUngroup(const KernelArgs &args, std::string &error, MoeExchangeBinding *out);

/// An i32 or i64 tensor read as int64, on either side.
struct IndexRead {
  const void *data = nullptr;
  bool wide = false;
  LLMC_HOST_DEVICE int64_t operator[](int64_t i) const {
    return wide ? static_cast<const int64_t *>(data)[i] : static_cast<const int32_t *>(data)[i];
  }
};

/// Output rows [to, to + rows) are input rows [from, from + rows).
struct RowRun {
  int64_t to, from, rows;
};

/// Derives an op's E runs from its index inputs (`first`: offsets, or
/// counts; `second`: unpack's kept) and pack's `groupCounts` [D, E] (null
/// without). Returns false on invalid data, with every run empty.
/// Single-threaded: O(D·E).
LLMC_HOST_DEVICE inline bool planExchange(const MoeExchangeBinding &b, IndexRead first,
                                          IndexRead second, const float *groupCounts, RowRun *runs);
/// The input row output row `row` copies, or −1 where it is zero.
LLMC_HOST_DEVICE inline int64_t exchangeSource(const MoeExchangeBinding &b, const RowRun *runs,
                                               int64_t row);
/// pack's kept [P, El] or regroup's local_offsets [El + 1] (none for the
/// other two ops) from the runs of a plan that returned `valid`.
LLMC_HOST_DEVICE inline void writeExchangeCounts(const MoeExchangeBinding &b, const RowRun *runs,
                                                 bool valid, int32_t *out);

//===----------------------------------------------------------------------===//
// Definitions
//===----------------------------------------------------------------------===//

namespace moe_exchange_impl {

/// counts (or kept) [P, El] of ids with P, El ≥ 1; sets ranks, localExperts.
inline bool bindCounts(Validator &v, const TensorView &counts, const char *what,
                       MoeExchangeBinding &b) {
  if (!v.isIndex(counts, what) || !v.hasRank(counts, what, 2))
    return false;
  if (counts.dim(0) < 1 || counts.dim(1) < 1)
    return v.fail(std::string(what) + " must have at least one rank and one expert, got " +
                  counts.describe());
  b.ranks = counts.dim(0);
  b.localExperts = counts.dim(1);
  return true;
}

/// A packed buffer [P·S, width] of a float dtype; sets slotRows, width, dtype.
inline bool bindSlots(Validator &v, const TensorView &packed, const char *what,
                      MoeExchangeBinding &b) {
  if (!v.isFloat(packed, what) || !v.hasRank(packed, what, 2))
    return false;
  if (packed.dim(0) % b.ranks != 0)
    return v.fail(std::string(what) + " must have a multiple of " + std::to_string(b.ranks) +
                  " rows (one slot per rank), got " + packed.describe());
  if (packed.dim(0) > std::numeric_limits<int32_t>::max())
    return v.fail(std::string(what) + " " + packed.describe() + " has more rows than i32 counts");
  b.dtype = packed.dtype;
  b.slotRows = packed.dim(0) / b.ranks;
  b.width = packed.dim(1);
  return true;
}

/// offsets [E + 1] of ids for the binding's E experts.
inline bool bindOffsets(Validator &v, const TensorView &offsets, const MoeExchangeBinding &b) {
  if (!v.isIndex(offsets, "offsets"))
    return false;
  if (offsets.rank() != 1 || offsets.dim(0) != b.experts() + 1)
    return v.fail("offsets must be [" + std::to_string(b.experts() + 1) + "] for " +
                  std::to_string(b.ranks) + " ranks × " + std::to_string(b.localExperts) +
                  " experts, got " + offsets.describe());
  return true;
}

/// Expert-sorted rows [R, width] of the binding's dtype and width.
inline bool bindRows(Validator &v, const TensorView &rows, const char *what,
                     MoeExchangeBinding &b) {
  if (!v.hasRank(rows, what, 2) || !v.hasType(rows, what, b.dtype, {rows.dim(0), b.width}))
    return false;
  if (rows.dim(0) > std::numeric_limits<int32_t>::max())
    return v.fail(std::string(what) + " " + rows.describe() + " has more rows than i32 counts");
  b.rows = rows.dim(0);
  return true;
}

/// pack's group_counts [D, E] (f32, input 2, when `present`) and
/// group_position: an int or a one-element array (a rank offset may have
/// made either), in [0, D).
inline bool bindGroup(Validator &v, bool present, MoeExchangeBinding &b) {
  const KernelAttrs &attrs = v.attrs();
  if (!present) {
    if (attrs.hasInt("group_position") || attrs.hasInts("group_position"))
      return v.fail("attribute 'group_position' needs the group_counts input");
    return true;
  }
  if (b.capacity == 0)
    return v.fail("group_counts need attribute 'capacity' > 0");
  const TensorView &counts = v.in(2);
  if (!v.hasDType(counts, "group_counts", DType::F32) || !v.hasRank(counts, "group_counts", 2))
    return false;
  if (counts.dim(0) < 1 || counts.dim(1) != b.experts())
    return v.fail("group_counts must be [ranks ≥ 1, " + std::to_string(b.experts()) +
                  "] (each rank's counts per expert), got " + counts.describe());
  b.groupRanks = counts.dim(0);
  if (attrs.hasInts("group_position")) {
    const std::vector<int64_t> &position = attrs.getInts("group_position");
    if (position.size() != 1)
      return v.fail("attribute 'group_position' must have one element, got " +
                    std::to_string(position.size()));
    b.groupPosition = position[0];
  } else if (!v.intAttr("group_position", &b.groupPosition, 0)) {
    return false;
  }
  if (b.groupPosition < 0 || b.groupPosition >= b.groupRanks)
    return v.fail("attribute 'group_position' must lie in [0, " + std::to_string(b.groupRanks) +
                  ") (group_counts' ranks), got " + std::to_string(b.groupPosition));
  return true;
}

/// Whether offsets [E + 1] cut R rows into E runs: offsets[0] = 0,
/// offsets[E] = R, never decreasing (every offset checked to lie in
/// [0, R] before any difference is taken).
LLMC_HOST_DEVICE inline bool validOffsets(IndexRead offsets, int64_t experts, int64_t rows) {
  if (offsets[0] != 0 || offsets[experts] != rows)
    return false;
  for (int64_t e = 0; e < experts; ++e)
    if (offsets[e + 1] < offsets[e] || offsets[e + 1] > rows)
      return false;
  return true;
}

LLMC_HOST_DEVICE inline bool clearRuns(RowRun *runs, int64_t n) {
  for (int64_t i = 0; i < n; ++i) runs[i] = {0, 0, 0};
  return false;
}

/// A group count as an exact row count, or −1 when it is not an integer in
/// [0, 2³¹) (NaN fails the first comparison).
LLMC_HOST_DEVICE inline int64_t groupCount(float count) {
  if (!(count >= 0.0f && count < 2147483648.0f))
    return -1;
  const int64_t n = static_cast<int64_t>(count);
  return static_cast<float>(n) == count ? n : -1;
}

/// Whether group_counts [D, E] are all row counts and row `groupPosition`
/// is this rank's (offsets already valid): a gather or position out of
/// step with the offsets would drop other tokens than one rank would.
LLMC_HOST_DEVICE inline bool validGroupCounts(const MoeExchangeBinding &b, IndexRead offsets,
                                              const float *groupCounts) {
  const int64_t experts = b.experts();
  for (int64_t q = 0; q < b.groupRanks; ++q)
    for (int64_t e = 0; e < experts; ++e) {
      const int64_t n = groupCount(groupCounts[q * experts + e]);
      if (n < 0 || (q == b.groupPosition && n != offsets[e + 1] - offsets[e]))
        return false;
    }
  return true;
}

/// The rows pack keeps of expert e's n: all without a capacity; else what
/// the capacity leaves after the ranks before this one (group counts
/// already valid).
LLMC_HOST_DEVICE inline int64_t packKept(const MoeExchangeBinding &b, const float *groupCounts,
                                         int64_t e, int64_t n) {
  if (b.capacity <= 0)
    return n;
  int64_t room = b.capacity;
  for (int64_t q = 0; groupCounts && q < b.groupPosition; ++q)
    room -= static_cast<int64_t>(groupCounts[q * b.experts() + e]);
  return room < 0 ? 0 : (room < n ? room : n);
}

/// pack (kept from the offsets, capacity and group counts) or unpack (kept given):
/// run e = p·El + j joins expert e's rows [offsets[e], …) and its place
/// in slot p. Pack copies slot ← rows, unpack rows ← slot.
LLMC_HOST_DEVICE inline bool planSlots(const MoeExchangeBinding &b, IndexRead offsets,
                                       IndexRead kept, const float *groupCounts, RowRun *runs) {
  const int64_t experts = b.experts();
  const bool pack = b.op == MoeExchangeOp::Pack;
  if (!validOffsets(offsets, experts, b.rows) ||
      (pack && groupCounts && !validGroupCounts(b, offsets, groupCounts)))
    return clearRuns(runs, experts);
  for (int64_t p = 0; p < b.ranks; ++p) {
    int64_t used = 0;
    for (int64_t j = 0; j < b.localExperts; ++j) {
      const int64_t e = p * b.localExperts + j, n = offsets[e + 1] - offsets[e];
      const int64_t k = pack ? packKept(b, groupCounts, e, n) : kept[e];
      if (k < 0 || k > n || k > b.slotRows - used)
        return clearRuns(runs, experts);
      const int64_t slotRow = p * b.slotRows + used;
      runs[e] = pack ? RowRun{slotRow, offsets[e], k} : RowRun{offsets[e], slotRow, k};
      used += k;
    }
  }
  return true;
}

/// regroup (to the expert-major order: run j·P + q) or ungroup (back to
/// the source-major slots: run q·El + j) for counts [P, El].
LLMC_HOST_DEVICE inline bool planGroups(const MoeExchangeBinding &b, IndexRead counts,
                                        RowRun *runs) {
  const int64_t ranks = b.ranks, local = b.localExperts;
  const bool regroup = b.op == MoeExchangeOp::Regroup;
  auto index = [&](int64_t q, int64_t j) { return regroup ? j * ranks + q : q * local + j; };
  // Source-major: each source's rows in its slot, in expert order.
  for (int64_t q = 0; q < ranks; ++q) {
    int64_t used = 0;
    for (int64_t j = 0; j < local; ++j) {
      const int64_t c = counts[q * local + j];
      if (c < 0 || c > b.slotRows - used)
        return clearRuns(runs, ranks * local);
      runs[index(q, j)] = {q * b.slotRows + used, 0, c};
      used += c;
    }
  }
  // Expert-major: for each expert, each source's rows in source order.
  int64_t next = 0;
  for (int64_t j = 0; j < local; ++j)
    for (int64_t q = 0; q < ranks; ++q) {
      RowRun &run = runs[index(q, j)];
      if (regroup)
        run = {next, run.to, run.rows};
      else
        run.from = next;
      next += run.rows;
    }
  return true;
}

} // namespace moe_exchange_impl

inline bool bindMoePack(const KernelArgs &args, std::string &error, MoeExchangeBinding *out) {
  using namespace moe_exchange_impl;
  Validator v("moe_pack", args, error);
  MoeExchangeBinding b;
  b.op = MoeExchangeOp::Pack;
  if (!v.arity(2, 3, 2) || !v.isFloat(v.in(0), "xs") || !bindCounts(v, v.out(1), "kept", b) ||
      !v.hasDType(v.out(1), "kept", DType::I32) || !bindSlots(v, v.out(0), "packed", b) ||
      !bindOffsets(v, v.in(1), b) || !v.intAttr("capacity", &b.capacity, 0))
    return false;
  if (b.capacity < 0)
    return v.fail("attribute 'capacity' must be ≥ 0 (0: unlimited), got " +
                  std::to_string(b.capacity));
  if (!bindRows(v, v.in(0), "xs", b) || !bindGroup(v, args.inputs.size() > 2, b))
    return false;
  *out = b;
  return true;
}

inline bool bindMoeUnpack(const KernelArgs &args, std::string &error, MoeExchangeBinding *out) {
  using namespace moe_exchange_impl;
  Validator v("moe_unpack", args, error);
  MoeExchangeBinding b;
  b.op = MoeExchangeOp::Unpack;
  if (!v.arity(3, 1) || !bindCounts(v, v.in(2), "kept", b) || !bindSlots(v, v.in(0), "packed", b) ||
      !bindOffsets(v, v.in(1), b) || !bindRows(v, v.out(0), "y", b))
    return false;
  *out = b;
  return true;
}

inline bool bindMoeRegroup(const KernelArgs &args, std::string &error, MoeExchangeBinding *out) {
  using namespace moe_exchange_impl;
  Validator v("moe_regroup", args, error);
  MoeExchangeBinding b;
  b.op = MoeExchangeOp::Regroup;
  if (!v.arity(2, 2) || !bindCounts(v, v.in(1), "counts", b) || !bindSlots(v, v.in(0), "recv", b) ||
      !v.hasType(v.out(0), "grouped", b.dtype, v.in(0).shape) ||
      !v.hasType(v.out(1), "local_offsets", DType::I32, {b.localExperts + 1}))
    return false;
  *out = b;
  return true;
}

inline bool bindMoeUngroup(const KernelArgs &args, std::string &error, MoeExchangeBinding *out) {
  using namespace moe_exchange_impl;
  Validator v("moe_ungroup", args, error);
  MoeExchangeBinding b;
  b.op = MoeExchangeOp::Ungroup;
  if (!v.arity(2, 1) || !bindCounts(v, v.in(1), "counts", b) ||
      !bindSlots(v, v.in(0), "grouped", b) || !v.hasType(v.out(0), "y", b.dtype, v.in(0).shape))
    return false;
  *out = b;
  return true;
}

LLMC_HOST_DEVICE inline bool planExchange(const MoeExchangeBinding &b, IndexRead first,
                                          IndexRead second, const float *groupCounts,
                                          RowRun *runs) {
  if (b.op == MoeExchangeOp::Pack || b.op == MoeExchangeOp::Unpack)
    return moe_exchange_impl::planSlots(b, first, second, groupCounts, runs);
  return moe_exchange_impl::planGroups(b, first, runs);
}

LLMC_HOST_DEVICE inline int64_t exchangeSource(const MoeExchangeBinding &b, const RowRun *runs,
                                               int64_t row) {
  // The runs an output row may lie in, sorted by `to` and contiguous: its
  // slot's El (pack, ungroup) or all E (unpack, regroup).
  int64_t lo = 0, hi = b.experts() - 1;
  if (b.op == MoeExchangeOp::Pack || b.op == MoeExchangeOp::Ungroup) {
    lo = row / b.slotRows * b.localExperts;
    hi = lo + b.localExperts - 1;
  }
  if (runs[lo].to > row)
    return -1;
  while (lo < hi) { // the last run starting at or before `row`
    const int64_t mid = (lo + hi + 1) / 2;
    if (runs[mid].to <= row)
      lo = mid;
    else
      hi = mid - 1;
  }
  const RowRun &run = runs[lo];
  return row < run.to + run.rows ? run.from + (row - run.to) : -1;
}

LLMC_HOST_DEVICE inline void writeExchangeCounts(const MoeExchangeBinding &b, const RowRun *runs,
                                                 bool valid, int32_t *out) {
  if (b.op == MoeExchangeOp::Pack) {
    for (int64_t e = 0; e < b.experts(); ++e) out[e] = static_cast<int32_t>(runs[e].rows);
  } else if (b.op == MoeExchangeOp::Regroup) {
    // Group j starts at its first source's run (run j·P); invalid counts
    // give one empty group after another and the last one every row.
    for (int64_t j = 0; j < b.localExperts; ++j)
      out[j] = valid ? static_cast<int32_t>(runs[j * b.ranks].to) : 0;
    const RowRun &last = runs[b.experts() - 1];
    out[b.localExperts] = static_cast<int32_t>(valid ? last.to + last.rows : b.packedRows());
  }
}

} // namespace llmc::contracts

#endif
