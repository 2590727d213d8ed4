//===- StreamPlacement.cpp - compute and communication streams, events ---===//
//
// Part of llmc: see StreamPlacement.h.
//
// Dependencies are found on arena bytes, not SSA values: the planner reuses
// an offset once its previous buffer is dead, so two unrelated values can
// share bytes, and only ranges see that hazard.
//
// For each instruction, in program order, placement looks at each other
// stream's instructions not yet covered by an earlier wait, newest first;
// the newest one that conflicts (overlapping bytes, at least one write) is
// waited for: an event is recorded right after it on its stream and waited
// for right before this instruction. Waiting for it also covers everything
// before it on that stream, and everything that stream had itself waited
// for by then (the streams' coverage is a vector clock), so later checks
// start after those.
//
// Streams: kernels on 0, collectives on 1, each transfer channel on its own
// (common/TransferChannel.h).
//
//===----------------------------------------------------------------------===//

#include "passes/lib/StreamPlacement.h"

#include "common/TransferChannel.h"
#include "dialects/Exec/ExecDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"

#include <array>
#include <vector>

using namespace mlir;
using namespace llmc;

namespace {

struct ByteRange {
  int64_t begin = 0, end = 0;
  bool write = false;
};

/// Per stream, how many of each stream's instructions are ordered before
/// the current point (a prefix, by stream order).
using Coverage = std::array<size_t, kMaxStreams>;

/// One instruction already placed on a stream, and what its stream had
/// covered when it was placed (itself included).
struct Placed {
  Operation *op;
  std::vector<ByteRange> ranges;
  Coverage knows;
};

/// The stream an already placed instruction was put on.
int64_t streamOf(Operation *placedOp) {
  return placedOp->getAttrOfType<IntegerAttr>("stream").getInt();
}

bool conflicts(const std::vector<ByteRange> &a, const std::vector<ByteRange> &b) {
  for (const ByteRange &x : a)
    for (const ByteRange &y : b)
      if ((x.write || y.write) && x.begin < y.end && y.begin < x.end)
        return true;
  return false;
}

/// The arena bytes of a buffer operand; fails on a value not defined by
/// exec.buffer (the lowering always defines them so).
FailureOr<ByteRange> rangeOf(Operation *user, Value value, bool write) {
  auto buffer = value.getDefiningOp<exec::BufferOp>();
  auto type = dyn_cast<MemRefType>(value.getType());
  if (!buffer || !type || !type.hasStaticShape())
    return user->emitOpError("operand is not a statically shaped exec.buffer");
  int64_t bits = type.getElementTypeBitWidth();
  int64_t bytes = type.getNumElements() * ((bits + 7) / 8);
  int64_t offset = static_cast<int64_t>(buffer.getOffset());
  return ByteRange{offset, offset + bytes, write};
}

/// The stream and byte ranges of one instruction.
LogicalResult describe(Operation *op, int64_t &stream, std::vector<ByteRange> &ranges) {
  auto add = [&](Value v, bool write) -> LogicalResult {
    FailureOr<ByteRange> r = rangeOf(op, v, write);
    if (failed(r))
      return failure();
    ranges.push_back(*r);
    return success();
  };
  if (auto kernel = dyn_cast<exec::KernelOp>(op)) {
    bool copy = kernel.getCallee() == "copy_to_host" || kernel.getCallee() == "copy_to_device";
    stream = copy ? kCopyStream : kComputeStream;
  } else if (isa<exec::SendOp, exec::RecvOp>(op)) {
    auto channel = op->getAttrOfType<IntegerAttr>("channel");
    stream = streamOfChannel(channel ? static_cast<int>(channel.getInt()) : kSharedChannel);
  } else if (exec::isCollective(op)) {
    stream = kCollectiveStream;
  } else if (isa<exec::RecordEventOp, exec::WaitEventOp>(op)) {
    return op->emitOpError("program already has stream events; llmc-place-streams inserts "
                           "them and must run once, on programs without any");
  } else {
    return op->emitOpError("unexpected instruction in an exec.program");
  }
  for (Value v : exec::buffersRead(op))
    if (failed(add(v, false)))
      return failure();
  for (Value v : exec::buffersWritten(op))
    if (failed(add(v, true)))
      return failure();
  return success();
}

LogicalResult insertEvents(exec::ProgramOp program) {
  std::vector<Operation *> instructions;
  for (Operation &op : program.getBody().front())
    if (!isa<exec::BufferOp>(op))
      instructions.push_back(&op);

  std::array<std::vector<Placed>, kMaxStreams> placed;
  // covered[s]: what stream s has already waited for, per stream.
  std::array<Coverage, kMaxStreams> covered{};
  llvm::DenseMap<Operation *, int64_t> eventAfter;
  int64_t nextEvent = 0;
  OpBuilder builder(program.getContext());

  for (Operation *op : instructions) {
    int64_t stream = 0;
    std::vector<ByteRange> ranges;
    if (failed(describe(op, stream, ranges)))
      return failure();
    Coverage &mine = covered[stream];
    // Per other stream, the newest conflicting instruction not yet waited
    // for; one that another of them already waited for needs no wait.
    std::vector<const Placed *> needed;
    for (int64_t other = 0; other < kMaxStreams; ++other) {
      if (other == stream)
        continue;
      std::vector<Placed> &theirs = placed[other];
      for (size_t j = theirs.size(); j > mine[other]; --j)
        if (conflicts(ranges, theirs[j - 1].ranges)) {
          needed.push_back(&theirs[j - 1]);
          break;
        }
    }
    for (const Placed *target : needed) {
      int64_t other = streamOf(target->op);
      size_t count = target->knows[other];
      if (llvm::any_of(needed,
                       [&](const Placed *by) { return by != target && by->knows[other] >= count; }))
        continue;
      auto [it, fresh] = eventAfter.try_emplace(target->op, nextEvent);
      if (fresh) {
        ++nextEvent;
        builder.setInsertionPointAfter(target->op);
        exec::RecordEventOp::create(builder, target->op->getLoc(), it->second, other);
      }
      builder.setInsertionPoint(op);
      exec::WaitEventOp::create(builder, op->getLoc(), it->second, stream);
      for (int64_t t = 0; t < kMaxStreams; ++t) mine[t] = std::max(mine[t], target->knows[t]);
    }
    op->setAttr("stream", builder.getI64IntegerAttr(stream));
    mine[stream] = placed[stream].size() + 1;
    placed[stream].push_back({op, std::move(ranges), mine});
  }
  return success();
}

} // namespace

LogicalResult llmc::placeStreams(ModuleOp module, StringRef pass) {
  bool any = false;
  WalkResult walked = module.walk([&](exec::ProgramOp program) {
    any = true;
    return failed(insertEvents(program)) ? WalkResult::interrupt() : WalkResult::advance();
  });
  if (walked.wasInterrupted())
    return failure();
  if (!any)
    return module.emitError() << pass
                              << " needs lowered exec programs (run llmc-lower-to-exec first)";
  return success();
}
