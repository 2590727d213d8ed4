//===- PlannerTest.cpp - llmc plan: links, pricing and composition --------===//

#include "compiler/plan/Planner.h"
#include "compiler/Compiler.h"
#include "compiler/plan/Cluster.h"
#include "compiler/plan/Probes.h"
#include "compiler/plan/ProgramCost.h"
#include "dialects/Exec/ExecDialect.h"
#include "passes/lib/MicrobatchSchedule.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace llmc::plan;

namespace {

TEST(PlanCluster, PresetsAndCounts) {
  Cluster c;
  std::string error;
  ASSERT_TRUE(parseCluster("dgx-h100:64", c, error)) << error;
  EXPECT_EQ(c.devices, 64);
  EXPECT_EQ(c.nodeSize, 8);
  EXPECT_DOUBLE_EQ(c.peakFlops, 989e12);
  EXPECT_DOUBLE_EQ(c.interBandwidth, 50e9); // NDR 400 Gb/s per GPU
  EXPECT_TRUE(parseCluster("dgx-a100:4", c, error)) << "part of one node";
  EXPECT_FALSE(parseCluster("dgx-a100:12", c, error));
  EXPECT_NE(error.find("whole number of 8-GPU nodes"), std::string::npos) << error;
  EXPECT_FALSE(parseCluster("dgx-a100:0", c, error));
  EXPECT_FALSE(parseCluster("tpu-v5:8", c, error));
  EXPECT_NE(error.find("unknown cluster 'tpu-v5'"), std::string::npos) << error;
  double bytes = 0;
  EXPECT_TRUE(parseBytes("80GiB", bytes));
  EXPECT_DOUBLE_EQ(bytes, 80.0 * (1ll << 30));
  EXPECT_TRUE(parseBytes("40GB", bytes));
  EXPECT_DOUBLE_EQ(bytes, 40e9);
  EXPECT_FALSE(parseBytes("lots", bytes));
  EXPECT_FALSE(parseBytes("-1GiB", bytes));
}

TEST(PlanCluster, AlphaBetaFormulas) {
  // Ring all-reduce on 8 ranks of 1 GB at 100 GB/s and 10 us per step.
  double alpha = 10e-6, beta = 100e9, bytes = 1e9;
  EXPECT_DOUBLE_EQ(collectiveSeconds(Collective::AllReduce, 8, bytes, alpha, beta),
                   14 * alpha + 2.0 * 7 / 8 * bytes / beta);
  EXPECT_DOUBLE_EQ(collectiveSeconds(Collective::AllGather, 8, bytes, alpha, beta),
                   7 * alpha + 7.0 / 8 * bytes / beta);
  EXPECT_DOUBLE_EQ(collectiveSeconds(Collective::ReduceScatter, 8, bytes, alpha, beta),
                   7 * alpha + 7.0 / 8 * bytes / beta);
  EXPECT_DOUBLE_EQ(collectiveSeconds(Collective::SendRecv, 2, bytes, alpha, beta),
                   alpha + bytes / beta);
  EXPECT_EQ(collectiveSeconds(Collective::AllReduce, 1, bytes, alpha, beta), 0);
}

TEST(PlanCompose, PipelinedZeroScattersOncePerStep) {
  // ZeRO-3's traffic as the probes see it without stages: gathers in each
  // forward and backward, a reduce-scatter in each backward. Under pipeline
  // stages the scatter moves to the step; the gathers stay per microbatch.
  DpTraffic t;
  auto kind = [](Collective c) { return static_cast<int>(c); };
  t.messages[{DpTraffic::EachForward, kind(Collective::AllGather)}] = {2, 100};
  t.messages[{DpTraffic::EachBackward, kind(Collective::AllGather)}] = {2, 100};
  t.messages[{DpTraffic::EachBackward, kind(Collective::ReduceScatter)}] = {2, 100};
  t.messages[{DpTraffic::StepBackward, kind(Collective::ReduceScatter)}] = {1, 50};
  DpTraffic once = t.scatteredOncePerStep();
  double alpha = 1e-6, beta = 1e9;
  EXPECT_EQ(once.seconds(DpTraffic::EachForward, 4, alpha, beta),
            t.seconds(DpTraffic::EachForward, 4, alpha, beta));
  DpTraffic gathers;
  gathers.messages[{DpTraffic::EachBackward, kind(Collective::AllGather)}] = {2, 100};
  EXPECT_EQ(once.seconds(DpTraffic::EachBackward, 4, alpha, beta),
            gathers.seconds(DpTraffic::EachBackward, 4, alpha, beta));
  EXPECT_GT(once.seconds(DpTraffic::StepBackward, 4, alpha, beta),
            t.seconds(DpTraffic::StepBackward, 4, alpha, beta));
  EXPECT_DOUBLE_EQ(once.seconds(DpTraffic::StepBackward, 4, alpha, beta),
                   t.seconds(DpTraffic::StepBackward, 4, alpha, beta) +
                       t.seconds(DpTraffic::EachBackward, 4, alpha, beta) -
                       once.seconds(DpTraffic::EachBackward, 4, alpha, beta));
  EXPECT_EQ(DpTraffic().scatteredOncePerStep().messages.size(), 0u);
}

TEST(PlanCluster, GroupsInsideANode) {
  MeshShape mesh;
  mesh.axes = {{"pp", 4}, {"dp", 4}, {"tp", 2}}; // 32 ranks, tp innermost
  EXPECT_EQ(mesh.stride("tp"), 1);
  EXPECT_EQ(mesh.stride("dp"), 2);
  EXPECT_EQ(mesh.stride("pp"), 8);
  EXPECT_TRUE(groupInsideNode(mesh, {"tp"}, 8));
  EXPECT_TRUE(groupInsideNode(mesh, {"dp"}, 8));        // ranks 0,2,4,6
  EXPECT_TRUE(groupInsideNode(mesh, {"dp", "tp"}, 8));  // 0..7
  EXPECT_FALSE(groupInsideNode(mesh, {"pp"}, 8));       // 0,8,16,24
  EXPECT_FALSE(groupInsideNode(mesh, {"dp"}, 4));       // 0..6 spans two nodes of 4
  EXPECT_TRUE(groupInsideNode(mesh, {"tp"}, 2));
}

/// The kernels of the exec module `ir`, in order (empty when it does not
/// parse: the caller's size check fails).
std::vector<mlir::Operation *> kernelsOf(mlir::MLIRContext &context, const char *ir,
                                         mlir::OwningOpRef<mlir::ModuleOp> &module) {
  llmc::prepareContext(context);
  module = mlir::parseSourceString<mlir::ModuleOp>(ir, &context);
  std::vector<mlir::Operation *> kernels;
  if (module)
    module->walk([&](llmc::exec::KernelOp k) { kernels.push_back(k); });
  return kernels;
}

TEST(PlanProgramCost, FusedHeadFlops) {
  // The head's product per pass over it: once forward (whole vocabulary or
  // a shard), three times with the backward's dh and dw, twice for a
  // frozen head (no dw).
  const char *ir = R"mlir(
    exec.program @train_step kind "train_step" {
      %h = exec.buffer offset 0 : memref<4x8x16xf32>
      %w = exec.buffer offset 2048 : memref<32x16xf32>
      %t = exec.buffer offset 4096 : memref<4x8xi32>
      %s = exec.buffer offset 4224 : memref<f32>
      %r = exec.buffer offset 4352 : memref<4x8xf32>
      %c = exec.buffer offset 4608 : memref<32x32xf32>
      exec.kernel "linear_cross_entropy"(%h, %w, %t : memref<4x8x16xf32>, memref<32x16xf32>, memref<4x8xi32>) -> (%s, %c : memref<f32>, memref<32x32xf32>) {chunk_rows = 32 : i64, transpose_b = 1 : i64}
      exec.kernel "linear_cross_entropy_partial"(%h, %w, %t : memref<4x8x16xf32>, memref<32x16xf32>, memref<4x8xi32>) -> (%r, %r, %r, %c : memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>, memref<32x32xf32>) {chunk_rows = 32 : i64, num_classes = 64 : i64, transpose_b = 1 : i64}
      exec.kernel "linear_cross_entropy_train"(%h, %w, %t, %s : memref<4x8x16xf32>, memref<32x16xf32>, memref<4x8xi32>, memref<f32>) -> (%s, %h, %w, %c : memref<f32>, memref<4x8x16xf32>, memref<32x16xf32>, memref<32x32xf32>) {chunk_rows = 32 : i64, transpose_b = 1 : i64}
      exec.kernel "linear_cross_entropy_train"(%h, %w, %t, %s : memref<4x8x16xf32>, memref<32x16xf32>, memref<4x8xi32>, memref<f32>) -> (%s, %h, %c : memref<f32>, memref<4x8x16xf32>, memref<32x32xf32>) {chunk_rows = 32 : i64, frozen_weight = 1 : i64, transpose_b = 1 : i64}
      exec.kernel "linear_cross_entropy_partial_grad"(%h, %w, %t, %r, %r, %r : memref<4x8x16xf32>, memref<32x16xf32>, memref<4x8xi32>, memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>) -> (%h, %c : memref<4x8x16xf32>, memref<32x32xf32>) {chunk_rows = 32 : i64, frozen_weight = 1 : i64, num_classes = 64 : i64, transpose_b = 1 : i64}
    }
  )mlir";
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::vector<mlir::Operation *> kernels = kernelsOf(context, ir, module);
  ASSERT_EQ(kernels.size(), 5u);
  const double head = 2.0 * 32 * 32 * 16; // rows · V · D
  EXPECT_DOUBLE_EQ(kernelFlops(kernels[0]), head);
  EXPECT_DOUBLE_EQ(kernelFlops(kernels[1]), head);
  EXPECT_DOUBLE_EQ(kernelFlops(kernels[2]), 3 * head);
  EXPECT_DOUBLE_EQ(kernelFlops(kernels[3]), 2 * head);
  EXPECT_DOUBLE_EQ(kernelFlops(kernels[4]), 2 * head);
}

TEST(PlanProgramCost, KernelFlopsAndPhases) {
  mlir::MLIRContext context;
  llmc::prepareContext(context);
  const char *ir = R"mlir(
    exec.program @train_step kind "train_step" {
      %x = exec.buffer offset 0 : memref<4x64x128xf32>
      %w = exec.buffer offset 131072 name "w" category "param" : memref<128x256xf32>
      %y = exec.buffer offset 262144 : memref<4x64x256xf32>
      %q = exec.buffer offset 524288 : memref<2x64x4x32xf32>
      %o = exec.buffer offset 589824 : memref<2x64x4x32xf32>
      %l = exec.buffer offset 655360 : memref<2x4x64xf32>
      exec.kernel "matmul"(%x, %w : memref<4x64x128xf32>, memref<128x256xf32>) -> (%y : memref<4x64x256xf32>) {exec.action = "F0"}
      exec.kernel "attention"(%q, %q, %q : memref<2x64x4x32xf32>, memref<2x64x4x32xf32>, memref<2x64x4x32xf32>) -> (%o, %l : memref<2x64x4x32xf32>, memref<2x4x64xf32>) {causal = 1 : i64, exec.action = "F0", scale = 1.0 : f64}
      exec.kernel "matmul"(%x, %w : memref<4x64x128xf32>, memref<128x256xf32>) -> (%y : memref<4x64x256xf32>) {exec.action = "B0"}
      exec.kernel "fill"() -> (%y : memref<4x64x256xf32>) {value = 0.0 : f64}
    }
  )mlir";
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(ir, &context);
  ASSERT_TRUE(module);
  auto program = *module->getOps<llmc::exec::ProgramOp>().begin();
  std::vector<mlir::Operation *> kernels;
  program.walk([&](llmc::exec::KernelOp k) { kernels.push_back(k); });
  ASSERT_EQ(kernels.size(), 4u);
  EXPECT_DOUBLE_EQ(kernelFlops(kernels[0]), 2.0 * 4 * 64 * 256 * 128);
  // 4·B·H·T·T·d, halved for the causal mask.
  EXPECT_DOUBLE_EQ(kernelFlops(kernels[1]), 4.0 * 2 * 4 * 64 * 64 * 32 / 2);
  EXPECT_DOUBLE_EQ(kernelBytes(kernels[0]), 4.0 * (4 * 64 * 128 + 128 * 256 + 4 * 64 * 256));

  Cluster c;
  c.peakFlops = 1e12;
  c.memoryBandwidth = 1e20; // compute-bound: seconds = FLOPs / peak
  c.kernelOverhead = 1e-6;
  MeshShape mesh;
  ProgramCost cost = costProgram(program, c, mesh, 1.0);
  EXPECT_EQ(cost.microbatches, 1);
  EXPECT_EQ(cost.phase('F').kernels, 2);
  EXPECT_EQ(cost.phase('B').kernels, 1);
  EXPECT_EQ(cost.phase('S').kernels, 1); // the fill outside any microbatch
  EXPECT_NEAR(cost.phase('B').computeSeconds, 2.0 * 4 * 64 * 256 * 128 / 1e12 + 1e-6, 1e-15);
  // fp32 matmuls at half the peak on tensor-core devices.
  ProgramCost tf32 = costProgram(program, c, mesh, 0.5);
  EXPECT_NEAR(tf32.phase('B').computeSeconds, 2 * 2.0 * 4 * 64 * 256 * 128 / 1e12 + 1e-6, 1e-15);
}

TEST(PlanSchedule, SimulationWithDurationsMatchesUnitCosts) {
  llmc::pipeline::Spec spec;
  spec.stages = 4;
  spec.microbatches = 8;
  std::string error;
  auto schedule = llmc::pipeline::buildSchedule(spec, error);
  ASSERT_TRUE(error.empty()) << error;
  auto unit = llmc::pipeline::simulate(spec, schedule);
  auto timed = llmc::pipeline::simulate(spec, schedule, [](int, const llmc::pipeline::Action &a) {
    return a.phase == llmc::pipeline::Phase::Forward ? 3.0 : 6.0;
  });
  EXPECT_DOUBLE_EQ(timed.makespan, 3 * unit.makespan);
  EXPECT_DOUBLE_EQ(timed.bubble, unit.bubble);
  EXPECT_NEAR(unit.bubble, 3.0 / 11, 1e-12); // (p − 1)/(m + p − 1)
}

TEST(PlanSchedule, BubbleAsPublished) {
  // Narayanan et al. 2021, section 2.2: the bubble over the ideal time is
  // (p − 1)/m under 1F1B and (1/v)·(p − 1)/m interleaved over v chunks
  // per stage. The planner runs the schedule with each chunk's forward and
  // backward at 1/v of the stage's (Compose.cpp); with uniform stages and
  // no transfers that must give the formula. The layouts of Table 1's
  // pipelined runs (examples/sc21/run_table_1.sh of Megatron-LM):
  // (p, m, v) for 39.1B, 76.1B, 145.6B, 310.1B and 529.6B.
  struct Row {
    int p, m, v;
  };
  for (Row row : {Row{2, 12, 1}, Row{4, 28, 3}, Row{8, 48, 2}, Row{16, 144, 2}, Row{35, 280, 3}}) {
    llmc::pipeline::Spec spec;
    spec.kind = row.v > 1 ? llmc::pipeline::Kind::Interleaved : llmc::pipeline::Kind::OneFOneB;
    spec.stages = row.p;
    spec.microbatches = row.m;
    spec.virtualStages = row.v;
    std::string error;
    auto schedule = llmc::pipeline::buildSchedule(spec, error);
    ASSERT_TRUE(error.empty()) << error;
    double F = 1, B = 2, v = row.v;
    auto stats =
        llmc::pipeline::simulate(spec, schedule, [&](int, const llmc::pipeline::Action &a) {
          return (a.phase == llmc::pipeline::Phase::Forward ? F : B) / v;
        });
    double ideal = row.m * (F + B);
    EXPECT_NEAR((stats.makespan - ideal) / ideal, (row.p - 1.0) / (v * row.m), 1e-12)
        << "p " << row.p << " m " << row.m << " v " << row.v;
  }
}

Request tinyRequest() {
  Request r;
  r.model.family = "gpt2";
  r.model.preset = "tiny";
  r.cluster.name = "test";
  r.cluster.devices = 2;
  r.cluster.nodeSize = 2;
  r.cluster.memoryBytes = 1e9;
  r.cluster.peakFlops = 1e11;
  r.cluster.memoryBandwidth = 1e10;
  r.cluster.intraBandwidth = r.cluster.interBandwidth = 1e9;
  r.globalBatch = 8;
  r.precision = "fp32";
  r.target = "cpu"; // CPU ranks: the roofline of a device without a wave model
  r.fp32MatmulScale = 1;
  return r;
}

TEST(PlanCompose, MemoryNearTheCompiledPlan) {
  // One-stage layouts compose from the probes within a few percent of the
  // compiler's own plan of the whole model (docs/planner.md has the
  // distribution over every layout of two models).
  Request r = tinyRequest();
  for (int64_t zero : {0, 1, 3}) {
    Layout l;
    l.dp = 2;
    l.zero = zero;
    l.microbatchSize = 2;
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

TEST(PlanSearch, RanksFittingLayoutsAndExplainsTheRest) {
  Request r = tinyRequest();
  Result result;
  std::string error;
  ASSERT_TRUE(runPlan(r, 2, result, error)) << error;
  ASSERT_FALSE(result.ranked.empty());
  for (size_t i = 1; i < result.ranked.size(); ++i)
    EXPECT_LE(result.ranked[i - 1].stepSeconds, result.ranked[i].stepSeconds);
  for (const Prediction &p : result.ranked) {
    EXPECT_LE(p.memoryBytes, r.cluster.memoryBytes);
    EXPECT_EQ(p.layout.tp * p.layout.pp * p.layout.dp, 2);
    EXPECT_EQ(p.layout.dp * p.layout.microbatchSize * p.layout.microbatches, 8);
    EXPECT_GT(p.mfu, 0);
    EXPECT_LT(p.mfu, 1);
  }
  // A device too small for anything: nothing fits, and each family says so.
  r.cluster.memoryBytes = 1e5;
  Result none;
  ASSERT_TRUE(runPlan(r, 0, none, error)) << error;
  EXPECT_TRUE(none.ranked.empty());
  bool saysSo = false;
  for (const Rejected &why : none.rejected)
    saysSo |= why.reason.find("does not fit") != std::string::npos;
  EXPECT_TRUE(saysSo);
}

TEST(PlanSearch, ConfirmsTheRowsShownAndEachFamilysBest) {
  // Confirming a feature combination is a compile; the ranking does not
  // depend on how many rows are confirmed, only the compile count does.
  Request r = tinyRequest();
  r.cluster.devices = r.cluster.nodeSize = 4;
  r.shownRows = 1;
  Result few, all;
  std::string error;
  ASSERT_TRUE(runPlan(r, 0, few, error)) << error;
  r.shownRows = 100000;
  ASSERT_TRUE(runPlan(r, 0, all, error)) << error;
  ASSERT_EQ(few.ranked.size(), all.ranked.size());
  ASSERT_GT(all.ranked.size(), 8u);
  for (size_t i = 0; i < all.ranked.size(); ++i)
    EXPECT_EQ(few.ranked[i].layout.label(), all.ranked[i].layout.label());
  EXPECT_LT(few.probesCompiled, all.probesCompiled);
  // Each family's best is confirmed either way: "worse by" names the same rows.
  auto worseBy = [](const Result &result) {
    std::vector<std::string> lines;
    for (const Rejected &why : result.rejected)
      if (why.reason.find("worse by") != std::string::npos)
        lines.push_back(why.family + ": " + why.reason);
    return lines;
  };
  EXPECT_FALSE(worseBy(all).empty());
  EXPECT_EQ(worseBy(few), worseBy(all));
}

TEST(PlanSearch, VirtualStagesAsGiven) {
  // Six layers on two stages: three per stage, so the default chunk
  // counts (2, 4) interleave nothing, and --virtual-stages 3 (Megatron-LM's
  // --num-layers-per-virtual-pipeline-stage 1 here) offers exactly that.
  Request r = tinyRequest();
  r.model.overrides = {"n_layer=6"};
  r.onlyPp = {2};
  r.onlyZero = {0};
  r.onlyRecompute = {"none"};
  r.onlySchedule = {"interleaved"};
  r.microbatchSizes = {1};
  Result plain, three;
  std::string error;
  ASSERT_TRUE(runPlan(r, 0, plain, error)) << error;
  EXPECT_TRUE(plain.ranked.empty());
  r.onlyVirtualStages = {3};
  ASSERT_TRUE(runPlan(r, 0, three, error)) << error;
  ASSERT_FALSE(three.ranked.empty());
  for (const Prediction &p : three.ranked) {
    EXPECT_EQ(p.layout.schedule, "interleaved");
    EXPECT_EQ(p.layout.virtualStages, 3) << p.layout.label();
    EXPECT_NE(p.layout.compileFlags(r).find("--virtual-stages 3"), std::string::npos);
  }
  r.onlyVirtualStages = {1};
  EXPECT_NE(validate(r).find("--virtual-stages: 1"), std::string::npos) << validate(r);
}

} // namespace

namespace {

TEST(PlanOffload, CostByHand) {
  // 1e9 parameters under ZeRO-1 over 8 ranks of a DGX H100 node: fp32
  // gradients down (4 bytes each), bf16 parameters up (2), and the update
  // touching 30 bytes per parameter, each rank its eighth.
  Cluster c;
  std::string error;
  ASSERT_TRUE(parseCluster("dgx-h100:8", c, error)) << error;
  EXPECT_DOUBLE_EQ(c.hostLinkBandwidth, 64e9);      // PCIe Gen5 x16, each way
  EXPECT_DOUBLE_EQ(c.hostMemoryBandwidth, 614.4e9); // 2 × 8 channels DDR5-4800
  OffloadTraffic whole{4e9, 2e9, 30e9, 12e9, 6e9};
  OffloadTraffic t = whole.shard(1, 8);
  EXPECT_DOUBLE_EQ(t.downBytes, 0.5e9);
  EXPECT_DOUBLE_EQ(t.upBytes, 0.25e9);
  EXPECT_DOUBLE_EQ(t.updateBytes, 3.75e9);
  EXPECT_DOUBLE_EQ(t.hostBytes(), 1.5e9 + 0.75e9);
  // 0.75 GB over 64 GB/s, 3.75 GB over 614.4/8 GB/s (eight GPUs share the
  // host's memory): 11.71875 ms + 48.828125 ms.
  EXPECT_DOUBLE_EQ(offloadSeconds(t, c), 0.060546875);
  // ZeRO-0 keeps everything on every rank; nothing offloaded costs nothing.
  EXPECT_DOUBLE_EQ(whole.shard(0, 8).downBytes, 4e9);
  EXPECT_EQ(offloadSeconds(OffloadTraffic(), c), 0);
  // One device alone has the host's memory to itself.
  c.devices = 1;
  EXPECT_DOUBLE_EQ(offloadSeconds(whole, c), 6e9 / 64e9 + 30e9 / 614.4e9);
}

TEST(PlanOffload, TrafficOfACompiledLayout) {
  // GPT-2 tiny in fp32 (no master weights) on two ranks: each step moves
  // every gradient and parameter down (4 + 4 bytes per parameter) and the
  // updated parameter up (4 bytes); AdamW reads parameter, gradient, m and
  // v and writes parameter, m and v (28 bytes). ZeRO-1 halves it all.
  Request r = tinyRequest();
  r.cluster.hostLinkBandwidth = 8e9;
  r.cluster.hostMemoryBandwidth = 20e9;
  r.offload = {"optimizer"};
  r.onlyTp = {1};
  r.onlyPp = {1};
  r.onlyZero = {0, 1};
  r.onlyRecompute = {"none"};
  r.microbatchSizes = {4};
  Result result;
  std::string error;
  ASSERT_TRUE(runPlan(r, 0, result, error)) << error;
  ASSERT_EQ(result.ranked.size(), 2u); // z0 and z1
  double n = result.parameters;
  for (const Prediction &p : result.ranked) {
    ASSERT_TRUE(p.layout.offload);
    EXPECT_NE(p.layout.label().find(" off"), std::string::npos);
    EXPECT_NE(p.layout.compileFlags(r).find("--offload optimizer"), std::string::npos);
    double share = p.layout.zero >= 1 ? 0.5 : 1.0;
    const OffloadTraffic &t = p.offload;
    EXPECT_NEAR(t.downBytes / (8 * n * share), 1, 0.01) << p.layout.label();
    EXPECT_NEAR(t.upBytes / (4 * n * share), 1, 0.01) << p.layout.label();
    EXPECT_NEAR(t.updateBytes / (28 * n * share), 1, 0.01) << p.layout.label();
    EXPECT_NEAR(t.stateBytes / (8 * n * share), 1, 0.01) << p.layout.label();
    EXPECT_DOUBLE_EQ(p.offloadSeconds,
                     (t.downBytes + t.upBytes) / 8e9 + t.updateBytes / (20e9 / 2));
  }
  // Without a host link offloading cannot be priced.
  r.cluster.hostLinkBandwidth = 0;
  EXPECT_FALSE(runPlan(r, 0, result, error));
  EXPECT_NE(error.find("--host-bw"), std::string::npos) << error;
}

TEST(PlanOffload, SearchedWhereNothingFitsWithout) {
  // By default a layout is offloaded only where it does not fit without;
  // a device between the two arenas fits only the offloaded layout.
  Request r = tinyRequest();
  r.cluster.devices = r.cluster.nodeSize = 1;
  r.cluster.hostLinkBandwidth = 8e9;
  r.cluster.hostMemoryBandwidth = 20e9;
  r.onlyRecompute = {"none"};
  r.microbatchSizes = {8};
  Result plain;
  std::string error;
  r.offload = {"none", "optimizer"};
  ASSERT_TRUE(runPlan(r, 0, plain, error)) << error;
  ASSERT_EQ(plain.ranked.size(), 2u);
  double without = 0, with = 0;
  for (const Prediction &p : plain.ranked)
    (p.layout.offload ? with : without) = p.memoryBytes;
  ASSERT_LT(with, without);
  r.offload.clear();
  r.cluster.memoryBytes = (with + without) / 2;
  Result result;
  ASSERT_TRUE(runPlan(r, 0, result, error)) << error;
  // Both ways of offloading fit where the plain layout does not (the
  // activations' bytes exceed the optimizer's here).
  ASSERT_EQ(result.ranked.size(), 2u);
  for (const Prediction &p : result.ranked)
    EXPECT_TRUE(p.layout.offload != p.layout.offloadActivations) << p.layout.label();
  ASSERT_EQ(result.offloadOnly.size(), 1u);
  EXPECT_NE(result.offloadOnly[0].reason.find(
                "fits only with --offload optimizer or --offload activations"),
            std::string::npos)
      << result.offloadOnly[0].reason;
  // Where the layout fits, the default does not offload it.
  r.cluster.memoryBytes = 1e9;
  Result roomy;
  ASSERT_TRUE(runPlan(r, 0, roomy, error)) << error;
  ASSERT_EQ(roomy.ranked.size(), 1u);
  for (const Prediction &p : roomy.ranked)
    EXPECT_FALSE(p.layout.offload) << p.layout.label();
}

// --offload activations in the planner: its copies are read from the
// probe's program (every saved value down and back up, each microbatch)
// and priced at the host link, exposed; a pipeline is never offered it.
TEST(PlanOffload, ActivationsPricedByTheirCopies) {
  Request r = tinyRequest();
  r.cluster.hostLinkBandwidth = 8e9;
  r.offload = {"activations"};
  r.onlyRecompute = {"none", "full"};
  r.microbatchSizes = {4, 2};
  Result result;
  std::string error;
  ASSERT_TRUE(runPlan(r, 0, result, error)) << error;
  ASSERT_FALSE(result.ranked.empty());
  for (const Prediction &p : result.ranked) {
    const Layout &l = p.layout;
    EXPECT_TRUE(l.offloadActivations && !l.offload) << l.label();
    EXPECT_EQ(l.pp, 1) << l.label();
    EXPECT_NE(l.label().find(" act-off"), std::string::npos);
    EXPECT_NE(l.compileFlags(r).find("--offload activations"), std::string::npos);
    // Each saved byte crosses twice per microbatch: the host holds one
    // microbatch's, so the copies are 2 x host bytes x microbatches.
    const OffloadTraffic &t = p.offload;
    EXPECT_GT(t.activationHostBytes, 0) << l.label();
    EXPECT_NEAR(t.activationCopyBytes / (2 * t.activationHostBytes * l.microbatches), 1, 0.01)
        << l.label();
    EXPECT_DOUBLE_EQ(p.activationOffloadSeconds, t.activationCopyBytes / 8e9);
    EXPECT_DOUBLE_EQ(p.offloadSeconds, p.activationOffloadSeconds);
  }
  // The host's memory rate is not needed (no update runs there); the link is.
  r.cluster.hostLinkBandwidth = 0;
  EXPECT_FALSE(runPlan(r, 0, result, error));
  EXPECT_NE(error.find("--offload activations: the cluster needs --host-bw ("), std::string::npos)
      << error;
}

// Against recomputation: over a fast link, keeping every layer's values in
// host memory costs less than recomputing them in full; over a slow one,
// more. The price, not a fixed order, ranks them.
TEST(PlanOffload, ActivationsRankedAgainstRecomputation) {
  Request r = tinyRequest();
  r.cluster.devices = r.cluster.nodeSize = 1;
  r.offload = {"none", "activations"};
  r.onlyRecompute = {"none", "full"};
  r.microbatchSizes = {8};
  auto fastest = [&](double link, std::string &label) {
    r.cluster.hostLinkBandwidth = link;
    Result result;
    std::string error;
    ASSERT_TRUE(runPlan(r, 0, result, error)) << error;
    double offloaded = 0, full = 0;
    for (const Prediction &p : result.ranked) {
      if (p.layout.offloadActivations && p.layout.recompute == "none")
        offloaded = p.stepSeconds;
      if (!p.layout.offloadActivations && p.layout.recompute == "full")
        full = p.stepSeconds;
    }
    ASSERT_GT(offloaded, 0);
    ASSERT_GT(full, 0);
    label = offloaded < full ? "offload" : "full";
  };
  std::string fast, slow;
  fastest(1e12, fast);
  fastest(1e8, slow);
  EXPECT_EQ(fast, "offload");
  EXPECT_EQ(slow, "full");
}

// A device that only the offloaded activations fit: every other layout is
// left out, and --explain says what it needs without.
TEST(PlanOffload, FitsOnlyWithActivationsOffloaded) {
  Request r = tinyRequest();
  r.cluster.devices = r.cluster.nodeSize = 1;
  r.cluster.hostLinkBandwidth = 8e9;
  r.offload = {"none", "activations"};
  r.onlyRecompute = {"none"};
  r.microbatchSizes = {8};
  Result both;
  std::string error;
  ASSERT_TRUE(runPlan(r, 0, both, error)) << error;
  ASSERT_EQ(both.ranked.size(), 2u);
  double with = 0, without = 0;
  for (const Prediction &p : both.ranked)
    (p.layout.offloadActivations ? with : without) = p.memoryBytes;
  ASSERT_LT(with, without);
  r.cluster.memoryBytes = (with + without) / 2;
  Result result;
  ASSERT_TRUE(runPlan(r, 0, result, error)) << error;
  ASSERT_EQ(result.ranked.size(), 1u);
  EXPECT_TRUE(result.ranked[0].layout.offloadActivations);
  ASSERT_EQ(result.offloadOnly.size(), 1u);
  EXPECT_NE(result.offloadOnly[0].reason.find("fits only with --offload activations:"),
            std::string::npos)
      << result.offloadOnly[0].reason;
}

} // namespace
