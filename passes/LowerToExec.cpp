//===- LowerToExec.cpp - tensors to a static per-rank program -------------===//
//
// Decides where every tensor lives. Persistent state (parameters, optimizer
// moments) is laid out once under stable names shared by all programs; each
// program's other values get arena buffers by liveness:
//
//  1. Alias classes: a reshape, or a slice that is a contiguous byte range,
//     is a view of its operand; an elementwise op whose first operand dies
//     there (add, scale; any operand of a fused_elementwise; the residual
//     norms' sum over a dying addend, and their backward's dx over its
//     addend) writes in place. Views and in-place results join the
//     operand's class.
//  2. Each class lives from its first definition to its last use (program
//     inputs from the start, outputs to the end; a send's input to the end)
//     and gets a 64-byte aligned offset above the persistent region that no
//     class live at the same time overlaps: the smallest of first-fit by
//     start time and greedy by size (ArenaPlacement.h), so the peak is at
//     most first-fit's.
//
// Each remaining llm op becomes an exec.kernel of the same name
// (passes/lib/ExecKernels.h). Under target=cuda an attention op cuDNN may
// run also gets a workspace output, a block of its own live only at that
// instruction (common/AttentionWorkspace.h).
//
//===----------------------------------------------------------------------===//

#include "dialects/Annotations/Annotations.h"
#include "passes/Passes.h"
#include "passes/lib/ArenaPlacement.h"
#include "passes/lib/EntryPoints.h"
#include "passes/lib/ExecKernels.h"
#include "passes/lib/Inlining.h"
#include "passes/lib/Layout.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#include <deque>
#include <map>

namespace llmc {
#define GEN_PASS_DEF_LOWERTOEXEC
#include "passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;
using namespace llmc;

namespace {

/// The category of a value llm.copy_to_host puts in host memory: planned
/// apart from the arena, in the host memory space numbered after it.
constexpr llvm::StringLiteral kHostActivation = "host_activation";

MemRefType memrefOf(Type tensorType) {
  auto t = cast<RankedTensorType>(tensorType);
  return MemRefType::get(t.getShape(), t.getElementType());
}

int64_t bytesOf(Type tensorType) { return exec::bufferBytes(memrefOf(tensorType)); }

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
  /// Places the host classes in host memory, by liveness as in the arena.
  LogicalResult allocateHost(ArrayRef<ClassInfo *> hostBlocks);
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

/// Byte offset of a slice if it reads one contiguous range of its input.
std::optional<int64_t> contiguousSliceOffset(llm::SliceOp slice) {
  auto in = slice.getX().getType();
  auto out = slice.getResult().getType();
  ArrayRef<int64_t> offsets = slice.getOffsets();
  // After the first dimension that is cut, every later dimension must be whole
  // and every earlier one of size 1 in the result.
  int64_t rank = in.getRank(), firstCut = rank;
  for (int64_t d = 0; d < rank; ++d)
    if (out.getDimSize(d) != in.getDimSize(d)) {
      firstCut = d;
      break;
    }
  for (int64_t d = 0; d < firstCut; ++d)
    if (out.getDimSize(d) != 1 && in.getDimSize(d) != 1)
      return std::nullopt;
  for (int64_t d = firstCut + 1; d < rank; ++d)
    if (out.getDimSize(d) != in.getDimSize(d))
      return std::nullopt;
  int64_t linear = 0, stride = 1;
  for (int64_t d = rank - 1; d >= 0; --d) {
    linear += offsets[d] * stride;
    stride *= in.getDimSize(d);
  }
  return linear * std::max<int64_t>(1, in.getElementTypeBitWidth() / 8);
}

static Value viewSource(Operation &op, int64_t &viewOffset);

LogicalResult ProgramLowering::placeValues() {
  numberOps();
  findGradients();
  if (failed(placeArguments()))
    return failure();
  FailureOr<llvm::DenseMap<Value, Value>> tiedTo = findTiedResults();
  if (failed(tiedTo))
    return failure();
  for (Value v : func.getBody().front().getTerminator()->getOperands()) {
    int64_t offset = 0;
    for (Operation *def = v.getDefiningOp(); def; def = v.getDefiningOp()) {
      if (isa<llm::SliceOp>(def)) {
        outputSlices.insert(def);
        break;
      }
      if (!(v = viewSource(*def, offset)))
        break;
    }
  }
  for (Operation &op : func.getBody().front().without_terminator())
    if (failed(placeResults(op, *tiedTo)))
      return failure();
  if (failed(placeOutputs(*tiedTo)))
    return failure();
  for (auto &[root, info] : classes)
    if (info.category == "activation" && gradValues.contains(root))
      info.category = "grad";
  classifyTransients();
  return success();
}

void ProgramLowering::numberOps() {
  Block &body = func.getBody().front();
  for (Operation &op : body) index[&op] = numOps++;
  for (Operation &op : body)
    for (Value operand : op.getOperands())
      lastUse[operand] = std::max(lastUse.lookup(operand), index[&op]);
  // A send completes asynchronously (the runtime waits at the program's
  // end), so its bytes must stay untouched until then.
  for (Operation &op : body)
    if (auto send = dyn_cast<dist::SendOp>(op))
      lastUse[send.getInput()] = numOps;
}

void ProgramLowering::findGradients() {
  Block &body = func.getBody().front();
  SmallVector<Value> worklist;
  for (Operation &op : body)
    if (isa<llm::AdamWOp, llm::AdamW8bitOp>(op))
      worklist.push_back(op.getOperand(1)); // the gradient
    else if (auto multi = dyn_cast<llm::MultiTensorAdamWOp>(op))
      worklist.append(multi.getGrads().begin(), multi.getGrads().end());
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (auto [i, v] : llvm::enumerate(ret.getOperands()))
    if (func.getResultAttr(i, kGradOfAttr))
      worklist.push_back(v);
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    if (!gradValues.insert(v).second)
      continue;
    // Accumulation (add, scale), widening (cast), synchronisation and the
    // copies and views of gradient buckets (concat, pad, slice, reshape)
    // keep it a gradient: the category follows the value, not the op that
    // last wrote it.
    Operation *def = v.getDefiningOp();
    if (def && isa<llm::AddOp, llm::ScaleOp, llm::ConcatOp>(def))
      for (Value operand : def->getOperands()) worklist.push_back(operand);
    // A fused elementwise loop (the last microbatch's sum and mean): its
    // operands of the gradient's type are the contributions it sums.
    if (def && isa<llm::FusedElementwiseOp>(def))
      for (Value operand : def->getOperands())
        if (operand.getType() == v.getType())
          worklist.push_back(operand);
    if (def && isa<llm::PadOp, llm::SliceOp, llm::ReshapeOp>(def))
      worklist.push_back(def->getOperand(0));
    if (def && isa<llm::CastOp, dist::AllReduceOp, dist::ReduceScatterOp, dist::BroadcastOp,
                   dist::ReduceOp>(def))
      worklist.push_back(def->getOperand(0));
  }
}

void ProgramLowering::newClass(Value v, int64_t start) {
  placement[v] = {v, 0};
  ClassInfo info;
  info.start = start;
  info.end = std::max(start, lastUse.lookup(v));
  info.bytes = bytesOf(v.getType());
  classes.insert({v, info});
}

LogicalResult ProgramLowering::placeArguments() {
  for (BlockArgument arg : func.getArguments()) {
    unsigned i = arg.getArgNumber();
    auto role = func.getArgAttrOfType<StringAttr>(i, kRoleAttr);
    auto name = func.getArgAttrOfType<StringAttr>(i, kNameAttr);
    llm::ParamAttr param = llm::getParamAttr(func, i);
    if (param || (role && role.getValue() != "input")) {
      StringRef r = role ? role.getValue() : StringRef("param");
      StringRef n = name ? name.getValue() : param.getName();
      FailureOr<Persistent *> p =
          persistent.get(arg.getLoc(), r, n, arg.getType(), param,
                         func.getArgAttrOfType<DictionaryAttr>(i, kShardAttr));
      if (failed(p))
        return failure();
      persistentArgs[arg] = *p;
      continue;
    }
    newClass(arg, 0);
    classes[arg].category = "input";
    classes[arg].name = name ? name.getValue().str() : ("input" + Twine(i)).str();
  }
  return success();
}

FailureOr<llvm::DenseMap<Value, Value>> ProgramLowering::findTiedResults() {
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  llvm::DenseMap<Value, Value> tiedTo;
  for (auto [i, v] : llvm::enumerate(ret.getOperands()))
    if (auto tied = func.getResultAttrOfType<IntegerAttr>(i, kTiedToAttr)) {
      Value arg = func.getArgument(tied.getInt());
      for (OpOperand &use : arg.getUses())
        if (v.getDefiningOp() && index[use.getOwner()] > index[v.getDefiningOp()])
          return v.getDefiningOp()->emitOpError(
              "updates state that is still read after it; cannot update in place");
      tiedTo[v] = arg;
    }
  return tiedTo;
}

/// The value `op` is a view of (reshape, replicate, stop_gradient,
/// qat.quantize_grad, a contiguous slice), with the view's byte offset into
/// it; null for any other op.
static Value viewSource(Operation &op, int64_t &viewOffset) {
  viewOffset = 0;
  if (auto reshape = dyn_cast<llm::ReshapeOp>(op))
    return reshape.getX();
  if (auto replicate = dyn_cast<dist::ReplicateOp>(op))
    return replicate.getInput(); // identity forward
  if (auto stop = dyn_cast<llm::StopGradientOp>(op))
    return stop.getX(); // identity forward
  if (auto quantizeGrad = dyn_cast<qat::QuantizeGradOp>(op))
    return quantizeGrad.getX(); // identity forward
  if (auto slice = dyn_cast<llm::SliceOp>(op))
    if (auto offset = contiguousSliceOffset(slice)) {
      viewOffset = *offset;
      return slice.getX();
    }
  return {};
}

LogicalResult ProgramLowering::placeResults(Operation &op,
                                            const llvm::DenseMap<Value, Value> &tiedTo) {
  int64_t at = index[&op];
  for (Value result : op.getResults()) {
    if (Value arg = tiedTo.lookup(result)) {
      persistentArgs[result] = persistentArgs.lookup(arg);
      continue;
    }
    int64_t viewOffset = 0;
    Value source = outputSlices.contains(&op) ? Value() : viewSource(op, viewOffset);
    if (source) {
      viewOps.insert(&op);
      if (isPersistentArg(source)) {
        persistentArgs[result] = persistentArgs.lookup(source);
        if (viewOffset)
          return op.emitOpError("views into persistent state are not supported");
        continue;
      }
      Placement p = placement.lookup(source);
      placement[result] = {p.root, p.offset + viewOffset};
      ClassInfo &info = classes[p.root];
      info.end = std::max(info.end, lastUse.lookup(result));
      continue;
    }
    if (!placeInPlace(op, result, at))
      newClass(result, at);
    if (isa<llm::CopyToHostOp>(op))
      classes[result].category = kHostActivation.str();
  }
  return success();
}

bool ProgramLowering::placeInPlace(Operation &op, Value result, int64_t at) {
  // In place: an operand whose class ends here and has the same size —
  // add's and scale's first; any of a fused elementwise loop's, which
  // reads each element of its inputs before it writes that element (a
  // result that takes one extends its class, so no other result takes
  // it too); either addend of a residual norm's sum; the addend of a
  // fused norm backward. The residual norms' kernels read each element
  // before writing it there, so fusing add and norm never needs a
  // buffer more than the two ops did.
  SmallVector<Value, 4> inPlaceCandidates;
  if (isa<llm::AddOp, llm::ScaleOp, dist::AllReduceOp, dist::BroadcastOp>(op))
    inPlaceCandidates.push_back(op.getOperand(0));
  else if (isa<llm::FusedElementwiseOp>(op))
    inPlaceCandidates.append(op.operand_begin(), op.operand_end());
  else if (isa<llm::AddLayerNormOp, llm::AddRMSNormOp>(op) && result == op.getResult(0))
    inPlaceCandidates = {op.getOperand(0), op.getOperand(1)};
  else if (isa<llm::LayerNormGradAddOp, llm::RMSNormGradAddOp>(op) && result == op.getResult(0))
    inPlaceCandidates.push_back(op.getOperand(3));
  for (Value lhs : inPlaceCandidates) {
    if (result.getType() != lhs.getType() || isPersistentArg(lhs) || !placement.count(lhs))
      continue;
    ClassInfo &info = classes[placement.lookup(lhs).root];
    Placement p = placement.lookup(lhs);
    if (info.end == at && info.category == "activation" && p.offset == 0 &&
        info.bytes == bytesOf(result.getType())) {
      placement[result] = p;
      info.end = std::max(at, lastUse.lookup(result));
      return true;
    }
  }
  return false;
}

LogicalResult ProgramLowering::placeOutputs(const llvm::DenseMap<Value, Value> &tiedTo) {
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    if (tiedTo.count(v))
      continue;
    if (isPersistentArg(v) || !placement.count(v))
      return ret.emitOpError("result ") << i << " must be computed by the program";
    ClassInfo &info = classes[placement.lookup(v).root];
    if (placement.lookup(v).offset != 0 || bytesOf(v.getType()) != info.bytes ||
        !info.name.empty()) {
      // Shares bytes with something else: give the output its own copy.
      return ret.emitOpError("result ") << i << " is a view of another value; "
                                        << "outputs must own their buffer";
    }
    info.end = numOps;
    info.category = "output";
    if (auto gradOf = func.getResultAttrOfType<StringAttr>(i, kGradOfAttr))
      info.name = ("grad/" + gradOf.getValue()).str();
    else if (auto name = func.getResultAttrOfType<StringAttr>(i, kNameAttr))
      info.name = name.getValue().str();
    else if (func.getName() == "forward" || func.getName() == "grad")
      info.name = i == 0 ? "loss" : ("output" + Twine(i)).str(); // by definition
    else
      info.name = ("output" + Twine(i)).str();
  }
  return success();
}

/// Splits the remaining transients into what the memory plan reports
/// apart: `activation` (a forward value kept for the backward, the term
/// Korthikanti et al. count), `communication` (a collective's or a
/// receive's result: gathered parameters and activations, received
/// stage inputs) and `workspace` (everything else: temporaries that die
/// within the forward or the backward).
void ProgramLowering::classifyTransients() {
  Block &body = func.getBody().front();
  // Saved: produced by the forward, read by the backward. A saved value
  // belongs to the layer whose backward reads it first (a layer's input,
  // produced by the layer before, is its own, as Korthikanti et al. count).
  llvm::MapVector<Value, StringAttr> saved;
  for (Operation &op : body) {
    if (!op.hasAttr(kBackwardAttr))
      continue;
    for (Value operand : op.getOperands()) {
      if (!placement.count(operand))
        continue;
      Value root = placement.lookup(operand).root;
      Operation *def = root.getDefiningOp();
      if (def && !def->hasAttr(kBackwardAttr) && !saved.count(root))
        saved[root] = op.getAttrOfType<StringAttr>(kBlockNameAttr);
    }
  }
  for (auto &[root, info] : classes) {
    Operation *def = root.getDefiningOp();
    if (!def)
      continue;
    if (auto mb = def->getAttrOfType<IntegerAttr>(kMicrobatchAttr))
      info.microbatch = mb.getInt();
    bool isSaved = saved.count(root);
    if (StringAttr layer = isSaved ? saved.lookup(root) : StringAttr();
        layer && info.microbatch <= 0)
      savedPerLayer[layer.getValue().str()] += info.bytes;
    if (info.category != "activation")
      continue;
    // A value copied back from host memory is a saved activation, in
    // flight to the backward that reads it.
    if (isa<dist::DistDialect>(def->getDialect()))
      info.category = "communication";
    else if (!isSaved && !isa<llm::CopyToDeviceOp>(def))
      info.category = "workspace";
  }
}

void ProgramLowering::planWorkspaces() {
  for (Operation &op : func.getBody().front().without_terminator()) {
    int64_t bytes = kernelWorkspaceBytes(op, target);
    if (bytes == 0)
      continue;
    ClassInfo info;
    info.start = info.end = index[&op];
    info.bytes = bytes;
    info.category = "workspace";
    if (auto mb = op.getAttrOfType<IntegerAttr>(kMicrobatchAttr))
      info.microbatch = mb.getInt();
    workspaces.insert({&op, info});
  }
}

LogicalResult ProgramLowering::allocate() {
  // Every block of the arena: the value classes (with their root), then the
  // kernels' workspaces (without one).
  SmallVector<ClassInfo *> blocks, hostBlocks;
  SmallVector<Value> roots;
  for (auto &[root, info] : classes) {
    if (info.category == kHostActivation) {
      hostBlocks.push_back(&info);
      continue;
    }
    blocks.push_back(&info);
    roots.push_back(root);
  }
  if (failed(allocateHost(hostBlocks)))
    return failure();
  for (auto &[op, info] : workspaces) {
    blocks.push_back(&info);
    roots.push_back(Value());
  }
  std::vector<arena::Interval> intervals;
  for (ClassInfo *info : blocks) intervals.push_back({info->start, info->end, info->bytes});
  arena::Plan plan = arena::planArena(intervals, exec::kBufferAlignment);
  // A wrong offset corrupts values silently at run time; checking is cheap.
  if (auto conflict = arena::findConflict(intervals, plan.offsets, exec::kBufferAlignment))
    return func.emitError("arena placement (")
           << arena::strategyName(plan.strategy) << ") puts two values live at once in the same "
           << "bytes: classes " << conflict->first << " and " << conflict->second;
  for (auto [info, offset] : llvm::zip(blocks, plan.offsets)) info->offset = offset;
  liveBytesBound = arena::liveBytesBound(intervals, exec::kBufferAlignment);

  transientPeak = plan.extent;

  // Each category's peak, and the gradients at theirs, in program order:
  // what is live as each block starts.
  SmallVector<size_t> order = llvm::to_vector(llvm::seq<size_t>(0, blocks.size()));
  llvm::stable_sort(order, [&](size_t a, size_t b) { return blocks[a]->start < blocks[b]->start; });
  struct Live {
    int64_t bytes, end;
    size_t block;
  };
  std::vector<Live> live;
  for (size_t i : order) {
    ClassInfo &info = *blocks[i];
    live.erase(
        std::remove_if(live.begin(), live.end(), [&](const Live &l) { return l.end < info.start; }),
        live.end());
    live.push_back({arena::alignedSize(info.bytes, exec::kBufferAlignment), info.end, i});
    std::map<std::string, int64_t> now;
    for (const Live &l : live) now[blocks[l.block]->category] += l.bytes;
    if (now["grad"] > categoryPeaks["grad"]) {
      gradientPeakParts.clear();
      for (const Live &l : live)
        if (blocks[l.block]->category == "grad")
          gradientPeakParts[gradientKind(roots[l.block])] += l.bytes;
    }
    for (auto &[category, bytes] : now)
      categoryPeaks[category] = std::max(categoryPeaks[category], bytes);
  }

  // The peak: of the instructions at which the arena's top byte is in use,
  // the one with the most bytes live (the first of equals). Where the plan
  // meets the live-bytes bound, that is where the most bytes are live.
  std::vector<int64_t> liveAt(numOps + 2, 0);
  for (const arena::Interval &it : intervals) {
    liveAt[it.start] += arena::alignedSize(it.bytes, exec::kBufferAlignment);
    liveAt[it.end + 1] -= arena::alignedSize(it.bytes, exec::kBufferAlignment);
  }
  for (size_t t = 1; t < liveAt.size(); ++t) liveAt[t] += liveAt[t - 1];
  int64_t peakAt = -1;
  for (const auto &[it, offset] : llvm::zip(intervals, plan.offsets)) {
    if (offset + arena::alignedSize(it.bytes, exec::kBufferAlignment) != transientPeak)
      continue;
    for (int64_t t = it.start; t <= it.end; ++t)
      if (peakAt < 0 || liveAt[t] > liveAt[peakAt] || (liveAt[t] == liveAt[peakAt] && t < peakAt))
        peakAt = t;
  }
  for (ClassInfo *info : blocks) {
    if (info->start > peakAt || info->end < peakAt)
      continue;
    int64_t bytes = arena::alignedSize(info->bytes, exec::kBufferAlignment);
    peakBreakdown[info->category] += bytes;
    if (info->category == "activation")
      peakActivationsByMicrobatch[std::max<int64_t>(info->microbatch, 0)] += bytes;
  }
  return success();
}

LogicalResult ProgramLowering::allocateHost(ArrayRef<ClassInfo *> hostBlocks) {
  std::vector<arena::Interval> intervals;
  for (ClassInfo *info : hostBlocks) intervals.push_back({info->start, info->end, info->bytes});
  arena::Plan plan = arena::planArena(intervals, exec::kBufferAlignment);
  if (auto conflict = arena::findConflict(intervals, plan.offsets, exec::kBufferAlignment))
    return func.emitError("host placement (")
           << arena::strategyName(plan.strategy) << ") puts two values live at once in the same "
           << "bytes: classes " << conflict->first << " and " << conflict->second;
  for (auto [info, offset] : llvm::zip(hostBlocks, plan.offsets)) info->offset = offset;
  hostPeak = plan.extent;
  return success();
}

LogicalResult ProgramLowering::emit(OpBuilder &b, StringRef programName, StringRef kind) {
  auto program = exec::ProgramOp::create(b, func.getLoc(), programName, kind);
  Block *block = new Block();
  program.getBody().push_back(block);
  OpBuilder pb = OpBuilder::atBlockEnd(block);
  emission = Emission();
  emission.builder = &pb;
  emission.base = persistent.bytes;

  // Declare inputs first so the runtime sees them even if unused.
  for (BlockArgument arg : func.getArguments()) bufferFor(arg);
  bool faultSitePlaced = false;
  for (Operation &op : func.getBody().front().without_terminator()) {
    Operation *last = block->empty() ? nullptr : &block->back();
    if (failed(emitOp(op)))
      return failure();
    if (!faultSitePlaced && isFaultSite(op)) {
      Operation *emitted = &block->back();
      while (isa<exec::BufferOp>(emitted)) emitted = emitted->getPrevNode();
      emitted->setAttr(exec::kFaultSiteAttr, pb.getUnitAttr());
      faultSitePlaced = true;
    }
    // Every instruction names the part of the step it belongs to, for traces.
    StringAttr part = stepPartOf(op, pb);
    if (!part)
      continue;
    for (Operation *it = last ? last->getNextNode() : &block->front(); it; it = it->getNextNode())
      if (!isa<exec::BufferOp>(it))
        it->setAttr(exec::kActionAttr, part);
  }
  // Outputs that are views of nothing computed here (none today) would need
  // a copy; make sure every output has its buffer declared.
  for (Value v : func.getBody().front().getTerminator()->getOperands()) bufferFor(v);
  emission = Emission();
  return success();
}

Value ProgramLowering::bufferFor(Value v) {
  if (Value existing = emission.buffers.lookup(v))
    return existing;
  OpBuilder &pb = *emission.builder;
  MemRefType type = memrefOf(v.getType());
  Value buffer;
  if (Persistent *p = persistentArgs.lookup(v)) {
    Value &shared = emission.persistentBuffers[p->name];
    if (!shared || shared.getType() != type) {
      auto op = exec::BufferOp::create(pb, v.getLoc(), type, p->offset, pb.getStringAttr(p->name),
                                       p->category);
      if (p->param)
        op->setAttr(llm::kParamAttrName, p->param);
      // The split describes the state as stored; a view of it in another
      // shape (a reshape the QAT of experts reads) is the same bytes and
      // takes it from the state's own declaration.
      if (p->shard && type == memrefOf(p->type))
        op->setAttr(kShardAttr, p->shard);
      shared = op;
    }
    buffer = shared;
  } else {
    Placement place = placement.lookup(v);
    ClassInfo &info = classes[place.root];
    bool owner = place.root == v;
    StringAttr name = owner && !info.name.empty() ? pb.getStringAttr(info.name) : nullptr;
    bool host = info.category == kHostActivation;
    buffer = exec::BufferOp::create(
        pb, v.getLoc(), type, (host ? hostBase : emission.base) + info.offset + place.offset, name,
        host ? StringRef("activation") : StringRef(info.category));
    if (host)
      buffer.getDefiningOp()->setAttr(exec::kHostSpaceAttr, pb.getUnitAttr());
  }
  emission.buffers[v] = buffer;
  return buffer;
}

LogicalResult ProgramLowering::emitOp(Operation &op) {
  OpBuilder &pb = *emission.builder;
  if (viewOps.contains(&op)) {
    bufferFor(op.getResult(0));
    return success();
  }
  StringRef dialect = op.getDialect()->getNamespace();
  if (dialect == "dist")
    return emitCollective(pb, &op, [&](Value v) { return bufferFor(v); });
  if (dialect != "llm" && dialect != "qat")
    return op.emitOpError("cannot be lowered to exec (not an llm, qat or dist op)");
  SmallVector<Value> ins, outs;
  for (Value operand : op.getOperands()) ins.push_back(bufferFor(operand));
  for (Value result : op.getResults()) outs.push_back(bufferFor(result));
  if (auto it = workspaces.find(&op); it != workspaces.end())
    outs.push_back(exec::BufferOp::create(
        pb, op.getLoc(), MemRefType::get({it->second.bytes}, pb.getI8Type()),
        emission.base + it->second.offset, /*name=*/StringAttr(), it->second.category));
  auto kernel = exec::KernelOp::create(pb, op.getLoc(), kernelName(op), ins, outs);
  return setKernelAttributes(op, kernel, pb);
}

struct LowerToExecPass : llmc::impl::LowerToExecBase<LowerToExecPass> {
  using LowerToExecBase::LowerToExecBase;

  void runOnOperation() override {
    if (target != "cpu" && target != "cuda") {
      getOperation().emitError() << "llmc-lower-to-exec: target must be cpu or cuda, got '"
                                 << target << "'";
      return signalPassFailure();
    }
    // Pipeline stages are lowered one by one, each into its own arena.
    for (ModuleOp module : programModules(getOperation()))
      if (failed(lower(module)))
        return signalPassFailure();
  }

  LogicalResult lower(ModuleOp module) {
    SmallVector<std::pair<func::FuncOp, StringRef>> todo;
    for (const EntryPoint &entry : kEntryPoints)
      if (func::FuncOp f = lookupFunc(module, entry.function))
        todo.push_back({f, entry.program});
    if (todo.empty()) {
      module.emitError("lower-to-exec: no entry point (@train_step, @forward, "
                       "@logits or @grad)");
      return failure();
    }

    PersistentLayout persistent;
    OpBuilder b(module.getContext());
    b.setInsertionPointToEnd(module.getBody());
    std::vector<std::unique_ptr<ProgramLowering>> lowerings;
    int64_t transient = 0;
    std::map<std::string, Attribute> programPlans;
    for (auto [f, programName] : todo) {
      flattenBlocks(f);
      if (failed(inlineCalls(module, f)))
        return failure();
    }
    for (auto [f, programName] : todo) {
      lowerings.push_back(std::make_unique<ProgramLowering>(f, persistent, target));
      if (failed(lowerings.back()->prepare()))
        return failure();
    }
    // Host memory is numbered after the arena, whose size is known once
    // every program is placed.
    int64_t host = 0;
    for (auto &lowering : lowerings) {
      transient = std::max(transient, lowering->transientPeak);
      host = std::max(host, lowering->hostPeak);
    }
    for (auto &lowering : lowerings) lowering->hostBase = persistent.bytes + transient;
    for (auto [i, entry] : llvm::enumerate(todo)) {
      auto &[f, programName] = entry;
      ProgramLowering *lowering = lowerings[i].get();
      if (failed(lowering->emit(b, programName, programName)))
        return failure();
      SmallVector<NamedAttribute> plan{
          b.getNamedAttr("peak", b.getI64IntegerAttr(lowering->transientPeak)),
          b.getNamedAttr("live_bound", b.getI64IntegerAttr(lowering->liveBytesBound))};
      for (auto &[category, bytes] : lowering->peakBreakdown)
        plan.push_back(b.getNamedAttr(category, b.getI64IntegerAttr(bytes)));
      SmallVector<NamedAttribute> peaks;
      for (auto &[category, bytes] : lowering->categoryPeaks)
        peaks.push_back(b.getNamedAttr(category, b.getI64IntegerAttr(bytes)));
      plan.push_back(b.getNamedAttr("category_peaks", b.getDictionaryAttr(peaks)));
      SmallVector<NamedAttribute> gradientParts;
      for (auto &[kind, bytes] : lowering->gradientPeakParts)
        gradientParts.push_back(b.getNamedAttr(kind, b.getI64IntegerAttr(bytes)));
      plan.push_back(b.getNamedAttr("gradient_peak_parts", b.getDictionaryAttr(gradientParts)));
      SmallVector<NamedAttribute> byMicrobatch, perLayer;
      for (auto &[microbatch, bytes] : lowering->peakActivationsByMicrobatch)
        byMicrobatch.push_back(
            b.getNamedAttr(std::to_string(microbatch), b.getI64IntegerAttr(bytes)));
      for (auto &[layer, bytes] : lowering->savedPerLayer)
        perLayer.push_back(b.getNamedAttr(layer, b.getI64IntegerAttr(bytes)));
      plan.push_back(
          b.getNamedAttr("activations_by_microbatch", b.getDictionaryAttr(byMicrobatch)));
      plan.push_back(b.getNamedAttr("saved_per_layer", b.getDictionaryAttr(perLayer)));
      programPlans[programName.str()] = b.getDictionaryAttr(plan);
    }
    int64_t params = 0, optim = 0, kvCache = 0;
    for (const Persistent &p : persistent.buffers)
      (p.category == "param"      ? params
       : p.category == "kv_cache" ? kvCache
                                  : optim) += bytesOf(p.type);

    for (auto [f, programName] : todo) f.erase();

    SmallVector<NamedAttribute> programsAttr;
    for (auto &[name, attr] : programPlans) programsAttr.push_back(b.getNamedAttr(name, attr));
    int64_t arena = persistent.bytes + transient;
    module->setAttr(exec::kArenaBytesAttr, b.getI64IntegerAttr(arena));
    if (auto mesh = module.lookupSymbol<dist::MeshOp>(kMeshName)) {
      SmallVector<NamedAttribute> axes;
      for (auto [name, size] :
           llvm::zip(mesh.getAxes().getAsValueRange<StringAttr>(), mesh.getShape()))
        axes.push_back(b.getNamedAttr(name, b.getI64IntegerAttr(size)));
      module->setAttr(exec::kMeshAttr, b.getDictionaryAttr(axes));
      module->setAttr(exec::kMeshAxesAttr, mesh.getAxes());
    }
    if (auto ranks = module->getAttrOfType<DenseI64ArrayAttr>(kStageRanksAttr))
      for (auto program : module.getOps<exec::ProgramOp>()) program->setAttr("exec.ranks", ranks);
    SmallVector<NamedAttribute> memoryPlan{
        b.getNamedAttr("arena", b.getI64IntegerAttr(arena)),
        b.getNamedAttr("persistent", b.getI64IntegerAttr(persistent.bytes)),
        b.getNamedAttr("params", b.getI64IntegerAttr(params)),
        b.getNamedAttr("optimizer_state", b.getI64IntegerAttr(optim)),
        b.getNamedAttr("programs", b.getDictionaryAttr(programsAttr))};
    if (kvCache) // inference steps only
      memoryPlan.push_back(b.getNamedAttr("kv_cache", b.getI64IntegerAttr(kvCache)));
    if (host) { // offloaded activations (llmc-offload-activations)
      module->setAttr(exec::kHostBytesAttr, b.getI64IntegerAttr(host));
      memoryPlan.push_back(b.getNamedAttr("host", b.getI64IntegerAttr(host)));
      memoryPlan.push_back(b.getNamedAttr("host_activations", b.getI64IntegerAttr(host)));
    }
    module->setAttr("exec.memory_plan", b.getDictionaryAttr(memoryPlan));
    return success();
  }
};

} // namespace
