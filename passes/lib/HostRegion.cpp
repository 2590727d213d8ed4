//===- HostRegion.cpp - run a stretch of a program on the host's cores ----===//

#include "passes/lib/HostRegion.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"

#include <limits>

using namespace mlir;

namespace llmc {
namespace {

/// Bytes [first, second) of the device arena.
using Range = std::pair<int64_t, int64_t>;

/// Buffer `v`'s bytes.
Range rangeOf(Value v) {
  auto buffer = v.getDefiningOp<exec::BufferOp>();
  auto begin = static_cast<int64_t>(buffer.getOffset());
  return {begin, begin + static_cast<int64_t>(exec::bufferBytes(buffer.getType()))};
}

bool contains(Range outer, Range inner) {
  return outer.first <= inner.first && inner.second <= outer.second;
}
bool overlaps(Range a, Range b) { return a.first < b.second && b.first < a.second; }
bool containedInOne(ArrayRef<Range> ranges, Range r) {
  return llvm::any_of(ranges, [&](Range w) { return contains(w, r); });
}
bool inHostSpace(Value v) { return v.getDefiningOp()->hasAttr(exec::kHostSpaceAttr); }

/// Buffers are views of arena bytes (a reshape is another buffer over the
/// same bytes), so what the region reads and writes is tracked by range.
class HostRegion {
public:
  HostRegion(exec::ProgramOp program, const llvm::DenseSet<Value> &hostBuffers)
      : body(program.getBody().front()) {
    for (Operation &op : body)
      if (!isa<exec::BufferOp>(op) &&
          llvm::any_of(op.getOperands(), [&](Value v) { return hostBuffers.contains(v); })) {
        first = first ? first : &op;
        last = &op;
      }
  }

  LogicalResult run(int64_t scratchBase, int64_t &scratchBytes) {
    if (!first)
      return success();
    if (failed(collect()))
      return failure();
    SmallVector<Value> out = copiedOut();
    placeMirrors(scratchBase, scratchBytes);
    OpBuilder b(first);
    for (Value v : copiedIn)
      exec::KernelOp::create(b, first->getLoc(), "copy_to_host", ValueRange{v},
                             ValueRange{mirror[v]});
    b.setInsertionPointAfter(last);
    for (Value v : out)
      exec::KernelOp::create(b, last->getLoc(), "copy_to_device", ValueRange{mirror[v]},
                             ValueRange{v});
    for (Operation *op : region) {
      op->setAttr(exec::kOnHostAttr, b.getUnitAttr());
      for (OpOperand &operand : op->getOpOperands())
        if (Value host = mirror.lookup(operand.get()))
          operand.set(host);
    }
    return success();
  }

private:
  /// The region's kernels and collectives (tensor parallelism's reductions
  /// of the host layers' partial sums, which run on the host's transport),
  /// the device buffers they touch, which of those they read before
  /// writing all of their bytes, and what they write. Events stay: they
  /// order the streams whose host work the region's instructions become.
  LogicalResult collect() {
    for (Operation *op = first;; op = op->getNextNode()) {
      if (isa<exec::BufferOp, exec::RecordEventOp, exec::WaitEventOp>(op))
        continue;
      auto kernel = dyn_cast<exec::KernelOp>(op);
      if ((!kernel && !exec::isCollective(op)) ||
          (kernel && kernel.getCallee().starts_with("copy_to_")))
        return op->emitOpError("runs among the layers --offloaded-layers host keeps on the "
                               "host, where it cannot run (a copy or a transfer between "
                               "pipeline stages: use --offloaded-layers stream)");
      region.push_back(op);
      for (Value v : exec::buffersRead(op))
        if (!inHostSpace(v) && !mirror.count(v)) {
          mirror[v] = Value();
          if (!containedInOne(written, rangeOf(v)))
            copiedIn.push_back(v);
        }
      for (Value v : exec::buffersWritten(op))
        if (!inHostSpace(v)) {
          mirror.try_emplace(v, Value());
          writers.insert(v);
          written.push_back(rangeOf(v));
        }
      if (op == last)
        return success();
    }
  }

  /// Device buffers to copy back after the region: each later read of
  /// bytes the region wrote (the reading view itself where one written
  /// view holds all of it, else every written view it overlaps: a mirror
  /// holds the region's latest bytes of its range whichever view wrote
  /// them), and what the step returns.
  SmallVector<Value> copiedOut() {
    llvm::SetVector<Value> out;
    SmallVector<Range> writtenLater;
    for (Operation *op = last->getNextNode(); op; op = op->getNextNode()) {
      for (Value v : exec::buffersRead(op)) {
        Range r = rangeOf(v);
        if (inHostSpace(v) || containedInOne(writtenLater, r))
          continue;
        if (containedInOne(written, r)) {
          out.insert(v);
          mirror.try_emplace(v, Value());
          continue;
        }
        for (Value w : writers)
          if (overlaps(rangeOf(w), r))
            out.insert(w);
      }
      for (Value v : exec::buffersWritten(op)) writtenLater.push_back(rangeOf(v));
    }
    for (Value w : writers)
      if (w.getDefiningOp<exec::BufferOp>().getCategory() == "output")
        out.insert(w);
    return out.takeVector();
  }

  /// Host mirrors at their device offsets less the lowest, from
  /// `scratchBase`. Buffers defined inside the region move to the top
  /// (they have no operands), so the copies ahead of it can name them.
  void placeMirrors(int64_t scratchBase, int64_t &scratchBytes) {
    int64_t lowest = std::numeric_limits<int64_t>::max(), highest = 0;
    for (auto &[v, host] : mirror) {
      lowest = std::min(lowest, rangeOf(v).first);
      highest = std::max(highest, rangeOf(v).second);
    }
    scratchBytes = std::max(scratchBytes, highest - lowest);
    OpBuilder b(&body, body.begin());
    for (auto &[v, host] : mirror) {
      auto device = v.getDefiningOp<exec::BufferOp>();
      if (first->isBeforeInBlock(device))
        device->moveBefore(&body, body.begin());
      b.setInsertionPointAfter(device);
      host = exec::BufferOp::create(b, device.getLoc(), device.getType(),
                                    scratchBase + rangeOf(v).first - lowest, StringAttr(),
                                    StringRef("workspace"));
      host.getDefiningOp()->setAttr(exec::kHostSpaceAttr, b.getUnitAttr());
    }
  }

  Block &body;
  Operation *first = nullptr, *last = nullptr;
  SmallVector<Operation *> region;
  llvm::MapVector<Value, Value> mirror; ///< device buffer → its host mirror
  SmallVector<Value> copiedIn;          ///< read before the region wrote all of it
  llvm::SetVector<Value> writers;       ///< written in the region
  SmallVector<Range> written;           ///< their bytes
};

} // namespace

LogicalResult runRegionOnHost(exec::ProgramOp program, const llvm::DenseSet<Value> &hostBuffers,
                              int64_t scratchBase, int64_t &scratchBytes) {
  return HostRegion(program, hostBuffers).run(scratchBase, scratchBytes);
}

} // namespace llmc
