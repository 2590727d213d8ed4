//===- Trace.cpp - the executed schedule as a Chrome trace ----------------===//

#include "runtime/train/Trace.h"

#include "runtime/support/AtomicFile.h"
#include "runtime/support/Error.h"
#include "runtime/support/Json.h"

#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>

namespace llmc {

void StepTrace::segment(const BoundProgram &program) {
  const std::vector<InstructionInfo> &insts = program.info().instructions;
  // Unlabelled instructions between two of the same part (a gradient added
  // to its running sum inside a backward) belong to that part.
  std::vector<std::string> labels(insts.size());
  for (size_t i = 0; i < insts.size(); ++i) labels[i] = insts[i].action;
  for (size_t i = 0; i < insts.size();) {
    if (!labels[i].empty() || i == 0) { ++i; continue; }
    size_t j = i;
    while (j < insts.size() && labels[j].empty()) ++j;
    if (j < insts.size() && labels[i - 1] == labels[j])
      for (size_t k = i; k < j; ++k) labels[k] = labels[j];
    i = j;
  }
  segments_.clear();
  for (size_t i = 0; i < insts.size();) {
    const std::string &name = labels[i];
    size_t j = i;
    while (j + 1 < insts.size() && labels[j + 1] == name) ++j;
    segments_.push_back({i, j, name.empty() ? "step" : name});
    i = j + 1;
  }
  segmented_ = &program;
}

void StepTrace::record(const BoundProgram &program, int64_t step) {
  if (!segmented_)
    segment(program);
  else if (segmented_ != &program)
    fail("a step trace records one program");
  const std::vector<double> &starts = program.instructionStarts();
  const std::vector<double> &micros = program.instructionMicros();
  for (size_t k = 0; k < segments_.size(); ++k) {
    const Segment &s = segments_[k];
    spans_.push_back({k, starts[s.first], starts[s.last] + micros[s.last] - starts[s.first], step});
  }
}

void StepTrace::write(const std::string &path, int rank, int worldSize,
                      const std::string &rankLabel, Communicator &comm) const {
  // This rank's events, as JSON array elements.
  std::ostringstream events;
  events.precision(17);
  events << "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": " << rank
         << ", \"args\": {\"name\": " << json::Value(rankLabel).dump(-1) << "}}";
  for (const Span &s : spans_)
    events << ",\n{\"name\": " << json::Value(segments_[s.segment].name).dump(-1)
           << ", \"cat\": \"train_step\", \"ph\": \"X\", \"ts\": " << s.start
           << ", \"dur\": " << s.duration << ", \"pid\": " << rank
           << ", \"tid\": 0, \"args\": {\"step\": " << s.step << "}}";
  std::string part = path + ".rank" + std::to_string(rank);
  std::string mine = events.str();
  if (worldSize > 1)
    writeFileAtomic(part, mine.data(), mine.size());
  comm.barrier();
  if (rank != 0)
    return;
  std::string all = "{\"traceEvents\": [\n";
  for (int r = 0; r < worldSize; ++r) {
    std::string text = mine;
    if (worldSize > 1) {
      std::string file = path + ".rank" + std::to_string(r);
      std::ifstream in(file);
      if (!in)
        fail("trace: cannot read '", file, "'");
      text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      std::remove(file.c_str());
    }
    all += (r ? ",\n" : "") + text;
  }
  all += "\n]}\n";
  writeFileAtomic(path, all.data(), all.size());
}

} // namespace llmc
