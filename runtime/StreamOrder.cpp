//===- StreamOrder.cpp - every cross-stream hazard has an event -----------===//

#include "runtime/StreamOrder.h"
#include "common/TransferChannel.h"
#include "runtime/support/Error.h"

#include <array>
#include <vector>

namespace llmc {
namespace {

constexpr int kStreams = kMaxStreams;
using Clock = std::array<uint64_t, kStreams>;

struct Access {
  size_t instruction;
  uint32_t buffer;
  uint64_t begin, end;
  bool write;
  uint64_t time; ///< the instruction's tick on its stream
};

/// The buffers an instruction reads and writes.
void accessesOf(const InstructionInfo &inst, std::vector<std::pair<uint32_t, bool>> &out) {
  out.clear();
  switch (inst.kind) {
  case InstructionKind::RecordEvent:
  case InstructionKind::WaitEvent:
    return;
  case InstructionKind::Send:
    for (uint32_t b : inst.inputs) out.push_back({b, false});
    return;
  case InstructionKind::Recv:
    for (uint32_t b : inst.inputs) out.push_back({b, true});
    return;
  default: // kernels and collectives: inputs read, outputs written
    for (uint32_t b : inst.inputs) out.push_back({b, false});
    for (uint32_t b : inst.outputs) out.push_back({b, true});
  }
}

} // namespace

bool usesStreams(const ProgramInfo &program) {
  for (const InstructionInfo &inst : program.instructions)
    if (inst.stream != 0)
      return true;
  return false;
}

void checkStreamOrder(const ProgramInfo &program,
                      const std::function<std::string(size_t)> &describe) {
  const size_t n = program.instructions.size();
  std::array<Clock, kStreams> clock{};
  // Per event: the clock of its stream when it was recorded, and where.
  std::vector<Clock> eventClock(n);
  std::vector<int64_t> recordedAt(n, -1);
  // Accesses per stream, in stream order; those with time <= what another
  // stream knows of this one are ordered before it for good, so each
  // stream keeps a cursor past them per other stream.
  std::array<std::vector<Access>, kStreams> accesses;
  std::array<std::array<size_t, kStreams>, kStreams> orderedPrefix{};
  std::vector<std::pair<uint32_t, bool>> touched;

  for (size_t i = 0; i < n; ++i) {
    const InstructionInfo &inst = program.instructions[i];
    if (inst.stream < 0 || inst.stream >= kStreams)
      fail(describe(i), ": stream ", inst.stream, " (programs have streams 0 to ", kStreams - 1,
           ")");
    const int s = inst.stream;
    ++clock[s][s];
    if (inst.kind == InstructionKind::RecordEvent || inst.kind == InstructionKind::WaitEvent) {
      if (inst.event < 0 || static_cast<size_t>(inst.event) >= n)
        fail(describe(i), ": event ", inst.event, " out of range (0..", n - 1, ")");
      size_t e = static_cast<size_t>(inst.event);
      if (inst.kind == InstructionKind::RecordEvent) {
        if (recordedAt[e] >= 0)
          fail(describe(i), ": event ", e, " is recorded a second time (first by ",
               describe(static_cast<size_t>(recordedAt[e])), ")");
        recordedAt[e] = static_cast<int64_t>(i);
        eventClock[e] = clock[s];
      } else {
        if (recordedAt[e] < 0)
          fail(describe(i), ": waits for event ", e, ", which no earlier instruction records");
        for (int t = 0; t < kStreams; ++t)
          clock[s][t] = std::max(clock[s][t], eventClock[e][t]);
      }
      continue;
    }
    accessesOf(inst, touched);
    for (auto [buffer, write] : touched) {
      const BufferInfo &b = program.buffers[buffer];
      uint64_t begin = b.offset, end = b.offset + b.bytes();
      for (int other = 0; other < kStreams; ++other) {
        if (other == s)
          continue;
        // Everything of the other stream up to what this stream has
        // waited for is ordered before this instruction.
        const std::vector<Access> &theirs = accesses[other];
        size_t &from = orderedPrefix[s][other];
        while (from < theirs.size() && theirs[from].time <= clock[s][other]) ++from;
        for (size_t k = from; k < theirs.size(); ++k) {
          const Access &a = theirs[k];
          if (!(write || a.write) || a.end <= begin || end <= a.begin)
            continue;
          const BufferInfo &ab = program.buffers[a.buffer];
          fail(describe(i), " on stream ", s, (write ? " writes" : " reads"), " buffer '", b.name,
               "' while ", describe(a.instruction), " on stream ", other,
               (a.write ? " writes" : " reads"), " buffer '", ab.name, "' (arena bytes [",
               std::max(begin, a.begin), ", ", std::min(end, a.end),
               ") in common) with no event ordering them: a data race");
        }
      }
      accesses[s].push_back({i, buffer, begin, end, write, clock[s][s]});
    }
  }
}

} // namespace llmc
