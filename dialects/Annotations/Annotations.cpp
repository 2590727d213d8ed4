//===- Annotations.cpp - verifying the llmc.* attributes ------------------===//

#include "dialects/Annotations/Annotations.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Operation.h"

#include "dialects/Annotations/AnnotationsDialect.cpp.inc"

using namespace mlir;

namespace llmc::annotations {
namespace {

enum Place : unsigned { OnOp = 1, OnModule = 2, OnArgument = 4, OnResult = 8 };

/// One known annotation: where it may stand and what its value must be.
struct Annotation {
  llvm::StringLiteral name;
  unsigned places;
  const char *kind; ///< for messages
  bool (*valid)(Attribute);
};

bool isString(Attribute a) { return isa<StringAttr>(a); }
bool isUnit(Attribute a) { return isa<UnitAttr>(a); }
bool isDict(Attribute a) { return isa<DictionaryAttr>(a); }
bool isIndex(Attribute a) {
  auto i = dyn_cast<IntegerAttr>(a);
  return i && i.getType().isInteger(64) && i.getInt() >= 0;
}
bool isRanks(Attribute a) { return isa<DenseI64ArrayAttr>(a); }
bool isRole(Attribute a) {
  auto s = dyn_cast<StringAttr>(a);
  return s && llvm::is_contained({"param", "master", "adam_m", "adam_v", "adam_m_absmax",
                                  "adam_v_absmax", "qat_state", "kv_cache", "input", "output"},
                                 s.getValue());
}

const Annotation kAnnotations[] = {
    {kBlockNameAttr, OnOp, "a string (the layer's name)", isString},
    {kMicrobatchAttr, OnOp, "a non-negative i64", isIndex},
    {kBackwardAttr, OnOp, "a unit attribute", isUnit},
    {kLossSeedAttr, OnOp, "a unit attribute", isUnit},
    {kRecomputedAttr, OnOp, "a unit attribute", isUnit},
    {kActionAttr, OnOp, "a string (a schedule action)", isString},
    {kGradientSyncAttr, OnOp, "a unit attribute", isUnit},
    {kRoleAttr, OnArgument | OnResult,
     "one of \"param\", \"master\", \"adam_m\", \"adam_v\", \"adam_m_absmax\", "
     "\"adam_v_absmax\", \"qat_state\", \"input\", \"output\"",
     isRole},
    {kNameAttr, OnArgument | OnResult, "a string", isString},
    {kTiedToAttr, OnResult, "a non-negative i64 (an argument number)", isIndex},
    {kGradOfAttr, OnResult, "a string (a parameter's name)", isString},
    {kShardAttr, OnArgument | OnOp, "a dictionary {global_shape, levels}", isDict},
    {kModelAttr, OnModule, "a dictionary", isDict},
    {kLayoutAttr, OnModule, "a dictionary", isDict},
    {kPipelineAttr, OnModule, "a dictionary", isDict},
    {kStageRanksAttr, OnModule, "an array<i64> of ranks", isRanks},
};

LogicalResult check(Operation *op, NamedAttribute attr, Place place, const llvm::Twine &where) {
  StringRef name = attr.getName().getValue();
  const Annotation *known = nullptr;
  for (const Annotation &a : kAnnotations)
    if (a.name == name)
      known = &a;
  if (!known) {
    std::string names;
    for (const Annotation &a : kAnnotations)
      names += (names.empty() ? "" : ", ") + a.name.str();
    return op->emitError() << "unknown annotation '" << name << "'" << where
                           << " (llmc.* names are reserved for: " << names << ")";
  }
  if (!(known->places & place))
    return op->emitError() << "annotation '" << name << "' cannot stand" << where;
  if (!known->valid(attr.getValue()))
    return op->emitError() << "annotation '" << name << "'" << where << " must be "
                           << known->kind << ", got " << attr.getValue();
  return success();
}

} // namespace

void LLMCAnnotationsDialect::initialize() {}

LogicalResult LLMCAnnotationsDialect::verifyOperationAttribute(Operation *op,
                                                               NamedAttribute attr) {
  bool module = isa<ModuleOp>(op);
  return check(op, attr, module ? OnModule : OnOp, module ? " on a module" : " on an op");
}

LogicalResult LLMCAnnotationsDialect::verifyRegionArgAttribute(Operation *op, unsigned region,
                                                               unsigned index,
                                                               NamedAttribute attr) {
  return check(op, attr, OnArgument, " on argument " + llvm::Twine(index));
}

LogicalResult LLMCAnnotationsDialect::verifyRegionResultAttribute(Operation *op, unsigned region,
                                                                  unsigned index,
                                                                  NamedAttribute attr) {
  if (failed(check(op, attr, OnResult, " on result " + llvm::Twine(index))))
    return failure();
  // An updated state overwrites one of the function's own arguments.
  if (attr.getName() == kTiedToAttr && op->getNumRegions() > region &&
      !op->getRegion(region).empty()) {
    int64_t tied = cast<IntegerAttr>(attr.getValue()).getInt();
    if (tied >= static_cast<int64_t>(op->getRegion(region).getNumArguments()))
      return op->emitError() << "annotation '" << kTiedToAttr << "' on result " << index
                             << " names argument " << tied << " of "
                             << op->getRegion(region).getNumArguments();
  }
  return success();
}

} // namespace llmc::annotations
