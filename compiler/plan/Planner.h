//===- Planner.h - `llmc plan`: choose a layout for a cluster ---*- C++ -*-===//
//
// Searches tensor (tp), pipeline (pp), data (dp) and, for a mixture of
// experts, expert (ep) parallelism, the ZeRO stage, sequence parallelism,
// recomputation (none, selective, full, or the fewest fully recomputed
// layers that fit), the microbatch size and the pipeline schedule (1F1B,
// interleaved with v virtual stages, zero-bubble) for a model, a global
// batch and a cluster, and ranks the layouts that fit
// by predicted step time.
//
// Nothing is fitted to measurements: every prediction prices compiled
// programs (ProgramCost.h) with the cluster's peaks and link speeds. The
// search never compiles a whole layout. It compiles, once per (tp, sp,
// microbatch size, recomputation), small probe models (1 and 2 layers on
// one pipeline stage; 2 layers on two stages) and reads from their
// programs and memory plans what one layer, the first stage's extra (the
// embedding) and the last stage's extra (head and loss) cost in time and
// bytes. A stage of any layout is then k layers plus its extras; the data-
// parallel collectives and ZeRO's sharding of the exact per-rank tensors
// follow from the dp size; the pipeline runs through the schedule
// simulation with the priced forward and backward times. docs/planner.md.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMPILER_PLAN_PLANNER_H
#define LLMC_COMPILER_PLAN_PLANNER_H

#include "compiler/Compiler.h"
#include "compiler/plan/Cluster.h"
#include "compiler/plan/OffloadCost.h"

#include <cstdint>
#include <string>
#include <vector>

namespace llmc::plan {

struct Request {
  ModelSource model;       ///< the model, with its overrides
  Cluster cluster;
  int64_t globalBatch = 0; ///< sequences per optimizer step
  int64_t seqLen = 0;      ///< 0: the model's own
  std::string precision = "bf16";
  /// The backend the layouts are compiled for (`llmc compile --target`):
  /// only what it accepts is offered, and probes price its programs.
  std::string target = "cuda";
  std::vector<int64_t> microbatchSizes = {1, 2, 4, 8};
  int64_t maxVirtualStages = 4;
  /// The fp32-matmul rate as a fraction of the peak (½ on tensor-core GPUs).
  double fp32MatmulScale = 0.5;
  /// Restrict the search (empty: every value): to price one published
  /// layout, or to search only what a job may use.
  std::vector<int64_t> onlyTp, onlyPp, onlyZero;
  /// Only these expert-parallel sizes (a mixture of experts; 1: none).
  std::vector<int64_t> onlyEp;
  std::vector<std::string> onlyRecompute, onlySchedule;
  /// Only these chunk counts per stage for the interleaved schedule (each
  /// at least 2; any that divides a stage's layers); empty: the powers of
  /// two up to maxVirtualStages.
  std::vector<int64_t> onlyVirtualStages;
  int onlySp = -1; ///< -1 both, 0 off, 1 on
  /// Offloading choices ("none", "optimizer", "activations",
  /// "optimizer+activations"); empty: offload a layout only where it does
  /// not fit without (and the cluster's host link is known).
  std::vector<std::string> offload;
  /// The rows the caller reads (the fastest `shownRows`, and as many of the
  /// slowest with `shownBottom`): the search confirms that the compiler
  /// accepts their feature combinations, and each family's best's, and
  /// leaves the other fitting rows unconfirmed (a compile each).
  int64_t shownRows = 10;
  bool shownBottom = false;
};

struct Layout {
  int64_t tp = 1, pp = 1, dp = 1, zero = 0;
  /// Expert parallelism: a batch axis beside dp (the batch splits over
  /// dp × ep ranks) that also splits every layer's experts; ZeRO shards
  /// over dp only.
  int64_t ep = 1;
  bool sp = false;
  int64_t microbatchSize = 1, microbatches = 1, virtualStages = 1;
  std::string schedule = "1f1b";   ///< 1f1b | interleaved | zero-bubble
  std::string recompute = "none";  ///< none | selective | full | budget
  int64_t budgetFullLayers = 0;    ///< budget: layers per stage recomputed in full
  bool offload = false;            ///< --offload optimizer
  /// --offload activations (one pipeline stage only: the compiler refuses
  /// it under pp).
  bool offloadActivations = false;
  /// "none", "optimizer", "activations" or "optimizer+activations".
  std::string offloadChoice() const;
  /// The ranks one microbatch's sequences are split over (dp × ep).
  int64_t batchRanks() const { return dp * ep; }
  std::string label() const; ///< "tp8 pp16 dp8 ep2 z1 sp mbs1 1f1b sel off", "... none act-off"
  /// The `llmc compile` flags of this layout for `request`.
  std::string compileFlags(const Request &request) const;
};

struct Prediction {
  Layout layout;
  double memoryBytes = 0;   ///< the largest stage's arena per rank
  double hostBytes = 0;     ///< offloaded: the largest stage's host memory per rank
  double offloadSeconds = 0; ///< offloaded: host copies and update per step (in stepSeconds)
  double activationOffloadSeconds = 0; ///< of which the activations' copies
  OffloadTraffic offload;    ///< offloaded: the slowest stage's host traffic per rank
  double stepSeconds = 0;
  double bubble = 0;        ///< idle share of the pipeline
  double commShare = 0;     ///< exposed communication / step
  double tokensPerSecond = 0;
  double tflopsPerDevice = 0; ///< model FLOPs (no recomputation) per second
  double mfu = 0;             ///< that over the device's datasheet peak
};

struct Rejected {
  std::string family; ///< "tp8 pp4 z3", or a whole parameter ("tp16")
  std::string reason;
};

struct Result {
  /// Fitting layouts, fastest first; the compiler's acceptance confirmed
  /// for the rows Request::shownRows names and each family's best.
  std::vector<Prediction> ranked;
  std::vector<Rejected> rejected;
  /// Families that fit only offloaded (optimizer or activations), and why
  /// not without.
  std::vector<Rejected> offloadOnly;
  int64_t layoutsSearched = 0;
  int64_t probesCompiled = 0;
  double probeSeconds = 0, searchSeconds = 0;
  /// Model FLOPs per step: PaLM's 6N + 12·L·H·Q·T per token, as llmc's
  /// kernels compute them (products and attention, forward and backward,
  /// causal attention at half the scores, no recomputation): the FLOPs
  /// MFU divides by and the time model prices (KernelCost.h).
  double modelFlopsPerStep = 0;
  /// The fastest rate a model FLOP is priced at, over the peak: every
  /// layout's MFU is at most this.
  double achievableFraction = 1;
  double parameters = 0;
  int64_t layers = 0;
  int64_t seqLen = 0; ///< the request's, or the model's own
};

/// Checks a request: the cluster, a positive batch and sequence (0: the
/// model's own), known target, precision, schedules and recomputation
/// modes, and filters that name sizes the search can take. "" when valid,
/// else a message naming the flag.
std::string validate(const Request &request);

/// Runs the search. `verified` (≥ 0) layouts from the top are compiled at
/// reduced depth in their real layout to confirm the compiler accepts them;
/// a refused one is moved to `rejected` with the compiler's message. False
/// with `error` set when the request itself is wrong.
bool runPlan(const Request &request, int64_t verified, Result &result, std::string &error);

/// Compiles `layout` in full and returns each stage's planned arena bytes
/// (what the prediction's memory column estimates), for checking the
/// composition on models small enough to compile whole.
bool compiledStageBytes(const Request &request, const Layout &layout,
                        std::vector<double> &bytes, std::string &error);

/// The predicted arena bytes of each stage of `layout` (after runPlan has
/// probed the shapes it needs, via the same cache).
bool predictedStageBytes(const Request &request, const Layout &layout,
                         std::vector<double> &bytes, std::string &error);

} // namespace llmc::plan

#endif
