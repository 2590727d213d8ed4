//===- Search.h - the layout search behind llmc plan -----------*- C++ -*-===//
//
// Internal to compiler/plan: the enumeration of layouts (Search.cpp) and
// the pricing of one layout from probe pieces (Compose.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMPILER_PLAN_SEARCH_H
#define LLMC_COMPILER_PLAN_SEARCH_H

#include "compiler/plan/OffloadCost.h"
#include "compiler/plan/Planner.h"
#include "compiler/plan/Probes.h"
#include "passes/lib/MicrobatchSchedule.h"

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace llmc::plan {

/// The family a layout belongs to: "tp8 pp2 dp64" (and " ep2").
std::string familyOf(const Layout &l);

/// One stage's host traffic per rank under `l` (none without offloading).
OffloadTraffic offloadTraffic(const Layout &l, const Piece &stage);

struct ModelShape {
  int64_t layers = 0, heads = 0, kvHeads = 0, seqLen = 0;
  double parameters = 0;
  double dropout = 0;
  int64_t experts = 0; ///< experts per MoE layer; 0: a dense model
};

/// The model's shape (layers, heads, parameters, sequence), from its builder.
bool modelShape(const Request &request, ModelShape &shape, std::string &error);

/// The schedule and its unit-cost simulation (in-flight counts) for one
/// (kind, p, m, v), built once.
struct ScheduleInfo {
  pipeline::Spec spec;
  std::vector<std::vector<pipeline::Action>> actions;
  pipeline::Stats unit;
  std::string error;
};

class Search {
public:
  Search(const Request &request, const ModelShape &shape, Result &result)
      : request(request), shape(shape), result(result), probes(request),
        memoryCap(request.cluster.memoryBytes) {}

  /// Every candidate layout, evaluated; fitting ones go to result.ranked.
  void run();
  /// Stage arena bytes of `layout` by composition.
  bool stageBytes(const Layout &layout, std::vector<double> &bytes, std::string &error);
  ProbeCache &cache() { return probes; }

private:
  /// result.modelFlopsPerStep, from the one-rank probe.
  void countModelFlops();
  /// Every layout of every family the request allows, priced; returns the
  /// families searched, in order.
  std::vector<std::string> searchLayouts();
  /// The tp sizes to search: powers of two within a node that divide the
  /// heads (the others rejected with the reason).
  std::vector<int64_t> tensorParallelSizes();
  /// The (optimizer, activations) offloading choices to try, fewest first.
  std::vector<std::pair<bool, bool>> offloadChoices() const;
  /// The schedules (kind, chunks per stage) a pp-stage layout of
  /// `microbatches` may take.
  std::vector<std::pair<std::string, int64_t>> scheduleChoices(int64_t pp,
                                                               int64_t microbatches) const;
  /// Every layout of the family of `named` (tp, pp, dp, ep set); false
  /// when the global batch divides into no microbatch size tried.
  bool searchFamily(const Layout &named, const std::string &family,
                    const std::vector<std::pair<bool, bool>> &offloads);
  /// Each offloading choice of `l`. By default a layout is offloaded only
  /// where it does not fit without (docs/planner.md): the optimizer or the
  /// activations where the plain layout is too big, both where each alone
  /// is. Activations not under pipeline stages (not yet priced per stage)
  /// nor with a budget (there the compiler's own search offloads layer by
  /// layer where that is cheaper than recomputing).
  void considerOffloaded(Layout l, const std::string &family,
                         const std::vector<std::pair<bool, bool>> &offloads);
  /// Evaluates `l`: ranks it, or notes why not for its family. True when
  /// it was priced and does not fit the memory.
  bool consider(const Layout &l, const std::string &family);
  /// Rejects the families with no row kept, with their reason, and notes
  /// those that fit only offloaded.
  void reportFamilies(const std::vector<std::string> &families,
                      const std::map<std::string, std::pair<double, std::string>> &best);
  /// One rejection per distinct compiler refusal.
  void reportRefusals();
  /// Rejects each family whose best row is slower than the fastest.
  void reportSlowerFamilies(const std::map<std::string, std::pair<double, std::string>> &best);
  bool autoOffload() const { return request.offload.empty(); }

  const ScheduleInfo &schedule(const Layout &layout);
  /// The expert-parallel sizes a layout with `batchRanks` (dp × ep) batch
  /// ranks may take: 1 alone for a dense model; for a mixture of experts
  /// each divisor of `batchRanks` that divides the experts (and --ep).
  std::vector<int64_t> expertParallelSizes(int64_t batchRanks) const;
  /// Whether the compiler accepts the combination of features `layout`
  /// uses (checked once per combination on a two-stage, two-rank, one-
  /// layer-per-chunk version of it).
  bool accepted(const Layout &layout, std::string &why);
  /// Sorts result.ranked and confirms with accepted() the rows the request
  /// shows and each family's best, fastest first; a refused row leaves the
  /// ranking (its message kept in `refusals`). Returns each family's best
  /// (step seconds, label) among the rows kept.
  std::map<std::string, std::pair<double, std::string>> confirmShownRows();
  /// Composes and prices `layout`; false with `why` when it cannot run or
  /// does not fit.
  bool evaluate(const Layout &layout, Prediction &prediction, std::string &why,
                std::vector<double> *stageMemory = nullptr);
  bool compose(const Layout &layout, const Pieces &pieces, const Piece &layers,
               Prediction &prediction, std::string &why, std::vector<double> *stageMemory);
  void reject(const std::string &family, const std::string &reason) {
    result.rejected.push_back({family, reason});
  }

  const Request &request;
  const ModelShape &shape;
  Result &result;
  ProbeCache probes;
  double memoryCap; ///< a layout needing more per rank does not fit
  std::map<std::tuple<std::string, int64_t, int64_t, int64_t>, ScheduleInfo> schedules;
  std::map<std::string, std::string> refusals; ///< feature combination → "" or why not
  /// A family's first refused row's message (the reason when none is kept).
  std::map<std::string, std::string> familyRefusal;
  /// What the search learns of each family on the way.
  struct FamilyNotes {
    std::map<std::string, std::string> why; ///< why no row fits (the smallest's)
    std::map<std::string, double> smallest; ///< bytes of its smallest row priced
    /// The smallest row without offloading that did not fit: bytes, label.
    std::map<std::string, std::pair<double, std::string>> plain;
    std::map<std::string, std::set<std::string>> offloaded; ///< choices that fit
    std::set<std::string> fitsPlain; ///< families with a row fitting without
  } notes;
};

} // namespace llmc::plan

#endif
