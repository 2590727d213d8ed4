//===- ProgramPlacement.cpp - where each value of a program lives ---------===//
//
// Alias classes (views and in-place results join their operand's), live
// ranges, categories for the memory plan, kernel workspaces, and the
// offsets of the arena and of host memory (see LowerToExec.cpp).
//
//===----------------------------------------------------------------------===//

#include "passes/lib/ProgramLowering.h"

#include "dialects/Annotations/Annotations.h"
#include "dialects/QAT/QATDialect.h"
#include "passes/lib/ExecKernels.h"
#include "passes/lib/Layout.h"

#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;

namespace llmc::lowering {

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
  std::vector<arena::Interval> hostIntervals;
  FailureOr<arena::Plan> host = place(hostBlocks, "host placement", hostIntervals);
  if (failed(host))
    return failure();
  hostPeak = host->extent;
  for (auto &[op, info] : workspaces) {
    blocks.push_back(&info);
    roots.push_back(Value());
  }
  std::vector<arena::Interval> intervals;
  FailureOr<arena::Plan> placed = place(blocks, "arena placement", intervals);
  if (failed(placed))
    return failure();
  const arena::Plan &plan = *placed;
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

FailureOr<arena::Plan> ProgramLowering::place(ArrayRef<ClassInfo *> blocks, StringRef what,
                                              std::vector<arena::Interval> &intervals) {
  for (ClassInfo *info : blocks) intervals.push_back({info->start, info->end, info->bytes});
  arena::Plan plan = arena::planArena(intervals, exec::kBufferAlignment);
  // A wrong offset corrupts values silently at run time; checking is cheap.
  if (auto conflict = arena::findConflict(intervals, plan.offsets, exec::kBufferAlignment))
    return func.emitError(what) << " (" << arena::strategyName(plan.strategy)
                                << ") puts two values live at once in the same bytes: classes "
                                << conflict->first << " and " << conflict->second;
  for (auto [info, offset] : llvm::zip(blocks, plan.offsets)) info->offset = offset;
  return plan;
}

} // namespace llmc::lowering
