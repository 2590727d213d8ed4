//===- Planner.cpp - layout search, composition and ranking ---------------===//

#include "compiler/plan/Planner.h"

#include "compiler/plan/Probes.h"
#include "dialects/Registration.h"
#include "models/Models.h"
#include "passes/MicrobatchSchedule.h"
#include "passes/Utils.h"

#include "llvm/Support/SourceMgr.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>

using namespace mlir;

namespace llmc::plan {

std::string Layout::label() const {
  std::ostringstream os;
  os << "tp" << tp << " pp" << pp << " dp" << dp << " z" << zero << (sp ? " sp" : "") << " mbs"
     << microbatchSize << " m" << microbatches;
  if (pp > 1)
    os << " " << schedule << (virtualStages > 1 ? "×" + std::to_string(virtualStages) : "");
  os << " " << (recompute == "selective" ? "sel" : recompute);
  if (recompute == "budget")
    os << "(" << budgetFullLayers << " full)";
  return os.str();
}

std::string Layout::compileFlags(const Request &request) const {
  std::ostringstream os;
  if (!request.model.inputFile.empty())
    os << request.model.inputFile;
  else
    os << "--model " << request.model.family << " --preset " << request.model.preset;
  if (!request.model.configJson.empty())
    os << " --config " << request.model.configJson;
  for (const std::string &set : request.model.overrides)
    os << " --set " << set;
  if (request.seqLen > 0)
    os << " --set seq_len=" << request.seqLen;
  // The model's batch_size is one microbatch over all data-parallel ranks.
  os << " --set batch_size=" << dp * microbatchSize << " --precision " << request.precision;
  TrainingPipelineOptions options = layoutOptions(request, *this);
  if (!options.mesh.empty())
    os << " --mesh " << options.mesh;
  if (zero)
    os << " --zero " << zero;
  if (sp)
    os << " --sp";
  if (microbatches > 1)
    os << " --microbatches " << microbatches;
  if (pp > 1 && schedule != "1f1b")
    os << " --pipeline-schedule " << schedule;
  if (virtualStages > 1)
    os << " --virtual-stages " << virtualStages;
  if (recompute == "budget") {
    std::ostringstream gib;
    gib << std::floor(request.cluster.memoryBytes / (1ll << 30)) << "GiB";
    os << " --recompute budget --memory-budget " << gib.str();
  } else if (recompute != "none") {
    os << " --recompute " << recompute;
  }
  return os.str();
}

namespace {

struct ModelShape {
  int64_t layers = 0, heads = 0, kvHeads = 0, seqLen = 0;
  double parameters = 0;
};

bool modelShape(const Request &request, ModelShape &shape, std::string &error) {
  MLIRContext context;
  prepareContext(context);
  std::string diagnostics;
  ScopedDiagnosticHandler capture(&context, [&](Diagnostic &d) {
    diagnostics += (diagnostics.empty() ? "" : "; ") + d.str();
    return success();
  });
  ModelSource source = request.model;
  if (request.seqLen > 0)
    source.overrides.push_back("seq_len=" + std::to_string(request.seqLen));
  llvm::SourceMgr sourceMgr;
  ModelConfig config;
  OwningOpRef<ModuleOp> module = loadModel(context, source, sourceMgr, &config);
  if (!module) {
    error = diagnostics.empty() ? "cannot load the model" : diagnostics;
    return false;
  }
  if (!source.inputFile.empty()) {
    error = "llmc plan needs a built-in model (--model): it varies the number of layers";
    return false;
  }
  shape.layers = config.nLayer;
  shape.seqLen = config.seqLen;
  shape.heads = config.nHead;
  shape.kvHeads = config.nKvHead > 0 ? config.nKvHead : config.nHead;
  shape.parameters = static_cast<double>(countParameters(*module).total);
  return true;
}

/// The schedule and its unit-cost simulation (in-flight counts) for one
/// (kind, p, m, v), built once.
struct ScheduleInfo {
  pipeline::Spec spec;
  std::vector<std::vector<pipeline::Action>> actions;
  pipeline::Stats unit;
  std::string error;
};

class Search {
public:
  Search(const Request &request, const ModelShape &shape, Result &result)
      : request(request), shape(shape), result(result), probes(request),
        memoryCap(request.cluster.memoryBytes) {}

  /// Every candidate layout, evaluated; fitting ones go to result.ranked.
  void run();
  /// Stage arena bytes of `layout` by composition.
  bool stageBytes(const Layout &layout, std::vector<double> &bytes, std::string &error);
  ProbeCache &cache() { return probes; }

private:
  const ScheduleInfo &schedule(const Layout &layout);
  /// Whether the compiler accepts the combination of features `layout`
  /// uses (checked once per combination on a two-stage, two-rank, one-
  /// layer-per-chunk version of it).
  bool accepted(const Layout &layout, std::string &why);
  /// Composes and prices `layout`; false with `why` when it cannot run or
  /// does not fit.
  bool evaluate(const Layout &layout, Prediction &prediction, std::string &why,
                std::vector<double> *stageMemory = nullptr);
  bool compose(const Layout &layout, const Pieces &pieces, const Piece &layers,
               Prediction &prediction, std::string &why, std::vector<double> *stageMemory);
  void reject(const std::string &family, const std::string &reason) {
    result.rejected.push_back({family, reason});
  }

  const Request &request;
  const ModelShape &shape;
  Result &result;
  ProbeCache probes;
  double memoryCap; ///< a layout needing more per rank does not fit
  std::map<std::tuple<std::string, int64_t, int64_t, int64_t>, ScheduleInfo> schedules;
  std::map<std::string, std::string> refusals; ///< feature combination → "" or why not
};

bool Search::accepted(const Layout &l, std::string &why) {
  Layout small = l;
  small.pp = std::min<int64_t>(l.pp, 2);
  small.dp = std::min<int64_t>(l.dp, 2);
  small.virtualStages = std::min<int64_t>(l.virtualStages, 2);
  small.microbatches = small.pp;
  small.microbatchSize = 1;
  small.recompute = "none";
  std::string key = small.label();
  auto it = refusals.find(key);
  if (it == refusals.end()) {
    std::vector<double> arenas;
    std::string error;
    if (probes.compileStages(layoutOptions(request, small), small.pp * small.virtualStages,
                             small.dp, arenas, error))
      error.clear();
    it = refusals.emplace(key, error).first;
  }
  why = it->second.empty() ? "" : "the compiler refuses it: " + it->second;
  return it->second.empty();
}

const ScheduleInfo &Search::schedule(const Layout &l) {
  auto key = std::make_tuple(l.schedule, l.pp, l.microbatches, l.virtualStages);
  auto it = schedules.find(key);
  if (it != schedules.end())
    return it->second;
  ScheduleInfo &info = schedules[key];
  pipeline::parseKind(l.schedule, info.spec.kind);
  info.spec.stages = static_cast<int>(l.pp);
  info.spec.microbatches = static_cast<int>(l.microbatches);
  info.spec.virtualStages = static_cast<int>(l.virtualStages);
  info.actions = pipeline::buildSchedule(info.spec, info.error);
  if (!info.error.empty())
    return info;
  info.unit = pipeline::simulate(info.spec, info.actions);
  // Under zero-bubble a microbatch's activations stay until its weight
  // gradient (W), not its input gradient (B): count in-flight to W.
  if (info.spec.kind == pipeline::Kind::ZeroBubble)
    for (size_t s = 0; s < info.actions.size(); ++s) {
      int live = 0, peak = 0;
      for (const pipeline::Action &a : info.actions[s]) {
        if (a.phase == pipeline::Phase::Forward)
          peak = std::max(peak, ++live);
        if (a.phase == pipeline::Phase::Weight)
          --live;
      }
      info.unit.peakInFlight[s] = peak;
    }
  return info;
}

bool Search::compose(const Layout &l, const Pieces &pieces, const Piece &layers,
                     Prediction &prediction, std::string &why,
                     std::vector<double> *stageMemory) {
  const Cluster &c = request.cluster;
  const ScheduleInfo &info = schedule(l);
  const TrafficPieces *traffic = l.dp > 1 ? probes.traffic(l.tp, l.sp, l.zero, why) : nullptr;
  if (l.dp > 1 && !traffic)
    return false;
  if (!info.error.empty()) {
    why = info.error;
    return false;
  }
  int64_t p = l.pp, k = shape.layers / l.pp;
  double v = static_cast<double>(l.virtualStages);
  // Each stage's piece: its layers plus the first or last stage's extra.
  std::vector<Piece> stage(p);
  for (int64_t s = 0; s < p; ++s) {
    if (p == 1) {
      stage[s] = pieces.single - pieces.layer + layers;
      continue;
    }
    stage[s] = layers;
    if (s == 0)
      stage[s] = stage[s] + pieces.first;
    if (s == p - 1)
      stage[s] = stage[s] + pieces.last;
  }
  // Memory: persistent state (ZeRO-sharded), activations of the
  // microbatches in flight, gradients, the largest workspace.
  double workspace = pieces.single.otherBytes;
  if (p > 1)
    workspace = std::max({workspace, pieces.first.otherBytes, pieces.last.otherBytes});
  double largest = 0;
  if (stageMemory)
    stageMemory->clear();
  for (int64_t s = 0; s < p; ++s) {
    double inFlight = p == 1 ? 1 : info.unit.peakInFlight[s];
    double activations = inFlight / v * layers.activationBytes;
    if (p > 1 && s == 0)
      activations += inFlight / v * pieces.first.activationBytes;
    if (p > 1 && s == p - 1)
      activations += pieces.last.activationBytes;
    if (p == 1)
      activations = stage[s].activationBytes;
    double gradients = stage[s].gradientBytes;
    if (l.zero >= 2)
      gradients = gradients / l.dp + pieces.layer.gradientBytes;
    double gathered = l.zero >= 3 ? 2 * pieces.layer.parameterBytes() : 0;
    double bytes = stage[s].persistentBytes(l.zero, l.dp) + activations + gradients + gathered +
                   workspace;
    largest = std::max(largest, bytes);
    if (stageMemory)
      stageMemory->push_back(bytes);
  }
  prediction.memoryBytes = largest;
  if (largest > memoryCap) {
    why = "needs " + formatSize(static_cast<int64_t>(largest)) + " per GPU";
    return false;
  }

  // Time: the schedule run with each stage's priced F/B/W per chunk, the
  // pipeline transfers on the pp link, then the optimizer and whatever
  // data-parallel communication the backward could not hide.
  MeshShape mesh;
  mesh.axes = {{"pp", l.pp}, {"dp", l.dp}, {"tp", l.tp}};
  auto linkOf = [&](const char *axis, double &alpha, double &beta) {
    bool inside = groupInsideNode(mesh, {axis}, c.nodeSize);
    alpha = inside ? c.intraLatency : c.interLatency;
    beta = inside ? c.intraBandwidth : c.interBandwidth;
  };
  double ppAlpha, ppBeta, dpAlpha, dpBeta;
  linkOf("pp", ppAlpha, ppBeta);
  linkOf("dp", dpAlpha, dpBeta);
  double sendF = collectiveSeconds(Collective::SendRecv, 2, pieces.p2pForwardBytes, ppAlpha, ppBeta);
  double sendB = collectiveSeconds(Collective::SendRecv, 2, pieces.p2pBackwardBytes, ppAlpha, ppBeta);
  bool split = l.schedule == "zero-bubble";
  std::vector<double> F(p), B(p), W(p), tpComm(p);
  for (int64_t s = 0; s < p; ++s) {
    F[s] = stage[s].forward.seconds();
    B[s] = stage[s].backward.seconds() + stage[s].weight.seconds();
    tpComm[s] = stage[s].forward.commSeconds + stage[s].backward.commSeconds;
  }
  int chunks = static_cast<int>(p * l.virtualStages);
  std::vector<double> finish(p, 0);
  double bubble = 0, p2pTotal = 0;
  if (p == 1) {
    finish[0] = l.microbatches * (F[0] + B[0]);
  } else {
    // B and W each half of the backward under zero-bubble, the split the
    // schedule itself assumes.
    pipeline::Stats stats = pipeline::simulate(
        info.spec, info.actions, [&](int s, const pipeline::Action &a) {
          switch (a.phase) {
          case pipeline::Phase::Forward: return F[s] / v + (a.chunk < chunks - 1 ? sendF : 0);
          case pipeline::Phase::Backward:
            return (split ? B[s] / 2 : B[s]) / v + (a.chunk > 0 ? sendB : 0);
          case pipeline::Phase::Weight: return B[s] / 2 / v;
          }
          return 0.0;
        });
    if (!stats.complete) {
      why = "the schedule deadlocks";
      return false;
    }
    for (int64_t s = 0; s < p; ++s)
      finish[s] = stats.times[s].empty() ? 0 : stats.times[s].back().second;
    bubble = stats.bubble;
    p2pTotal = l.microbatches * l.virtualStages * (sendF + sendB);
  }
  double m = static_cast<double>(l.microbatches), step = 0, exposedWorst = 0;
  for (int64_t s = 0; s < p; ++s) {
    double optimizer = stage[s].step.seconds() / (l.zero >= 1 ? l.dp : 1);
    double exposed = 0;
    if (l.dp > 1) {
      // The stage's data-parallel traffic: its layers, plus the rest of
      // the model on the stages holding the embedding or the (tied) head.
      DpTraffic t = traffic->layer.scaled(static_cast<double>(k));
      if (s == 0 || s == p - 1)
        t = t + traffic->base;
      auto at = [&](DpTraffic::When when) { return t.seconds(when, l.dp, dpAlpha, dpBeta); };
      auto hidden = [&](double comm, double compute) {
        return c.overlap ? std::max(0.0, comm - compute) : comm;
      };
      exposed = m * (hidden(at(DpTraffic::EachForward), F[s]) +
                     hidden(at(DpTraffic::EachBackward), B[s])) +
                hidden(at(DpTraffic::StepBackward), B[s]) + at(DpTraffic::StepAfter);
    }
    double end = finish[s] + optimizer + exposed;
    if (end >= step) {
      step = end;
      exposedWorst = exposed + m * tpComm[s] + p2pTotal;
    }
  }
  prediction.layout = l;
  prediction.stepSeconds = step;
  prediction.bubble = bubble;
  prediction.commShare = step > 0 ? exposedWorst / step : 0;
  double tokens = static_cast<double>(request.globalBatch) * request.seqLen;
  prediction.tokensPerSecond = tokens / step;
  prediction.tflopsPerDevice = result.modelFlopsPerStep / step / c.devices / 1e12;
  prediction.mfu = result.modelFlopsPerStep / step / c.devices / c.peakFlops;
  return true;
}

bool Search::evaluate(const Layout &l, Prediction &prediction, std::string &why,
                      std::vector<double> *stageMemory) {
  if (!accepted(l, why))
    return false;
  int64_t k = shape.layers / l.pp;
  ProbeKey key{l.tp, l.sp, l.microbatchSize, l.recompute == "budget" ? "none" : l.recompute,
               l.microbatches > 1 ? 2 : 1};
  const Pieces *pieces = probes.get(key, l.pp > 1, why);
  if (!pieces)
    return false;
  if (l.recompute != "budget")
    return compose(l, *pieces, pieces->layer.scaled(k), prediction, why, stageMemory);
  // The fewest layers per stage recomputed in full that fit (the compiler's
  // budget search then picks the cheapest plan that fits, which may mix in
  // selective layers: at most this slow).
  ProbeKey fullKey = key;
  fullKey.recompute = "full";
  const Pieces *full = probes.get(fullKey, l.pp > 1, why);
  if (!full)
    return false;
  // Budget only where recomputing nothing does not fit.
  if (compose(l, *pieces, pieces->layer.scaled(k), prediction, why, stageMemory)) {
    why = "";
    prediction = Prediction();
    return false;
  }
  for (int64_t r = 1; r < k; ++r) {
    Layout mixed = l;
    mixed.budgetFullLayers = r;
    Piece layers = pieces->layer.scaled(k - r) + full->layer.scaled(r);
    if (compose(mixed, *pieces, layers, prediction, why, stageMemory))
      return true;
  }
  why = "no partial recomputation fits (" + why + "); none or full recomputation covers the rest";
  return false;
}

bool Search::stageBytes(const Layout &layout, std::vector<double> &bytes, std::string &error) {
  Prediction ignored;
  std::string why;
  // Memory is reported even where it exceeds the device.
  memoryCap = HUGE_VAL;
  bool ok = evaluate(layout, ignored, why, &bytes);
  memoryCap = request.cluster.memoryBytes;
  if (!ok)
    error = why;
  return ok;
}

template <typename T> bool allowed(const std::vector<T> &only, const T &value) {
  return only.empty() || std::find(only.begin(), only.end(), value) != only.end();
}

std::vector<int64_t> divisorsOf(int64_t n) {
  std::vector<int64_t> d;
  for (int64_t i = 1; i <= n; ++i)
    if (n % i == 0)
      d.push_back(i);
  return d;
}

void Search::run() {
  const Cluster &c = request.cluster;
  int64_t G = c.devices, L = shape.layers;
  // Model FLOPs per step from the unsharded, unrecomputed forward.
  {
    std::string error;
    ProbeKey key{1, false, 1, "none", 1};
    if (const Pieces *p = probes.get(key, false, error)) {
      double forward = p->single.forward.modelFlops +
                       (L - 1) * p->layer.forward.modelFlops;
      result.modelFlopsPerStep = 3 * forward * request.globalBatch;
    }
  }
  std::vector<int64_t> tps;
  for (int64_t t = 1; t <= G; t *= 2) {
    std::string name = "tp" + std::to_string(t);
    if (t > c.nodeSize)
      reject(name, "more than the " + std::to_string(c.nodeSize) +
                       " devices of a node (tensor parallelism stays on NVLink)");
    else if (shape.heads % t || shape.kvHeads % t)
      reject(name, std::to_string(shape.heads) + " heads (" + std::to_string(shape.kvHeads) +
                       " key/value heads) do not divide by " + std::to_string(t));
    else
      tps.push_back(t);
  }
  std::map<std::string, std::pair<double, std::string>> familyBest; // best step per family
  std::map<std::string, std::string> familyWhy;
  std::map<std::string, double> familySmallest;
  for (int64_t t : tps)
    for (int64_t pp : divisorsOf(G / t)) {
      if (G % (t * pp) || !allowed(request.onlyTp, t) || !allowed(request.onlyPp, pp))
        continue;
      std::string ppName = "pp" + std::to_string(pp);
      if (pp > L) {
        if (t == 1)
          reject(ppName, "more stages than the " + std::to_string(L) + " layers");
        continue;
      }
      if (L % pp) {
        if (t == 1)
          reject(ppName, std::to_string(L) + " layers do not split evenly into " +
                             std::to_string(pp) + " stages");
        continue;
      }
      int64_t dp = G / (t * pp);
      std::string family = "tp" + std::to_string(t) + " pp" + std::to_string(pp) + " dp" +
                           std::to_string(dp);
      bool anyBatch = false;
      for (int64_t mbs : request.microbatchSizes) {
        if (request.globalBatch % (dp * mbs))
          continue;
        anyBatch = true;
        int64_t m = request.globalBatch / (dp * mbs);
        std::vector<std::pair<std::string, int64_t>> scheduleChoices = {{"1f1b", 1}};
        if (pp > 1) {
          scheduleChoices.push_back({"zero-bubble", 1});
          for (int64_t v = 2; v <= request.maxVirtualStages; v *= 2)
            if ((L / pp) % v == 0 && m % pp == 0)
              scheduleChoices.push_back({"interleaved", v});
        }
        for (bool sp : t > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false})
          for (int64_t zero = 0; zero <= 3; ++zero)
            for (const char *rc : {"none", "selective", "full", "budget"})
              for (auto &[kind, v] : scheduleChoices) {
                Layout l;
                l.tp = t, l.pp = pp, l.dp = dp, l.zero = zero, l.sp = sp;
                l.microbatchSize = mbs, l.microbatches = m;
                l.schedule = kind, l.virtualStages = v, l.recompute = rc;
                if (zero > 0 && dp == 1)
                  continue; // ZeRO over one rank is stage 0
                if (!allowed(request.onlyZero, zero) ||
                    !allowed(request.onlyRecompute, std::string(rc)) ||
                    (pp > 1 && !allowed(request.onlySchedule, kind)) ||
                    (request.onlySp >= 0 && t > 1 && sp != (request.onlySp == 1)))
                  continue;
                ++result.layoutsSearched;
                Prediction prediction;
                std::string why;
                if (evaluate(l, prediction, why)) {
                  result.ranked.push_back(prediction);
                  auto &best = familyBest[family];
                  if (best.second.empty() || prediction.stepSeconds < best.first)
                    best = {prediction.stepSeconds, l.label()};
                } else if (!why.empty()) {
                  if (!familyWhy.count(family))
                    familyWhy[family] = why;
                  if (prediction.memoryBytes > 0 &&
                      (!familySmallest.count(family) ||
                       prediction.memoryBytes < familySmallest[family])) {
                    familySmallest[family] = prediction.memoryBytes;
                    familyWhy[family] = "does not fit: the smallest layout (" + l.label() +
                                        ") " + why + " of " +
                                        formatSize(static_cast<int64_t>(c.memoryBytes));
                  }
                }
              }
      }
      if (!anyBatch) {
        reject(family, "the global batch (" + std::to_string(request.globalBatch) +
                           ") does not divide into dp × microbatch size for any size tried");
        continue;
      }
      if (!familyBest.count(family))
        reject(family, familyWhy[family]);
    }
  // One line per refusal, with the first combination it refused.
  std::map<std::string, std::vector<std::string>> refused;
  for (auto &[combination, refusal] : refusals)
    if (!refusal.empty())
      refused[refusal].push_back(combination);
  for (auto &[refusal, combinations] : refused)
    reject("layouts like " + combinations.front() +
               (combinations.size() > 1
                    ? " (and " + std::to_string(combinations.size() - 1) + " similar)"
                    : ""),
           "the compiler refuses them: " + refusal);
  std::stable_sort(result.ranked.begin(), result.ranked.end(),
                   [](const Prediction &a, const Prediction &b) {
                     return a.stepSeconds < b.stepSeconds;
                   });
  if (!result.ranked.empty()) {
    double best = result.ranked.front().stepSeconds;
    for (auto &[family, entry] : familyBest)
      if (entry.first > best * 1.0000001) {
        std::ostringstream os;
        os.precision(1);
        os << std::fixed << "worse by " << 100 * (entry.first / best - 1) << "% at best ("
           << entry.second << ")";
        reject(family, os.str());
      }
  }
}

} // namespace

bool runPlan(const Request &request, int64_t verified, Result &result, std::string &error) {
  if (std::string bad = validate(request.cluster); !bad.empty()) {
    error = bad;
    return false;
  }
  if (request.globalBatch <= 0) {
    error = "give the global batch (--global-batch, sequences per step)";
    return false;
  }
  ModelShape shape;
  if (!modelShape(request, shape, error))
    return false;
  Request resolved = request;
  if (resolved.seqLen <= 0)
    resolved.seqLen = shape.seqLen;
  result.seqLen = resolved.seqLen;
  result.parameters = shape.parameters;
  result.layers = shape.layers;
  auto start = std::chrono::steady_clock::now();
  Search search(resolved, shape, result);
  search.run();
  // Confirm the leaders compile in their real layout (at one layer per
  // chunk and one microbatch per stage, which is quick at any width).
  std::vector<Prediction> kept;
  for (Prediction &p : result.ranked) {
    if (static_cast<int64_t>(kept.size()) >= verified) {
      kept.push_back(p);
      continue;
    }
    const Layout &l = p.layout;
    Layout reduced = l;
    reduced.microbatches = l.pp;
    if (reduced.recompute == "budget")
      reduced.recompute = "selective";
    std::vector<double> arenas;
    std::string why;
    if (search.cache().compileStages(layoutOptions(resolved, reduced), l.pp * l.virtualStages,
                                     l.dp * l.microbatchSize, arenas, why))
      kept.push_back(p);
    else
      result.rejected.push_back({l.label(), "the compiler refuses it: " + why});
  }
  result.ranked = std::move(kept);
  result.probesCompiled = search.cache().compiled();
  result.probeSeconds = search.cache().seconds();
  result.searchSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return true;
}

bool compiledStageBytes(const Request &request, const Layout &layout, std::vector<double> &bytes,
                        std::string &error) {
  ModelShape shape;
  if (!modelShape(request, shape, error))
    return false;
  ProbeCache cache(request);
  TrainingPipelineOptions options = layoutOptions(request, layout);
  if (layout.recompute == "budget") {
    error = "compile a budget layout with llmc compile --recompute budget";
    return false;
  }
  return cache.compileStages(options, shape.layers, layout.dp * layout.microbatchSize, bytes,
                             error);
}

bool predictedStageBytes(const Request &request, const Layout &layout, std::vector<double> &bytes,
                         std::string &error) {
  ModelShape shape;
  if (!modelShape(request, shape, error))
    return false;
  Result result;
  Search search(request, shape, result);
  return search.stageBytes(layout, bytes, error);
}

} // namespace llmc::plan
