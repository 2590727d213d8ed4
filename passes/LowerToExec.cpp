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
#include "passes/lib/EntryPoints.h"
#include "passes/lib/ExecKernels.h"
#include "passes/lib/Inlining.h"
#include "passes/lib/Layout.h"
#include "passes/lib/ProgramLowering.h"

#include <map>

namespace llmc {
#define GEN_PASS_DEF_LOWERTOEXEC
#include "passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;
using namespace llmc;
using namespace llmc::lowering;

namespace llmc::lowering {

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

} // namespace llmc::lowering

namespace {

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
