//===- moe_exchange_test.cpp - expert-parallel row copies -----------------===//
//
// moe_pack, moe_unpack, moe_regroup and moe_ungroup are conformance cases
// (Conformance.h) against the float64 references of
// kernels/reference/moe_exchange.cpp, exactly (copies only), CUDA against
// the CPU exactly too. Shapes: one rank and one expert up to 8 ranks × 8
// experts over 2048 routed rows; experts no row goes to; slots filled
// exactly and with padding; a capacity that drops rows and one that drops
// none; f32, bf16, f16; i32 and i64 offsets and counts. Invalid data
// (offsets decreasing, not starting at 0 or ending past R, a slot
// overflowing, kept beyond an expert's rows, negative counts) give NaN
// outputs. moe_pack with group_counts (the batch's capacity over D ranks):
// D = 1 to 6, this rank first, in the middle or last, earlier ranks that
// used up an expert's capacity entirely, partly or not at all, a capacity
// larger than everything; group counts that are not row counts (a
// fraction, negative, NaN, past 2³¹, this rank's row not its offsets')
// give NaN. Here also: pack → unpack and regroup → ungroup round trips,
// the batch's capacity split over ranks keeping exactly the tokens one
// rank keeps, and the binding errors with their messages.

#include "Conformance.h"

#include <algorithm>
#include <random>

namespace llmc::test {
namespace {

struct ExchangeShape {
  int64_t ranks, localExperts, rows, width;
  int64_t capacity; ///< 0: unlimited
  int64_t slack;    ///< slot rows beyond what the fullest slot needs
  bool idleExperts = false; ///< every third expert gets no row
};

const std::vector<ExchangeShape> kShapes = {
    {1, 1, 3, 1, 0, 0},      {1, 4, 12, 5, 0, 0},         {2, 4, 16, 7, 3, 0},
    {4, 2, 40, 33, 0, 5},    {3, 5, 300, 64, 0, 2, true}, {8, 8, 2048, 128, 40, 0},
    {2, 32, 3000, 96, 0, 1}, {2, 3, 50, 9, 1000, 4},
};

std::string shapeLabel(DType dtype, const ExchangeShape &s, DType idType) {
  std::string label = std::string(dtypeName(dtype)) + "_P" + std::to_string(s.ranks) + "_El" +
                      std::to_string(s.localExperts) + "_R" + std::to_string(s.rows) + "_C" +
                      std::to_string(s.width) + "_ids_" + dtypeName(idType);
  if (s.capacity)
    label += "_capacity" + std::to_string(s.capacity);
  if (s.slack)
    label += "_slack" + std::to_string(s.slack);
  return label + (s.idleExperts ? "_idle_experts" : "");
}

/// offsets [E + 1] of `rows` rows routed to random experts.
RefTensor routedOffsets(const ExchangeShape &s, uint64_t seed) {
  const int64_t experts = s.ranks * s.localExperts;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> pick(0, experts - 1);
  std::vector<int64_t> counts(static_cast<size_t>(experts), 0);
  for (int64_t r = 0; r < s.rows; ++r) {
    int64_t e = pick(rng);
    while (s.idleExperts && experts > 1 && e % 3 == 0) e = pick(rng);
    ++counts[e];
  }
  RefTensor offsets = RefTensor::zeros({experts + 1});
  for (int64_t e = 0; e < experts; ++e)
    offsets.data[e + 1] = offsets.data[e] + static_cast<double>(counts[e]);
  return offsets;
}

/// Rows per slot: the fullest slot's kept rows plus the shape's slack.
int64_t slotRowsFor(const ExchangeShape &s, const RefTensor &offsets) {
  int64_t fullest = 0;
  for (int64_t p = 0; p < s.ranks; ++p) {
    int64_t sum = 0;
    for (int64_t j = 0; j < s.localExperts; ++j) {
      const int64_t e = p * s.localExperts + j;
      const auto n = static_cast<int64_t>(offsets.data[e + 1] - offsets.data[e]);
      sum += s.capacity > 0 ? std::min(n, s.capacity) : n;
    }
    fullest = std::max(fullest, sum);
  }
  return fullest + s.slack;
}

/// What is wrong with a case's index data.
enum class Fault {
  None,
  Decreasing,     ///< offsets go down between two experts
  WrongTotal,     ///< offsets[E] ≠ R
  SlotOverflow,   ///< one slot's rows exceed S
  KeptPastExpert, ///< unpack: kept beyond an expert's rows
  NegativeCount,  ///< a negative kept or count
};

const char *faultName(Fault f) {
  switch (f) {
  case Fault::None: return "";
  case Fault::Decreasing: return "_decreasing";
  case Fault::WrongTotal: return "_wrong_total";
  case Fault::SlotOverflow: return "_slot_overflow";
  case Fault::KeptPastExpert: return "_kept_past_expert";
  case Fault::NegativeCount: return "_negative";
  }
  return "";
}

/// The case's offsets and slot rows, with an offsets fault applied.
std::pair<RefTensor, int64_t> faultyOffsets(const ExchangeShape &s, Fault fault, uint64_t seed) {
  RefTensor offsets = routedOffsets(s, seed);
  int64_t slotRows = slotRowsFor(s, offsets);
  const int64_t experts = offsets.numel() - 1;
  if (fault == Fault::Decreasing && experts > 1) // expert 1 ends before it starts
    offsets.data[1] = offsets.data[2] + 1;
  if (fault == Fault::WrongTotal)
    offsets.data[experts] += 1;
  if (fault == Fault::SlotOverflow)
    slotRows = std::max<int64_t>(0, slotRows - s.slack - 1);
  return {offsets, slotRows};
}

ConformanceCase packCase(DType dtype, const ExchangeShape &s, DType idType, Fault fault,
                         uint64_t seed) {
  return {"moe_pack", shapeLabel(dtype, s, idType) + faultName(fault), [=] {
            auto [offsets, slotRows] = faultyOffsets(s, fault, seed);
            KernelCall k;
            k.input(randomTensor({s.rows, s.width}, seed + 1), dtype);
            k.input(offsets, idType);
            k.output(dtype, {s.ranks * slotRows, s.width});
            k.output(DType::I32, {s.ranks, s.localExperts});
            k.attrs = attrs({}, {{"capacity", s.capacity}});
            k.reference = [s, slotRows = slotRows](const std::vector<RefTensor> &in) {
              return ref::moePack(in[0], in[1], s.ranks, slotRows, s.capacity);
            };
            k.tolerances = k.cudaTolerances = {0.0};
            return k;
          }};
}

ConformanceCase unpackCase(DType dtype, const ExchangeShape &s, DType idType, Fault fault,
                           uint64_t seed) {
  return {"moe_unpack", shapeLabel(dtype, s, idType) + faultName(fault), [=] {
            auto [offsets, slotRows] = faultyOffsets(s, Fault::None, seed);
            RefTensor kept = ref::moePack(RefTensor::zeros({s.rows, 1}), offsets, s.ranks, slotRows,
                                          s.capacity)[1];
            if (fault == Fault::KeptPastExpert) // one row more than expert 0 has
              kept.data[0] = offsets.data[1] - offsets.data[0] + 1;
            if (fault == Fault::NegativeCount)
              kept.data.back() = -1;
            if (fault == Fault::SlotOverflow)
              slotRows = std::max<int64_t>(0, slotRows - s.slack - 1);
            if (fault == Fault::Decreasing || fault == Fault::WrongTotal)
              offsets = faultyOffsets(s, fault, seed).first;
            KernelCall k;
            k.input(randomTensor({s.ranks * slotRows, s.width}, seed + 1), dtype);
            k.input(offsets, idType);
            k.input(kept, idType);
            k.output(dtype, {s.rows, s.width});
            k.reference = [rows = s.rows](const std::vector<RefTensor> &in) {
              return std::vector<RefTensor>{ref::moeUnpack(in[0], in[1], in[2], rows)};
            };
            k.tolerances = k.cudaTolerances = {0.0};
            return k;
          }};
}

/// counts [P, El] that a rank receives: each source's slot filled up to
/// S − slack rows, at random among the experts.
RefTensor receivedCounts(const ExchangeShape &s, int64_t slotRows, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> pick(0, s.localExperts - 1);
  RefTensor counts = RefTensor::zeros({s.ranks, s.localExperts});
  std::uniform_int_distribution<int64_t> fill(0, std::max<int64_t>(0, slotRows - s.slack));
  for (int64_t q = 0; q < s.ranks; ++q) {
    const int64_t rows = q == 0 ? slotRows - s.slack : fill(rng); // one slot full
    for (int64_t r = 0; r < rows; ++r) counts.data[q * s.localExperts + pick(rng)] += 1;
  }
  return counts;
}

ConformanceCase groupsCase(const char *kernel, DType dtype, const ExchangeShape &s, DType idType,
                           Fault fault, uint64_t seed) {
  return {kernel, shapeLabel(dtype, s, idType) + faultName(fault), [=] {
            const int64_t slotRows = slotRowsFor(s, routedOffsets(s, seed));
            RefTensor counts = receivedCounts(s, slotRows, seed + 2);
            if (fault == Fault::NegativeCount)
              counts.data.back() = -1;
            if (fault == Fault::SlotOverflow)
              counts.data[0] += static_cast<double>(s.slack + 1);
            const bool regroup = std::string(kernel) == "moe_regroup";
            KernelCall k;
            k.input(randomTensor({s.ranks * slotRows, s.width}, seed + 1), dtype);
            k.input(counts, idType);
            k.output(dtype, {s.ranks * slotRows, s.width});
            if (regroup)
              k.output(DType::I32, {s.localExperts + 1});
            k.reference = [regroup](const std::vector<RefTensor> &in) {
              return regroup ? ref::moeRegroup(in[0], in[1])
                             : std::vector<RefTensor>{ref::moeUngroup(in[0], in[1])};
            };
            k.tolerances = k.cudaTolerances = {0.0};
            return k;
          }};
}

/// A pack over D ranks of the batch: this rank at `position`, `capacity`
/// tokens per expert for the whole batch.
struct GroupShape {
  ExchangeShape rank; ///< this rank's rows (its capacity field unused)
  int64_t groupRanks, position, capacity;
  /// The earlier ranks' counts drawn like the later ones' instead of
  /// aimed at the capacity (with a large one: nothing dropped).
  bool plainPriors = false;
};

/// What is wrong with a group case's group_counts.
enum class GroupFault { None, Fraction, Negative, NaN, PastInt32, NotThisRank };

const char *groupFaultName(GroupFault f) {
  switch (f) {
  case GroupFault::None: return "";
  case GroupFault::Fraction: return "_fraction";
  case GroupFault::Negative: return "_negative";
  case GroupFault::NaN: return "_nan";
  case GroupFault::PastInt32: return "_past_int32";
  case GroupFault::NotThisRank: return "_not_this_rank";
  }
  return "";
}

/// group_counts [D, E]: row `position` this rank's n_e; the earlier rows
/// sum, per expert in turn, to more than the capacity (nothing left),
/// to leave part of n_e, or to leave all of it (or, plainPriors, are
/// drawn as the later rows are: at random in [0, 2·n_e]).
RefTensor groupCounts(const GroupShape &g, const RefTensor &offsets, uint64_t seed) {
  const int64_t experts = offsets.numel() - 1;
  std::mt19937_64 rng(seed);
  RefTensor counts = RefTensor::zeros({g.groupRanks, experts});
  for (int64_t e = 0; e < experts; ++e) {
    const auto n = static_cast<int64_t>(offsets.data[e + 1] - offsets.data[e]);
    int64_t prior = 0;
    if (e % 3 == 0)
      prior = g.capacity + e % 2; // exhausted
    else if (e % 3 == 1)
      prior = std::max<int64_t>(0, g.capacity - std::max<int64_t>(1, n / 2)); // partly
    else
      prior = std::max<int64_t>(0, g.capacity - n - e % 2); // all of n_e left
    for (int64_t q = 0; q < g.position; ++q) { // split the prior over the earlier ranks
      const int64_t share = g.plainPriors ? std::uniform_int_distribution<int64_t>(0, 2 * n)(rng)
                            : q + 1 == g.position
                                ? prior
                                : std::uniform_int_distribution<int64_t>(0, prior)(rng);
      counts.data[q * experts + e] = static_cast<double>(share);
      prior -= share;
    }
    counts.data[g.position * experts + e] = static_cast<double>(n);
    for (int64_t q = g.position + 1; q < g.groupRanks; ++q)
      counts.data[q * experts + e] =
          static_cast<double>(std::uniform_int_distribution<int64_t>(0, 2 * n)(rng));
  }
  return counts;
}

void applyGroupFault(RefTensor &counts, const GroupShape &g, GroupFault fault) {
  const int64_t experts = counts.shape[1], last = counts.numel() - 1;
  switch (fault) {
  case GroupFault::None: break;
  case GroupFault::Fraction: counts.data[last] += 0.5; break;
  case GroupFault::Negative: counts.data[0] = -1; break;
  case GroupFault::NaN: counts.data[last / 2] = std::nan(""); break;
  case GroupFault::PastInt32: counts.data[last] = 3.0e9; break;
  case GroupFault::NotThisRank: counts.data[g.position * experts + experts - 1] += 1; break;
  }
}

std::string groupLabel(DType dtype, const GroupShape &g, GroupFault fault) {
  return shapeLabel(dtype, g.rank, DType::I32) + "_D" + std::to_string(g.groupRanks) + "_at" +
         std::to_string(g.position) + "_batch_capacity" + std::to_string(g.capacity) +
         (g.plainPriors ? "_plain_priors" : "") + groupFaultName(fault);
}

ConformanceCase groupPackCase(DType dtype, const GroupShape &g, GroupFault fault, uint64_t seed) {
  return {"moe_pack", groupLabel(dtype, g, fault), [=] {
            const ExchangeShape &s = g.rank;
            const RefTensor offsets = routedOffsets(s, seed);
            RefTensor counts = groupCounts(g, offsets, seed + 2);
            // Slots as full as this rank's kept rows make them, plus slack.
            const int64_t bound = s.rows + 1;
            const RefTensor kept = ref::moePack(RefTensor::zeros({s.rows, 1}), offsets, s.ranks,
                                                bound, g.capacity, &counts, g.position)[1];
            int64_t slotRows = 0;
            for (int64_t p = 0; p < s.ranks; ++p) {
              int64_t sum = 0;
              for (int64_t j = 0; j < s.localExperts; ++j)
                sum += static_cast<int64_t>(kept.data[p * s.localExperts + j]);
              slotRows = std::max(slotRows, sum);
            }
            slotRows += s.slack;
            applyGroupFault(counts, g, fault);
            KernelCall k;
            k.input(randomTensor({s.rows, s.width}, seed + 1), dtype);
            k.input(offsets, DType::I32);
            k.input(counts, DType::F32);
            k.output(dtype, {s.ranks * slotRows, s.width});
            k.output(DType::I32, {s.ranks, s.localExperts});
            k.attrs = attrs({}, {{"capacity", g.capacity}});
            k.attrs.setInts("group_position", {g.position});
            k.reference = [g, slotRows](const std::vector<RefTensor> &in) {
              return ref::moePack(in[0], in[1], g.rank.ranks, slotRows, g.capacity, &in[2],
                                  g.position);
            };
            k.tolerances = k.cudaTolerances = {0.0};
            return k;
          }};
}

std::vector<ConformanceCase> groupPackCases() {
  std::vector<ConformanceCase> cases;
  uint64_t seed = 18500;
  const ExchangeShape small{2, 4, 40, 7, 0, 0}, idle{3, 5, 300, 64, 0, 2, true},
      wide{8, 8, 2048, 128, 0, 1};
  const std::vector<GroupShape> shapes = {
      {small, 1, 0, 4},       {small, 2, 0, 6},
      {small, 2, 1, 6},       {small, 4, 2, 5},
      {small, 4, 3, 8},       {idle, 3, 1, 20},
      {idle, 6, 5, 25},       {idle, 5, 0, 18},
      {wide, 4, 2, 40},       {wide, 2, 1, 16},
      {idle, 4, 3, 60, true}, {small, 3, 2, 1000, true}, // capacity past everything
  };
  for (DType dtype : kFloatTypes)
    for (const GroupShape &g : shapes)
      cases.push_back(groupPackCase(dtype, g, GroupFault::None, seed += 5));
  for (GroupFault fault : {GroupFault::Fraction, GroupFault::Negative, GroupFault::NaN,
                           GroupFault::PastInt32, GroupFault::NotThisRank}) {
    cases.push_back(groupPackCase(DType::F32, {small, 4, 2, 5}, fault, seed += 5));
    cases.push_back(groupPackCase(DType::BF16, {idle, 3, 0, 20}, fault, seed += 5));
  }
  return cases;
}

LLMC_CONFORMANCE_CASES(MoePackGroup, groupPackCases);

std::vector<ConformanceCase> exchangeCases() {
  std::vector<ConformanceCase> cases;
  uint64_t seed = 18000;
  auto all = [&](DType dtype, const ExchangeShape &s, DType idType, Fault fault) {
    if (fault != Fault::KeptPastExpert && fault != Fault::NegativeCount)
      cases.push_back(packCase(dtype, s, idType, fault, seed += 5));
    cases.push_back(unpackCase(dtype, s, idType, fault, seed += 5));
    if (fault == Fault::None || fault == Fault::SlotOverflow || fault == Fault::NegativeCount) {
      cases.push_back(groupsCase("moe_regroup", dtype, s, idType, fault, seed += 5));
      cases.push_back(groupsCase("moe_ungroup", dtype, s, idType, fault, seed += 5));
    }
  };
  for (DType dtype : kFloatTypes)
    for (const ExchangeShape &s : kShapes) all(dtype, s, DType::I32, Fault::None);
  all(DType::F32, {2, 4, 16, 7, 3, 0}, DType::I64, Fault::None);
  all(DType::BF16, {4, 2, 40, 33, 0, 5}, DType::I64, Fault::None);
  for (Fault fault : {Fault::Decreasing, Fault::WrongTotal, Fault::SlotOverflow,
                      Fault::KeptPastExpert, Fault::NegativeCount}) {
    all(DType::F32, {4, 2, 40, 33, 0, 5}, DType::I32, fault);
    all(DType::BF16, {2, 4, 16, 7, 3, 2}, DType::I64, fault);
  }
  return cases;
}

LLMC_CONFORMANCE_CASES(MoeExchange, exchangeCases);

/// pack then unpack gives back every kept row and zeros for the dropped
/// ones; regroup then ungroup gives back every received row and zeros for
/// each slot's padding.
TEST(MoeExchangeKernels, RoundTrips) {
  const ExchangeShape s{4, 3, 500, 17, 30, 3};
  const RefTensor offsets = routedOffsets(s, 18901);
  const int64_t slotRows = slotRowsFor(s, offsets), packedRows = s.ranks * slotRows;
  Buffer xs = Buffer::of(randomTensor({s.rows, s.width}, 18902), DType::F32);
  Buffer off = Buffer::of(offsets, DType::I32);
  const RefTensor x = xs.toRef(); // as stored
  Buffer packed(DType::F32, {packedRows, s.width}), kept(DType::I32, {s.ranks, s.localExperts});
  Buffer back(DType::F32, {s.rows, s.width});
  ASSERT_TRUE(
      runKernel("moe_pack", {&xs, &off}, {&packed, &kept}, attrs({}, {{"capacity", s.capacity}})));
  ASSERT_TRUE(runKernel("moe_unpack", {&packed, &off, &kept}, {&back}));
  const RefTensor got = back.toRef(), k = kept.toRef();
  int64_t dropped = 0;
  for (int64_t e = 0; e < offsets.numel() - 1; ++e)
    for (int64_t r = int64_t(offsets.data[e]); r < int64_t(offsets.data[e + 1]); ++r) {
      const bool keptRow = r - offsets.data[e] < k.data[e];
      dropped += !keptRow;
      for (int64_t i = 0; i < s.width; ++i)
        ASSERT_EQ(got.data[r * s.width + i], keptRow ? x.data[r * s.width + i] : 0.0)
            << "row " << r << " of expert " << e;
    }
  EXPECT_GT(dropped, 0) << "the capacity should drop rows in this case";

  Buffer grouped(DType::F32, {packedRows, s.width}), localOffsets(DType::I32, {s.localExperts + 1});
  Buffer slots(DType::F32, {packedRows, s.width});
  ASSERT_TRUE(runKernel("moe_regroup", {&packed, &kept}, {&grouped, &localOffsets}));
  ASSERT_TRUE(runKernel("moe_ungroup", {&grouped, &kept}, {&slots}));
  EXPECT_EQ(slots.toRef().data, packed.toRef().data);
  const RefTensor lo = localOffsets.toRef();
  double total = 0;
  for (double c : k.data) total += c;
  EXPECT_EQ(lo.data.front(), 0.0);
  EXPECT_EQ(lo.data.back(), total);
}

/// The rows of `tokens` (each routed to one expert) that moe_pack keeps
/// when one rank holds them all: token ids (1-based, as row values), per
/// expert, with group counts [D, E] when the tokens are split into D
/// contiguous parts (batch order) and each part packs at its position.
std::vector<std::vector<int64_t>> keptTokens(const std::vector<int64_t> &expertOf, int64_t experts,
                                             int64_t capacity, int64_t parts) {
  const auto tokens = static_cast<int64_t>(expertOf.size());
  // Each part's expert-sorted rows (token order within an expert).
  std::vector<std::vector<std::vector<int64_t>>> rowsOf(
      static_cast<size_t>(parts), std::vector<std::vector<int64_t>>(static_cast<size_t>(experts)));
  for (int64_t t = 0; t < tokens; ++t) rowsOf[t * parts / tokens][expertOf[t]].push_back(t + 1);
  RefTensor counts = RefTensor::zeros({parts, experts});
  for (int64_t q = 0; q < parts; ++q)
    for (int64_t e = 0; e < experts; ++e)
      counts.data[q * experts + e] = static_cast<double>(rowsOf[q][e].size());
  std::vector<std::vector<int64_t>> kept(static_cast<size_t>(experts));
  for (int64_t q = 0; q < parts; ++q) {
    RefTensor xs = RefTensor::zeros({0, 1}), offsets = RefTensor::zeros({experts + 1});
    for (int64_t e = 0; e < experts; ++e) {
      for (int64_t id : rowsOf[q][e]) xs.data.push_back(static_cast<double>(id));
      offsets.data[e + 1] = offsets.data[e] + static_cast<double>(rowsOf[q][e].size());
    }
    const int64_t rows = static_cast<int64_t>(xs.data.size());
    xs.shape = {rows, 1};
    Buffer x = Buffer::of(xs, DType::F32), off = Buffer::of(offsets, DType::I32),
           group = Buffer::of(counts, DType::F32);
    Buffer packed(DType::F32, {rows, 1}), k(DType::I32, {1, experts});
    KernelAttrs a = attrs({}, {{"capacity", capacity}});
    a.setInts("group_position", {q});
    EXPECT_TRUE(runKernel("moe_pack", {&x, &off, &group}, {&packed, &k}, a));
    const RefTensor got = packed.toRef(), n = k.toRef();
    for (int64_t e = 0, row = 0; e < experts; row += static_cast<int64_t>(n.data[e++]))
      for (int64_t i = 0; i < n.data[e]; ++i)
        kept[e].push_back(static_cast<int64_t>(got.data[row + i]));
  }
  for (std::vector<int64_t> &ids : kept) std::sort(ids.begin(), ids.end());
  return kept;
}

/// The batch's capacity gives the same model in every layout: split over
/// 2, 3 or 7 ranks, the ranks together keep exactly the tokens one rank
/// holding the batch keeps, each expert's earliest `capacity`.
TEST(MoeExchangeKernels, BatchCapacityKeepsTheSameTokensInEveryLayout) {
  const int64_t experts = 5, tokens = 211, capacity = 30;
  std::mt19937_64 rng(18950);
  std::vector<int64_t> expertOf(static_cast<size_t>(tokens));
  for (int64_t &e : expertOf) e = std::uniform_int_distribution<int64_t>(0, experts - 1)(rng);
  const std::vector<std::vector<int64_t>> whole = keptTokens(expertOf, experts, capacity, 1);
  int64_t droppedExperts = 0;
  for (int64_t e = 0; e < experts; ++e) {
    std::vector<int64_t> earliest;
    for (int64_t t = 0; t < tokens && int64_t(earliest.size()) < capacity; ++t)
      if (expertOf[t] == e)
        earliest.push_back(t + 1);
    EXPECT_EQ(whole[e], earliest) << "expert " << e;
    droppedExperts += std::count(expertOf.begin(), expertOf.end(), e) > capacity;
  }
  EXPECT_GT(droppedExperts, 0) << "the capacity should drop tokens in this case";
  for (int64_t parts : {2, 3, 7}) {
    SCOPED_TRACE(std::to_string(parts) + " ranks");
    EXPECT_EQ(keptTokens(expertOf, experts, capacity, parts), whole);
  }
}

TEST(MoeExchangeKernels, BindErrorsNameTheOperand) {
  const TensorView xs = typeOnly(DType::F32, {10, 4}), off = typeOnly(DType::I32, {7}),
                   packed = typeOnly(DType::F32, {12, 4}), kept = typeOnly(DType::I32, {2, 3}),
                   lo = typeOnly(DType::I32, {4});
  const KernelAttrs cap = attrs({}, {{"capacity", 2}});
  EXPECT_EQ(bindError("moe_pack", {xs, off}, {packed, kept}, cap), "");
  EXPECT_EQ(bindError("moe_pack", {xs, typeOnly(DType::I32, {6})}, {packed, kept}),
            "moe_pack: offsets must be [7] for 2 ranks × 3 experts, got i32[6]");
  EXPECT_EQ(bindError("moe_pack", {xs, off}, {typeOnly(DType::F32, {11, 4}), kept}),
            "moe_pack: packed must have a multiple of 2 rows (one slot per rank), got f32[11x4]");
  EXPECT_EQ(bindError("moe_pack", {xs, off}, {packed, typeOnly(DType::I64, {2, 3})}),
            "moe_pack: kept must be i32, got i64[2x3]");
  EXPECT_EQ(bindError("moe_pack", {xs, off}, {packed, typeOnly(DType::I32, {0, 3})}),
            "moe_pack: kept must have at least one rank and one expert, got i32[0x3]");
  EXPECT_EQ(bindError("moe_pack", {typeOnly(DType::F32, {10, 5}), off}, {packed, kept}),
            "moe_pack: xs must be f32[10x4], got f32[10x5]");
  EXPECT_EQ(bindError("moe_pack", {xs, off}, {packed, kept}, attrs({}, {{"capacity", -1}})),
            "moe_pack: attribute 'capacity' must be ≥ 0 (0: unlimited), got -1");

  // The batch's capacity: group_counts [D, E] and group_position, an int
  // or one element (as a rank offset leaves it).
  const TensorView group = typeOnly(DType::F32, {3, 6});
  KernelAttrs at2 = cap, atInt = cap, twoElements = cap, past = cap;
  at2.setInts("group_position", {2});
  atInt.setInt("group_position", 1);
  twoElements.setInts("group_position", {0, 1});
  past.setInts("group_position", {3});
  EXPECT_EQ(bindError("moe_pack", {xs, off, group}, {packed, kept}, cap), "");
  EXPECT_EQ(bindError("moe_pack", {xs, off, group}, {packed, kept}, at2), "");
  EXPECT_EQ(bindError("moe_pack", {xs, off, group}, {packed, kept}, atInt), "");
  EXPECT_EQ(bindError("moe_pack", {xs, off, group}, {packed, kept}),
            "moe_pack: group_counts need attribute 'capacity' > 0");
  EXPECT_EQ(bindError("moe_pack", {xs, off, typeOnly(DType::BF16, {3, 6})}, {packed, kept}, cap),
            "moe_pack: group_counts must be f32, got bf16[3x6]");
  EXPECT_EQ(bindError("moe_pack", {xs, off, typeOnly(DType::F32, {3, 5})}, {packed, kept}, cap),
            "moe_pack: group_counts must be [ranks ≥ 1, 6] (each rank's counts per expert), got "
            "f32[3x5]");
  EXPECT_EQ(bindError("moe_pack", {xs, off, typeOnly(DType::F32, {0, 6})}, {packed, kept}, cap),
            "moe_pack: group_counts must be [ranks ≥ 1, 6] (each rank's counts per expert), got "
            "f32[0x6]");
  EXPECT_EQ(bindError("moe_pack", {xs, off, typeOnly(DType::F32, {18})}, {packed, kept}, cap),
            "moe_pack: group_counts must have rank 2, got f32[18]");
  EXPECT_EQ(bindError("moe_pack", {xs, off, group}, {packed, kept}, past),
            "moe_pack: attribute 'group_position' must lie in [0, 3) (group_counts' ranks), got 3");
  EXPECT_EQ(bindError("moe_pack", {xs, off, group}, {packed, kept}, twoElements),
            "moe_pack: attribute 'group_position' must have one element, got 2");
  EXPECT_EQ(bindError("moe_pack", {xs, off}, {packed, kept}, at2),
            "moe_pack: attribute 'group_position' needs the group_counts input");
  EXPECT_EQ(bindError("moe_pack", {xs, off, group, group}, {packed, kept}, cap),
            "moe_pack: expected 2 to 3 inputs, got 4");

  const TensorView y = typeOnly(DType::F32, {10, 4});
  EXPECT_EQ(bindError("moe_unpack", {packed, off, typeOnly(DType::I64, {2, 3})}, {y}), "");
  EXPECT_EQ(bindError("moe_unpack", {packed, off, typeOnly(DType::F32, {2, 3})}, {y}),
            "moe_unpack: kept must be i32 or i64, got f32[2x3]");
  EXPECT_EQ(bindError("moe_unpack", {packed, off, kept}, {typeOnly(DType::BF16, {10, 4})}),
            "moe_unpack: y must be f32[10x4], got bf16[10x4]");
  EXPECT_EQ(bindError("moe_unpack", {packed, off}, {y}), "moe_unpack: expected 3 inputs, got 2");

  EXPECT_EQ(bindError("moe_regroup", {packed, kept}, {packed, lo}), "");
  EXPECT_EQ(bindError("moe_regroup", {packed, kept}, {packed, typeOnly(DType::I32, {3})}),
            "moe_regroup: local_offsets must be i32[4], got i32[3]");
  EXPECT_EQ(bindError("moe_regroup", {typeOnly(DType::I32, {12, 4}), kept}, {packed, lo}),
            "moe_regroup: recv must be f32, bf16 or f16, got i32[12x4]");
  EXPECT_EQ(bindError("moe_regroup", {packed, typeOnly(DType::I32, {6})}, {packed, lo}),
            "moe_regroup: counts must have rank 2, got i32[6]");

  EXPECT_EQ(bindError("moe_ungroup", {packed, kept}, {packed}), "");
  EXPECT_EQ(bindError("moe_ungroup", {packed, kept}, {typeOnly(DType::F32, {12, 5})}),
            "moe_ungroup: y must be f32[12x4], got f32[12x5]");
  EXPECT_EQ(bindError("moe_ungroup", {typeOnly(DType::F32, {13, 4}), kept}, {packed}),
            "moe_ungroup: grouped must have a multiple of 2 rows (one slot per rank), got "
            "f32[13x4]");
}

} // namespace
} // namespace llmc::test
