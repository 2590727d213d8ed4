//===- Probes.h - what one layer, the first and the last stage cost -*- C++ -*-===//
//
// The planner never compiles a whole layout. For each (tp, ep, sp,
// microbatch size, recomputation) it compiles three probe models of the real width —
// one layer on one stage, two layers on one stage, two layers on two
// pipeline stages — and subtracts: two layers minus one is a layer; the
// one-layer model minus a layer is the embedding and head; the pipeline's
// first stage minus a layer is the embedding's stage extra, its last stage
// minus a layer the head's. Each piece carries its priced work per
// microbatch and phase, its saved activations per microbatch, its gradient
// and optimizer work, and its persistent tensors (so ZeRO's sharding of
// the exact shapes, padding included, follows for any dp).
//
// Expert parallelism changes the shapes themselves (each rank keeps 1/ep
// of the experts; the exchange's buffers hold ep·R rows), so probes are
// compiled at the layout's ep: their memory plans hold the split experts,
// their gradients and optimizer state, and the all-to-all buffers; their
// programs price the all-to-alls on the ep group's link.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMPILER_PLAN_PROBES_H
#define LLMC_COMPILER_PLAN_PROBES_H

#include "compiler/plan/Planner.h"
#include "compiler/plan/ProgramCost.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <map>
#include <memory>
#include <tuple>

namespace llmc::plan {

/// A kind of persistent tensor of a stage (parameter or optimizer state):
/// category, dim 0 (what ZeRO shards) and bytes per row. Pieces count how
/// many tensors of each kind they hold, so subtracting probes subtracts
/// tensors without relying on names.
/// Offloaded optimizer state has category "host_optim".
using StateKind = std::tuple<std::string, int64_t, double>;

/// A piece of a stage: per microbatch (F, B, W) and per step (S) work, and
/// what it keeps in memory. Pieces add and subtract as probes do.
struct Piece {
  Cost forward, backward, weight, step;
  double activationBytes = 0; ///< saved per microbatch in flight
  double gradientBytes = 0;   ///< live at the arena peak (one microbatch)
  double otherBytes = 0;      ///< workspace, inputs, outputs at the peak
  double savedPerLayer = 0;   ///< the plan's saved bytes of one layer, one microbatch
  /// --offload optimizer, per step: bytes copied to the host and back, and
  /// the bytes the host kernels touch (OffloadCost.h); the host memory
  /// planned beside the optimizer state (staging copies).
  double hostDownBytes = 0, hostUpBytes = 0, hostUpdateBytes = 0, hostStagingBytes = 0;
  /// --offload activations: bytes copied down and back up per microbatch,
  /// and the host memory holding them (per step: microbatches reuse it).
  double activationCopyBytes = 0, activationHostBytes = 0;
  std::map<StateKind, int64_t> states; ///< kind → count
  Piece operator-(const Piece &o) const;
  Piece operator+(const Piece &o) const;
  Piece scaled(double k) const; ///< k layers (states repeated k times)
  /// Persistent bytes per rank in the device arena with ZeRO `zero` over
  /// `dp` ranks (dim 0 padded to a multiple of dp, as the ZeRO passes do).
  double persistentBytes(int64_t zero, int64_t dp) const;
  /// Optimizer state per rank kept in host memory (--offload optimizer).
  double hostStateBytes(int64_t zero, int64_t dp) const;
  double parameterBytes() const; ///< unsharded, this rank's tp shard
};

/// Data-parallel collectives of a piece, by when they run: in each
/// microbatch's forward or backward (ZeRO-3 gathers, ZeRO-2 scatters),
/// once per step during the last backward (gradient buckets), or once
/// after it (ZeRO-1/2's all-gather of updated parameters). Read from probes
/// compiled on two data-parallel ranks; priced for any dp size.
struct DpTraffic {
  enum When { EachForward, EachBackward, StepBackward, StepAfter };
  /// (when, collective kind) → (messages, bytes)
  std::map<std::pair<int, int>, std::pair<double, double>> messages;
  DpTraffic operator+(const DpTraffic &o) const;
  DpTraffic scaled(double k) const;
  /// The same traffic with each backward's reduce-scatters sent once per
  /// step instead: ZeRO-2/3 under pipeline stages accumulate whole
  /// gradients over the microbatches and scatter them after the last.
  DpTraffic scatteredOncePerStep() const;
  /// Seconds of everything sent at `when` on `n` ranks over a link.
  double seconds(When when, int64_t n, double alpha, double beta) const;
};

/// A layout's data-parallel traffic by the batch axes each collective
/// spans: {dp} for a dense model; under expert parallelism also {ep} and
/// {dp, ep} (an expert's gradient is averaged over dp only; a replicated
/// one over both; ZeRO shards over dp and leaves ep to an all-reduce).
/// Other axes a group spans (tp under sequence parallelism) are left out:
/// the batch axes set its size and link.
struct TrafficPieces {
  using Groups = std::map<std::vector<std::string>, DpTraffic>;
  Groups layer, base; ///< one layer; the rest of the one-layer model
};

struct ProbeKey {
  int64_t tp = 1;
  bool sp = false;
  int64_t microbatchSize = 1;
  std::string recompute = "none";
  /// 1, or 2 for layouts with several microbatches: then the plans hold
  /// the gradient accumulators that live through the step.
  int64_t microbatches = 1;
  bool offload = false; ///< compiled with --offload optimizer
  int64_t ep = 1;       ///< expert-parallel ranks (the probe's batch is ep × microbatch size)
  bool offloadActivations = false; ///< compiled with --offload activations
  bool operator<(const ProbeKey &o) const {
    return std::tie(tp, sp, microbatchSize, recompute, microbatches, offload, ep,
                    offloadActivations) < std::tie(o.tp, o.sp, o.microbatchSize, o.recompute,
                                                   o.microbatches, o.offload, o.ep,
                                                   o.offloadActivations);
  }
};

/// The pieces of one probe key.
struct Pieces {
  Piece layer;        ///< one transformer layer
  Piece single;       ///< the whole one-stage model with one layer
  Piece first, last;  ///< a pipeline's first/last stage beyond its layers
  double p2pForwardBytes = 0, p2pBackwardBytes = 0; ///< per microbatch and chunk boundary
  /// --offload activations: the activations in the arena at the peak of
  /// one, two and three layers (in flight; no deeper model holds more).
  std::vector<double> inFlightByDepth;
};

class ProbeCache {
public:
  ProbeCache(const Request &request);
  ~ProbeCache();
  /// The pieces for `key`; `pipeline` also compiles the two-stage probe.
  /// Null with `error` set (the compiler's message) when a probe fails.
  const Pieces *get(const ProbeKey &key, bool pipeline, std::string &error);
  /// The data-parallel traffic for (tp, sp, zero, ep).
  const TrafficPieces *traffic(int64_t tp, bool sp, int64_t zero, int64_t ep, std::string &error);
  int64_t compiled() const { return compiledCount; }
  double seconds() const { return compileSeconds; }
  /// Compiles the model with `layers` layers and `batchSize` rows per
  /// microbatch (all data-parallel ranks together: the model's
  /// `batch_size`) under `options` to exec IR; null with `error` set (the
  /// compiler's message) when it fails.
  mlir::OwningOpRef<mlir::ModuleOp> compile(const CompileOptions &options, int64_t layers,
                                            int64_t batchSize, std::string &error);

private:
  bool compileProbe(const ProbeKey &key, int64_t layers, int64_t stages, std::vector<Piece> &out,
                    double &p2pForward, double &p2pBackward, std::string &error);
  const Request &request;
  std::unique_ptr<mlir::MLIRContext> context;
  std::map<std::pair<ProbeKey, bool>, std::unique_ptr<Pieces>> cache;
  std::map<std::pair<ProbeKey, bool>, std::string> failures;
  std::map<std::tuple<int64_t, bool, int64_t, int64_t>, std::unique_ptr<TrafficPieces>> traffics;
  bool collectTraffic(int64_t tp, bool sp, int64_t zero, int64_t ep, int64_t layers,
                      TrafficPieces::Groups &out, std::string &error);
  int64_t compiledCount = 0;
  double compileSeconds = 0;
};

/// Each stage's planned arena bytes in a compiled exec module.
std::vector<double> stageArenaBytes(mlir::ModuleOp module);

/// The options a probe or layout compiles with.
CompileOptions layoutOptions(const Request &request, const Layout &layout);

} // namespace llmc::plan

#endif
