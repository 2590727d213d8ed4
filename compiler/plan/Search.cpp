//===- Search.cpp - enumerate layouts, reject, rank -----------------------===//

#include "compiler/plan/Search.h"

#include "passes/lib/SizeFormat.h"

#include <algorithm>
#include <set>
#include <sstream>

namespace llmc::plan {

bool Search::accepted(const Layout &l, std::string &why) {
  Layout small = l;
  // Under --target cuda the compiler proves that the stages' NCCL
  // transfers (two channels, docs/cuda.md) make progress, which depends on
  // the schedule's pattern over stages and microbatches: the probe keeps up
  // to 4 stages and twice as many microbatches (the leaders are then
  // compiled at their real counts, Planner.cpp), so a layout is offered
  // only where that proof holds.
  bool transfersChecked = request.target == "cuda" && l.pp > 1;
  small.pp = std::min<int64_t>(l.pp, transfersChecked ? 4 : 2);
  small.dp = std::min<int64_t>(l.dp, 2);
  small.virtualStages = std::min<int64_t>(l.virtualStages, 2);
  small.microbatches =
      transfersChecked ? std::min<int64_t>(l.microbatches, 2 * small.pp) : small.pp;
  small.microbatchSize = 1;
  small.recompute = "none";
  std::string key = small.label();
  auto it = refusals.find(key);
  if (it == refusals.end()) {
    std::string error;
    if (probes.compile(layoutOptions(request, small), small.pp * small.virtualStages,
                       small.batchRanks(), error))
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

bool Search::evaluate(const Layout &l, Prediction &prediction, std::string &why,
                      std::vector<double> *stageMemory) {
  int64_t k = shape.layers / l.pp;
  ProbeKey key{l.tp,
               l.sp,
               l.microbatchSize,
               l.recompute == "budget" ? "none" : l.recompute,
               l.microbatches > 1 ? 2 : 1,
               l.offload,
               l.ep,
               l.offloadActivations};
  const Pieces *pieces = probes.get(key, l.pp > 1, why);
  if (!pieces)
    return false;
  if (l.recompute != "budget" && l.offloadActivations && k < 3 &&
      static_cast<int64_t>(pieces->inFlightByDepth.size()) >= k) {
    // Fewer layers than saturate the in-flight activations: the probe of
    // that depth's.
    Pieces shallow = *pieces;
    shallow.single.activationBytes = pieces->inFlightByDepth[k - 1];
    return compose(l, shallow, shallow.layer.scaled(k), prediction, why, stageMemory);
  }
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

namespace {

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

} // namespace

std::string familyOf(const Layout &l) {
  return "tp" + std::to_string(l.tp) + " pp" + std::to_string(l.pp) + " dp" + std::to_string(l.dp) +
         (l.ep > 1 ? " ep" + std::to_string(l.ep) : "");
}

// Confirming a feature combination compiles a reduced layout; most fitting
// rows are never read, so only the shown ones and each family's best (for
// "worse by") are confirmed. A 175B-shaped search on 1024 GPUs priced
// ~9,000 layouts with no refusal among them, and spent half its compiles
// confirming them all.
std::map<std::string, std::pair<double, std::string>> Search::confirmShownRows() {
  std::vector<Prediction> &rows = result.ranked;
  std::stable_sort(rows.begin(), rows.end(), [](const Prediction &a, const Prediction &b) {
    return a.stepSeconds < b.stepSeconds;
  });
  std::map<std::string, std::pair<double, std::string>> best;
  auto confirm = [&](const Prediction &p) {
    std::string why;
    if (accepted(p.layout, why))
      return true;
    familyRefusal.emplace(familyOf(p.layout), why);
    return false;
  };
  std::vector<Prediction> kept;
  for (const Prediction &p : rows) {
    std::string family = familyOf(p.layout);
    bool shown = static_cast<int64_t>(kept.size()) < request.shownRows;
    if ((shown || !best.count(family)) && !confirm(p))
      continue;
    best.emplace(family, std::make_pair(p.stepSeconds, p.layout.label()));
    kept.push_back(p);
  }
  if (request.shownBottom) {
    int64_t confirmed = 0;
    for (size_t i = kept.size(); i-- > 0 && confirmed < request.shownRows;)
      if (confirm(kept[i]))
        ++confirmed;
      else
        kept.erase(kept.begin() + static_cast<std::ptrdiff_t>(i));
  }
  rows = std::move(kept);
  return best;
}

std::vector<int64_t> Search::expertParallelSizes(int64_t batchRanks) const {
  std::vector<int64_t> sizes;
  for (int64_t ep : divisorsOf(batchRanks))
    if ((ep == 1 || (shape.experts > 1 && shape.experts % ep == 0)) && allowed(request.onlyEp, ep))
      sizes.push_back(ep);
  return sizes;
}

void Search::countModelFlops() {
  // Model FLOPs per step: what the unsharded, unrecomputed programs of one
  // sequence compute in products and attention, forward and backward
  // (KernelCost.h), counted kernel by kernel as they are priced.
  std::string error;
  ProbeKey key{1, false, 1, "none", 1};
  const Pieces *p = probes.get(key, false, error);
  if (!p)
    return;
  auto work = [](const Piece &piece) {
    return piece.forward.modelFlops + piece.backward.modelFlops + piece.weight.modelFlops;
  };
  result.modelFlopsPerStep =
      (work(p->single) + (shape.layers - 1) * work(p->layer)) * request.globalBatch;
}

std::vector<int64_t> Search::tensorParallelSizes() {
  const Cluster &c = request.cluster;
  std::vector<int64_t> tps;
  for (int64_t t = 1; t <= c.devices; t *= 2) {
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
  return tps;
}

std::vector<std::pair<bool, bool>> Search::offloadChoices() const {
  const Cluster &c = request.cluster;
  bool linkKnown = c.hostLinkBandwidth > 0, updateKnown = linkKnown && c.hostMemoryBandwidth > 0;
  std::vector<std::pair<bool, bool>> choices;
  for (auto [optimizer, activations] :
       {std::pair{false, false}, {false, true}, {true, false}, {true, true}}) {
    Layout named;
    named.offload = optimizer;
    named.offloadActivations = activations;
    if (autoOffload() ? (!optimizer || updateKnown) && (!activations || linkKnown)
                      : allowed(request.offload, named.offloadChoice()))
      choices.push_back({optimizer, activations});
  }
  return choices;
}

bool Search::consider(const Layout &l, const std::string &family) {
  ++result.layoutsSearched;
  Prediction prediction;
  std::string why;
  if (evaluate(l, prediction, why)) {
    result.ranked.push_back(prediction);
    if (!l.offload && !l.offloadActivations)
      notes.fitsPlain.insert(family);
    else
      notes.offloaded[family].insert(l.offloadChoice());
    return false;
  }
  if (why.empty())
    return false;
  if (!notes.why.count(family))
    notes.why[family] = why;
  if (prediction.memoryBytes <= 0)
    return false;
  if (!l.offload && !l.offloadActivations &&
      (!notes.plain.count(family) || prediction.memoryBytes < notes.plain[family].first))
    notes.plain[family] = {prediction.memoryBytes, l.label() + ") " + why};
  if (!notes.smallest.count(family) || prediction.memoryBytes < notes.smallest[family]) {
    notes.smallest[family] = prediction.memoryBytes;
    notes.why[family] = "does not fit: the smallest layout (" + l.label() + ") " + why + " of " +
                        formatSize(static_cast<int64_t>(request.cluster.memoryBytes));
  }
  return true;
}

void Search::considerOffloaded(Layout l, const std::string &family,
                               const std::vector<std::pair<bool, bool>> &choices) {
  std::map<std::pair<bool, bool>, bool> big; // choice → did not fit
  auto tooBigOrSkipped = [&](bool optimizer, bool activations) {
    auto it = big.find({optimizer, activations});
    return it == big.end() || it->second;
  };
  for (auto [optimizer, activations] : choices) {
    if (activations && (l.pp > 1 || l.recompute == "budget"))
      continue;
    if (autoOffload() && (optimizer || activations)) {
      auto plain = big.find({false, false});
      if (plain == big.end() || !plain->second)
        continue;
      if (optimizer && activations &&
          !(tooBigOrSkipped(true, false) && tooBigOrSkipped(false, true)))
        continue;
    }
    l.offload = optimizer;
    l.offloadActivations = activations;
    big[{optimizer, activations}] = consider(l, family);
  }
}

std::vector<std::pair<std::string, int64_t>> Search::scheduleChoices(int64_t pp,
                                                                     int64_t microbatches) const {
  std::vector<std::pair<std::string, int64_t>> choices = {{"1f1b", 1}};
  if (pp == 1)
    return choices;
  choices.push_back({"zero-bubble", 1});
  std::vector<int64_t> chunks = request.onlyVirtualStages;
  if (chunks.empty())
    for (int64_t v = 2; v <= request.maxVirtualStages; v *= 2) chunks.push_back(v);
  for (int64_t v : chunks)
    if ((shape.layers / pp) % v == 0 && microbatches % pp == 0)
      choices.push_back({"interleaved", v});
  return choices;
}

bool Search::searchFamily(const Layout &named, const std::string &family,
                          const std::vector<std::pair<bool, bool>> &offloads) {
  int64_t t = named.tp, pp = named.pp, dp = named.dp, ep = named.ep;
  bool anyBatch = false;
  for (int64_t mbs : request.microbatchSizes) {
    if (request.globalBatch % (dp * ep * mbs))
      continue;
    anyBatch = true;
    int64_t m = request.globalBatch / (dp * ep * mbs);
    std::vector<std::pair<std::string, int64_t>> schedulesTried = scheduleChoices(pp, m);
    for (bool sp : t > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false})
      for (int64_t zero = 0; zero <= 3; ++zero)
        for (const char *rc : {"none", "selective", "full", "budget"})
          for (auto &[kind, v] : schedulesTried) {
            if (zero > 0 && dp == 1)
              continue; // ZeRO over one rank is stage 0
            if (!allowed(request.onlyZero, zero) ||
                !allowed(request.onlyRecompute, std::string(rc)) ||
                (pp > 1 && !allowed(request.onlySchedule, kind)) ||
                (request.onlySp >= 0 && t > 1 && sp != (request.onlySp == 1)))
              continue;
            Layout l = named;
            l.zero = zero, l.sp = sp;
            l.microbatchSize = mbs, l.microbatches = m;
            l.schedule = kind, l.virtualStages = v, l.recompute = rc;
            considerOffloaded(l, family, offloads);
          }
  }
  return anyBatch;
}

std::vector<std::string> Search::searchLayouts() {
  int64_t G = request.cluster.devices, L = shape.layers;
  std::vector<std::pair<bool, bool>> offloads = offloadChoices();
  std::vector<std::string> families; // in the order searched
  for (int64_t t : tensorParallelSizes())
    for (int64_t pp : divisorsOf(G / t)) {
      if (G % (t * pp) || !allowed(request.onlyTp, t) || !allowed(request.onlyPp, pp))
        continue;
      std::string ppName = "pp" + std::to_string(pp);
      if (pp > L || L % pp) {
        if (t == 1)
          reject(ppName, pp > L ? "more stages than the " + std::to_string(L) + " layers"
                                : std::to_string(L) + " layers do not split evenly into " +
                                      std::to_string(pp) + " stages");
        continue;
      }
      // The batch ranks of the layout (G / (tp·pp)) split into dp × ep.
      int64_t batchRanks = G / (t * pp);
      for (int64_t ep : expertParallelSizes(batchRanks)) {
        Layout named;
        named.tp = t, named.pp = pp, named.dp = batchRanks / ep, named.ep = ep;
        std::string family = familyOf(named);
        if (searchFamily(named, family, offloads))
          families.push_back(family);
        else
          reject(family, "the global batch (" + std::to_string(request.globalBatch) +
                             ") does not divide into dp × " + (ep > 1 ? "ep × " : "") +
                             "microbatch size for any size tried");
      }
    }
  return families;
}

void Search::reportFamilies(const std::vector<std::string> &families,
                            const std::map<std::string, std::pair<double, std::string>> &best) {
  for (const std::string &family : families) {
    if (!best.count(family)) {
      auto refused = familyRefusal.find(family);
      reject(family, refused != familyRefusal.end() ? refused->second : notes.why[family]);
      continue;
    }
    if (notes.fitsPlain.count(family) || !notes.plain.count(family))
      continue;
    std::string with;
    for (const char *kind : {"optimizer", "activations", "optimizer+activations"})
      if (notes.offloaded[family].count(kind))
        with += (with.empty() ? "--offload " : " or --offload ") +
                std::string(kind == std::string("optimizer+activations") ? "optimizer,activations"
                                                                         : kind);
    result.offloadOnly.push_back(
        {family, "fits only with " + with + ": without it the smallest layout (" +
                     notes.plain[family].second + " of " +
                     formatSize(static_cast<int64_t>(request.cluster.memoryBytes))});
  }
}

void Search::reportRefusals() {
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
}

void Search::reportSlowerFamilies(
    const std::map<std::string, std::pair<double, std::string>> &best) {
  if (result.ranked.empty())
    return;
  double fastest = result.ranked.front().stepSeconds;
  for (auto &[family, entry] : best)
    if (entry.first > fastest * 1.0000001) {
      std::ostringstream os;
      os.precision(1);
      os << std::fixed << "worse by " << 100 * (entry.first / fastest - 1) << "% at best ("
         << entry.second << ")";
      reject(family, os.str());
    }
}

void Search::run() {
  countModelFlops();
  std::vector<std::string> families = searchLayouts();
  std::map<std::string, std::pair<double, std::string>> best = confirmShownRows();
  reportFamilies(families, best);
  reportRefusals();
  reportSlowerFamilies(best);
}

} // namespace llmc::plan
