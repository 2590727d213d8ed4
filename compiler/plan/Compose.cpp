//===- Compose.cpp - one layout's memory and step time from probe pieces --===//

#include "compiler/plan/OffloadCost.h"
#include "compiler/plan/Search.h"

#include "passes/lib/SizeFormat.h"

#include <algorithm>
#include <cmath>

namespace llmc::plan {

OffloadTraffic offloadTraffic(const Layout &l, const Piece &stage) {
  OffloadTraffic t;
  if (l.offload) {
    t.downBytes = stage.hostDownBytes;
    t.upBytes = stage.hostUpBytes;
    t.updateBytes = stage.hostUpdateBytes;
    t.stagingBytes = stage.hostStagingBytes;
    t = t.shard(l.zero, l.dp);
    t.stateBytes = stage.hostStateBytes(l.zero, l.dp);
  }
  if (l.offloadActivations) {
    // Every microbatch copies its saved values; they reuse one place.
    t.activationCopyBytes = stage.activationCopyBytes * static_cast<double>(l.microbatches);
    t.activationHostBytes = stage.activationHostBytes;
  }
  return t;
}

namespace {

/// ZeRO-2/3 under pipeline stages accumulate whole gradients over the
/// microbatches and reduce-scatter them once per step, as ZeRO-1 does.
bool scattersOncePerStep(const Layout &l) { return l.pp > 1 && l.zero >= 2; }

/// Each stage's piece: its layers plus the first or last stage's extra.
std::vector<Piece> stagePieces(int64_t p, const Pieces &pieces, const Piece &layers) {
  if (p == 1)
    return {pieces.single - pieces.layer + layers};
  std::vector<Piece> stage(p, layers);
  stage[0] = stage[0] + pieces.first;
  stage[p - 1] = stage[p - 1] + pieces.last;
  return stage;
}

/// Each stage's bytes per GPU: persistent state (ZeRO-sharded),
/// activations of the microbatches in flight, gradients, the largest
/// workspace.
std::vector<double> stageBytesOf(const Layout &l, const ScheduleInfo &info, const Pieces &pieces,
                                 const Piece &layers, const std::vector<Piece> &stage) {
  const int64_t p = l.pp;
  const double v = static_cast<double>(l.virtualStages);
  double workspace = pieces.single.otherBytes;
  if (p > 1)
    workspace = std::max({workspace, pieces.first.otherBytes, pieces.last.otherBytes});
  std::vector<double> bytes;
  for (int64_t s = 0; s < p; ++s) {
    double inFlight = p == 1 ? 1 : info.unit.peakInFlight[s];
    double activations = inFlight / v * layers.activationBytes;
    if (p > 1 && s == 0)
      activations += inFlight / v * pieces.first.activationBytes;
    if (p > 1 && s == p - 1)
      activations += pieces.last.activationBytes;
    if (p == 1)
      activations = stage[s].activationBytes;
    // ZeRO-2/3 keep a layer's whole gradient and shards of the rest, unless
    // they scatter once per step.
    double gradients = stage[s].gradientBytes;
    if (l.zero >= 2 && !scattersOncePerStep(l))
      gradients = gradients / l.dp + pieces.layer.gradientBytes;
    double gathered = l.zero >= 3 ? 2 * pieces.layer.parameterBytes() : 0;
    bytes.push_back(stage[s].persistentBytes(l.zero, l.dp) + activations + gradients + gathered +
                    workspace);
  }
  return bytes;
}

/// The layout's ranks on the cluster's links: a group of ranks inside a
/// node talks over NVLink, else over the network.
struct Links {
  MeshShape mesh;
  const Cluster &c;

  Links(const Layout &l, const Cluster &c) : c(c) {
    mesh.axes = {{"pp", l.pp}, {"dp", l.dp}, {"ep", l.ep}, {"tp", l.tp}};
  }
  void of(const std::vector<std::string> &axes, double &alpha, double &beta) const {
    bool inside = groupInsideNode(mesh, axes, c.nodeSize);
    alpha = inside ? c.intraLatency : c.interLatency;
    beta = inside ? c.intraBandwidth : c.interBandwidth;
  }
};

/// The pipeline's time: each stage's priced forward and backward per
/// microbatch, and when its last action ends under the schedule.
struct PipelineTimes {
  std::vector<double> F, B, tpComm, finish;
  double bubble = 0, p2pSeconds = 0; ///< p2p: every send of the step
};

/// Runs the schedule with each stage's priced F/B/W per chunk and the
/// pipeline transfers on the pp link; false with `why` when it deadlocks.
bool runSchedule(const Layout &l, const ScheduleInfo &info, const Pieces &pieces,
                 const std::vector<Piece> &stage, const Links &links, PipelineTimes &t,
                 std::string &why) {
  const int64_t p = l.pp;
  const double v = static_cast<double>(l.virtualStages);
  t.F.assign(p, 0), t.B.assign(p, 0), t.tpComm.assign(p, 0), t.finish.assign(p, 0);
  for (int64_t s = 0; s < p; ++s) {
    t.F[s] = stage[s].forward.seconds();
    t.B[s] = stage[s].backward.seconds() + stage[s].weight.seconds();
    t.tpComm[s] = stage[s].forward.commSeconds + stage[s].backward.commSeconds;
  }
  if (p == 1) {
    t.finish[0] = l.microbatches * (t.F[0] + t.B[0]);
    return true;
  }
  double ppAlpha, ppBeta;
  links.of({"pp"}, ppAlpha, ppBeta);
  double sendF =
      collectiveSeconds(Collective::SendRecv, 2, pieces.p2pForwardBytes, ppAlpha, ppBeta);
  double sendB =
      collectiveSeconds(Collective::SendRecv, 2, pieces.p2pBackwardBytes, ppAlpha, ppBeta);
  const bool split = l.schedule == "zero-bubble";
  const int chunks = static_cast<int>(p * l.virtualStages);
  // B and W each half of the backward under zero-bubble, the split the
  // schedule itself assumes.
  pipeline::Stats stats =
      pipeline::simulate(info.spec, info.actions, [&](int s, const pipeline::Action &a) {
        switch (a.phase) {
        case pipeline::Phase::Forward: return t.F[s] / v + (a.chunk < chunks - 1 ? sendF : 0);
        case pipeline::Phase::Backward:
          return (split ? t.B[s] / 2 : t.B[s]) / v + (a.chunk > 0 ? sendB : 0);
        case pipeline::Phase::Weight: return t.B[s] / 2 / v;
        }
        return 0.0;
      });
  if (!stats.complete) {
    why = "the schedule deadlocks";
    return false;
  }
  for (int64_t s = 0; s < p; ++s)
    t.finish[s] = stats.times[s].empty() ? 0 : stats.times[s].back().second;
  t.bubble = stats.bubble;
  t.p2pSeconds = l.microbatches * l.virtualStages * (sendF + sendB);
  return true;
}

/// Stage `s`'s data-parallel traffic at `when`: its layers, plus the rest
/// of the model on the stages holding the embedding or the (tied) head;
/// each batch-axis group on its own ranks and link.
double dataParallelSeconds(const Layout &l, const TrafficPieces &traffic, int64_t s,
                           const Links &links, DpTraffic::When when, int64_t layersPerStage) {
  const int64_t p = l.pp;
  double seconds = 0;
  for (auto &[axes, layer] : traffic.layer) {
    DpTraffic t = layer.scaled(static_cast<double>(layersPerStage));
    if (s == 0 || s == p - 1)
      if (auto base = traffic.base.find(axes); base != traffic.base.end())
        t = t + base->second;
    if (scattersOncePerStep(l))
      t = t.scatteredOncePerStep();
    int64_t ranks = 1;
    for (const std::string &axis : axes) ranks *= links.mesh.size(axis);
    double alpha, beta;
    links.of(axes, alpha, beta);
    seconds += t.seconds(when, ranks, alpha, beta);
  }
  return seconds;
}

} // namespace

bool Search::compose(const Layout &l, const Pieces &pieces, const Piece &layers,
                     Prediction &prediction, std::string &why, std::vector<double> *stageMemory) {
  const Cluster &c = request.cluster;
  const ScheduleInfo &info = schedule(l);
  const bool batchSplit = l.batchRanks() > 1;
  const TrafficPieces *traffic =
      batchSplit ? probes.traffic(l.tp, l.sp, l.zero, l.ep, why) : nullptr;
  if (batchSplit && !traffic)
    return false;
  if (!info.error.empty()) {
    why = info.error;
    return false;
  }
  const int64_t p = l.pp;
  const std::vector<Piece> stage = stagePieces(p, pieces, layers);
  const std::vector<double> bytes = stageBytesOf(l, info, pieces, layers, stage);
  if (stageMemory)
    *stageMemory = bytes;
  double largestHost = 0;
  for (int64_t s = 0; s < p; ++s)
    largestHost = std::max(largestHost, offloadTraffic(l, stage[s]).hostBytes());
  prediction.memoryBytes = *std::max_element(bytes.begin(), bytes.end());
  prediction.hostBytes = largestHost;
  if (prediction.memoryBytes > memoryCap) {
    why = "needs " + formatSize(static_cast<int64_t>(prediction.memoryBytes)) + " per GPU";
    return false;
  }

  // Time: the schedule, then the optimizer and whatever data-parallel
  // communication the backward could not hide.
  Links links(l, c);
  PipelineTimes t;
  if (!runSchedule(l, info, pieces, stage, links, t, why))
    return false;
  auto hidden = [&](double comm, double compute) {
    return c.overlap ? std::max(0.0, comm - compute) : comm;
  };
  double m = static_cast<double>(l.microbatches), step = 0, exposedWorst = 0;
  for (int64_t s = 0; s < p; ++s) {
    double optimizer = stage[s].step.seconds() / (l.zero >= 1 ? l.dp : 1);
    double exposed = 0;
    if (batchSplit) {
      auto at = [&](DpTraffic::When when) {
        return dataParallelSeconds(l, *traffic, s, links, when, shape.layers / p);
      };
      exposed = m * (hidden(at(DpTraffic::EachForward), t.F[s]) +
                     hidden(at(DpTraffic::EachBackward), t.B[s])) +
                hidden(at(DpTraffic::StepBackward), t.B[s]) + at(DpTraffic::StepAfter);
    }
    // Offloading: the copies and the host update run in the compute
    // stream's order, not beside it (the activations' inside each
    // microbatch, the optimizer's after the backward).
    OffloadTraffic host = offloadTraffic(l, stage[s]);
    double offload = offloadSeconds(host, c);
    double end = t.finish[s] + optimizer + exposed + offload;
    if (end >= step) {
      step = end;
      prediction.offloadSeconds = offload;
      prediction.activationOffloadSeconds = host.activationCopyBytes / c.hostLinkBandwidth;
      prediction.offload = host;
      exposedWorst = exposed + m * t.tpComm[s] + t.p2pSeconds;
    }
  }
  prediction.layout = l;
  prediction.stepSeconds = step;
  prediction.bubble = t.bubble;
  prediction.commShare = step > 0 ? exposedWorst / step : 0;
  double tokens = static_cast<double>(request.globalBatch) * request.seqLen;
  prediction.tokensPerSecond = tokens / step;
  prediction.tflopsPerDevice = result.modelFlopsPerStep / step / c.devices / 1e12;
  prediction.mfu = result.modelFlopsPerStep / step / c.devices / c.peakFlops;
  return true;
}

} // namespace llmc::plan
