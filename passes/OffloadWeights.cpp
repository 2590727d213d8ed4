//===- OffloadWeights.cpp - generation weights beyond a device budget -----===//
//
// `llmc compile --inference … --device-memory <bytes>`: when the lowered
// generation steps (@prefill, @decode) need a larger arena than the device
// has, the weights of the last decoder layers move to host memory and are
// streamed into the device ahead of use, as a model too large for one GPU
// is served from host memory.
//
// Two device staging slots, each the size of the largest offloaded layer's
// weights, take turns: the j-th offloaded layer a step reads uses slot
// j mod 2, and its copies are issued right after the last kernel that read
// the slot's previous occupant (layer j − 2). Layer j's weights thus arrive
// while layer j − 1 computes, one layer ahead. Two slots cost two layers'
// weights, so offloading pays from the third layer on; layers are taken
// from the last down until the arena fits.
//
// With `layers=host` (--offloaded-layers host) nothing is streamed: the
// moved layers' KV cache joins their weights in host memory, and the
// stretch of each step that runs those layers runs on the host's cores
// (passes/lib/HostRegion.h), with no staging slots on the device.
//
// With `layers=split` the KV cache is in host memory as under `host`, and
// each step takes the form its shape favours: @decode (a row of tokens,
// bound by reading weights) runs the layers on the host; @prefill (a
// chunk of prompt, bound by compute) streams them, each layer's KV pools
// staged with its weights and copied back after its last kernel, since
// the chunk writes them. A slot holds a layer's weights and pools.
//
// Offsets follow llmc-offload-optimizer's numbering: the device arena is
// [0, arena), the host space [arena, arena + host). A moved weight keeps a
// persistent offset in the host space, where loading and checkpoints find
// it; every device offset above moved weights shifts down by their bytes,
// and the staging slots end the device arena.
//
//===----------------------------------------------------------------------===//

#include "common/LayerName.h"
#include "passes/Passes.h"
#include "passes/lib/ArenaPlacement.h"
#include "passes/lib/EntryPoints.h"
#include "passes/lib/HostRegion.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>

namespace llmc {
#define GEN_PASS_DEF_OFFLOADWEIGHTS
#include "passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;
using namespace llmc;

namespace {

std::string mib(int64_t bytes) {
  return llvm::formatv("{0:F2} MiB ({1} bytes)", static_cast<double>(bytes) / (1 << 20), bytes)
      .str();
}

/// One persistent weight slot of the arena (64-byte aligned, as
/// LowerToExec lays persistent state out).
struct WeightSlot {
  int64_t begin = 0, end = 0;
  std::string layer;
  bool cache = false; ///< a KV-cache pool (moved unless the layers stream)
  int64_t packed = 0; ///< offset inside its layer's staging slot
};

/// A decoder layer's weights: their slots in arena order.
struct LayerWeights {
  std::string name;
  int64_t index = 0;
  SmallVector<WeightSlot *> slots;
  int64_t bytes = 0; ///< the slots' bytes, alignment included
};

/// Every layer's weight slots, from the buffers of every program.
struct WeightMap {
  std::map<int64_t, WeightSlot> slots; ///< by begin
  std::map<std::string, LayerWeights> layers;

  /// Records `buffer` when it is a layer's weight, or with `caches` a
  /// layer's KV-cache pool ("kv_cache/kv/layers.3.k").
  void add(exec::BufferOp buffer, bool caches) {
    std::string_view name = buffer.getName().value_or("");
    bool cache = buffer.getCategory() == "kv_cache";
    if (cache)
      name = name.substr(name.rfind('/') + 1);
    std::string_view layer = layerOfParameter(name);
    if (!(buffer.getCategory() == "param" || (caches && cache)) || layer.empty())
      return;
    int64_t begin = buffer.getOffset();
    WeightSlot &slot = slots[begin];
    slot.begin = begin;
    slot.end = std::max(slot.end, begin + arena::alignedSize(exec::bufferBytes(buffer.getType()),
                                                             exec::kBufferAlignment));
    slot.layer = std::string(layer);
    slot.cache = cache;
  }

  /// Groups the slots by layer, ordered by layer index.
  SmallVector<LayerWeights *> group() {
    for (auto &[begin, slot] : slots) {
      LayerWeights &l = layers[slot.layer];
      l.name = slot.layer;
      l.index = layerIndex(slot.layer);
      slot.packed = l.bytes;
      l.slots.push_back(&slot);
      l.bytes += slot.end - slot.begin;
    }
    SmallVector<LayerWeights *> ordered;
    for (auto &[name, l] : layers) ordered.push_back(&l);
    llvm::stable_sort(ordered, [](auto *a, auto *b) { return a->index < b->index; });
    return ordered;
  }

  /// The slot holding device range [begin, end), if one does.
  const WeightSlot *slotOf(int64_t begin, int64_t end) const {
    auto it = slots.upper_bound(begin);
    if (it == slots.begin())
      return nullptr;
    --it;
    return end <= it->second.end ? &it->second : nullptr;
  }
};

/// Which layers leave the device, and where everything goes.
struct OffloadPlan {
  SmallVector<LayerWeights *> layers; ///< offloaded, in layer order
  int64_t movedBytes = 0;
  int64_t cacheBytes = 0; ///< of which KV-cache pools (host and split)
  int64_t slotBytes = 0; ///< one staging slot: the largest offloaded layer
  int64_t slotCount = 0;
  int64_t deviceBytes = 0;                    ///< the arena afterwards
  std::map<int64_t, int64_t> hostOffsetOf;    ///< slot begin -> host offset
  std::map<int64_t, int64_t> movedBelow;      ///< slot end -> moved bytes up to it
  std::map<std::string, int64_t> offloadRank; ///< layer -> its rank among the offloaded

  int64_t stagingBase() const { return deviceBytes - slotCount * slotBytes; }
  bool offloaded(const WeightSlot &slot) const { return offloadRank.count(slot.layer); }

  /// A device offset once the moved slots below it are gone.
  int64_t deviceOffset(int64_t offset) const {
    auto it = movedBelow.upper_bound(offset);
    return it == movedBelow.begin() ? offset : offset - std::prev(it)->second;
  }
};

/// The plan offloading the last `count` layers of `ordered`; `staged`:
/// whether some step streams them (two slots).
OffloadPlan planOffload(ArrayRef<LayerWeights *> ordered, size_t count, int64_t arena,
                        int64_t priorHost, bool staged) {
  OffloadPlan plan;
  plan.layers.assign(ordered.end() - count, ordered.end());
  std::map<int64_t, const WeightSlot *> moved;
  for (LayerWeights *l : plan.layers) {
    plan.offloadRank[l->name] = static_cast<int64_t>(plan.offloadRank.size());
    plan.movedBytes += l->bytes;
    plan.slotBytes = std::max(plan.slotBytes, l->bytes);
    for (WeightSlot *slot : l->slots) {
      moved[slot->begin] = slot;
      plan.cacheBytes += slot->cache ? slot->end - slot->begin : 0;
    }
  }
  plan.slotCount = staged ? std::min<int64_t>(2, static_cast<int64_t>(count)) : 0;
  int64_t running = 0;
  for (auto &[begin, slot] : moved) {
    plan.hostOffsetOf[begin] = priorHost + running;
    running += slot->end - slot->begin;
    plan.movedBelow[slot->end] = running;
  }
  plan.deviceBytes = arena - plan.movedBytes + plan.slotCount * plan.slotBytes;
  return plan;
}

/// Rewrites one program: host weights, staging views, and the copies.
class ProgramRewrite {
public:
  ProgramRewrite(exec::ProgramOp program, const WeightMap &weights, const OffloadPlan &plan,
                 int64_t arena)
      : program(program), weights(weights), plan(plan), arena(arena) {}

  /// Streams the moved layers' weights (and under split their KV pools)
  /// through the staging slots.
  LogicalResult stream() {
    SmallVector<Operation *> ops = placeBuffers();
    for (Operation *op : ops)
      if (!isa<exec::BufferOp>(op) && failed(readThroughStaging(op)))
        return failure();
    insertCopiesBack();
    return insertCopies();
  }

  /// Runs the moved layers on the host; their mirrors of device buffers
  /// from host offset `scratchBase`, `scratchBytes` the most any needs.
  LogicalResult runOnHost(int64_t scratchBase, int64_t &scratchBytes) {
    staged = false;
    placeBuffers();
    llvm::DenseSet<Value> moved;
    for (auto &[value, slot] : hostWeight) moved.insert(value);
    return runRegionOnHost(program, moved, scratchBase, scratchBytes);
  }

private:
  exec::ProgramOp program;
  const WeightMap &weights;
  const OffloadPlan &plan;
  int64_t arena; ///< the device arena's size before offloading
  bool staged = true; ///< read through the staging slots (where there are any)
  /// Each host weight's slot, and the device view its readers now read.
  llvm::DenseMap<Value, const WeightSlot *> hostWeight;
  llvm::DenseMap<Value, Value> stagingView;
  /// Per offloaded layer: the host weights (and pools) it reads, its
  /// readers, and the last instruction using its slot (its last reader,
  /// or the last copy of its pools back).
  struct LayerUse {
    SmallVector<Value> weights;
    Operation *first = nullptr, *last = nullptr, *release = nullptr;
  };
  std::map<std::string, LayerUse> uses;

  SmallVector<Operation *> placeBuffers() {
    SmallVector<Operation *> ops;
    for (Operation &op : program.getBody().front()) ops.push_back(&op);
    for (Operation *op : ops)
      if (auto buffer = dyn_cast<exec::BufferOp>(op))
        placeBuffer(buffer);
    return ops;
  }

  void placeBuffer(exec::BufferOp buffer) {
    if (buffer->hasAttr(exec::kHostSpaceAttr)) { // relative to the host space, as below
      buffer.setOffset(buffer.getOffset() - arena);
      return;
    }
    int64_t begin = buffer.getOffset(), end = begin + exec::bufferBytes(buffer.getType());
    const WeightSlot *slot = weights.slotOf(begin, end);
    if (!slot || !plan.offloaded(*slot)) {
      buffer.setOffset(plan.deviceOffset(begin));
      return;
    }
    buffer.setOffset(plan.hostOffsetOf.at(slot->begin) + (begin - slot->begin));
    buffer->setAttr(exec::kHostSpaceAttr, UnitAttr::get(buffer.getContext()));
    hostWeight[buffer] = slot;
    if (plan.slotCount == 0 || !staged)
      return; // run on the host: read in place
    // The view the step's kernels read, in the layer's staging slot.
    OpBuilder b(buffer);
    b.setInsertionPointAfter(buffer);
    int64_t at = plan.stagingBase() +
                 plan.offloadRank.at(slot->layer) % plan.slotCount * plan.slotBytes + slot->packed +
                 (begin - slot->begin);
    stagingView[buffer] = exec::BufferOp::create(b, buffer.getLoc(), buffer.getType(), at,
                                                 StringAttr(), StringRef("workspace"));
  }

  LogicalResult readThroughStaging(Operation *op) {
    auto kernel = dyn_cast<exec::KernelOp>(op);
    for (OpOperand &operand : op->getOpOperands()) {
      auto it = hostWeight.find(operand.get());
      if (it == hostWeight.end())
        continue;
      std::string name = operand.get().getDefiningOp<exec::BufferOp>().getName().value_or("").str();
      if (!kernel)
        return op->emitOpError("reads weight '")
               << name << "', which --device-memory keeps in host memory; only kernels may";
      if (!it->second->cache && llvm::is_contained(kernel.getOutputs(), operand.get()))
        return op->emitOpError("writes weight '")
               << name << "', which --device-memory keeps in host memory";
      LayerUse &use = uses[it->second->layer];
      if (!llvm::is_contained(use.weights, operand.get()))
        use.weights.push_back(operand.get());
      if (!use.first)
        use.first = op;
      use.last = op;
      operand.set(stagingView.lookup(operand.get()));
    }
    return success();
  }

  /// Each staged KV pool back to host memory after its layer's last kernel.
  void insertCopiesBack() {
    for (auto &[layer, use] : uses) {
      use.release = use.last;
      for (Value pool : use.weights)
        if (hostWeight.lookup(pool)->cache) {
          OpBuilder b(use.release->getContext());
          b.setInsertionPointAfter(use.release);
          use.release =
              exec::KernelOp::create(b, use.last->getLoc(), "copy_to_host",
                                     ValueRange{stagingView.lookup(pool)}, ValueRange{pool});
        }
    }
  }

  /// Each offloaded layer's copies, right after the slot's previous
  /// occupant is done with it (at the step's start for the first two).
  LogicalResult insertCopies() {
    SmallVector<LayerUse *> byFirstUse;
    for (auto &[layer, use] : uses) byFirstUse.push_back(&use);
    llvm::sort(byFirstUse,
               [](LayerUse *a, LayerUse *b) { return a->first->isBeforeInBlock(b->first); });
    Operation *start = nullptr;
    for (Operation &op : program.getBody().front())
      if (!isa<exec::BufferOp>(op)) {
        start = &op;
        break;
      }
    for (auto [j, use] : llvm::enumerate(byFirstUse)) {
      OpBuilder b(start);
      if (static_cast<int64_t>(j) >= plan.slotCount) {
        LayerUse *before = byFirstUse[j - plan.slotCount];
        if (!before->last->isBeforeInBlock(use->first))
          return use->first->emitOpError(
              "reads a streamed layer's weights while the layer before it in its staging slot "
              "is still being read; --device-memory cannot stream these layers");
        b.setInsertionPointAfter(before->release);
      }
      for (Value weight : use->weights)
        exec::KernelOp::create(b, use->first->getLoc(), "copy_to_device", ValueRange{weight},
                               ValueRange{stagingView.lookup(weight)});
    }
    return success();
  }
};

struct OffloadWeightsPass : llmc::impl::OffloadWeightsBase<OffloadWeightsPass> {
  using OffloadWeightsBase::OffloadWeightsBase;

  void runOnOperation() override {
    if (deviceBytes <= 0)
      return;
    if (layers != "stream" && layers != "host" && layers != "split") {
      getOperation().emitError() << "offload-weights: layers must be stream, host or split, got '"
                                 << layers << "'";
      return signalPassFailure();
    }
    for (ModuleOp module : programModules(getOperation()))
      if (failed(offload(module)))
        return signalPassFailure();
  }

  LogicalResult offload(ModuleOp module) {
    auto arena = module->getAttrOfType<IntegerAttr>(exec::kArenaBytesAttr);
    auto memoryPlan = module->getAttrOfType<DictionaryAttr>("exec.memory_plan");
    if (!arena || !memoryPlan)
      return module.emitError(
          "offload-weights: the module is not lowered (run llmc-lower-to-exec)");
    if (arena.getInt() <= deviceBytes)
      return success();
    // The KV pools move with their layers unless every step streams them.
    const bool caches = layers != "stream", staged = layers != "host";
    WeightMap weights;
    for (auto program : module.getOps<exec::ProgramOp>())
      for (auto buffer : program.getOps<exec::BufferOp>()) weights.add(buffer, caches);
    SmallVector<LayerWeights *> ordered = weights.group();
    auto prior = module->getAttrOfType<IntegerAttr>(exec::kHostBytesAttr);
    int64_t priorHost = prior ? prior.getInt() : 0;
    std::optional<OffloadPlan> chosen;
    int64_t fewest = arena.getInt();
    for (size_t count = 1; count <= ordered.size() && !chosen; ++count) {
      OffloadPlan plan = planOffload(ordered, count, arena.getInt(), priorHost, staged);
      fewest = std::min(fewest, plan.deviceBytes);
      if (plan.deviceBytes <= deviceBytes)
        chosen = std::move(plan);
    }
    if (!chosen)
      return module.emitError("--device-memory ")
             << mib(deviceBytes) << ": the generation steps need " << mib(arena.getInt())
             << " of device memory, and at least " << mib(fewest)
             << " with every decoder layer's weights (" << ordered.size()
             << " layers) in host memory ("
             << (layers == "host"
                     ? "run on the host: the embeddings, head, the other layers' KV cache and "
                       "the activations stay on the device"
                 : layers == "split"
                     ? "split: the embeddings, head, the other layers' KV cache, activations "
                       "and two layers' staging with their KV cache stay on the device"
                     : "the embeddings, head, KV cache, activations and two layers' staging "
                       "stay on the device")
             << "); raise it, or shrink the KV cache "
                "(--inference blocks=, max-batch=) or the weights (--weight-quant)";
    // Host mirrors of device buffers follow the moved layers in host memory.
    int64_t scratchBase = priorHost + chosen->movedBytes, scratchBytes = 0;
    for (auto program : module.getOps<exec::ProgramOp>()) {
      ProgramRewrite rewrite(program, weights, *chosen, arena.getInt());
      // Under split a row of tokens runs on the host, a prompt streams.
      bool onHost = layers == "host" || (layers == "split" && program.getSymName() == "decode");
      if (failed(onHost ? rewrite.runOnHost(scratchBase, scratchBytes) : rewrite.stream()))
        return failure();
    }
    record(module, *chosen, priorHost, scratchBytes, memoryPlan);
    return success();
  }

  /// Host offsets continue the device arena's numbering; the memory plan
  /// gains the host weights and the staging slots.
  void record(ModuleOp module, const OffloadPlan &plan, int64_t priorHost, int64_t scratchBytes,
              DictionaryAttr memoryPlan) {
    int64_t hostBytes = priorHost + plan.movedBytes + scratchBytes;
    for (auto program : module.getOps<exec::ProgramOp>())
      for (auto buffer : program.getOps<exec::BufferOp>())
        if (buffer->hasAttr(exec::kHostSpaceAttr))
          buffer.setOffset(plan.deviceBytes + buffer.getOffset());
    Builder b(module.getContext());
    module->setAttr(exec::kArenaBytesAttr, b.getI64IntegerAttr(plan.deviceBytes));
    module->setAttr(exec::kHostBytesAttr, b.getI64IntegerAttr(hostBytes));
    auto get = [&](StringRef key) {
      auto v = memoryPlan.getAs<IntegerAttr>(key);
      return v ? v.getInt() : 0;
    };
    NamedAttrList updated(memoryPlan);
    updated.set("arena", b.getI64IntegerAttr(plan.deviceBytes));
    int64_t weightBytes = plan.movedBytes - plan.cacheBytes;
    updated.set("persistent", b.getI64IntegerAttr(get("persistent") - plan.movedBytes));
    updated.set("params", b.getI64IntegerAttr(get("params") - weightBytes));
    updated.set("host", b.getI64IntegerAttr(hostBytes));
    updated.set("host_weights", b.getI64IntegerAttr(weightBytes));
    updated.set("weight_staging", b.getI64IntegerAttr(plan.slotCount * plan.slotBytes));
    if (layers != "stream") {
      updated.set("kv_cache", b.getI64IntegerAttr(get("kv_cache") - plan.cacheBytes));
      updated.set("host_kv_cache", b.getI64IntegerAttr(plan.cacheBytes));
      updated.set("host_scratch", b.getI64IntegerAttr(scratchBytes));
    }
    module->setAttr("exec.memory_plan", updated.getDictionary(module.getContext()));
  }
};

} // namespace
