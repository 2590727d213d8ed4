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

bool Search::compose(const Layout &l, const Pieces &pieces, const Piece &layers,
                     Prediction &prediction, std::string &why,
                     std::vector<double> *stageMemory) {
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
  int64_t p = l.pp, k = shape.layers / l.pp;
  bool scatterOnce = p > 1 && l.zero >= 2;
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
  double largest = 0, largestHost = 0;
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
    // ZeRO-2/3 keep a layer's whole gradient and shards of the rest; under
    // pipeline stages whole gradients accumulate over the microbatches and
    // are scattered once per step, as under ZeRO-1.
    double gradients = stage[s].gradientBytes;
    if (l.zero >= 2 && !scatterOnce)
      gradients = gradients / l.dp + pieces.layer.gradientBytes;
    double gathered = l.zero >= 3 ? 2 * pieces.layer.parameterBytes() : 0;
    double bytes = stage[s].persistentBytes(l.zero, l.dp) + activations + gradients + gathered +
                   workspace;
    largest = std::max(largest, bytes);
    largestHost = std::max(largestHost, offloadTraffic(l, stage[s]).hostBytes());
    if (stageMemory)
      stageMemory->push_back(bytes);
  }
  prediction.memoryBytes = largest;
  prediction.hostBytes = largestHost;
  if (largest > memoryCap) {
    why = "needs " + formatSize(static_cast<int64_t>(largest)) + " per GPU";
    return false;
  }

  // Time: the schedule run with each stage's priced F/B/W per chunk, the
  // pipeline transfers on the pp link, then the optimizer and whatever
  // data-parallel communication the backward could not hide.
  MeshShape mesh;
  mesh.axes = {{"pp", l.pp}, {"dp", l.dp}, {"ep", l.ep}, {"tp", l.tp}};
  auto linkOf = [&](const std::vector<std::string> &axes, double &alpha, double &beta) {
    bool inside = groupInsideNode(mesh, axes, c.nodeSize);
    alpha = inside ? c.intraLatency : c.interLatency;
    beta = inside ? c.intraBandwidth : c.interBandwidth;
  };
  double ppAlpha, ppBeta;
  linkOf({"pp"}, ppAlpha, ppBeta);
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
    if (batchSplit) {
      // The stage's data-parallel traffic: its layers, plus the rest of
      // the model on the stages holding the embedding or the (tied) head;
      // each batch-axis group on its own ranks and link.
      auto at = [&](DpTraffic::When when) {
        double seconds = 0;
        for (auto &[axes, layer] : traffic->layer) {
          DpTraffic t = layer.scaled(static_cast<double>(k));
          if (s == 0 || s == p - 1)
            if (auto base = traffic->base.find(axes); base != traffic->base.end())
              t = t + base->second;
          if (scatterOnce)
            t = t.scatteredOncePerStep();
          int64_t ranks = 1;
          for (const std::string &axis : axes) ranks *= mesh.size(axis);
          double alpha, beta;
          linkOf(axes, alpha, beta);
          seconds += t.seconds(when, ranks, alpha, beta);
        }
        return seconds;
      };
      auto hidden = [&](double comm, double compute) {
        return c.overlap ? std::max(0.0, comm - compute) : comm;
      };
      exposed = m * (hidden(at(DpTraffic::EachForward), F[s]) +
                     hidden(at(DpTraffic::EachBackward), B[s])) +
                hidden(at(DpTraffic::StepBackward), B[s]) + at(DpTraffic::StepAfter);
    }
    // Offloading: the copies and the host update run in the compute
    // stream's order, not beside it (the activations' inside each
    // microbatch, the optimizer's after the backward).
    OffloadTraffic host = offloadTraffic(l, stage[s]);
    double offload = offloadSeconds(host, c);
    double end = finish[s] + optimizer + exposed + offload;
    if (end >= step) {
      step = end;
      prediction.offloadSeconds = offload;
      prediction.activationOffloadSeconds = host.activationCopyBytes / c.hostLinkBandwidth;
      prediction.offload = host;
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

} // namespace llmc::plan
