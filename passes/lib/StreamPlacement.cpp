//===- StreamPlacement.cpp - compute and communication streams, events ---===//
//
// Part of llmc: see StreamPlacement.h.
//
// Dependencies are found on arena bytes, not SSA values: the planner reuses
// an offset once its previous buffer is dead, so two unrelated values can
// share bytes, and only ranges see that hazard.
//
// For each instruction, in program order, placement looks at the other
// stream's instructions not yet covered by an earlier wait, newest first;
// the newest one that conflicts (overlapping bytes, at least one write) is
// waited for: an event is recorded right after it on its stream and waited
// for right before this instruction. Waiting for it also covers everything
// before it on that stream, so later checks start after it.
//
//===----------------------------------------------------------------------===//

#include "passes/lib/StreamPlacement.h"

#include "dialects/Exec/ExecDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseMap.h"

#include <array>
#include <vector>

using namespace mlir;
using namespace llmc;

namespace {

constexpr int64_t kComputeStream = 0, kCommStream = 1;

struct ByteRange {
  int64_t begin = 0, end = 0;
  bool write = false;
};

/// One instruction already placed on a stream.
struct Placed {
  Operation *op;
  std::vector<ByteRange> ranges;
};

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
    stream = kComputeStream;
    for (Value v : kernel.getInputs())
      if (failed(add(v, false)))
        return failure();
    for (Value v : kernel.getOutputs())
      if (failed(add(v, true)))
        return failure();
    return success();
  }
  if (isa<exec::SendOp>(op)) {
    stream = kCommStream;
    return add(op->getOperand(0), false);
  }
  if (isa<exec::RecvOp>(op)) {
    stream = kCommStream;
    return add(op->getOperand(0), true);
  }
  if (isa<exec::RecordEventOp, exec::WaitEventOp>(op))
    return op->emitOpError("program already has stream events; llmc-place-streams inserts "
                           "them and must run once, on programs without any");
  // Every collective: operand 0 read, operand 1 written.
  if (op->getNumOperands() == 2) {
    stream = kCommStream;
    if (failed(add(op->getOperand(0), false)) || failed(add(op->getOperand(1), true)))
      return failure();
    return success();
  }
  return op->emitOpError("unexpected instruction in an exec.program");
}

LogicalResult insertEvents(exec::ProgramOp program) {
  std::vector<Operation *> instructions;
  for (Operation &op : program.getBody().front())
    if (!isa<exec::BufferOp>(op))
      instructions.push_back(&op);

  std::array<std::vector<Placed>, 2> placed;
  // covered[s][o]: how many of stream o's instructions stream s has already
  // waited for (a prefix, by stream order).
  size_t covered[2][2] = {{0, 0}, {0, 0}};
  llvm::DenseMap<Operation *, int64_t> eventAfter;
  int64_t nextEvent = 0;
  OpBuilder builder(program.getContext());

  for (Operation *op : instructions) {
    int64_t stream = 0;
    std::vector<ByteRange> ranges;
    if (failed(describe(op, stream, ranges)))
      return failure();
    int64_t other = 1 - stream;
    std::vector<Placed> &theirs = placed[other];
    for (size_t j = theirs.size(); j > covered[stream][other]; --j) {
      if (!conflicts(ranges, theirs[j - 1].ranges))
        continue;
      Operation *earlier = theirs[j - 1].op;
      auto [it, fresh] = eventAfter.try_emplace(earlier, nextEvent);
      if (fresh) {
        ++nextEvent;
        builder.setInsertionPointAfter(earlier);
        exec::RecordEventOp::create(builder, earlier->getLoc(), it->second, other);
      }
      builder.setInsertionPoint(op);
      exec::WaitEventOp::create(builder, op->getLoc(), it->second, stream);
      covered[stream][other] = j;
      break;
    }
    op->setAttr("stream", builder.getI64IntegerAttr(stream));
    placed[stream].push_back({op, std::move(ranges)});
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
