//===- Trace.h - the executed schedule as a Chrome trace --------*- C++ -*-===//
//
// With `llmc-run --trace F`, each rank records, for every training step,
// one span per run of consecutive instructions of the same part of the step
// (a pipeline action like "F3" or "B0.2", a microbatch's forward "F0" or
// backward "B0", or "step" for the rest: synchronisation, optimizer). At
// the end the ranks' spans go into one Chrome trace JSON file (open in
// chrome://tracing or Perfetto): one row per rank, so a pipeline schedule
// shows as it actually ran, bubbles included. Times come from each host's
// steady clock (ranks on one host line up exactly).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_TRAIN_TRACE_H
#define LLMC_RUNTIME_TRAIN_TRACE_H

#include "runtime/Executor.h"
#include "runtime/comm/Communicator.h"

#include <string>
#include <vector>

namespace llmc {

class StepTrace {
public:
  /// Spans of the program's last run (it must run with profiling on).
  void record(const BoundProgram &program, int64_t step);
  /// Writes `path`: every rank's spans (collective: all ranks call it).
  void write(const std::string &path, int rank, int worldSize, const std::string &rankLabel,
             Communicator &comm) const;

private:
  /// Instructions [first, last] run as one span named `name`: derived from
  /// the program once, the same every step.
  struct Segment {
    size_t first, last;
    std::string name;
  };
  struct Span {
    size_t segment;
    double start, duration; // µs
    int64_t step;
  };
  void segment(const BoundProgram &program);

  const BoundProgram *segmented_ = nullptr;
  std::vector<Segment> segments_;
  std::vector<Span> spans_;
};

} // namespace llmc

#endif
