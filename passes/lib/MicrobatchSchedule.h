//===- MicrobatchSchedule.h - microbatch schedules of pipeline stages -*- C++ -*-===//
//
// Which forward (F), backward (B) and weight-gradient (W) action each
// pipeline stage runs, in which order, for M microbatches over p stages
// (each stage holding v model chunks; chunk c lives on stage c mod p).
// Plain C++: the pipeline pass expands these orders into each stage's
// program, and the simulation gives the bubble and in-flight numbers the
// compiler reports.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_PASSES_LIB_PIPELINESCHEDULE_H
#define LLMC_PASSES_LIB_PIPELINESCHEDULE_H

#include <functional>
#include <string>
#include <vector>

namespace llmc::pipeline {

enum class Phase { Forward, Backward, Weight };

struct Action {
  int microbatch = 0;
  int chunk = 0; ///< global model chunk (0 .. p·v−1)
  Phase phase = Phase::Forward;
  bool operator==(const Action &o) const {
    return microbatch == o.microbatch && chunk == o.chunk && phase == o.phase;
  }
};

enum class Kind { Naive, GPipe, OneFOneB, Interleaved, ZeroBubble };

struct Spec {
  Kind kind = Kind::OneFOneB;
  int stages = 1;        ///< p
  int microbatches = 1;  ///< m
  int virtualStages = 1; ///< v (interleaved only)
};

/// "gpipe" → Kind::GPipe etc.; false for an unknown name.
bool parseKind(const std::string &name, Kind &kind);
const char *kindName(Kind kind);

/// Each stage's actions in order. W actions appear only for the zero-bubble
/// schedule (elsewhere B includes the weight gradients). Returns an empty
/// vector and sets `error` when the spec is not valid for the kind.
std::vector<std::vector<Action>> buildSchedule(const Spec &spec, std::string &error);

/// What running a schedule costs, in units where a chunk's forward takes 1
/// and its backward 2 (zero-bubble: B 1 and W 1), with no transfer time.
struct Stats {
  bool complete = true; ///< false: the orders wait on each other forever
  double makespan = 0;
  double bubble = 0;         ///< idle fraction of p × makespan
  double analyticBubble = 0; ///< the textbook value for the kind
  std::vector<int> peakInFlight; ///< per stage: most microbatch-chunks whose
                                 ///< forward ran and backward did not yet
  /// Per stage, per action (in schedule order): start and end time.
  std::vector<std::vector<std::pair<double, double>>> times;
};

Stats simulate(const Spec &spec, const std::vector<std::vector<Action>> &schedule);

/// The same simulation with each action taking `duration(stage, action)`
/// (seconds, say): what `llmc plan` runs with the priced programs.
Stats simulate(const Spec &spec, const std::vector<std::vector<Action>> &schedule,
               const std::function<double(int stage, const Action &)> &duration);

/// "F0 F1 B0 ..." (chunk shown as F0.1 when v > 1).
std::string describe(const std::vector<Action> &actions, int virtualStages);
/// The inverse of describe() for stage `stage`; false with `error` set on
/// a malformed token.
bool parseActions(const std::string &text, int stage, std::vector<Action> &actions,
                  std::string &error);

} // namespace llmc::pipeline

#endif
