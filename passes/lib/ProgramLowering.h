//===- ProgramLowering.h - one program's placement and emission -*- C++ -*-===//
//
// Private to llmc-lower-to-exec: where every value of a program lives
// (persistent state laid out once for all programs, the rest by liveness in
// the arena; ProgramPlacement.cpp) and the exec.program that names those
// places (LowerToExec.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_PASSES_LIB_PROGRAMLOWERING_H
#define LLMC_PASSES_LIB_PROGRAMLOWERING_H

#include "dialects/Dist/DistDialect.h"
#include "dialects/Exec/ExecDialect.h"
#include "dialects/LLM/LLMDialect.h"
#include "passes/lib/ArenaPlacement.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringMap.h"

#include <deque>
#include <map>
#include <string>

namespace llmc::lowering {

using mlir::ArrayRef, mlir::Attribute, mlir::DictionaryAttr, mlir::FailureOr, mlir::Location,
    mlir::LogicalResult, mlir::MemRefType, mlir::OpBuilder, mlir::OpOperand, mlir::Operation,
    mlir::RankedTensorType, mlir::StringRef, mlir::Type, mlir::Value;
using mlir::cast, mlir::dyn_cast, mlir::dyn_cast_or_null, mlir::isa;
using mlir::emitError, mlir::failure, mlir::success;
namespace func = mlir::func;

/// The category of a value llm.copy_to_host puts in host memory: planned
/// apart from the arena, in the host memory space numbered after it.
constexpr llvm::StringLiteral kHostActivation = "host_activation";

inline MemRefType memrefOf(Type tensorType) {
  auto t = cast<RankedTensorType>(tensorType);
  return MemRefType::get(t.getShape(), t.getElementType());
}

inline int64_t bytesOf(Type tensorType) { return exec::bufferBytes(memrefOf(tensorType)); }

/// A persistent buffer shared by every program (parameter or optimizer state).
struct Persistent {
  std::string name, category;
  Type type;
  int64_t offset = 0;
  Attribute param; ///< #llm.param for parameters
  DictionaryAttr shard; ///< llmc.shard for ZeRO-sharded state
};

/// Persistent layout: stable names, assigned in order of first appearance.
struct PersistentLayout {
  std::deque<Persistent> buffers; // stable addresses
  llvm::StringMap<Persistent *> byName;
  int64_t bytes = 0;

  /// Registers (or finds) the buffer for a state argument; fails on a type
  /// clash between programs.
  FailureOr<Persistent *> get(Location loc, StringRef role, StringRef name, Type type,
                              Attribute param, DictionaryAttr shard) {
    std::string key = role == "param" ? name.str() : (role + "/" + name).str();
    if (Persistent *existing = byName.lookup(key)) {
      if (existing->type != type)
        return emitError(loc) << "persistent buffer '" << key << "' has type " << existing->type
                              << " in one program and " << type << " in another";
      return existing;
    }
    // The KV cache is a category of its own: neither weights nor training
    // state, never checkpointed.
    StringRef category = role == "param" ? "param" : role == "kv_cache" ? "kv_cache" : "optim";
    buffers.push_back({key, category.str(), type, bytes, param, shard});
    bytes = arena::alignedSize(bytes + bytesOf(type), exec::kBufferAlignment);
    byName[key] = &buffers.back();
    return &buffers.back();
  }
};

/// Where one SSA value lives.
struct Placement {
  Value root;         ///< the class's root value (owns the bytes)
  int64_t offset = 0; ///< byte offset from the root's start (views)
};

/// Per-program liveness, classes and offsets.
class ProgramLowering {
public:
  ProgramLowering(func::FuncOp func, PersistentLayout &persistent, StringRef target)
      : func(func), persistent(persistent), target(target) {}

  /// Registers persistent state, assigns classes and transient offsets.
  LogicalResult prepare() {
    if (failed(placeValues()))
      return failure();
    planWorkspaces();
    return allocate();
  }
  /// Emits the exec.program (after every program is prepared, so the
  /// persistent region's size is final).
  LogicalResult emit(OpBuilder &builder, StringRef programName, StringRef kind);

  int64_t transientPeak = 0;
  /// Host memory the program's offloaded activations need (their own plan).
  int64_t hostPeak = 0;
  /// The device arena's size, which host offsets follow (set before emit).
  int64_t hostBase = 0;
  /// The most bytes live at one instruction: no placement's peak is lower.
  int64_t liveBytesBound = 0;
  std::map<std::string, int64_t> peakBreakdown;
  /// Per category, the most bytes of it ever live at once.
  std::map<std::string, int64_t> categoryPeaks;
  /// What the gradients live at their peak are: "gradients" proper,
  /// "partial sums" (contributions alive beside the sum they join),
  /// "buckets" (concatenated for a fused all-reduce), "fp32 copies"
  /// (widened for the optimizer step), "awaiting widening" (a bf16/f16
  /// gradient beside the fp32 gradient it becomes), "padded copies" (a
  /// gradient padded to its parameter's shape), "awaiting reduce-scatter"
  /// (whole before ZeRO shards it), "shards" (this rank's reduce-scattered
  /// part).
  std::map<std::string, int64_t> gradientPeakParts;
  /// The activations live at the peak, by the microbatch whose forward
  /// produced them (a pipeline stage holds several in flight).
  std::map<int64_t, int64_t> peakActivationsByMicrobatch;
  /// Bytes each layer's forward keeps for its backward, for the first
  /// microbatch (every microbatch keeps the same).
  std::map<std::string, int64_t> savedPerLayer;

private:
  /// Gives every value its class (a block of the arena, or persistent
  /// state) and the classes their live ranges, names and categories, in
  /// the steps below.
  LogicalResult placeValues();
  /// Numbers the ops and records each value's last use.
  void numberOps();
  /// What reaches an optimizer update or a gradient output through the
  /// accumulation adds and scales (gradValues, for the memory plan).
  void findGradients();
  /// A new class rooted at `v`, live from `start` to its last use.
  void newClass(Value v, int64_t start);
  /// Arguments: persistent state, or program inputs live from the start.
  LogicalResult placeArguments();
  /// Results tied to state arguments are written straight into that state:
  /// each such result and its argument; fails when the state is read after
  /// its update.
  FailureOr<llvm::DenseMap<Value, Value>> findTiedResults();
  /// Places `op`'s results: into tied state, as a view of their source, in
  /// place of a dying operand, or as a new class.
  LogicalResult placeResults(Operation &op, const llvm::DenseMap<Value, Value> &tiedTo);
  /// Places `result` of `op` (instruction `at`) over an operand whose class
  /// ends there, when one may take it; true when it did.
  bool placeInPlace(Operation &op, Value result, int64_t at);
  /// Outputs live to the end of the program and carry their names.
  LogicalResult placeOutputs(const llvm::DenseMap<Value, Value> &tiedTo);
  /// Gives each kernel that needs a workspace on the target its block.
  void planWorkspaces();
  LogicalResult allocate();
  bool isPersistentArg(Value v) const { return persistentArgs.count(v); }
  /// The exec.buffer of `v` in the program being emitted, declared on
  /// first use (persistent state once per name and type).
  Value bufferFor(Value v);
  /// Emits `op`'s instructions: nothing for a view, an exec collective for
  /// a dist op, else the kernel it names with its workspace.
  LogicalResult emitOp(Operation &op);

  func::FuncOp func;
  PersistentLayout &persistent;
  StringRef target;
  llvm::DenseMap<Value, Persistent *> persistentArgs;
  llvm::DenseMap<Value, Placement> placement;
  llvm::DenseMap<Operation *, int64_t> index;
  llvm::DenseMap<Value, int64_t> lastUse;
  // Per class root: [start, end], byte size, assigned offset, name, category.
  struct ClassInfo {
    int64_t start = 0, end = 0, bytes = 0, offset = -1;
    std::string name, category = "activation";
    int64_t microbatch = -1; ///< of the producing op, when it has one
  };
  void classifyTransients();
  /// Places `blocks` by liveness into one memory (the arena, or host
  /// memory), their intervals appended to `intervals`, each block's offset
  /// set; the placement is checked, and a conflict is an error naming
  /// `what`.
  FailureOr<arena::Plan> place(ArrayRef<ClassInfo *> blocks, StringRef what,
                               std::vector<arena::Interval> &intervals);
  /// What a gradient class is (see gradientPeakParts).
  std::string gradientKind(Value root) const {
    // A cast that is its source's only use converts the gradient (fp32
    // gradients: the backward's bf16 result becomes the fp32 gradient);
    // one beside other uses (the norm read the bf16 gradient) copies it.
    auto converts = [](llm::CastOp cast) { return cast && cast.getX().hasOneUse(); };
    if (root.hasOneUse() && converts(dyn_cast<llm::CastOp>(*root.getUsers().begin())))
      return "awaiting widening";
    // The second operand of an accumulating add (or any but the first of a
    // fused loop's) is a contribution alive beside the sum it joins (a
    // tied weight's second use, a microbatch).
    for (OpOperand &use : root.getUses())
      if (isa<llm::AddOp, llm::FusedElementwiseOp>(use.getOwner()) && use.getOperandNumber() >= 1 &&
          llvm::any_of(use.getOwner()->getResults(),
                       [&](Value result) { return gradValues.contains(result); }))
        return "partial sums";
    if (llvm::any_of(root.getUsers(),
                     [](Operation *user) { return isa<dist::ReduceScatterOp>(user); }))
      return "awaiting reduce-scatter";
    if (root.getDefiningOp<dist::ReduceScatterOp>())
      return "shards";
    Operation *def = root.getDefiningOp();
    if (def && isa<dist::DistDialect>(def->getDialect()) && def->getNumOperands() == 1)
      def = def->getOperand(0).getDefiningOp();
    if (def && isa<llm::ConcatOp>(def))
      return "buckets";
    if (auto cast = dyn_cast_or_null<llm::CastOp>(def))
      return converts(cast) ? "gradients" : "fp32 copies";
    if (def && isa<llm::PadOp>(def))
      return "padded copies";
    return "gradients";
  }
  llvm::MapVector<Value, ClassInfo> classes;
  /// Kernel workspaces: blocks of category "workspace" that are no value's,
  /// live at their op's instruction only.
  llvm::MapVector<Operation *, ClassInfo> workspaces;
  llvm::DenseSet<Value> gradValues;
  llvm::DenseSet<Operation *> viewOps;
  /// Contiguous slices a program output reads through views (one row of
  /// a padded head's logits): copied, since an output owns its buffer.
  llvm::DenseSet<Operation *> outputSlices;
  int64_t numOps = 0;
  /// While emit() runs: where instructions go, the arena's transient base,
  /// and the buffers declared so far.
  struct Emission {
    OpBuilder *builder = nullptr;
    int64_t base = 0;
    llvm::DenseMap<Value, Value> buffers;
    llvm::StringMap<Value> persistentBuffers;
  } emission;
};

} // namespace llmc::lowering

#endif // LLMC_PASSES_LIB_PROGRAMLOWERING_H
