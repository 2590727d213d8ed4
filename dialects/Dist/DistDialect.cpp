//===- DistDialect.cpp - dist verifiers -----------------------------------===//
//
// Every op that names a mesh is checked against it: axes exist and are
// distinct, group-dependent shapes divide evenly, roots and shifts fall
// inside the group.
//
//===----------------------------------------------------------------------===//

#include "dialects/Dist/DistDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace llmc::dist;

#include "dialects/Dist/DistOpsDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/Dist/DistOpsAttrs.cpp.inc"

void DistDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/Dist/DistOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/Dist/DistOpsAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// dist.rank_offsets on any op
//===----------------------------------------------------------------------===//

LogicalResult DistDialect::verifyOperationAttribute(Operation *op, NamedAttribute attr) {
  if (attr.getName() != kRankOffsetsAttrName)
    return op->emitOpError("unknown dist attribute '") << attr.getName().getValue() << "'";
  auto terms = dyn_cast<ArrayAttr>(attr.getValue());
  if (!terms)
    return op->emitOpError("'") << kRankOffsetsAttrName
                                << "' must be an array of #dist.rank_offset";
  for (Attribute a : terms) {
    auto term = dyn_cast<RankOffsetAttr>(a);
    if (!term)
      return op->emitOpError("'") << kRankOffsetsAttrName
                                  << "' must be an array of #dist.rank_offset, got " << a;
    auto mesh = SymbolTable::lookupNearestSymbolFrom<MeshOp>(op, term.getMesh());
    if (!mesh)
      return op->emitOpError("rank offset refers to ")
             << term.getMesh() << ", which is not a dist.mesh";
    for (Attribute axis : term.getAxes()) {
      auto name = dyn_cast<StringAttr>(axis);
      if (!name || mesh.axisSize(name.getValue()) < 0)
        return op->emitOpError("rank offset names axis ")
               << axis << ", which mesh @" << mesh.getSymName() << " does not have";
    }
    if (term.getStride() < 0)
      return op->emitOpError("rank offset stride must be >= 0, got ") << term.getStride();
    Attribute target = op->getAttr(term.getAttr());
    int64_t size = isa_and_nonnull<IntegerAttr>(target) ? 1
                   : isa_and_nonnull<DenseI64ArrayAttr>(target)
                       ? cast<DenseI64ArrayAttr>(target).size()
                       : -1;
    if (size < 0)
      return op->emitOpError("rank offset targets attribute '")
             << term.getAttr().getValue() << "', which is not an integer or integer array here";
    if (term.getIndex() < 0 || term.getIndex() >= size)
      return op->emitOpError("rank offset index ")
             << term.getIndex() << " is out of range for attribute '"
             << term.getAttr().getValue() << "' of " << size << " element(s)";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Mesh
//===----------------------------------------------------------------------===//

LogicalResult MeshOp::verify() {
  ArrayRef<int64_t> shape = getShape();
  if (getAxes().empty())
    return emitOpError("needs at least one axis");
  if (getAxes().size() != shape.size())
    return emitOpError("has ") << getAxes().size() << " axis names but " << shape.size()
                               << " sizes";
  llvm::StringSet<> seen;
  for (auto [name, size] : llvm::zip(getAxes().getAsValueRange<StringAttr>(), shape)) {
    if (name.empty())
      return emitOpError("axis names must not be empty");
    if (!seen.insert(name).second)
      return emitOpError("axis '") << name << "' is named twice";
    if (size < 1)
      return emitOpError("axis '") << name << "' must have size >= 1, got " << size;
  }
  return success();
}

int64_t MeshOp::axisSize(StringRef axis) {
  for (auto [name, size] : llvm::zip(getAxes().getAsValueRange<StringAttr>(), getShape()))
    if (name == axis)
      return size;
  return -1;
}

int64_t MeshOp::numRanks() {
  int64_t n = 1;
  for (int64_t s : getShape()) n *= s;
  return n;
}

namespace {

FailureOr<MeshOp> lookupMesh(Operation *op, FlatSymbolRefAttr ref) {
  auto mesh = SymbolTable::lookupNearestSymbolFrom<MeshOp>(op, ref);
  if (!mesh)
    return op->emitOpError("refers to ") << ref << ", which is not a dist.mesh";
  return mesh;
}

/// Product of the sizes of `axes`, checking they exist and are distinct.
FailureOr<int64_t> groupSize(Operation *op, MeshOp mesh, ArrayAttr axes) {
  if (axes.empty())
    return op->emitOpError("needs at least one mesh axis");
  llvm::StringSet<> seen;
  int64_t size = 1;
  for (StringRef axis : axes.getAsValueRange<StringAttr>()) {
    int64_t s = mesh.axisSize(axis);
    if (s < 0)
      return op->emitOpError("mesh @") << mesh.getSymName() << " has no axis '" << axis << "'";
    if (!seen.insert(axis).second)
      return op->emitOpError("axis '") << axis << "' appears twice";
    size *= s;
  }
  return size;
}

LogicalResult checkReduction(Operation *op, StringRef reduction) {
  if (reduction != "sum" && reduction != "max" && reduction != "min" && reduction != "mean")
    return op->emitOpError("unknown reduction '") << reduction
                                                 << "' (expected sum, max, min or mean)";
  return success();
}

LogicalResult checkDim(Operation *op, int64_t dim, int64_t rank, StringRef what) {
  if (dim < 0 || dim >= rank)
    return op->emitOpError(what) << " " << dim << " is out of range for rank " << rank;
  return success();
}

LogicalResult checkResult(Operation *op, RankedTensorType expected, Type actual) {
  if (expected != actual)
    return op->emitOpError("result must be ") << expected << ", got " << actual;
  return success();
}

/// Mesh, group size, and the input type of a collective.
template <typename OpT>
FailureOr<std::pair<int64_t, RankedTensorType>> prepare(OpT op) {
  FailureOr<MeshOp> mesh = lookupMesh(op, op.getMeshAttr());
  if (failed(mesh))
    return failure();
  FailureOr<int64_t> size = groupSize(op, *mesh, op.getAxes());
  if (failed(size))
    return failure();
  auto in = cast<RankedTensorType>(op.getInput().getType());
  if (in.getElementType() != cast<RankedTensorType>(op.getType()).getElementType())
    return op.emitOpError("cannot change the element type");
  return std::make_pair(*size, in);
}

RankedTensorType withDim(RankedTensorType t, int64_t dim, int64_t size) {
  SmallVector<int64_t> shape(t.getShape());
  shape[dim] = size;
  return RankedTensorType::get(shape, t.getElementType());
}

LogicalResult checkDivisible(Operation *op, RankedTensorType t, int64_t dim, int64_t group) {
  if (t.getDimSize(dim) % group != 0)
    return op->emitOpError("dimension ") << dim << " of size " << t.getDimSize(dim)
                                         << " is not divisible by the group size " << group;
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Sharding
//===----------------------------------------------------------------------===//

LogicalResult ShardingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   FlatSymbolRefAttr mesh, ArrayAttr dims, ArrayAttr partial) {
  llvm::StringSet<> seen;
  auto use = [&](Attribute a) -> LogicalResult {
    auto name = dyn_cast<StringAttr>(a);
    if (!name)
      return emitError() << "mesh axes must be strings";
    if (!seen.insert(name.getValue()).second)
      return emitError() << "axis '" << name.getValue() << "' is used twice";
    return success();
  };
  for (Attribute dim : dims) {
    auto axes = dyn_cast<ArrayAttr>(dim);
    if (!axes)
      return emitError() << "each entry of dims must be a list of mesh axes";
    for (Attribute a : axes)
      if (failed(use(a)))
        return failure();
  }
  if (partial)
    for (Attribute a : partial)
      if (failed(use(a)))
        return failure();
  return success();
}

LogicalResult ShardOp::verify() {
  ShardingAttr sharding = getSharding();
  FailureOr<MeshOp> mesh = lookupMesh(*this, sharding.getMesh());
  if (failed(mesh))
    return failure();
  auto type = cast<RankedTensorType>(getX().getType());
  if (static_cast<int64_t>(sharding.getDims().size()) != type.getRank())
    return emitOpError("sharding has ") << sharding.getDims().size()
                                        << " dimension entries for a rank-" << type.getRank()
                                        << " tensor";
  for (auto [d, entry] : llvm::enumerate(sharding.getDims())) {
    auto axes = cast<ArrayAttr>(entry);
    if (axes.empty())
      continue;
    FailureOr<int64_t> size = groupSize(*this, *mesh, axes);
    if (failed(size) || failed(checkDivisible(*this, type, d, *size)))
      return failure();
  }
  if (sharding.getPartial() && !sharding.getPartial().empty())
    if (failed(groupSize(*this, *mesh, sharding.getPartial())))
      return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

LogicalResult AllReduceOp::verify() {
  auto p = prepare(*this);
  if (failed(p) || failed(checkReduction(*this, getReduction())))
    return failure();
  return checkResult(*this, p->second, getType());
}

LogicalResult AllGatherOp::verify() {
  auto p = prepare(*this);
  if (failed(p))
    return failure();
  auto [group, in] = *p;
  int64_t dim = getDimAttr().getInt();
  if (failed(checkDim(*this, dim, in.getRank(), "dim")))
    return failure();
  return checkResult(*this, withDim(in, dim, in.getDimSize(dim) * group), getType());
}

LogicalResult ReduceScatterOp::verify() {
  auto p = prepare(*this);
  if (failed(p) || failed(checkReduction(*this, getReduction())))
    return failure();
  auto [group, in] = *p;
  int64_t dim = getDimAttr().getInt();
  if (failed(checkDim(*this, dim, in.getRank(), "dim")) ||
      failed(checkDivisible(*this, in, dim, group)))
    return failure();
  return checkResult(*this, withDim(in, dim, in.getDimSize(dim) / group), getType());
}

LogicalResult AllSliceOp::verify() {
  auto p = prepare(*this);
  if (failed(p))
    return failure();
  auto [group, in] = *p;
  int64_t dim = getDimAttr().getInt();
  if (failed(checkDim(*this, dim, in.getRank(), "dim")) ||
      failed(checkDivisible(*this, in, dim, group)))
    return failure();
  return checkResult(*this, withDim(in, dim, in.getDimSize(dim) / group), getType());
}

template <typename OpT> static LogicalResult verifyRooted(OpT op) {
  auto p = prepare(op);
  if (failed(p))
    return failure();
  int64_t root = op.getRootAttr().getInt();
  if (root < 0 || root >= p->first)
    return op.emitOpError("root ") << root << " is outside the group of " << p->first;
  return checkResult(op, p->second, op.getType());
}

LogicalResult BroadcastOp::verify() { return verifyRooted(*this); }

LogicalResult ReduceOp::verify() {
  if (failed(checkReduction(*this, getReduction())))
    return failure();
  return verifyRooted(*this);
}

LogicalResult AllToAllOp::verify() {
  auto p = prepare(*this);
  if (failed(p))
    return failure();
  auto [group, in] = *p;
  int64_t split = getSplitDimAttr().getInt(), concat = getConcatDimAttr().getInt();
  if (failed(checkDim(*this, split, in.getRank(), "split dim")) ||
      failed(checkDim(*this, concat, in.getRank(), "concat dim")) ||
      failed(checkDivisible(*this, in, split, group)))
    return failure();
  RankedTensorType out = withDim(in, split, in.getDimSize(split) / group);
  out = withDim(out, concat, out.getDimSize(concat) * group);
  return checkResult(*this, out, getType());
}

LogicalResult ReplicateOp::verify() {
  FailureOr<MeshOp> mesh = lookupMesh(*this, getMeshAttr());
  if (failed(mesh))
    return failure();
  return failure(failed(groupSize(*this, *mesh, getAxes())));
}

//===----------------------------------------------------------------------===//
// Point to point
//===----------------------------------------------------------------------===//

template <typename OpT> static LogicalResult verifyPointToPoint(OpT op) {
  FailureOr<MeshOp> mesh = lookupMesh(op, op.getMeshAttr());
  if (failed(mesh))
    return failure();
  int64_t size = mesh->axisSize(op.getAxis());
  if (size < 0)
    return op.emitOpError("mesh @") << mesh->getSymName() << " has no axis '" << op.getAxis() << "'";
  int64_t shift = op.getShiftAttr().getInt();
  if (shift == 0 || std::abs(shift) >= size)
    return op.emitOpError("shift ") << shift << " must be non-zero and smaller than the size of axis '"
                                    << op.getAxis() << "' (" << size << ")";
  return success();
}

LogicalResult SendOp::verify() { return verifyPointToPoint(*this); }
LogicalResult RecvOp::verify() { return verifyPointToPoint(*this); }

#define GET_OP_CLASSES
#include "dialects/Dist/DistOps.cpp.inc"
