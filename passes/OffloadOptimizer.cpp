//===- OffloadOptimizer.cpp - optimizer state and update in host memory ---===//
//
// ZeRO-Offload (Ren et al., 2021) on a lowered program: the optimizer state
// (fp32 masters, AdamW's moments) leaves the device arena for a second
// memory space, host memory, and every kernel that touches it runs on the
// host's cores. The device arena shrinks by the state's bytes; the host
// space holds the state and the staging buffers the copies fill.
//
// Offsets: the device arena is [0, arena); the host space is [arena, arena
// + host) of the same numbering, so persistent state keeps one offset for
// initialisation and checkpoints, while the two ranges live in separate
// memories (a GPU's device memory and pinned host memory). Activations
// already offloaded (llmc-offload-activations, placed by the lowering)
// keep the start of the host space; the state and staging follow them.
//
// Copies are explicit kernels: `copy_to_host` moves a device value a host
// kernel reads (a gradient, the parameter under fp32, lr, the norm) into a
// host staging buffer right after the device's last write of it, so each
// gradient travels as soon as it is final rather than after the whole
// backward; `copy_to_device` moves what a host kernel writes for the device
// (the updated parameter, bf16 under mixed precision: the cast runs on the
// host) back right after the kernel. Staging buffers are not reused.
//
//===----------------------------------------------------------------------===//

#include "dialects/Annotations/Annotations.h"
#include "passes/Passes.h"
#include "passes/lib/ArenaPlacement.h"
#include "passes/lib/EntryPoints.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"

#include <map>

namespace llmc {
#define GEN_PASS_DEF_OFFLOADOPTIMIZER
#include "passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;
using namespace llmc;

namespace {

/// Optimizer state by the role prefix of its persistent name (LowerToExec
/// names it "<role>/<parameter>"); observer states of QAT stay on the device.
bool isOptimizerState(exec::BufferOp buffer) {
  if (buffer.getCategory() != "optim" || !buffer.getName())
    return false;
  StringRef name = *buffer.getName();
  return llvm::any_of(
      ArrayRef<StringRef>{"master/", "adam_m/", "adam_v/", "adam_m_absmax/", "adam_v_absmax/"},
      [&](StringRef role) { return name.starts_with(role); });
}

/// A byte range of the (pre-offload) device arena.
struct Range {
  int64_t begin = 0, end = 0;
  bool overlaps(const Range &o) const { return begin < o.end && o.begin < end; }
};
Range rangeOf(exec::BufferOp b) {
  int64_t offset = b.getOffset();
  return {offset, offset + exec::bufferBytes(b.getType())};
}

/// Where the optimizer state goes: each persistent slot (64-byte aligned, as
/// LowerToExec lays it out) moves to the host space in arena order.
struct SpaceMap {
  std::map<int64_t, std::pair<int64_t, int64_t>> slots; ///< begin -> (end, host offset)
  std::map<int64_t, int64_t> stateBytes;                 ///< begin -> the state's own bytes
  int64_t movedBytes = 0; ///< the slots' bytes, alignment included

  /// The host offset of a device range inside a moved slot, if it is.
  std::optional<int64_t> hostOffset(Range r) const {
    auto it = slots.upper_bound(r.begin);
    if (it == slots.begin())
      return std::nullopt;
    --it;
    if (r.end > it->second.first)
      return std::nullopt;
    return it->second.second + (r.begin - it->first);
  }
  /// A device offset after the moved slots below it are gone.
  int64_t deviceOffset(int64_t offset) const {
    int64_t below = 0;
    for (auto &[begin, slot] : slots)
      if (slot.first <= offset)
        below += slot.first - begin;
    return offset - below;
  }
};

class ProgramOffload {
public:
  ProgramOffload(exec::ProgramOp program, const SpaceMap &space, int64_t stagingBase,
                 int64_t arenaBytes)
      : program(program), space(space), hostTop(stagingBase), arenaBytes(arenaBytes) {}

  /// Moves the program's buffers to their spaces and runs every kernel that
  /// touches host memory on the host; returns the host space's size.
  FailureOr<int64_t> run() {
    SmallVector<Operation *> ops;
    for (Operation &op : program.getBody().front()) ops.push_back(&op);
    for (Operation *op : ops)
      if (auto buffer = dyn_cast<exec::BufferOp>(op))
        placeBuffer(buffer);
    for (Operation *op : ops) {
      if (isa<exec::BufferOp>(op))
        continue;
      if (failed(visit(op)))
        return failure();
    }
    return hostTop;
  }

private:
  exec::ProgramOp program;
  const SpaceMap &space;
  int64_t hostTop;
  int64_t arenaBytes; ///< the device arena's size before offloading
  /// Host offsets of host buffers (relative to the host space), and the
  /// device ranges of device buffers, before any offset is final.
  llvm::DenseMap<Value, int64_t> hostAt;
  llvm::DenseMap<Value, Range> deviceAt;
  /// A device value's host copy, valid until the device bytes change.
  SmallVector<std::pair<Range, Value>> staged;
  /// The last instruction that wrote each device value's bytes.
  SmallVector<std::pair<Range, Operation *>> writers;

  void placeBuffer(exec::BufferOp buffer) {
    // Offloaded activations: only their copies read or write them.
    if (buffer->hasAttr(exec::kHostSpaceAttr)) {
      buffer.setOffset(buffer.getOffset() - arenaBytes); // relative, as below
      return;
    }
    Range r = rangeOf(buffer);
    if (std::optional<int64_t> host = space.hostOffset(r)) {
      hostAt[buffer] = *host;
      buffer.setOffset(*host); // relative to the host space until the end
      buffer->setAttr(exec::kHostSpaceAttr, UnitAttr::get(buffer.getContext()));
      return;
    }
    deviceAt[buffer] = r;
    buffer.setOffset(space.deviceOffset(r.begin));
  }

  bool onHost(Value v) const { return hostAt.contains(v); }

  LogicalResult visit(Operation *op) {
    auto kernel = dyn_cast<exec::KernelOp>(op);
    bool touchesHost = llvm::any_of(op->getOperands(), [&](Value v) { return onHost(v); });
    if (touchesHost && !kernel) {
      Value v = *llvm::find_if(op->getOperands(), [&](Value v) { return onHost(v); });
      return op->emitOpError("reads or writes optimizer state '")
             << v.getDefiningOp<exec::BufferOp>().getName().value_or("")
             << "', which --offload optimizer keeps in host memory; only kernels can run there";
    }
    if (touchesHost)
      runOnHost(kernel);
    else
      noteWrites(op);
    return success();
  }

  void noteWrites(Operation *op) {
    for (Value v : exec::buffersWritten(op)) {
      auto it = deviceAt.find(v);
      if (it == deviceAt.end())
        continue;
      Range r = it->second;
      llvm::erase_if(staged, [&](auto &entry) { return entry.first.overlaps(r); });
      writers.push_back({r, op});
    }
  }

  Value hostBuffer(Location loc, MemRefType type, OpBuilder &b) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&program.getBody().front());
    auto buffer =
        exec::BufferOp::create(b, loc, type, hostTop, StringAttr(), StringRef("workspace"));
    buffer->setAttr(exec::kHostSpaceAttr, b.getUnitAttr());
    hostAt[buffer] = hostTop;
    hostTop = arena::alignedSize(hostTop + exec::bufferBytes(type), exec::kBufferAlignment);
    return buffer;
  }

  /// The host copy of device value `v`, copied right after the last write of
  /// its bytes before `user` (after its declaration when nothing wrote them).
  Value stageDown(Value v, Operation *user) {
    Range r = deviceAt.lookup(v);
    for (auto &[range, copy] : staged)
      if (range.begin == r.begin && range.end == r.end &&
          cast<MemRefType>(copy.getType()) == cast<MemRefType>(v.getType()))
        return copy;
    OpBuilder b(user);
    Value copy = hostBuffer(user->getLoc(), cast<MemRefType>(v.getType()), b);
    Operation *after = v.getDefiningOp();
    for (auto &[range, writer] : llvm::reverse(writers))
      if (range.overlaps(r)) {
        if (after->isBeforeInBlock(writer))
          after = writer;
        break;
      }
    b.setInsertionPointAfter(after);
    auto down =
        exec::KernelOp::create(b, user->getLoc(), "copy_to_host", ValueRange{v}, ValueRange{copy});
    // Traces show the copy as part of the step's action that made the value.
    if (Attribute action = after->getAttr(exec::kActionAttr))
      down->setAttr(exec::kActionAttr, action);
    staged.push_back({r, copy});
    return copy;
  }

  /// Runs `kernel` on the host: device inputs are staged down, device
  /// outputs written to staging buffers and copied up after it. An output
  /// the kernel updates in place on the device (a parameter under fp32)
  /// is updated in place in its host copy.
  void runOnHost(exec::KernelOp kernel) {
    kernel->setAttr(exec::kOnHostAttr, UnitAttr::get(kernel.getContext()));
    SmallVector<Value> inputs(kernel.getInputs()), outputs(kernel.getOutputs());
    for (Value &in : inputs)
      if (!onHost(in))
        in = stageDown(in, kernel);
    OpBuilder after(kernel->getContext());
    after.setInsertionPointAfter(kernel);
    for (Value &out : outputs) {
      if (onHost(out))
        continue;
      Value device = out;
      Range r = deviceAt.lookup(device);
      Value host;
      for (auto [original, in] : llvm::zip(kernel.getInputs(), inputs))
        if (!onHost(original) && deviceAt.lookup(original).begin == r.begin &&
            original.getType() == device.getType())
          host = in;
      if (!host) {
        OpBuilder b(kernel);
        host = hostBuffer(kernel.getLoc(), cast<MemRefType>(device.getType()), b);
      }
      out = host;
      auto up = exec::KernelOp::create(after, kernel.getLoc(), "copy_to_device", ValueRange{host},
                                       ValueRange{device});
      if (Attribute action = kernel->getAttr(exec::kActionAttr))
        up->setAttr(exec::kActionAttr, action);
      after.setInsertionPointAfter(up);
      llvm::erase_if(staged, [&](auto &entry) { return entry.first.overlaps(r); });
      writers.push_back({r, up});
      staged.push_back({r, host});
    }
    kernel.getInputsMutable().assign(inputs);
    kernel.getOutputsMutable().assign(outputs);
  }
};

struct OffloadOptimizerPass : llmc::impl::OffloadOptimizerBase<OffloadOptimizerPass> {
  using OffloadOptimizerBase::OffloadOptimizerBase;

  void runOnOperation() override {
    for (ModuleOp module : programModules(getOperation()))
      if (failed(offload(module)))
        return signalPassFailure();
  }

  LogicalResult offload(ModuleOp module) {
    auto arena = module->getAttrOfType<IntegerAttr>(exec::kArenaBytesAttr);
    auto plan = module->getAttrOfType<DictionaryAttr>("exec.memory_plan");
    if (!arena || !plan)
      return module.emitError("offload: the module is not lowered (run llmc-lower-to-exec)");
    if (plan.get("host_optimizer_state"))
      return module.emitError("offload: the module's optimizer state is already offloaded");
    // Host memory the lowering gave offloaded activations, at its start.
    auto prior = module->getAttrOfType<IntegerAttr>(exec::kHostBytesAttr);
    int64_t priorHost = prior ? prior.getInt() : 0;
    SpaceMap space;
    for (auto program : module.getOps<exec::ProgramOp>())
      for (auto buffer : program.getOps<exec::BufferOp>())
        if (isOptimizerState(buffer)) {
          Range r = rangeOf(buffer);
          int64_t slotEnd = r.begin + arena::alignedSize(r.end - r.begin, exec::kBufferAlignment);
          auto [slot, added] = space.slots.emplace(r.begin, std::make_pair(slotEnd, 0));
          slot->second.first = std::max(slot->second.first, slotEnd);
          int64_t &bytes = space.stateBytes[r.begin];
          bytes = std::max(bytes, r.end - r.begin);
        }
    if (space.slots.empty())
      return module.emitError("offload: no optimizer state to offload (--offload optimizer "
                              "needs a training step with AdamW)");
    for (auto &[begin, slot] : space.slots) {
      slot.second = priorHost + space.movedBytes;
      space.movedBytes += slot.first - begin;
    }
    int64_t hostBytes = priorHost + space.movedBytes;
    for (auto program : module.getOps<exec::ProgramOp>()) {
      FailureOr<int64_t> top = ProgramOffload(program, space, hostBytes, arena.getInt()).run();
      if (failed(top))
        return failure();
      hostBytes = std::max(hostBytes, *top);
    }
    int64_t deviceBytes = arena.getInt() - space.movedBytes;
    // Host offsets continue the device arena's numbering.
    for (auto program : module.getOps<exec::ProgramOp>())
      for (auto buffer : program.getOps<exec::BufferOp>())
        if (buffer->hasAttr(exec::kHostSpaceAttr))
          buffer.setOffset(deviceBytes + buffer.getOffset());
    Builder b(module.getContext());
    module->setAttr(exec::kArenaBytesAttr, b.getI64IntegerAttr(deviceBytes));
    module->setAttr(exec::kHostBytesAttr, b.getI64IntegerAttr(hostBytes));
    NamedAttrList updated(plan);
    updated.set("arena", b.getI64IntegerAttr(deviceBytes));
    auto persistent = plan.getAs<IntegerAttr>("persistent");
    updated.set("persistent",
                b.getI64IntegerAttr((persistent ? persistent.getInt() : 0) - space.movedBytes));
    updated.set("host", b.getI64IntegerAttr(hostBytes));
    int64_t stateBytes = 0;
    for (auto &[begin, bytes] : space.stateBytes) stateBytes += bytes;
    updated.set("host_optimizer_state", b.getI64IntegerAttr(stateBytes));
    module->setAttr("exec.memory_plan", updated.getDictionary(module.getContext()));
    return success();
  }
};

} // namespace
