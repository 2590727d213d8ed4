//===- PlanExpertParallelTest.cpp - llmc plan's expert parallelism --------===//
//
// The planner searches ep only for a mixture of experts, at sizes dividing
// both the experts and the batch ranks; prices the all-to-alls from the
// compiled buffers on the ep group's link; prices the grouped matmuls at
// the rows received; and composes memory near the compiler's own plan.
//
//===----------------------------------------------------------------------===//

#include "compiler/plan/Planner.h"
#include "compiler/plan/Probes.h"
#include "compiler/plan/ProgramCost.h"
#include "dialects/Exec/ExecDialect.h"
#include "passes/lib/EntryPoints.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

using namespace llmc::plan;
namespace exec = llmc::exec;

namespace {

/// Mixtral tiny (4 experts, top 2, width 128, 128 tokens) on CPU ranks.
Request moeRequest(int64_t devices) {
  Request r;
  r.model.family = "mixtral";
  r.model.preset = "tiny";
  r.cluster.name = "test";
  r.cluster.devices = devices;
  r.cluster.nodeSize = devices;
  r.cluster.memoryBytes = 1e9;
  r.cluster.peakFlops = 1e11;
  r.cluster.memoryBandwidth = 1e10;
  r.cluster.intraBandwidth = 4e9;
  r.cluster.interBandwidth = 1e9;
  r.cluster.intraLatency = 1e-6;
  r.cluster.interLatency = 5e-6;
  r.globalBatch = 8;
  r.precision = "fp32";
  r.target = "cpu";
  r.fp32MatmulScale = 1;
  // One kind of layout per (tp, pp, dp, ep): the sizes are what is tested.
  r.onlyTp = {1};
  r.onlyZero = {0};
  r.onlyRecompute = {"none"};
  r.onlySchedule = {"1f1b"};
  r.microbatchSizes = {1};
  return r;
}

/// pp → the ep sizes of the layouts that fit.
std::map<int64_t, std::set<int64_t>> expertSizes(const Request &r) {
  Result result;
  std::string error;
  EXPECT_TRUE(runPlan(r, 0, result, error)) << error;
  std::map<int64_t, std::set<int64_t>> sizes;
  for (const Prediction &p : result.ranked) {
    const Layout &l = p.layout;
    EXPECT_EQ(l.tp * l.pp * l.dp * l.ep, r.cluster.devices) << l.label();
    EXPECT_EQ(l.dp * l.ep * l.microbatchSize * l.microbatches, r.globalBatch) << l.label();
    sizes[l.pp].insert(l.ep);
  }
  return sizes;
}

TEST(PlanExpertParallel, SearchedAtSizesDividingExpertsAndBatchRanks) {
  // Four ranks: one stage leaves four batch ranks (ep 1, 2, 4 of the 4
  // experts), two stages leave two (ep 4 no longer divides them).
  Request r = moeRequest(4);
  r.onlyPp = {1, 2};
  std::map<int64_t, std::set<int64_t>> expected = {{1, {1, 2, 4}}, {2, {1, 2}}};
  EXPECT_EQ(expertSizes(r), expected);
  // Six experts: ep 4 does not divide them, whatever the ranks.
  r.model.overrides = {"num_experts=6"};
  expected = {{1, {1, 2}}, {2, {1, 2}}};
  EXPECT_EQ(expertSizes(r), expected);
  // --ep restricts the sizes.
  r.model.overrides.clear();
  r.onlyEp = {2};
  expected = {{1, {2}}, {2, {2}}};
  EXPECT_EQ(expertSizes(r), expected);
}

TEST(PlanExpertParallel, LabelsAndFlagsName) {
  Request r = moeRequest(4);
  Layout l;
  l.dp = 2;
  l.ep = 2;
  l.microbatchSize = 1;
  l.microbatches = 2;
  EXPECT_EQ(l.label(), "tp1 pp1 dp2 ep2 z0 mbs1 m2 none");
  std::string flags = l.compileFlags(r);
  EXPECT_NE(flags.find("--set batch_size=4 "), std::string::npos) << flags;
  EXPECT_NE(flags.find("--mesh dp=2,ep=2 "), std::string::npos) << flags;
  l.pp = 2, l.tp = 2, l.dp = 1;
  EXPECT_NE(l.compileFlags(r).find("--mesh pp=2,ep=2,tp=2 "), std::string::npos);
}

TEST(PlanExpertParallel, NeverForADenseModel) {
  Request r = moeRequest(4);
  r.model.family = "gpt2";
  r.onlyPp = {1};
  std::map<int64_t, std::set<int64_t>> expected = {{1, {1}}};
  EXPECT_EQ(expertSizes(r), expected);
  r.onlyEp = {2};
  Result result;
  std::string error;
  EXPECT_FALSE(runPlan(r, 0, result, error));
  EXPECT_NE(error.find("--ep: 2 does not divide the model's 0 experts (a dense model"),
            std::string::npos)
      << error;
  r = moeRequest(4);
  r.onlyEp = {3};
  EXPECT_FALSE(runPlan(r, 0, result, error));
  EXPECT_NE(error.find("--ep: 3 does not divide the model's 4 experts"), std::string::npos)
      << error;
}

/// The train_step program of the first stage of `module`.
exec::ProgramOp trainStep(mlir::ModuleOp module) {
  for (mlir::ModuleOp stage : llmc::programModules(module))
    for (auto program : stage.getOps<exec::ProgramOp>())
      if (program.getSymName() == "train_step")
        return program;
  return nullptr;
}

TEST(PlanExpertParallel, AllToAllsPricedFromTheCompiledBuffers) {
  // Two layers, one microbatch of one sequence per rank, ep = 2: per layer
  // the counts [ep, E/ep] (i32) and four exchanges of [ep·R, C] (forward
  // out and back, their gradients), R = T·k = 128·2 routed rows, C = 128,
  // fp32: the dropless worst case.
  Request r = moeRequest(2);
  ProbeCache cache(r);
  Layout l;
  l.ep = 2;
  std::string error;
  auto module = cache.compile(layoutOptions(r, l), 2, l.batchRanks(), error);
  ASSERT_TRUE(module) << error;
  exec::ProgramOp train = trainStep(*module);
  ASSERT_TRUE(train);
  const int64_t ep = 2, experts = 4, layers = 2, R = 128 * 2, C = 128;
  int64_t count = 0;
  double bytes = 0, alone = 0;
  train.walk([&](exec::AllToAllOp a) {
    ++count;
    bytes += bytesOf(a.getInput().getType());
    alone +=
        collectiveSeconds(Collective::AllToAll, ep, bytesOf(a.getInput().getType()), 1e-6, 4e9);
  });
  EXPECT_EQ(count, layers * 5);
  const int64_t localExperts = experts / ep; // the counts' [ep, E/ep] i32
  EXPECT_EQ(bytes, layers * (4.0 * ep * localExperts + 4.0 * ep * R * C * 4));
  // The probe's price: exactly those all-to-alls on the node's link, each
  // rank sending (ep − 1)/ep of its buffer; the gradients' average over ep
  // is left to the data-parallel traffic.
  MeshShape mesh;
  mesh.axes = {{"ep", ep}};
  auto comm = [&](const Cluster &c) {
    ProgramCost cost = costProgram(train, c, mesh, 1, {"ep"});
    double seconds = 0;
    for (auto &[phase, phaseCost] : cost.phases) seconds += phaseCost.commSeconds;
    return seconds;
  };
  EXPECT_NEAR(comm(r.cluster) / alone, 1, 1e-12);
  EXPECT_NEAR(alone, count * 1e-6 + bytes / 2 / 4e9, 1e-15);
  // One rank per node: the exchange crosses nodes.
  Cluster apart = r.cluster;
  apart.nodeSize = 1;
  EXPECT_NEAR(comm(apart), count * 5e-6 + bytes / 2 / 1e9, 1e-15);
}

TEST(PlanExpertParallel, EpGroupsInsideANodeWhileTpTimesEpFits) {
  // Ranks outermost first: pp, dp, ep, tp.
  MeshShape mesh;
  mesh.axes = {{"pp", 2}, {"dp", 2}, {"ep", 4}, {"tp", 2}};
  EXPECT_EQ(mesh.stride("ep"), 2);
  EXPECT_TRUE(groupInsideNode(mesh, {"ep"}, 8));        // tp·ep = 8
  EXPECT_FALSE(groupInsideNode(mesh, {"ep"}, 4));       // tp·ep = 8 > 4
  EXPECT_FALSE(groupInsideNode(mesh, {"dp", "ep"}, 8)); // 16 ranks
  EXPECT_TRUE(groupInsideNode(mesh, {"dp", "ep"}, 16));
}

TEST(PlanExpertParallel, GroupedMatmulsPricedAtTheRowsReceived) {
  // A rank's experts see, on average, as many routed rows under ep = 2 as
  // one rank's tokens route without it: the GEMMs are priced on those, not
  // on the 2× receive buffers.
  Request r = moeRequest(2);
  ProbeCache cache(r);
  auto groupedFlops = [&](int64_t ep, int64_t priceAt) {
    Layout l;
    l.ep = ep;
    std::string error;
    auto module = cache.compile(layoutOptions(r, l), 1, l.batchRanks(), error);
    EXPECT_TRUE(module) << error;
    double flops = 0, count = 0;
    if (module)
      trainStep(*module).walk([&](exec::KernelOp k) {
        if (k.getCallee().starts_with("grouped_matmul")) {
          flops += kernelFlops(k, priceAt);
          ++count;
        }
      });
    EXPECT_GT(count, 0);
    return flops;
  };
  double one = groupedFlops(1, 1);
  EXPECT_GT(one, 0);
  EXPECT_DOUBLE_EQ(groupedFlops(2, 2), one);
  EXPECT_DOUBLE_EQ(groupedFlops(2, 1), 2 * one); // the buffers, taken whole
}

TEST(PlanExpertParallel, MemoryNearTheCompiledPlan) {
  // The probes, compiled at the layout's ep, compose to within a few
  // percent of the compiler's plan of the whole model.
  Request r = moeRequest(4);
  for (auto [dp, ep, zero] : {std::tuple{1, 2, 0}, {2, 2, 1}, {1, 4, 0}}) {
    Layout l;
    l.dp = dp;
    l.ep = ep;
    l.zero = zero;
    l.microbatchSize = 1;
    l.microbatches = 2;
    std::vector<double> predicted, compiled;
    std::string error;
    ASSERT_TRUE(predictedStageBytes(r, l, predicted, error)) << error;
    ASSERT_TRUE(compiledStageBytes(r, l, compiled, error)) << error;
    ASSERT_EQ(predicted.size(), 1u);
    ASSERT_EQ(compiled.size(), 1u);
    EXPECT_NEAR(predicted[0] / compiled[0], 1.0, 0.10) << l.label();
  }
}

} // namespace
