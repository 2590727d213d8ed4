//===- PipelineParallel.cpp - pipeline stages with a microbatch schedule --===//
//
// Runs on the whole single-program training step (after autodiff, the
// optimizer and data/tensor sharding) and splits it over the `pp` axis:
//
//  1. The layers (llm.blocks of @forward) are cut into p·v contiguous model
//     chunks — by an explicit layout, or balanced by a cost model (FLOPs of
//     each layer, with the embedding on the first chunk and the head and
//     loss on the last); chunk c runs on stage c mod p.
//  2. Every op of a (microbatch, chunk) belongs to that chunk's stage: layer
//     ops by their llmc.block_name, the others by data flow (an op sits with
//     the latest chunk its operands come from). Backward ops are the B
//     action of their (microbatch, chunk); for the zero-bubble schedule the
//     ones that only make weight gradients are split off as W.
//  3. Ops outside any microbatch (input slicing, gradient synchronisation,
//     the optimizer) are repeated on every stage that needs their results;
//     a value made on one stage and needed on another travels by
//     dist.send/dist.recv along `pp`. The global gradient norm is summed
//     per stage and all-reduced over `pp`; the loss (made on the last
//     stage) is broadcast so every rank reports it.
//  4. Each stage's program runs its actions in the schedule's order
//     (MicrobatchSchedule.h); the stage becomes a nested module with the
//     ranks that run it (`llmc.ranks`), lowered on its own.
//
// Sends complete asynchronously (the runtime waits for them when the
// program ends), so the only waits are receives, and a schedule whose
// actions respect the data dependencies cannot deadlock.
//
//===----------------------------------------------------------------------===//

#include "common/Mesh.h"
#include "dialects/Annotations/Annotations.h"
#include "passes/Passes.h"
#include "passes/lib/EntryPoints.h"
#include "passes/lib/Inlining.h"
#include "passes/lib/Layout.h"
#include "passes/lib/MicrobatchSchedule.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/bit.h"

#include <map>
#include <sstream>

namespace llmc {
#define GEN_PASS_DEF_PIPELINEPARALLEL
#include "passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;
using namespace llmc;
using pipeline::Action;
using pipeline::Phase;

namespace {

constexpr llvm::StringLiteral kAxis = "pp";

/// Multiply-adds of the matmuls and attention of an op list, the cost
/// model's unit.
double flopsOf(Operation *root) {
  double flops = 0;
  root->walk([&](Operation *op) {
    auto product = [&](auto m) {
      auto c = cast<RankedTensorType>(m.getType());
      auto a = cast<RankedTensorType>(m.getA().getType());
      int64_t k = m.getTransposeA() ? a.getShape().end()[-2] : a.getShape().back();
      flops += 2.0 * c.getNumElements() * k;
    };
    if (auto m = dyn_cast<llm::MatmulOp>(op)) {
      product(m);
    } else if (auto m = dyn_cast<qat::MatmulFp8Op>(op)) {
      product(m);
    } else if (auto a = dyn_cast<llm::AttentionOp>(op)) {
      auto q = a.getQ().getType(); // [B, T, H, D]; S keys
      int64_t s = a.getK().getType().getDimSize(1);
      flops += 4.0 * q.getNumElements() * s;
    }
  });
  return flops;
}

struct StageOps {
  int chunk = 0, microbatch = 0;
  Phase phase = Phase::Forward;
};

/// Splits one function of the training module into per-stage copies.
class Splitter {
public:
  Splitter(func::FuncOp func, int p, int v, const llvm::StringMap<int> &blockChunk,
           const std::vector<std::vector<Action>> &schedule, bool training,
           llvm::StringMap<uint64_t> &homeOfName, int64_t &nextTag)
      : func(func), p(p), v(v), blockChunk(blockChunk), schedule(schedule),
        training(training), homeOfName(homeOfName), nextTag(nextTag) {}

  /// Assigns chunks and phases; fails on ops it cannot place.
  LogicalResult classify(bool splitWeightGradients);
  /// Moves ZeRO-3's parameter gathers into the one action each serves.
  void placeParameterGathers();
  /// Decides, for every stage, what it computes and receives.
  void plan();
  /// Records, per parameter name, the stages whose ops read it.
  void recordHomes(llvm::StringMap<uint64_t> &homes) const;
  /// Writes stage `s`'s copy of the function into `into`.
  LogicalResult emitStage(int s, ModuleOp into);

private:
  /// What emitting one stage's function builds up as it goes.
  struct StageEmitter {
    StageEmitter(int s, MLIRContext *context) : s(s), b(context) {}
    /// Ops of an action carry its name (traces of the executed schedule).
    void label(Operation *op) const {
      if (action)
        op->setAttr(kActionAttr, action);
    }
    int s;
    OpBuilder b;
    IRMapping mapping;
    func::FuncOp stageFunc;
    SmallVector<unsigned> argList;      ///< original argument numbers, sorted
    SmallVector<Type> argTypes;
    llvm::DenseMap<unsigned, unsigned> newArgIndex;
    FlatSymbolRefAttr meshRef;
    ArrayAttr ppAxes;
    StringAttr action;                  ///< the action being emitted, if any
    SmallVector<Operation *> pending;   ///< ops outside microbatches not yet emitted
    bool stagesDone = false;            ///< every action of the stage emitted
  };
  /// The stage's function, its arguments mapped; the builder at its entry.
  void createStageFunction(StageEmitter &e, ModuleOp into);
  /// The tag of the transfer of `x` to stage `to` (one per pair).
  int64_t tagOf(Value x, int to);
  /// Receives `x` from its producing stage, unless it is already here.
  void receive(StageEmitter &e, Value x);
  /// Sends `op`'s results to the other stages that use them.
  void sendResults(StageEmitter &e, Operation *op);
  /// The stage's share of a global norm, all-reduced over the stages;
  /// false until every operand is here.
  bool emitGlobalNorm(StageEmitter &e, llm::GlobalNormOp norm);
  /// Emits every pending op whose operands exist.
  void emitReady(StageEmitter &e);
  /// The stage's actions in schedule order, with their transfers.
  LogicalResult emitActions(StageEmitter &e);
  /// Broadcasts outputs made elsewhere; the return and result attributes.
  void emitOutputs(StageEmitter &e);

  /// What one stage computes beyond its own ops.
  struct StagePlan {
    SmallVector<unsigned> results;          ///< of the original function
    llvm::SetVector<Operation *> repeated;  ///< ops outside microbatches
    llvm::SetVector<Value> received;        ///< other stages' values
    llvm::DenseSet<Value> broadcast;        ///< outputs made on another stage
    llvm::DenseMap<Operation *, SmallVector<Value>> normOperands;
  };
  void planStage(int s, StagePlan &plan);
  /// Stages (other than the producer's) that receive `value`.
  SmallVector<int> consumersOf(Value value) const;

  bool isStageOp(Operation *op) const { return info.count(op); }
  int stageOf(Operation *op) const { return info.lookup(op).chunk % p; }
  /// Stages of the stage ops a value is computed from (through ops outside
  /// any microbatch), as a bit mask.
  uint64_t origins(Value v);
  /// Stages that keep argument `i` (parameters: where they are used;
  /// optimizer state: with its parameter; inputs: every stage).
  uint64_t homeOfArg(unsigned i) const;
  bool isOutput(unsigned result) const {
    auto role = func.getResultAttrOfType<StringAttr>(result, kRoleAttr);
    return role && role.getValue() == "output";
  }

  mutable func::FuncOp func; // FuncOp's accessors are not const
  int p, v;
  const llvm::StringMap<int> &blockChunk;
  const std::vector<std::vector<Action>> &schedule;
  bool training;
  llvm::StringMap<uint64_t> &homeOfName;
  int64_t &nextTag;
  llvm::DenseMap<Operation *, StageOps> info; // ops of a (microbatch, chunk)
  llvm::DenseMap<Operation *, uint64_t> originCache;
  llvm::DenseMap<Operation *, int64_t> order;
  std::vector<StagePlan> plans;
  std::map<std::pair<const void *, int>, int64_t> tags; // (value, to) → tag
};

LogicalResult Splitter::classify(bool splitWeightGradients) {
  Block &body = func.getBody().front();
  int64_t position = 0;
  for (Operation &op : body) order[&op] = position++;
  SmallVector<Operation *> unplaced;
  for (Operation &op : body.without_terminator()) {
    auto mb = op.getAttrOfType<IntegerAttr>(kMicrobatchAttr);
    if (training && !mb)
      continue; // repeated wherever needed
    StageOps s;
    s.microbatch = mb ? mb.getInt() : 0;
    s.phase = op.hasAttr(kBackwardAttr) ? Phase::Backward : Phase::Forward;
    s.chunk = -1;
    if (auto name = op.getAttrOfType<StringAttr>(kBlockNameAttr)) {
      auto it = blockChunk.find(name.getValue());
      if (it == blockChunk.end())
        return op.emitOpError("pipeline: layer '") << name.getValue() << "' is not in @forward";
      s.chunk = it->second;
    } else {
      // Forward data flows to higher chunks, gradients to lower ones: an op
      // joins the chunk whose work it waits for last.
      bool backward = s.phase == Phase::Backward;
      for (Value operand : op.getOperands())
        if (Operation *def = operand.getDefiningOp(); def && info.count(def)) {
          int c = info[def].chunk;
          if (c < 0)
            continue;
          s.chunk = s.chunk < 0 ? c : backward ? std::min(s.chunk, c) : std::max(s.chunk, c);
        }
    }
    info[&op] = s;
    if (s.chunk < 0)
      unplaced.push_back(&op);
  }
  // Ops reading only arguments (an embedding, a constant) join the user
  // that runs first: in the forward the lowest chunk; in the backward,
  // where gradients flow to lower chunks, the highest (a loss seed scaled
  // for every layer's router is sent down from the last chunk).
  for (Operation *op : llvm::reverse(unplaced)) {
    const bool backward = info[op].phase == Phase::Backward;
    int chunk = -1;
    for (Operation *user : op->getUsers())
      if (info.count(user) && info[user].chunk >= 0) {
        const int c = info[user].chunk;
        chunk = chunk < 0 ? c : backward ? std::max(chunk, c) : std::min(chunk, c);
      }
    info[op].chunk = chunk < 0 ? 0 : chunk;
  }
  if (!splitWeightGradients) {
    placeParameterGathers();
    return success();
  }
  // Zero bubble: a backward op is B when the gradient sent to the previous
  // chunk depends on it, W otherwise.
  std::map<std::tuple<int, int>, SmallVector<Operation *>> backward;
  for (auto &[op, s] : info)
    if (s.phase == Phase::Backward)
      backward[{s.microbatch, s.chunk}].push_back(op);
  for (auto &[key, ops] : backward) {
    llvm::DenseSet<Operation *> inAction(ops.begin(), ops.end());
    SmallVector<Operation *> worklist;
    for (Operation *op : ops)
      for (Operation *user : op->getUsers())
        if (info.count(user) && user->hasAttr(kBackwardAttr) &&
            info[user].chunk != info[op].chunk)
          worklist.push_back(op);
    llvm::DenseSet<Operation *> inputGradient;
    while (!worklist.empty()) {
      Operation *op = worklist.pop_back_val();
      if (!inputGradient.insert(op).second)
        continue;
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp(); def && inAction.contains(def))
          worklist.push_back(def);
    }
    for (Operation *op : ops)
      if (!inputGradient.contains(op))
        info[op].phase = Phase::Weight;
  }
  placeParameterGathers();
  return success();
}

void Splitter::placeParameterGathers() {
  // ZeRO-3's gathers of a parameter shard (and the cut of a padded one)
  // stand outside the microbatches. One that serves a single (microbatch,
  // chunk) joins that action, so a stage gathers a block's parameters when
  // it runs the block rather than all of them at its start; the backward's
  // gather joins B when W reads it too. A gather kept for several
  // microbatches (--fsdp-keep-gathered) stays outside them.
  Block &body = func.getBody().front();
  auto readsShard = [](Operation &op) {
    auto gather = dyn_cast<dist::AllGatherOp>(op);
    if (auto cut = dyn_cast<llm::SliceOp>(op))
      gather = cut.getX().getDefiningOp<dist::AllGatherOp>();
    return gather && isa<BlockArgument>(gather.getInput());
  };
  for (Operation &op : llvm::reverse(body.without_terminator())) {
    if (info.count(&op) || !readsShard(op) || op.use_empty())
      continue;
    std::optional<StageOps> action;
    bool single = true;
    for (Operation *user : op.getUsers()) {
      auto it = info.find(user);
      if (it == info.end()) {
        single = false;
        break;
      }
      StageOps s = it->second;
      if (s.phase == Phase::Weight)
        s.phase = Phase::Backward;
      if (!action)
        action = s;
      else if (action->microbatch != s.microbatch || action->chunk != s.chunk ||
               action->phase != s.phase)
        single = false;
    }
    if (single && action)
      info[&op] = *action;
  }
}

uint64_t Splitter::origins(Value v) {
  Operation *def = v.getDefiningOp();
  if (!def)
    return 0;
  if (isStageOp(def))
    return uint64_t(1) << stageOf(def);
  auto it = originCache.find(def);
  if (it != originCache.end())
    return it->second;
  uint64_t mask = 0;
  for (Value operand : def->getOperands())
    mask |= origins(operand);
  return originCache[def] = mask;
}

uint64_t Splitter::homeOfArg(unsigned i) const {
  auto role = func.getArgAttrOfType<StringAttr>(i, kRoleAttr);
  auto name = func.getArgAttrOfType<StringAttr>(i, kNameAttr);
  llm::ParamAttr param = llm::getParamAttr(func, i);
  std::string key = param ? param.getName().str() : name ? name.getValue().str() : "";
  if (role && role.getValue() == "input")
    return ~uint64_t(0);
  if (param || (role && !key.empty())) {
    auto it = homeOfName.find(key);
    return it == homeOfName.end() ? 1 : it->second;
  }
  return ~uint64_t(0); // a plain batch argument of @forward / @logits
}

void Splitter::planStage(int s, StagePlan &plan) {
  Block &body = func.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  uint64_t me = uint64_t(1) << s;

  // Results this stage returns: outputs everywhere, updated state where it
  // is kept.
  SmallVector<unsigned> &results = plan.results;
  for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
    auto tied = func.getResultAttrOfType<IntegerAttr>(i, kTiedToAttr);
    if (!tied || (homeOfArg(tied.getInt()) & me))
      results.push_back(i);
  }

  // What this stage computes: its own ops, plus everything outside a
  // microbatch that leads to them or to its results. Values of other
  // stages' ops arrive by recv. A global norm counts only the gradients
  // this stage owns (the lowest stage they come from).
  llvm::SetVector<Operation *> &repeated = plan.repeated;
  llvm::SetVector<Value> &received = plan.received;
  llvm::DenseSet<Value> &broadcast = plan.broadcast;
  llvm::DenseMap<Operation *, SmallVector<Value>> &normOperands = plan.normOperands;
  SmallVector<Value> worklist;
  auto ownedBy = [&](Value g) {
    uint64_t o = origins(g);
    return o ? llvm::countr_zero(o) : 0;
  };
  for (auto &[op, st] : info)
    if (stageOf(op) == s)
      worklist.append(op->operand_begin(), op->operand_end());
  for (unsigned i : results) {
    Value value = ret.getOperand(i);
    // An output some other stage makes (the loss, the logits) is
    // broadcast from the last stage it comes from.
    bool elsewhere = false;
    if (isOutput(i)) {
      SmallVector<Value> cone{value};
      llvm::DenseSet<Value> seen;
      while (!cone.empty() && !elsewhere) {
        Value x = cone.pop_back_val();
        Operation *def = x.getDefiningOp();
        if (!def || !seen.insert(x).second || isa<llm::GlobalNormOp>(def))
          continue;
        if (isStageOp(def))
          elsewhere = stageOf(def) != s;
        else
          cone.append(def->operand_begin(), def->operand_end());
      }
    }
    if (elsewhere)
      broadcast.insert(value);
    else
      worklist.push_back(value);
  }
  while (!worklist.empty()) {
    Value x = worklist.pop_back_val();
    Operation *def = x.getDefiningOp();
    if (!def)
      continue;
    if (isStageOp(def)) {
      if (stageOf(def) != s)
        received.insert(x);
      continue;
    }
    if (!repeated.insert(def))
      continue;
    if (auto norm = dyn_cast<llm::GlobalNormOp>(def)) {
      SmallVector<Value> mine;
      for (Value g : norm.getInputs())
        if (ownedBy(g) == s)
          mine.push_back(g);
      normOperands[def] = mine;
      worklist.append(mine.begin(), mine.end());
      continue;
    }
    worklist.append(def->operand_begin(), def->operand_end());
  }
}

void Splitter::recordHomes(llvm::StringMap<uint64_t> &homes) const {
  // The stages whose ops read an argument, directly or through ops outside
  // the microbatches (a ZeRO-3 gather serving several stages' actions, a
  // cast): each of them keeps it and its update.
  auto usedOn = [&](BlockArgument arg) {
    uint64_t mask = 0;
    SmallVector<Operation *> worklist(arg.getUsers().begin(), arg.getUsers().end());
    llvm::DenseSet<Operation *> seen;
    while (!worklist.empty()) {
      Operation *user = worklist.pop_back_val();
      if (!seen.insert(user).second || isa<func::ReturnOp>(user))
        continue;
      if (isStageOp(user)) {
        mask |= uint64_t(1) << stageOf(user);
        continue;
      }
      for (Operation *next : user->getUsers())
        worklist.push_back(next);
    }
    return mask ? mask : 1;
  };
  for (BlockArgument arg : func.getArguments())
    if (llm::ParamAttr param = llm::getParamAttr(func, arg.getArgNumber()))
      homes[param.getName()] = usedOn(arg);
  // Other state with a name of its own (fake-quantization observers) lives
  // where it is used; optimizer state shares its parameter's name and home.
  for (BlockArgument arg : func.getArguments()) {
    auto role = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kRoleAttr);
    auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kNameAttr);
    if (role && name && role.getValue() != "input" && !homes.count(name.getValue()))
      homes[name.getValue()] = usedOn(arg);
  }
}

void Splitter::plan() {
  plans.resize(p);
  for (int s = 0; s < p; ++s)
    planStage(s, plans[s]);
  // A broadcast is a collective: the stage that makes the output takes
  // part too, as its root.
  llvm::DenseSet<Value> everywhere;
  for (StagePlan &plan : plans)
    everywhere.insert(plan.broadcast.begin(), plan.broadcast.end());
  for (StagePlan &plan : plans)
    plan.broadcast.insert(everywhere.begin(), everywhere.end());
}

SmallVector<int> Splitter::consumersOf(Value value) const {
  SmallVector<int> stages;
  for (int t = 0; t < p; ++t)
    if (plans[t].received.contains(value))
      stages.push_back(t);
  return stages;
}

void Splitter::createStageFunction(StageEmitter &e, ModuleOp into) {
  Block &body = func.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  const StagePlan &plan = plans[e.s];

  // Arguments: those read here, and every input.
  llvm::SetVector<unsigned> args;
  auto noteArgs = [&](Operation *op) {
    for (Value operand : op->getOperands())
      if (auto arg = dyn_cast<BlockArgument>(operand); arg && arg.getOwner() == &body)
        args.insert(arg.getArgNumber());
  };
  for (auto &[op, st] : info)
    if (stageOf(op) == e.s)
      noteArgs(op);
  for (Operation *op : plan.repeated)
    noteArgs(op);
  for (unsigned i : plan.results)
    if (auto arg = dyn_cast<BlockArgument>(ret.getOperand(i)))
      args.insert(arg.getArgNumber());
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (homeOfArg(i) == ~uint64_t(0))
      args.insert(i);
  e.argList.assign(args.begin(), args.end());
  llvm::sort(e.argList);

  e.b.setInsertionPointToEnd(into.getBody());
  for (unsigned i : e.argList)
    e.argTypes.push_back(func.getArgument(i).getType());
  e.stageFunc = func::FuncOp::create(e.b, func.getLoc(), func.getSymName(),
                                     e.b.getFunctionType(e.argTypes, {}));
  Block *entry = e.stageFunc.addEntryBlock();
  for (auto [k, i] : llvm::enumerate(e.argList)) {
    e.mapping.map(func.getArgument(i), entry->getArgument(k));
    e.stageFunc.setArgAttrs(k, func.getArgAttrDict(i));
    e.newArgIndex[i] = k;
  }
  e.b.setInsertionPointToEnd(entry);
  e.meshRef = FlatSymbolRefAttr::get(e.b.getContext(), kMeshName);
  e.ppAxes = e.b.getStrArrayAttr({kAxis});
}

int64_t Splitter::tagOf(Value x, int to) {
  auto key = std::make_pair(x.getAsOpaquePointer(), to);
  auto it = tags.find(key);
  if (it != tags.end())
    return it->second;
  return tags[key] = nextTag++;
}

void Splitter::receive(StageEmitter &e, Value x) {
  if (e.mapping.contains(x))
    return;
  OpBuilder &b = e.b;
  int from = stageOf(x.getDefiningOp());
  auto recv = dist::RecvOp::create(b, x.getLoc(), x.getType(), e.meshRef,
                                   b.getStringAttr(kAxis), b.getI64IntegerAttr(from - e.s),
                                   b.getI64IntegerAttr(tagOf(x, e.s)));
  // The received value is the producer's: same layer, microbatch and
  // direction (the memory plan tells a kept activation from a gradient).
  for (StringRef annotation : {kBlockNameAttr, kMicrobatchAttr, kBackwardAttr})
    if (Attribute value = x.getDefiningOp()->getAttr(annotation))
      recv->setAttr(annotation, value);
  e.label(recv);
  e.mapping.map(x, recv.getResult());
}

void Splitter::sendResults(StageEmitter &e, Operation *op) {
  for (Value r : op->getResults())
    for (int to : consumersOf(r)) {
      if (to == e.s)
        continue;
      e.label(dist::SendOp::create(e.b, op->getLoc(), e.mapping.lookup(r), e.meshRef,
                                   e.b.getStringAttr(kAxis), e.b.getI64IntegerAttr(to - e.s),
                                   e.b.getI64IntegerAttr(tagOf(r, to))));
    }
}

bool Splitter::emitGlobalNorm(StageEmitter &e, llm::GlobalNormOp norm) {
  // Summed over all stages once every stage has its gradients.
  if (!e.stagesDone)
    return false;
  SmallVector<Value> mine;
  for (Value g : plans[e.s].normOperands.lookup(norm)) {
    if (!e.mapping.contains(g))
      return false;
    mine.push_back(e.mapping.lookup(g));
  }
  OpBuilder &b = e.b;
  Location loc = norm.getLoc();
  auto scalar = RankedTensorType::get({}, b.getF32Type());
  Value sq = mine.empty() ? llm::FillOp::create(b, loc, scalar, APFloat(0.0f)).getResult()
                          : llm::GlobalNormOp::create(b, loc, ValueRange(mine), true).getResult();
  sq = dist::AllReduceOp::create(b, loc, scalar, sq, e.meshRef, e.ppAxes, b.getStringAttr("sum"));
  if (!norm.getSquared())
    sq = llm::SqrtOp::create(b, loc, sq);
  e.mapping.map(norm.getResult(), sq);
  return true;
}

void Splitter::emitReady(StageEmitter &e) {
  auto ready = [&](Operation *op) {
    return llvm::all_of(op->getOperands(), [&](Value x) { return e.mapping.contains(x); });
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (Operation *&op : e.pending) {
      if (!op)
        continue;
      if (auto norm = dyn_cast<llm::GlobalNormOp>(op)) {
        if (!emitGlobalNorm(e, norm))
          continue;
      } else if (ready(op)) {
        e.b.clone(*op, e.mapping);
      } else {
        continue;
      }
      op = nullptr;
      progress = true;
    }
  }
}

LogicalResult Splitter::emitActions(StageEmitter &e) {
  Block &body = func.getBody().front();
  const llvm::SetVector<Value> &received = plans[e.s].received;
  std::map<std::tuple<int, int, Phase>, SmallVector<Operation *>> actionOps;
  for (Operation &op : body.without_terminator())
    if (auto it = info.find(&op); it != info.end() && stageOf(&op) == e.s) {
      Phase phase = it->second.phase;
      actionOps[{it->second.microbatch, it->second.chunk, phase}].push_back(&op);
    }
  std::vector<Action> actions;
  if (training) {
    actions = schedule[e.s];
  } else {
    for (int c = e.s; c < p * v; c += p)
      actions.push_back({0, c, Phase::Forward});
  }
  for (const Action &a : actions) {
    auto it = actionOps.find({a.microbatch, a.chunk, a.phase});
    if (it == actionOps.end())
      continue;
    StringAttr name = e.b.getStringAttr(pipeline::describe({a}, v));
    for (Operation *op : it->second) {
      e.action = name;
      for (Value operand : op->getOperands())
        if (received.contains(operand))
          receive(e, operand);
      if (llvm::any_of(op->getOperands(), [&](Value x) { return !e.mapping.contains(x); }))
        return op->emitOpError("pipeline: an operand is not available on stage ")
               << e.s << " when action " << name.getValue() << " runs";
      e.label(e.b.clone(*op, e.mapping));
      sendResults(e, op);
      // Ops outside the microbatches that became ready belong to no action.
      e.action = {};
      emitReady(e);
    }
    actionOps.erase(it);
  }
  if (!actionOps.empty()) {
    Operation *stray = actionOps.begin()->second.front();
    return stray->emitOpError("pipeline: belongs to no action of stage ")
           << e.s << "'s schedule";
  }
  return success();
}

void Splitter::emitOutputs(StageEmitter &e) {
  Block &body = func.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  const StagePlan &plan = plans[e.s];
  OpBuilder &b = e.b;
  // Outputs made elsewhere: broadcast from their last stage of origin.
  for (unsigned i : plan.results) {
    Value value = ret.getOperand(i);
    if (!plan.broadcast.contains(value))
      continue;
    int root = 63 - llvm::countl_zero(origins(value));
    Value source = root == e.s ? e.mapping.lookup(value)
                               : llm::FillOp::create(b, value.getLoc(), value.getType(),
                                                     APFloat(0.0f))
                                     .getResult();
    Value all = dist::BroadcastOp::create(b, value.getLoc(), value.getType(), source, e.meshRef,
                                          e.ppAxes, b.getI64IntegerAttr(root));
    e.mapping.map(value, all);
  }

  SmallVector<Value> values;
  SmallVector<Type> types;
  for (unsigned i : plan.results) {
    values.push_back(e.mapping.lookup(ret.getOperand(i)));
    types.push_back(values.back().getType());
  }
  func::ReturnOp::create(b, ret.getLoc(), values);
  e.stageFunc.setFunctionType(b.getFunctionType(e.argTypes, types));
  for (auto [k, i] : llvm::enumerate(plan.results)) {
    e.stageFunc.setResultAttrs(k, func.getResultAttrDict(i));
    if (auto tied = func.getResultAttrOfType<IntegerAttr>(i, kTiedToAttr))
      e.stageFunc.setResultAttr(k, kTiedToAttr, b.getI64IntegerAttr(e.newArgIndex[tied.getInt()]));
  }
}

LogicalResult Splitter::emitStage(int s, ModuleOp into) {
  StageEmitter e(s, into.getContext());
  createStageFunction(e, into);
  // Ops outside the microbatches run as soon as their operands exist; the
  // ones that depend on a collective over all stages wait for it.
  for (Operation &op : func.getBody().front().without_terminator())
    if (plans[s].repeated.contains(&op))
      e.pending.push_back(&op);
  emitReady(e);
  if (failed(emitActions(e)))
    return failure();
  // Values other stages made for the ops outside the microbatches.
  for (Value x : plans[s].received)
    receive(e, x);
  e.stagesDone = true;
  emitReady(e);
  for (Operation *op : e.pending)
    if (op)
      return op->emitOpError("pipeline: its operands never become available on stage ") << s;
  emitOutputs(e);
  return success();
}

} // namespace

namespace {

/// The layers of @forward in order, with their FLOPs; the embedding's go
/// to `before` (the first chunk), the head's and loss's to `after` (the
/// last). A layer is an llm.block, or the run of ops a flattened one left
/// tagged with its name (ZeRO-3 flattens @forward to place its gathers).
struct LayerCosts {
  SmallVector<std::string> blocks;
  SmallVector<double> cost;
  double before = 0, after = 0;
};

LayerCosts layerCostsOf(func::FuncOp forward) {
  LayerCosts layers;
  bool seenBlock = false;
  for (Operation &op : forward.getBody().front()) {
    StringRef name;
    if (auto block = dyn_cast<llm::BlockOp>(op))
      name = block.getName();
    else if (auto tag = op.getAttrOfType<StringAttr>(kBlockNameAttr))
      name = tag.getValue();
    if (name.empty()) {
      (seenBlock ? layers.after : layers.before) += flopsOf(&op);
      continue;
    }
    if (layers.blocks.empty() || layers.blocks.back() != name) {
      layers.blocks.push_back(name.str());
      layers.cost.push_back(0);
    }
    layers.cost.back() += flopsOf(&op);
    seenBlock = true;
  }
  return layers;
}

/// Gives each layer its chunk, `counts[c]` layers to chunk c in order;
/// returns the layout as text ("h.0-h.1|h.2-h.3").
std::string assignChunks(ArrayRef<std::string> blocks, ArrayRef<int> counts,
                         llvm::StringMap<int> &blockChunk) {
  std::string layoutText;
  for (int c = 0, next = 0; c < static_cast<int>(counts.size()); ++c) {
    layoutText += (c ? "|" : "") + blocks[next];
    if (counts[c] > 1)
      layoutText += "-" + blocks[next + counts[c] - 1];
    for (int k = 0; k < counts[c]; ++k) blockChunk[blocks[next++]] = c;
  }
  return layoutText;
}

/// The microbatches of @train_step: the leading dimension of its 3-D
/// input; 1 without a training step.
int microbatchesOf(ModuleOp module) {
  func::FuncOp step = lookupFunc(module, "train_step");
  if (!step)
    return 1;
  for (unsigned i = 0; i < step.getNumArguments(); ++i) {
    auto role = step.getArgAttrOfType<StringAttr>(i, kRoleAttr);
    auto t = cast<RankedTensorType>(step.getArgument(i).getType());
    if (role && role.getValue() == "input" && t.getRank() == 3)
      return static_cast<int>(t.getDimSize(0));
  }
  return 1;
}

/// One nested module per stage, run by the ranks at that pp coordinate,
/// each with a copy of the mesh.
SmallVector<ModuleOp> createStageModules(ModuleOp module, dist::MeshOp mesh, int64_t p,
                                         OpBuilder &b) {
  Mesh ranksMesh;
  int ppIndex = 0;
  for (auto [i, name, size] :
       llvm::enumerate(mesh.getAxes().getAsValueRange<StringAttr>(), mesh.getShape())) {
    ranksMesh.push_back({name.str(), static_cast<int>(size)});
    if (name == kAxis)
      ppIndex = static_cast<int>(i);
  }
  SmallVector<ModuleOp> stages;
  for (int s = 0; s < p; ++s) {
    SmallVector<int64_t> ranks;
    for (int r = 0; r < mesh.numRanks(); ++r)
      if (meshCoordinates(ranksMesh, r)[ppIndex] == s)
        ranks.push_back(r);
    auto stage = ModuleOp::create(b, module.getLoc(), ("stage" + Twine(s)).str());
    stage->setAttr(kStageRanksAttr, b.getDenseI64ArrayAttr(ranks));
    OpBuilder inner(stage.getBody(), stage.getBody()->begin());
    inner.clone(*mesh);
    stages.push_back(stage);
  }
  return stages;
}

struct PipelineParallelPass : llmc::impl::PipelineParallelBase<PipelineParallelPass> {
  using PipelineParallelBase::PipelineParallelBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto mesh = module.lookupSymbol<dist::MeshOp>(kMeshName);
    int64_t p = mesh ? mesh.axisSize(kAxis) : -1;
    if (p <= 1)
      return;
    auto error = [&]() { return module.emitError("pipeline: "); };
    if (p > 64) {
      error() << "at most 64 stages are supported, got " << p;
      return signalPassFailure();
    }
    pipeline::Kind kind;
    if (!pipeline::parseKind(schedule, kind)) {
      error() << "unknown schedule '" << schedule
              << "' (expected naive, gpipe, 1f1b, interleaved or zero-bubble)";
      return signalPassFailure();
    }
    int v = static_cast<int>(virtualStages);
    func::FuncOp forward = lookupFunc(module, "forward");
    if (!forward) {
      error() << "no @forward to take the layers from";
      return signalPassFailure();
    }
    LayerCosts layers = layerCostsOf(forward);
    int chunks = static_cast<int>(p) * v;
    if (static_cast<int>(layers.blocks.size()) < chunks) {
      error() << layers.blocks.size() << " layers cannot fill " << chunks << " model chunks (" << p
              << " stages x " << v << " virtual stages)";
      return signalPassFailure();
    }
    FailureOr<SmallVector<int>> counts =
        layerCounts(layers.cost, layers.before, layers.after, chunks);
    if (failed(counts))
      return signalPassFailure();
    llvm::StringMap<int> blockChunk;
    std::string layoutText = assignChunks(layers.blocks, *counts, blockChunk);

    int m = microbatchesOf(module);
    pipeline::Spec spec{kind, static_cast<int>(p), m, v};
    std::string why;
    std::vector<std::vector<Action>> order = pipeline::buildSchedule(spec, why);
    if (order.empty()) {
      error() << why;
      return signalPassFailure();
    }
    pipeline::Stats stats = pipeline::simulate(spec, order);

    OpBuilder b(module.getContext());
    b.setInsertionPointToEnd(module.getBody());
    SmallVector<ModuleOp> stages = createStageModules(module, mesh, p, b);
    if (failed(splitEntryPoints(module, stages, v, blockChunk, order, kind)))
      return signalPassFailure();

    SmallVector<Attribute> actions, inFlight;
    for (int s = 0; s < p; ++s) {
      actions.push_back(b.getStringAttr(pipeline::describe(order[s], v)));
      inFlight.push_back(b.getI64IntegerAttr(stats.peakInFlight[s]));
    }
    module->setAttr(kPipelineAttr,
                    b.getDictionaryAttr({
                        b.getNamedAttr("schedule", b.getStringAttr(pipeline::kindName(kind))),
                        b.getNamedAttr("stages", b.getI64IntegerAttr(p)),
                        b.getNamedAttr("microbatches", b.getI64IntegerAttr(m)),
                        b.getNamedAttr("virtual_stages", b.getI64IntegerAttr(v)),
                        b.getNamedAttr("layout", b.getStringAttr(layoutText)),
                        b.getNamedAttr("bubble", b.getF64FloatAttr(stats.bubble)),
                        b.getNamedAttr("analytic_bubble", b.getF64FloatAttr(stats.analyticBubble)),
                        b.getNamedAttr("in_flight", b.getArrayAttr(inFlight)),
                        b.getNamedAttr("actions", b.getArrayAttr(actions)),
                    }));
  }

  /// Splits @train_step, @forward and @logits into the stages' modules
  /// (names placed where the training step puts them), then erases the
  /// entry points: calibration is not staged, a pipeline artifact has no
  /// @calibrate.
  LogicalResult splitEntryPoints(ModuleOp module, ArrayRef<ModuleOp> stages, int v,
                                 const llvm::StringMap<int> &blockChunk,
                                 const std::vector<std::vector<Action>> &order,
                                 pipeline::Kind kind) {
    const int p = static_cast<int>(stages.size());
    llvm::StringMap<uint64_t> homeOfName;
    int64_t nextTag = 1;
    for (StringRef name : {"train_step", "forward", "logits"}) {
      func::FuncOp f = lookupFunc(module, name);
      if (!f)
        continue;
      flattenBlocks(f);
      bool training = name == "train_step";
      Splitter splitter(f, p, v, blockChunk, order, training, homeOfName, nextTag);
      if (failed(splitter.classify(training && kind == pipeline::Kind::ZeroBubble)))
        return failure();
      if (training || homeOfName.empty())
        splitter.recordHomes(homeOfName);
      splitter.plan();
      for (int s = 0; s < p; ++s)
        if (failed(splitter.emitStage(s, stages[s])))
          return failure();
    }
    for (const EntryPoint &entry : kEntryPoints)
      if (func::FuncOp f = lookupFunc(module, entry.function))
        f.erase();
    return success();
  }

  /// Layers per chunk: `stage-layout` when given, else a contiguous split
  /// minimising the costliest chunk.
  FailureOr<SmallVector<int>> layerCounts(ArrayRef<double> cost, double before, double after,
                                          int chunks) {
    int n = static_cast<int>(cost.size());
    SmallVector<int> counts;
    if (!StringRef(stageLayout).trim().empty()) {
      int total = 0;
      for (StringRef item : llvm::split(StringRef(stageLayout), ',')) {
        int k;
        if (item.trim().getAsInteger(10, k) || k < 1) {
          getOperation().emitError() << "pipeline: bad stage-layout '" << stageLayout
                                     << "' (expected layers per model chunk, e.g. 3,3,2)";
          return failure();
        }
        counts.push_back(k);
        total += k;
      }
      if (static_cast<int>(counts.size()) != chunks || total != n) {
        getOperation().emitError() << "pipeline: stage-layout '" << stageLayout << "' gives "
                                   << counts.size() << " chunks of " << total
                                   << " layers; the model needs " << chunks << " chunks of "
                                   << n << " layers";
        return failure();
      }
      return counts;
    }
    // best[c][i]: the least possible costliest chunk when the first i
    // layers form c chunks.
    std::vector<double> prefix(n + 1, 0);
    for (int i = 0; i < n; ++i)
      prefix[i + 1] = prefix[i] + cost[i];
    auto chunkCost = [&](int c, int from, int to) {
      return prefix[to] - prefix[from] + (c == 0 ? before : 0) + (c == chunks - 1 ? after : 0);
    };
    const double inf = std::numeric_limits<double>::infinity();
    std::vector<std::vector<double>> best(chunks + 1, std::vector<double>(n + 1, inf));
    std::vector<std::vector<int>> cut(chunks + 1, std::vector<int>(n + 1, 0));
    best[0][0] = 0;
    for (int c = 1; c <= chunks; ++c)
      for (int i = c; i <= n - (chunks - c); ++i)
        for (int j = c - 1; j < i; ++j) {
          double worst = std::max(best[c - 1][j], chunkCost(c - 1, j, i));
          if (worst < best[c][i]) {
            best[c][i] = worst;
            cut[c][i] = j;
          }
        }
    counts.assign(chunks, 0);
    for (int c = chunks, i = n; c > 0; --c) {
      counts[c - 1] = i - cut[c][i];
      i = cut[c][i];
    }
    return counts;
  }
};

} // namespace
