//===- Probes.cpp - compile small probe models and take them apart --------===//

#include "compiler/plan/Probes.h"

#include "dialects/Annotations/Annotations.h"
#include "dialects/Exec/ExecDialect.h"
#include "passes/lib/EntryPoints.h"
#include "passes/lib/MicrobatchSchedule.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/SourceMgr.h"

#include <chrono>

using namespace mlir;

namespace llmc::plan {

Piece Piece::operator+(const Piece &o) const {
  Piece p = *this;
  p.forward += o.forward;
  p.backward += o.backward;
  p.weight += o.weight;
  p.step += o.step;
  p.activationBytes += o.activationBytes;
  p.gradientBytes += o.gradientBytes;
  p.otherBytes += o.otherBytes;
  p.hostDownBytes += o.hostDownBytes;
  p.hostUpBytes += o.hostUpBytes;
  p.hostUpdateBytes += o.hostUpdateBytes;
  p.hostStagingBytes += o.hostStagingBytes;
  p.activationCopyBytes += o.activationCopyBytes;
  p.activationHostBytes += o.activationHostBytes;
  for (auto &[kind, n] : o.states)
    p.states[kind] += n;
  return p;
}

Piece Piece::scaled(double k) const {
  Piece p;
  p.forward = forward.scaled(k);
  p.backward = backward.scaled(k);
  p.weight = weight.scaled(k);
  p.step = step.scaled(k);
  p.activationBytes = activationBytes * k;
  p.gradientBytes = gradientBytes * k;
  p.otherBytes = otherBytes * k;
  p.hostDownBytes = hostDownBytes * k;
  p.hostUpBytes = hostUpBytes * k;
  p.hostUpdateBytes = hostUpdateBytes * k;
  p.hostStagingBytes = hostStagingBytes * k;
  p.activationCopyBytes = activationCopyBytes * k;
  p.activationHostBytes = activationHostBytes * k;
  for (auto &[kind, n] : states)
    p.states[kind] = static_cast<int64_t>(n * k);
  return p;
}

Piece Piece::operator-(const Piece &o) const { return *this + o.scaled(-1); }

namespace {

/// Bytes per rank of the states `counted` admits, ZeRO-sharded.
template <typename Admit>
double stateBytes(const std::map<StateKind, int64_t> &states, int64_t zero, int64_t dp,
                  Admit counted) {
  double bytes = 0;
  for (auto &[kind, n] : states) {
    auto &[category, rows, rowBytes] = kind;
    if (!counted(category))
      continue;
    bool optimizer = category == "optim" || category == "host_optim";
    bool sharded = (optimizer && zero >= 1) || (category == "param" && zero >= 3);
    int64_t kept = sharded ? (rows + dp - 1) / dp : rows;
    bytes += n * kept * rowBytes;
  }
  return bytes;
}

} // namespace

double Piece::persistentBytes(int64_t zero, int64_t dp) const {
  return stateBytes(states, zero, dp,
                    [](const std::string &category) { return category != "host_optim"; });
}

double Piece::hostStateBytes(int64_t zero, int64_t dp) const {
  return stateBytes(states, zero, dp,
                    [](const std::string &category) { return category == "host_optim"; });
}

double Piece::parameterBytes() const {
  double bytes = 0;
  for (auto &[kind, n] : states)
    if (std::get<0>(kind) == "param")
      bytes += n * std::get<1>(kind) * std::get<2>(kind);
  return bytes;
}

DpTraffic DpTraffic::operator+(const DpTraffic &o) const {
  DpTraffic t = *this;
  for (auto &[key, value] : o.messages) {
    t.messages[key].first += value.first;
    t.messages[key].second += value.second;
  }
  return t;
}

DpTraffic DpTraffic::scaled(double k) const {
  DpTraffic t;
  for (auto &[key, value] : messages)
    t.messages[key] = {value.first * k, value.second * k};
  return t;
}

DpTraffic DpTraffic::scatteredOncePerStep() const {
  DpTraffic t = *this;
  int scatter = static_cast<int>(Collective::ReduceScatter);
  auto each = t.messages.find({EachBackward, scatter});
  if (each == t.messages.end())
    return t;
  auto &once = t.messages[{StepBackward, scatter}];
  once.first += each->second.first;
  once.second += each->second.second;
  t.messages.erase({EachBackward, scatter});
  return t;
}

double DpTraffic::seconds(When when, int64_t n, double alpha, double beta) const {
  double total = 0;
  for (auto &[key, value] : messages) {
    if (key.first != when)
      continue;
    auto kind = static_cast<Collective>(key.second);
    // Each message pays the latency; the bytes pay the bandwidth once.
    total += std::max(0.0, value.first) * collectiveSeconds(kind, n, 0, alpha, beta) +
             collectiveSeconds(kind, n, std::max(0.0, value.second), 0, beta);
  }
  return total;
}

namespace {

/// A difference of two plans' peaks can come out below zero where the two
/// peaks fall at different moments; no piece holds negative bytes.
void clampBytes(Piece &piece) {
  piece.activationBytes = std::max(0.0, piece.activationBytes);
  piece.gradientBytes = std::max(0.0, piece.gradientBytes);
  piece.otherBytes = std::max(0.0, piece.otherBytes);
}

/// Ranks outermost first: pipeline stages, data-parallel replicas, the
/// expert-parallel ranks of a replica, tensor-parallel ranks innermost (an
/// ep group stays inside a node while tp·ep fits one).
std::string meshSpec(int64_t pp, int64_t dp, int64_t ep, int64_t tp) {
  std::string mesh;
  auto add = [&](const char *axis, int64_t n) {
    if (n > 1)
      mesh += (mesh.empty() ? "" : ",") + std::string(axis) + "=" + std::to_string(n);
  };
  add("pp", pp);
  add("dp", dp);
  add("ep", ep);
  add("tp", tp);
  return mesh;
}

double memrefBytes(Value v) {
  auto type = cast<MemRefType>(v.getType());
  return type.getNumElements() * type.getElementTypeBitWidth() / 8.0;
}

/// Whether `v` is a saved activation in host memory (--offload
/// activations): what a copy to the host writes or a copy back reads.
bool hostActivation(Value v) {
  auto buffer = v.getDefiningOp<exec::BufferOp>();
  return buffer && buffer->hasAttr(exec::kHostSpaceAttr) && buffer.getCategory() == "activation";
}

/// --offload optimizer's copies each way and the bytes the host kernels
/// read and write, over the whole step; --offload activations' copies
/// apart, both ways together, over the probe's `microbatches`.
void countHostTraffic(exec::ProgramOp program, Piece &piece, double microbatches) {
  program.walk([&](exec::KernelOp kernel) {
    StringRef name = kernel.getCallee();
    if (name == "copy_to_host" || name == "copy_to_device") {
      double bytes = 0;
      for (Value v : kernel.getInputs())
        bytes += memrefBytes(v);
      Value host = name == "copy_to_host" ? kernel.getOutputs()[0] : kernel.getInputs()[0];
      if (hostActivation(host))
        piece.activationCopyBytes += bytes / microbatches;
      else
        (name == "copy_to_host" ? piece.hostDownBytes : piece.hostUpBytes) += bytes;
    } else if (kernel->hasAttr(exec::kOnHostAttr)) {
      for (Value v : kernel->getOperands())
        piece.hostUpdateBytes += memrefBytes(v);
    }
  });
}

int64_t planValue(DictionaryAttr plan, StringRef key) {
  if (!plan)
    return 0;
  auto value = plan.getAs<IntegerAttr>(key);
  return value ? value.getInt() : 0;
}

} // namespace

CompileOptions layoutOptions(const Request &request, const Layout &layout) {
  CompileOptions o;
  o.precision = request.precision;
  o.target = request.target;
  o.mesh = meshSpec(layout.pp, layout.dp, layout.ep, layout.tp);
  o.zero = layout.zero;
  o.sequenceParallel = layout.sp;
  o.microbatches = layout.microbatches;
  o.pipelineSchedule = layout.schedule;
  o.virtualStages = layout.virtualStages;
  o.recompute = layout.recompute == "budget" ? "none" : layout.recompute;
  o.offload = layout.offload && layout.offloadActivations ? "optimizer,activations"
              : layout.offload                            ? "optimizer"
              : layout.offloadActivations                 ? "activations"
                                                          : "none";
  return o;
}

ProbeCache::ProbeCache(const Request &request)
    : request(request), context(std::make_unique<MLIRContext>()) {
  prepareContext(*context);
  // Probes compile many small models: one thread, no pool to spin up.
  context->disableMultithreading();
}

ProbeCache::~ProbeCache() = default;

std::vector<double> stageArenaBytes(ModuleOp module) {
  std::vector<double> bytes;
  for (ModuleOp stage : programModules(module))
    if (auto arena = stage->getAttrOfType<IntegerAttr>(exec::kArenaBytesAttr))
      bytes.push_back(static_cast<double>(arena.getInt()));
  return bytes;
}

OwningOpRef<ModuleOp> ProbeCache::compile(const CompileOptions &options, int64_t layers,
                                          int64_t batchSize, std::string &error) {
  std::string diagnostics;
  ScopedDiagnosticHandler capture(context.get(), [&](Diagnostic &d) {
    if (d.getSeverity() == DiagnosticSeverity::Error)
      diagnostics += (diagnostics.empty() ? "" : "; ") + d.str();
    return success();
  });
  ModelSource source = request.model;
  source.overrides.push_back("n_layer=" + std::to_string(layers));
  source.overrides.push_back("batch_size=" + std::to_string(batchSize));
  if (request.seqLen > 0)
    source.overrides.push_back("seq_len=" + std::to_string(request.seqLen));
  llvm::SourceMgr sourceMgr;
  OwningOpRef<ModuleOp> module = loadModel(*context, source, sourceMgr);
  CompileOptions resolved = options;
  resolved.emit = "exec";
  if (!module) {
    error = diagnostics.empty() ? "the model does not build" : diagnostics;
    return nullptr;
  }
  if (std::string bad = resolveOptions(resolved); !bad.empty()) {
    error = bad;
    return nullptr;
  }
  auto start = std::chrono::steady_clock::now();
  PassManager pm(context.get());
  bool ok = succeeded(buildTrainingPipeline(pm, resolved, [&](const llvm::Twine &message) {
              diagnostics += message.str();
            })) &&
            succeeded(pm.run(*module));
  compileSeconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ++compiledCount;
  if (!ok) {
    error = diagnostics.empty() ? "the compiler refused the layout" : diagnostics;
    return nullptr;
  }
  return module;
}

bool ProbeCache::compileProbe(const ProbeKey &key, int64_t layers, int64_t stages,
                              std::vector<Piece> &out, double &p2pForward, double &p2pBackward,
                              std::string &error) {
  Layout layout;
  layout.tp = key.tp;
  layout.sp = key.sp;
  layout.pp = stages;
  layout.microbatchSize = key.microbatchSize;
  layout.microbatches = std::max(stages, key.microbatches);
  layout.recompute = key.recompute;
  layout.offload = key.offload;
  layout.offloadActivations = key.offloadActivations;
  layout.ep = key.ep;
  OwningOpRef<ModuleOp> module = compile(layoutOptions(request, layout), layers,
                                         layout.batchRanks() * key.microbatchSize, error);
  if (!module)
    return false;
  // Microbatches in flight per stage: 1F1B keeps p − s on stage s.
  pipeline::Spec spec;
  spec.stages = stages;
  spec.microbatches = static_cast<int>(layout.microbatches);
  std::string scheduleError;
  pipeline::Stats stats = pipeline::simulate(spec, pipeline::buildSchedule(spec, scheduleError));
  MeshShape mesh;
  mesh.axes = {{"pp", stages}, {"ep", key.ep}, {"tp", key.tp}};
  out.clear();
  p2pForward = p2pBackward = 0;
  int stageIndex = 0;
  for (ModuleOp stage : programModules(*module)) {
    Piece piece;
    exec::ProgramOp train;
    for (auto program : stage.getOps<exec::ProgramOp>())
      if (program.getSymName() == "train_step")
        train = program;
    if (!train) {
      error = "a probe has no train_step program";
      return false;
    }
    // The gradients' average over ep is data-parallel traffic (priced by
    // the traffic probes); the all-to-alls are priced here.
    ProgramCost cost = costProgram(train, request.cluster, mesh, request.fp32MatmulScale, {"ep"});
    double m = static_cast<double>(std::max<int64_t>(1, cost.microbatches));
    piece.forward = cost.phase('F').scaled(1 / m);
    piece.backward = cost.phase('B').scaled(1 / m);
    piece.weight = cost.phase('W').scaled(1 / m);
    piece.step = cost.phase('S');
    if (stageIndex == 0)
      p2pForward = piece.forward.p2pBytes;
    if (stageIndex == stages - 1)
      p2pBackward = piece.backward.p2pBytes;
    auto memory = stage->getAttrOfType<DictionaryAttr>("exec.memory_plan");
    auto programs = memory ? memory.getAs<DictionaryAttr>("programs") : DictionaryAttr();
    auto plan = programs ? programs.getAs<DictionaryAttr>("train_step") : DictionaryAttr();
    double inFlight = stageIndex < static_cast<int>(stats.peakInFlight.size())
                          ? std::max(1, stats.peakInFlight[stageIndex])
                          : 1;
    double peak = planValue(plan, "peak"), activation = planValue(plan, "activation"),
           gradient = planValue(plan, "grad");
    piece.activationHostBytes = planValue(memory, "host_activations");
    piece.hostStagingBytes = planValue(memory, "host") - planValue(memory, "host_optimizer_state") -
                             piece.activationHostBytes;
    piece.activationBytes = activation / inFlight;
    piece.gradientBytes = gradient;
    piece.otherBytes = peak - activation - gradient;
    if (auto saved = plan ? plan.getAs<DictionaryAttr>("saved_per_layer") : DictionaryAttr())
      for (NamedAttribute layer : saved)
        piece.savedPerLayer = std::max<double>(piece.savedPerLayer,
                                               cast<IntegerAttr>(layer.getValue()).getInt());
    train.walk([&](exec::BufferOp buffer) {
      StringRef category = buffer.getCategory();
      if (category != "param" && category != "optim")
        return;
      auto type = cast<MemRefType>(buffer.getType());
      int64_t rows = type.getRank() ? type.getDimSize(0) : 1;
      double bytes = type.getNumElements() * type.getElementTypeBitWidth() / 8.0;
      std::string kind = category.str();
      if (buffer->hasAttr(exec::kHostSpaceAttr))
        kind = "host_" + kind;
      piece.states[{kind, rows, rows ? bytes / rows : 0}] += 1;
    });
    countHostTraffic(train, piece, m);
    out.push_back(std::move(piece));
    ++stageIndex;
  }
  return true;
}

namespace {

using Groups = TrafficPieces::Groups;

Groups plus(const Groups &a, const Groups &b, double scaleB = 1) {
  Groups sum = a;
  for (auto &[group, traffic] : b) sum[group] = sum[group] + traffic.scaled(scaleB);
  return sum;
}

/// The batch axes of a collective's group: what sets its size and link.
std::vector<std::string> batchAxesOf(const std::vector<std::string> &group) {
  std::vector<std::string> axes;
  for (const std::string &axis : group)
    if (axis == "dp" || axis == "ep")
      axes.push_back(axis);
  return axes;
}

} // namespace

bool ProbeCache::collectTraffic(int64_t tp, bool sp, int64_t zero, int64_t ep, int64_t layers,
                                Groups &out, std::string &error) {
  // Two ranks and two microbatches tell per-microbatch traffic (the same
  // in both) from per-step traffic (only in the last backward, or after).
  // Expert parallelism keeps its own size: it sets the experts' shapes.
  Layout layout;
  layout.tp = tp;
  layout.sp = sp;
  layout.dp = 2;
  layout.ep = ep;
  layout.zero = zero;
  layout.microbatches = 2;
  OwningOpRef<ModuleOp> module =
      compile(layoutOptions(request, layout), layers, layout.batchRanks(), error);
  if (!module)
    return false;
  MeshShape mesh;
  mesh.axes = {{"dp", 2}, {"ep", ep}, {"tp", tp}};
  Groups first, second, after;
  for (ModuleOp stage : programModules(*module))
    for (auto program : stage.getOps<exec::ProgramOp>()) {
      if (program.getSymName() != "train_step")
        continue;
      ProgramCost cost =
          costProgram(program, request.cluster, mesh, request.fp32MatmulScale, {"dp", "ep"});
      for (const Message &m : cost.deferred) {
        Groups &into = m.microbatch == 0 ? first : m.microbatch == 1 ? second : after;
        int when = m.phase == 'F' ? DpTraffic::EachForward : DpTraffic::EachBackward;
        if (&into == &after)
          when = DpTraffic::StepAfter;
        auto &entry = into[batchAxesOf(m.group)].messages[{when, static_cast<int>(m.kind)}];
        entry.first += 1;
        entry.second += m.bytes;
      }
    }
  out = plus(first, after);
  // What the second microbatch sends beyond the first runs once per step.
  for (auto &[group, traffic] : plus(second, first, -1))
    for (auto &[key, value] : traffic.messages) {
      auto &entry = out[group].messages[{DpTraffic::StepBackward, key.second}];
      entry.first += value.first;
      entry.second += value.second;
    }
  return true;
}

const TrafficPieces *ProbeCache::traffic(int64_t tp, bool sp, int64_t zero, int64_t ep,
                                         std::string &error) {
  auto key = std::make_tuple(tp, sp, zero, ep);
  if (auto it = traffics.find(key); it != traffics.end())
    return it->second.get();
  Groups one, two;
  if (!collectTraffic(tp, sp, zero, ep, 1, one, error) ||
      !collectTraffic(tp, sp, zero, ep, 2, two, error))
    return nullptr;
  auto pieces = std::make_unique<TrafficPieces>();
  pieces->layer = plus(two, one, -1);
  pieces->base = plus(one, pieces->layer, -1);
  return (traffics[key] = std::move(pieces)).get();
}

const Pieces *ProbeCache::get(const ProbeKey &key, bool pipelined, std::string &error) {
  auto id = std::make_pair(key, pipelined);
  if (auto it = cache.find(id); it != cache.end())
    return it->second.get();
  if (auto it = failures.find(id); it != failures.end()) {
    error = it->second;
    return nullptr;
  }
  auto pieces = std::make_unique<Pieces>();
  bool ok = true;
  if (pipelined) {
    // The embedding and head are not layers: recomputation leaves them as
    // they are, so one pipeline probe (recomputing nothing) serves every
    // recomputation mode.
    ProbeKey plainKey = key;
    plainKey.recompute = "none";
    plainKey.microbatches = 2; // a pipeline always has several
    const Pieces *own = get(key, false, error);
    const Pieces *plain = own ? get(plainKey, false, error) : nullptr;
    std::vector<Piece> staged;
    double f = 0, b = 0;
    ok = plain;
    if (ok && key.recompute != "none") {
      const Pieces *shared = get(plainKey, true, error);
      ok = shared;
      if (ok) {
        *pieces = *own;
        pieces->first = shared->first;
        pieces->last = shared->last;
        pieces->p2pForwardBytes = shared->p2pForwardBytes;
        pieces->p2pBackwardBytes = shared->p2pBackwardBytes;
      }
    } else if (ok) {
      ok = compileProbe(plainKey, 2, 2, staged, f, b, error) && staged.size() == 2;
      if (ok) {
        *pieces = *own;
        pieces->first = staged[0] - plain->layer;
        pieces->last = staged[1] - plain->layer;
        pieces->first.otherBytes = staged[0].otherBytes;
        pieces->last.otherBytes = staged[1].otherBytes;
        clampBytes(pieces->first);
        clampBytes(pieces->last);
        pieces->p2pForwardBytes = f;
        pieces->p2pBackwardBytes = b;
      }
    }
  } else {
    std::vector<Piece> one, two;
    double f = 0, b = 0;
    ok = compileProbe(key, 1, 1, one, f, b, error) && compileProbe(key, 2, 1, two, f, b, error);
    if (ok) {
      pieces->layer = two[0] - one[0];
      pieces->single = one[0];
      // What a layer keeps for its backward is in the plan itself; the
      // difference of two peaks is not (they need not be at one moment).
      pieces->layer.activationBytes = two[0].savedPerLayer;
      std::vector<Piece> three;
      if (key.offloadActivations) {
        // Offloaded, saved values are in the arena only in flight (until
        // copied down, and once copied back a layer ahead of their
        // backward): at most three layers' worth at any depth (one in its
        // forward, one in its backward, the next prefetched), which the
        // three-layer probe's peak holds.
        ok = compileProbe(key, 3, 1, three, f, b, error);
        pieces->layer.activationBytes = 0;
        pieces->inFlightByDepth = {one[0].activationBytes, two[0].activationBytes,
                                   ok ? three[0].activationBytes : 0.0};
        pieces->single.activationBytes =
            *std::max_element(pieces->inFlightByDepth.begin(), pieces->inFlightByDepth.end());
      }
      // Workspace is not per layer: the larger probe's stands for any depth.
      pieces->layer.otherBytes = 0;
      pieces->single.otherBytes = std::max(one[0].otherBytes, two[0].otherBytes);
      if (key.offloadActivations && ok) {
        pieces->single.otherBytes = std::max(pieces->single.otherBytes, three[0].otherBytes);
        // With few activations in the arena the peak moves into the
        // backward as layers are added, where more gradients are live:
        // what the third layer adds at the peak stands for every layer.
        pieces->layer.gradientBytes =
            std::max(pieces->layer.gradientBytes, three[0].gradientBytes - two[0].gradientBytes);
      }
      clampBytes(pieces->layer);
    }
  }
  if (!ok) {
    failures[id] = error;
    return nullptr;
  }
  return (cache[id] = std::move(pieces)).get();
}

} // namespace llmc::plan
