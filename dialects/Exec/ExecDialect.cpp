//===- ExecDialect.cpp - exec dialect registration and verifiers ----------===//

#include "dialects/Exec/ExecDialect.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace llmc::exec;

#include "dialects/Exec/ExecOpsDialect.cpp.inc"

void ExecDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/Exec/ExecOps.cpp.inc"
      >();
}

int64_t llmc::exec::bufferBytes(MemRefType type) {
  int64_t bits = type.getElementTypeBitWidth();
  return type.getNumElements() * ((bits + 7) / 8);
}

bool llmc::exec::isCollective(Operation *op) {
  return isa<AllReduceOp, AllGatherOp, ReduceScatterOp, AllSliceOp, BroadcastOp, ReduceOp,
             AllToAllOp>(op);
}

SmallVector<Value> llmc::exec::buffersRead(Operation *op) {
  if (auto kernel = dyn_cast<KernelOp>(op))
    return SmallVector<Value>(kernel.getInputs());
  if (isCollective(op) || isa<SendOp>(op))
    return {op->getOperand(0)};
  return {};
}

SmallVector<Value> llmc::exec::buffersWritten(Operation *op) {
  if (auto kernel = dyn_cast<KernelOp>(op))
    return SmallVector<Value>(kernel.getOutputs());
  if (isCollective(op))
    return {op->getOperand(1)};
  if (isa<RecvOp>(op))
    return {op->getOperand(0)};
  return {};
}

namespace {

/// The mesh (axis → size) of the module enclosing `op`, or null.
DictionaryAttr meshOf(Operation *op) {
  auto module = op->getParentOfType<ModuleOp>();
  return module ? module->getAttrOfType<DictionaryAttr>(kMeshAttr) : nullptr;
}

/// Size of the named mesh axis, or an error naming the axis.
FailureOr<int64_t> axisSize(Operation *op, StringRef axis) {
  DictionaryAttr mesh = meshOf(op);
  if (!mesh)
    return op->emitOpError("needs a module attribute '")
           << kMeshAttr << "' to resolve axis '" << axis << "'";
  auto size = mesh.getAs<IntegerAttr>(axis);
  if (!size)
    return op->emitOpError("mesh has no axis '") << axis << "'";
  return size.getInt();
}

} // namespace

LogicalResult ProgramOp::verify() {
  if (getKind().empty())
    return emitOpError("needs a non-empty kind");
  llvm::DenseSet<int64_t> recorded;
  for (Operation &op : getBody().front()) {
    if (auto record = dyn_cast<RecordEventOp>(op))
      recorded.insert(record.getEvent());
    if (auto wait = dyn_cast<WaitEventOp>(op))
      if (!recorded.contains(wait.getEvent()))
        return wait.emitOpError("waits for event ")
               << wait.getEvent() << " before any record_event of it";
  }
  return success();
}

LogicalResult BufferOp::verify() {
  static const llvm::StringSet<> categories = {
      "param",  "grad",  "optim",  "kv_cache", "activation",
      "communication", "input", "output", "workspace"};
  if (!categories.contains(getCategory()))
    return emitOpError("unknown category '") << getCategory() << "'";
  MemRefType type = getType();
  if (!type.hasStaticShape() || !type.getLayout().isIdentity())
    return emitOpError("buffer must be a static, identity-layout memref");
  int64_t offset = getOffsetAttr().getInt();
  if (offset < 0)
    return emitOpError("offset must be >= 0");
  int64_t elementBytes = std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
  if (offset % elementBytes != 0)
    return emitOpError("offset ") << offset << " is not aligned to the "
                                  << elementBytes << "-byte element size";
  if (auto module = (*this)->getParentOfType<ModuleOp>())
    if (auto arena = module->getAttrOfType<IntegerAttr>(kArenaBytesAttr)) {
      bool host = (*this)->hasAttr(kHostSpaceAttr);
      auto hostBytes = module->getAttrOfType<IntegerAttr>(kHostBytesAttr);
      if (host && !hostBytes)
        return emitOpError("is in the host space, but the module has no '")
               << kHostBytesAttr << "'";
      int64_t begin = host ? arena.getInt() : 0,
              end = host ? arena.getInt() + hostBytes.getInt() : arena.getInt();
      if (host && (offset < begin || offset + bufferBytes(type) > end))
        return emitOpError("bytes [") << offset << ", " << offset + bufferBytes(type)
                                      << ") exceed the host space [" << begin << ", " << end
                                      << ")";
      if (!host && offset + bufferBytes(type) > end)
        return emitOpError("bytes [") << offset << ", " << offset + bufferBytes(type)
                                      << ") exceed the arena of " << end << " bytes";
    }
  if (getName() && getName()->empty())
    return emitOpError("name must not be empty");
  return success();
}

LogicalResult KernelOp::verify() {
  if (getCallee().empty())
    return emitOpError("needs a kernel name");
  if (getOutputs().empty() && getCallee() != "noop")
    return emitOpError("kernel '") << getCallee() << "' writes no output";
  if (getStreamAttr().getInt() < 0)
    return emitOpError("stream must be >= 0");
  for (NamedAttribute attr : (*this)->getDiscardableAttrs()) {
    // Rank-dependent terms are verified by the dist dialect; the action
    // label is not a kernel attribute.
    if (attr.getName().getValue().starts_with("dist.") || attr.getName() == kActionAttr)
      continue;
    Attribute value = attr.getValue();
    if (attr.getName() == kFaultSiteAttr || attr.getName() == kOnHostAttr) {
      if (!isa<UnitAttr>(value))
        return emitOpError("'") << attr.getName().getValue() << "' must be a unit attribute";
      continue;
    }
    bool ok = isa<IntegerAttr, FloatAttr, DenseI64ArrayAttr>(value);
    if (auto array = dyn_cast<ArrayAttr>(value))
      ok = llvm::all_of(array, [](Attribute a) { return isa<IntegerAttr>(a); });
    if (!ok)
      return emitOpError("attribute '") << attr.getName().getValue()
                                        << "' must be an integer, float or integer array";
  }
  return verifyMemorySpaces();
}

/// A host kernel reads and writes host memory only; a device kernel device
/// memory only, except the copies between the two.
LogicalResult KernelOp::verifyMemorySpaces() {
  auto onHost = [](Value v) {
    auto buffer = v.getDefiningOp<BufferOp>();
    return buffer && buffer->hasAttr(kHostSpaceAttr);
  };
  bool hostKernel = (*this)->hasAttr(kOnHostAttr);
  bool inputsHost = hostKernel || getCallee() == "copy_to_device";
  bool outputsHost = hostKernel || getCallee() == "copy_to_host";
  if (hostKernel && getCallee().starts_with("copy_to_"))
    return emitOpError("'") << getCallee() << "' runs on the device, not the host";
  for (auto [i, v] : llvm::enumerate(getInputs()))
    if (onHost(v) != inputsHost)
      return emitOpError("input ") << i << " is in " << (onHost(v) ? "host" : "device")
                                   << " memory, but '" << getCallee() << "' reads "
                                   << (inputsHost ? "host" : "device") << " memory";
  for (auto [i, v] : llvm::enumerate(getOutputs()))
    if (onHost(v) != outputsHost)
      return emitOpError("output ") << i << " is in " << (onHost(v) ? "host" : "device")
                                    << " memory, but '" << getCallee() << "' writes "
                                    << (outputsHost ? "host" : "device") << " memory";
  return success();
}

/// Shared checks for every collective: group axes exist and are distinct,
/// the reduction is known, root is a group member, shapes agree.
template <typename OpT>
static LogicalResult verifyCollective(OpT op, StringRef shapeRule) {
  // Device memory, or with exec.on_host (a layer run on the host's cores)
  // host memory only.
  bool onHostOp = op->hasAttr(kOnHostAttr);
  if (onHostOp && !isa<UnitAttr>(op->getAttr(kOnHostAttr)))
    return op.emitOpError("'") << kOnHostAttr << "' must be a unit attribute";
  for (Value v : {op.getInput(), op.getOutput()}) {
    auto buffer = v.getDefiningOp<BufferOp>();
    bool host = buffer && buffer->hasAttr(kHostSpaceAttr);
    if (buffer && host != onHostOp)
      return op.emitOpError(host ? "communicates a buffer in host memory; only a collective "
                                   "marked exec.on_host moves host memory"
                                 : "runs on the host but communicates a buffer in device "
                                   "memory");
  }
  if (op.getGroup().empty())
    return op.emitOpError("group must name at least one mesh axis");
  int64_t groupSize = 1;
  llvm::StringSet<> seen;
  for (Attribute axis : op.getGroup()) {
    auto name = dyn_cast<StringAttr>(axis);
    if (!name)
      return op.emitOpError("group entries must be axis names");
    if (!seen.insert(name.getValue()).second)
      return op.emitOpError("axis '") << name.getValue() << "' appears twice in the group";
    FailureOr<int64_t> size = axisSize(op, name.getValue());
    if (failed(size))
      return failure();
    groupSize *= *size;
  }
  StringRef reduction = op.getReduction();
  if (reduction != "sum" && reduction != "max" && reduction != "mean")
    return op.emitOpError("unknown reduction '") << reduction << "'";
  int64_t root = op.getRootAttr().getInt();
  if (root < 0 || root >= groupSize)
    return op.emitOpError("root ") << root << " is outside the group of "
                                   << groupSize;
  MemRefType in = op.getInput().getType(), out = op.getOutput().getType();
  if (in.getElementType() != out.getElementType())
    return op.emitOpError("input and output element types differ");
  if (shapeRule == "same") {
    if (in.getShape() != out.getShape())
      return op.emitOpError("input and output shapes must match");
    return success();
  }
  if (in.getRank() < 1 || in.getRank() != out.getRank() ||
      in.getShape().drop_front() != out.getShape().drop_front())
    return op.emitOpError("input and output may differ only in dimension 0");
  int64_t inRows = in.getDimSize(0), outRows = out.getDimSize(0);
  if (shapeRule == "gather" && outRows != inRows * groupSize)
    return op.emitOpError("output dim 0 must be ") << inRows * groupSize
                                                   << " (input × group size "
                                                   << groupSize << "), got " << outRows;
  if (shapeRule == "scatter" && inRows != outRows * groupSize)
    return op.emitOpError("input dim 0 must be ") << outRows * groupSize
                                                  << " (output × group size "
                                                  << groupSize << "), got " << inRows;
  if (shapeRule == "all_to_all" && (inRows != outRows || inRows % groupSize != 0))
    return op.emitOpError("dim 0 (") << inRows << ") must be equal on both sides and "
                                     << "divisible by the group size " << groupSize;
  return success();
}

LogicalResult AllReduceOp::verify() { return verifyCollective(*this, "same"); }
LogicalResult BroadcastOp::verify() { return verifyCollective(*this, "same"); }
LogicalResult ReduceOp::verify() { return verifyCollective(*this, "same"); }
LogicalResult AllGatherOp::verify() { return verifyCollective(*this, "gather"); }
LogicalResult ReduceScatterOp::verify() { return verifyCollective(*this, "scatter"); }
LogicalResult AllSliceOp::verify() { return verifyCollective(*this, "scatter"); }
LogicalResult AllToAllOp::verify() { return verifyCollective(*this, "all_to_all"); }

template <typename OpT> static LogicalResult verifyPointToPoint(OpT op) {
  FailureOr<int64_t> size = axisSize(op, op.getAxis());
  if (failed(size))
    return failure();
  int64_t shift = op.getShiftAttr().getInt();
  if (shift == 0 || std::abs(shift) >= *size)
    return op.emitOpError("shift ") << shift << " must be non-zero and smaller "
                                    << "than the size of axis '" << op.getAxis()
                                    << "' (" << *size << ")";
  // The communicators of common/TransferChannel.h: shared, then the
  // transfer channels.
  int64_t channel = op.getChannelAttr().getInt();
  if (channel < 0 || channel > 6)
    return op.emitOpError("channel ")
           << channel << " is not 0 (shared) or a transfer channel, 1 to 6";
  return success();
}

LogicalResult SendOp::verify() { return verifyPointToPoint(*this); }
LogicalResult RecvOp::verify() { return verifyPointToPoint(*this); }

#define GET_OP_CLASSES
#include "dialects/Exec/ExecOps.cpp.inc"
