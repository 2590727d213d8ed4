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
};

} // namespace llmc::plan

#endif
