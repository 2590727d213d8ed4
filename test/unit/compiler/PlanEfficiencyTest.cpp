//===- PlanEfficiencyTest.cpp - llmc plan's kernel prices and its MFU ------===//
//
// The GPU efficiency model against numbers worked out by hand: tile and
// wave quantization, the cap at the measured GEMM rate and at the peak,
// the measured attention rates, bandwidth-bound kernels, the fused head's
// chunked GEMMs, unfused attention; calibration files; and the bound every
// plan's MFU must respect, over every preset family and the search's
// extremes.
//
//===----------------------------------------------------------------------===//

#include "compiler/Compiler.h"
#include "compiler/plan/Calibration.h"
#include "compiler/plan/Efficiency.h"
#include "compiler/plan/KernelCost.h"
#include "compiler/plan/Planner.h"
#include "dialects/Exec/ExecDialect.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace llmc::plan;

namespace {

/// An H100-like device: 132 SMs, the three large tiles, 790 TF/s in full
/// waves against a 989 TF/s peak.
Efficiency hopper() {
  Efficiency e;
  e.sms = 132;
  e.tiles = largeGemmTiles();
  e.gemmFlops = 790e12;
  return e;
}

TEST(PlanEfficiency, WaveQuantizationByHand) {
  Efficiency e = hopper();
  // GPT-2 124M's attention projection at B·T = 16384: 128×256 tiles make
  // 128·3 = 384 tiles, 3 waves of 132 (396 slots): 384/396 busy. The other
  // tiles fit no better, so the first is kept.
  WaveFit proj = bestWaveFit(e, {1, 16384, 768, 768});
  EXPECT_EQ(proj.tile.rows, 128);
  EXPECT_EQ(proj.tile.cols, 256);
  EXPECT_EQ(proj.tiles, 384);
  EXPECT_EQ(proj.waves, 3);
  EXPECT_DOUBLE_EQ(proj.efficiency, 384.0 / 396);
  // 2048×2304: 16·9 = 144 large tiles need 2 waves (264 slots, 55% busy);
  // 16·18 = 288 tiles of 128×128 fill 3 waves (396 slots): 288/396.
  WaveFit partial = bestWaveFit(e, {1, 2048, 2304, 2304});
  EXPECT_EQ(partial.tile.rows, 128);
  EXPECT_EQ(partial.tile.cols, 128);
  EXPECT_EQ(partial.tiles, 288);
  EXPECT_EQ(partial.waves, 3);
  EXPECT_DOUBLE_EQ(partial.efficiency, 288.0 / 396);
  // One 100×100 output: one 128×128 tile in a wave of 132.
  EXPECT_DOUBLE_EQ(bestWaveFit(e, {1, 100, 100, 64}).efficiency, 100.0 * 100 / (132 * 128 * 128));
  // A batch of 4 one-tile products: 4 tiles in one wave.
  EXPECT_DOUBLE_EQ(bestWaveFit(e, {4, 128, 128, 64}).efficiency, 4.0 / 132);
  // 132 tiles of 128×256 exactly: one full wave.
  EXPECT_DOUBLE_EQ(bestWaveFit(e, {1, 132 * 128, 256, 1024}).efficiency, 1.0);

  // Seconds: the product's FLOPs at the full-wave rate over the share of
  // the waves that computes it.
  EXPECT_DOUBLE_EQ(gemmSeconds(e, 989e12, {1, 132 * 128, 256, 1024}),
                   2.0 * 132 * 128 * 256 * 1024 / 790e12);
  EXPECT_DOUBLE_EQ(gemmSeconds(e, 989e12, {1, 2048, 2304, 2304}),
                   2.0 * 2048 * 2304 * 2304 / (790e12 * 288 / 396));
  // fp32 on the TF32 path: half the rate.
  EXPECT_DOUBLE_EQ(gemmSeconds(e, 989e12, {1, 132 * 128, 256, 1024}, 0.5),
                   2 * 2.0 * 132 * 128 * 256 * 1024 / 790e12);
}

TEST(PlanEfficiency, CappedAtTheMeasuredRateAndThePeak) {
  Efficiency e = hopper();
  GemmShape full{1, 132 * 128, 256, 4096};
  double flops = 2.0 * full.m * full.n * full.k;
  // No shape runs faster than the measured large-GEMM rate...
  EXPECT_DOUBLE_EQ(flops / gemmSeconds(e, 989e12, full), 790e12);
  // ...nor than the peak, whatever a measurement says.
  e.gemmFlops = 2000e12;
  EXPECT_DOUBLE_EQ(flops / gemmSeconds(e, 989e12, full), 989e12);
  // Without a measurement: the peak; without SMs: no quantization.
  e.gemmFlops = 0;
  e.sms = 0;
  EXPECT_DOUBLE_EQ(gemmSeconds(e, 1e12, {1, 3, 5, 7}), 2.0 * 3 * 5 * 7 / 1e12);
  EXPECT_DOUBLE_EQ(bestWaveFit(e, {1, 3, 5, 7}).efficiency, 1.0);
}

TEST(PlanEfficiency, AttentionAtTheMeasuredRate) {
  Efficiency e;
  e.attention = {{128, 1024, 280e12}, {128, 4096, 480e12}, {64, 1024, 200e12}};
  const double peak = 989e12;
  // Linear in log2(seq) between measurements, held beyond them.
  EXPECT_DOUBLE_EQ(attentionRate(e, peak, 128, 2048), 380e12);
  EXPECT_DOUBLE_EQ(attentionRate(e, peak, 128, 1024), 280e12);
  EXPECT_DOUBLE_EQ(attentionRate(e, peak, 128, 512), 280e12);
  EXPECT_DOUBLE_EQ(attentionRate(e, peak, 128, 16384), 480e12);
  // The nearest measured head dim by ratio: 96 is nearer 128, 80 nearer 64.
  EXPECT_DOUBLE_EQ(attentionRate(e, peak, 96, 4096), 480e12);
  EXPECT_DOUBLE_EQ(attentionRate(e, peak, 80, 4096), 200e12);
  // Never above the peak; nothing measured: the peak.
  EXPECT_DOUBLE_EQ(attentionRate(e, 300e12, 128, 4096), 300e12);
  EXPECT_DOUBLE_EQ(attentionRate(Efficiency(), peak, 128, 4096), peak);

  // The fastest priced rate bounds MFU: here the GEMMs'.
  Efficiency both = hopper();
  both.attention = e.attention;
  EXPECT_DOUBLE_EQ(achievableFraction(both, peak), 790e12 / peak);
  both.attention.push_back({256, 8192, 900e12});
  EXPECT_DOUBLE_EQ(achievableFraction(both, peak), 900e12 / peak);
  EXPECT_DOUBLE_EQ(achievableFraction(Efficiency(), peak), 1.0);
}

TEST(PlanEfficiency, RefusesConstantsThatAreNotRates) {
  Efficiency e = hopper();
  EXPECT_EQ(validate(e), "");
  e.tiles.clear();
  EXPECT_NE(validate(e).find("needs its GEMM tiles"), std::string::npos);
  e = hopper();
  e.tiles.push_back({0, 128});
  EXPECT_NE(validate(e).find("is not positive"), std::string::npos);
  e = hopper();
  e.attention = {{128, 1024, 0}};
  EXPECT_NE(validate(e).find("attention rate"), std::string::npos);
}

/// The kernels of the exec module `ir`, in order.
std::vector<mlir::Operation *> kernelsOf(mlir::MLIRContext &context, const char *ir,
                                         mlir::OwningOpRef<mlir::ModuleOp> &module) {
  llmc::prepareContext(context);
  module = mlir::parseSourceString<mlir::ModuleOp>(ir, &context);
  std::vector<mlir::Operation *> kernels;
  if (module)
    module->walk([&](llmc::exec::KernelOp k) { kernels.push_back(k); });
  return kernels;
}

Cluster hopperCluster() {
  Cluster c;
  c.peakFlops = 989e12;
  c.memoryBandwidth = 3e12;
  c.kernelOverhead = 2e-6;
  c.efficiency = hopper();
  return c;
}

// A sliding window W < T scores W·T − W(W−1)/2 pairs, not T²/2.
TEST(PlanKernelCost, SlidingWindowCountsItsPairs) {
  const char *ir = R"mlir(
    exec.program @train_step kind "train_step" {
      %q = exec.buffer offset 0 : memref<2x1024x8x64xbf16>
      %l = exec.buffer offset 0 : memref<2x8x1024xf32>
      exec.kernel "attention"(%q, %q, %q : memref<2x1024x8x64xbf16>, memref<2x1024x8x64xbf16>, memref<2x1024x8x64xbf16>) -> (%q, %l : memref<2x1024x8x64xbf16>, memref<2x8x1024xf32>) {causal = 1 : i64, scale = 0.125 : f64, window = 256 : i64}
      exec.kernel "attention"(%q, %q, %q : memref<2x1024x8x64xbf16>, memref<2x1024x8x64xbf16>, memref<2x1024x8x64xbf16>) -> (%q, %l : memref<2x1024x8x64xbf16>, memref<2x8x1024xf32>) {causal = 1 : i64, scale = 0.125 : f64, window = 4096 : i64}
    }
  )mlir";
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::vector<mlir::Operation *> k = kernelsOf(context, ir, module);
  ASSERT_EQ(k.size(), 2u);
  const double perPair = 4.0 * 2 * 8 * 64, pairs = 256.0 * 1024 - 256.0 * 255 / 2;
  EXPECT_DOUBLE_EQ(kernelFlops(k[0]), perPair * pairs);
  // A window past the sequence is plain causal attention.
  EXPECT_DOUBLE_EQ(kernelFlops(k[1]), perPair * 1024 * 1024 / 2);
}

TEST(PlanKernelCost, MoeExchangeCopiesAreMemoryBound) {
  // Pack, unpack, regroup and ungroup only move rows: no FLOPs, priced by
  // the bytes of their operands (the kept counts and offsets included).
  const char *ir = R"mlir(
    exec.program @train_step kind "train_step" {
      %xs = exec.buffer offset 0 : memref<4096x512xbf16>
      %off = exec.buffer offset 0 : memref<9xi32>
      %p = exec.buffer offset 0 : memref<6144x512xbf16>
      %k = exec.buffer offset 0 : memref<2x4xi32>
      %l = exec.buffer offset 0 : memref<5xi32>
      exec.kernel "moe_pack"(%xs, %off : memref<4096x512xbf16>, memref<9xi32>) -> (%p, %k : memref<6144x512xbf16>, memref<2x4xi32>) {capacity = 768 : i64}
      exec.kernel "moe_unpack"(%p, %off, %k : memref<6144x512xbf16>, memref<9xi32>, memref<2x4xi32>) -> (%xs : memref<4096x512xbf16>)
      exec.kernel "moe_regroup"(%p, %k : memref<6144x512xbf16>, memref<2x4xi32>) -> (%p, %l : memref<6144x512xbf16>, memref<5xi32>)
      exec.kernel "moe_ungroup"(%p, %k : memref<6144x512xbf16>, memref<2x4xi32>) -> (%p : memref<6144x512xbf16>)
    }
  )mlir";
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::vector<mlir::Operation *> k = kernelsOf(context, ir, module);
  ASSERT_EQ(k.size(), 4u);
  const double rows = 4096.0 * 512 * 2, slots = 6144.0 * 512 * 2;
  const std::vector<double> bytes = {rows + 36 + slots + 32, slots + 36 + 32 + rows,
                                     slots + 32 + slots + 20, slots + 32 + slots};
  for (size_t i = 0; i < k.size(); ++i) {
    EXPECT_EQ(kernelFlops(k[i]), 0.0) << i;
    EXPECT_EQ(kernelModelFlops(k[i]), 0.0) << i;
    EXPECT_DOUBLE_EQ(kernelBytes(k[i]), bytes[i]) << i;
  }
}

TEST(PlanKernelCost, EachKindAtItsRate) {
  const char *ir = R"mlir(
    exec.program @train_step kind "train_step" {
      %x = exec.buffer offset 0 : memref<16x1024x768xbf16>
      %w = exec.buffer offset 0 : memref<768x2304xbf16>
      %y = exec.buffer offset 0 : memref<16x1024x2304xbf16>
      %q = exec.buffer offset 0 : memref<16x1024x12x64xbf16>
      %l = exec.buffer offset 0 : memref<16x12x1024xf32>
      %h = exec.buffer offset 0 : memref<16x1024x768xbf16>
      %v = exec.buffer offset 0 : memref<50304x768xbf16>
      %t = exec.buffer offset 0 : memref<16x1024xi32>
      %s = exec.buffer offset 0 : memref<f32>
      %c = exec.buffer offset 0 : memref<4096x50304xf32>
      exec.kernel "matmul"(%x, %w : memref<16x1024x768xbf16>, memref<768x2304xbf16>) -> (%y : memref<16x1024x2304xbf16>)
      exec.kernel "add"(%y, %y : memref<16x1024x2304xbf16>, memref<16x1024x2304xbf16>) -> (%y : memref<16x1024x2304xbf16>)
      exec.kernel "attention"(%q, %q, %q : memref<16x1024x12x64xbf16>, memref<16x1024x12x64xbf16>, memref<16x1024x12x64xbf16>) -> (%q, %l : memref<16x1024x12x64xbf16>, memref<16x12x1024xf32>) {causal = 1 : i64, scale = 0.125 : f64}
      exec.kernel "attention_grad"(%q, %q, %q, %q, %l, %q : memref<16x1024x12x64xbf16>, memref<16x1024x12x64xbf16>, memref<16x1024x12x64xbf16>, memref<16x1024x12x64xbf16>, memref<16x12x1024xf32>, memref<16x1024x12x64xbf16>) -> (%q, %q, %q : memref<16x1024x12x64xbf16>, memref<16x1024x12x64xbf16>, memref<16x1024x12x64xbf16>) {causal = 1 : i64, scale = 0.125 : f64}
      exec.kernel "linear_cross_entropy_train"(%h, %v, %t, %s : memref<16x1024x768xbf16>, memref<50304x768xbf16>, memref<16x1024xi32>, memref<f32>) -> (%s, %h, %v, %c : memref<f32>, memref<16x1024x768xbf16>, memref<50304x768xbf16>, memref<4096x50304xf32>) {chunk_rows = 4096 : i64, transpose_b = 1 : i64}
    }
  )mlir";
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::vector<mlir::Operation *> k = kernelsOf(context, ir, module);
  ASSERT_EQ(k.size(), 5u);
  Cluster c = hopperCluster();

  // The QKV product, M = 16·1024 folded rows: 128·9 = 1152 tiles of
  // 128×256, 9 waves of 132 (1188 slots).
  std::vector<GemmShape> qkv = kernelGemms(k[0]);
  ASSERT_EQ(qkv.size(), 1u);
  EXPECT_EQ(qkv[0].m, 16384);
  EXPECT_EQ(qkv[0].n, 2304);
  EXPECT_EQ(qkv[0].k, 768);
  double qkvFlops = 2.0 * 16384 * 2304 * 768;
  EXPECT_DOUBLE_EQ(kernelSeconds(k[0], c, 0.5), qkvFlops / (790e12 * 1152 / 1188) + 2e-6);
  EXPECT_DOUBLE_EQ(kernelModelFlops(k[0]), qkvFlops);

  // An elementwise add: its bytes (two inputs, one output) at the bandwidth.
  double addBytes = 3.0 * 16384 * 2304 * 2;
  EXPECT_DOUBLE_EQ(kernelSeconds(k[1], c, 0.5), addBytes / 3e12 + 2e-6);
  EXPECT_EQ(kernelModelFlops(k[1]), 0);

  // Attention at the measured rate for D = 64, T = 1024. Its backward
  // computes 2.5× the forward and counts as 2× in model FLOPs.
  double forward = 4.0 * 16 * 12 * 1024 * 1024 * 64 / 2;
  EXPECT_DOUBLE_EQ(kernelFlops(k[2]), forward);
  EXPECT_DOUBLE_EQ(kernelModelFlops(k[3]), 2 * forward);
  c.efficiency.attention = {{64, 1024, 300e12}};
  EXPECT_DOUBLE_EQ(kernelSeconds(k[2], c, 0.5), forward / 300e12 + 2e-6);
  EXPECT_DOUBLE_EQ(kernelSeconds(k[3], c, 0.5), 2.5 * forward / 300e12 + 2e-6);

  // The fused head: 4 chunks of 4096 rows, each its logits [4096, V] over
  // D, dh [4096, D] over V and dw [V, D] over the chunk; then its row
  // passes over the bf16 logits (a read, and the gradient's read and write).
  std::vector<GemmShape> head = kernelGemms(k[4]);
  ASSERT_EQ(head.size(), 12u);
  EXPECT_EQ(head[0].m, 4096);
  EXPECT_EQ(head[0].n, 50304);
  EXPECT_EQ(head[0].k, 768);
  EXPECT_EQ(head[1].n, 768);
  EXPECT_EQ(head[1].k, 50304);
  EXPECT_EQ(head[2].m, 50304);
  EXPECT_EQ(head[2].k, 4096);
  double gemms = 0;
  for (const GemmShape &g : head)
    gemms += gemmSeconds(c.efficiency, c.peakFlops, g);
  double rowPasses = 16384.0 * 50304 * 2 * 3 / 3e12;
  EXPECT_DOUBLE_EQ(kernelSeconds(k[4], c, 0.5), gemms + rowPasses + 2e-6);
  EXPECT_DOUBLE_EQ(kernelModelFlops(k[4]), 3 * 2.0 * 16384 * 50304 * 768);

  // Without flash attention every T×T matrix passes through memory: the
  // forward writes the scores, the softmax reads them and writes the
  // probabilities, the second product reads them.
  c.efficiency.unfusedAttention = true;
  double pass = 16.0 * 12 * 1024 * 1024 * 2 / 3e12;
  auto product = [&](int64_t m, int64_t n, int64_t kk) {
    return std::max(gemmSeconds(c.efficiency, c.peakFlops, {16 * 12, m, n, kk}), pass);
  };
  EXPECT_DOUBLE_EQ(kernelSeconds(k[2], c, 0.5),
                   product(1024, 1024, 64) + 2 * pass + product(1024, 64, 1024) + 2e-6);
  c.efficiency.attentionDropout = true;
  EXPECT_DOUBLE_EQ(kernelSeconds(k[2], c, 0.5), product(1024, 1024, 64) + 2 * pass +
                                                     2.5 * pass + product(1024, 64, 1024) +
                                                     2e-6);
}

TEST(PlanCalibration, ReplacesTheDevice) {
  Cluster c;
  std::string error;
  ASSERT_TRUE(parseCluster("dgx-h200:8", c, error)) << error;
  const char *text = R"json({"kind": "llmc-gpu-calibration", "schema": 1, "device": "GPU X",
    "sms": 100, "bandwidth_gbs": 2000, "kernel_overhead_us": 0, "memory_bytes": 1e10,
    "gemm": {"large_tflops": 500, "tiles": [[64, 64]]},
    "attention": [{"head_dim": 64, "seq": 1024, "tflops": 250}]})json";
  ASSERT_TRUE(applyCalibration(text, "x.json", c, error)) << error;
  EXPECT_EQ(c.deviceName, "GPU X");
  EXPECT_EQ(c.efficiency.sms, 100);
  ASSERT_EQ(c.efficiency.tiles.size(), 1u);
  EXPECT_EQ(c.efficiency.tiles[0].rows, 64);
  EXPECT_DOUBLE_EQ(c.efficiency.gemmFlops, 500e12);
  EXPECT_DOUBLE_EQ(c.memoryBandwidth, 2000e9);
  EXPECT_DOUBLE_EQ(c.memoryBytes, 1e10);
  EXPECT_EQ(c.kernelOverhead, 0);
  EXPECT_DOUBLE_EQ(c.peakFlops, 989e12); // the preset's: not in the file
  EXPECT_EQ(c.devices, 8);               // the cluster stays
  ASSERT_EQ(c.efficiency.attention.size(), 1u);
  EXPECT_DOUBLE_EQ(c.efficiency.attention[0].flopsPerSecond, 250e12);

  // A refused file leaves the cluster as it was.
  Cluster before = c;
  EXPECT_FALSE(applyCalibration(R"({"kind": "llmc-gpu-calibration", "schema": 1, "device": "Y",
    "sms": 1.5})", "y.json", c, error));
  EXPECT_EQ(error, "calibration y.json: sms: expected a positive whole number");
  EXPECT_EQ(c.deviceName, before.deviceName);
  EXPECT_FALSE(applyCalibration("[1, 2]", "z.json", c, error));
  EXPECT_EQ(error, "calibration z.json: (top level): expected an object");
}

/// Plans `family`/`preset` on `cluster` for `batch` sequences and checks
/// that every layout's MFU is positive and at most what the device's
/// fastest priced rate allows.
void expectMfuWithinTheDevice(const std::string &family, const std::string &preset,
                              const std::string &cluster, int64_t batch) {
  SCOPED_TRACE(family + " " + preset + " on " + cluster + ", global batch " +
               std::to_string(batch));
  Request r;
  r.model.family = family;
  r.model.preset = preset;
  std::string error;
  ASSERT_TRUE(parseCluster(cluster, r.cluster, error)) << error;
  r.globalBatch = batch;
  r.microbatchSizes = {1, 8};
  Result result;
  ASSERT_TRUE(runPlan(r, 0, result, error)) << error;
  ASSERT_FALSE(result.ranked.empty());
  EXPECT_GT(result.achievableFraction, 0);
  EXPECT_LE(result.achievableFraction, 1);
  for (const Prediction &p : result.ranked) {
    EXPECT_GT(p.mfu, 0) << p.layout.label();
    EXPECT_LE(p.mfu, result.achievableFraction) << p.layout.label();
  }
}

TEST(PlanMfu, NeverAboveWhatTheDeviceWasMeasuredAt) {
  for (const char *preset : {"tiny", "124M", "350M", "774M", "1.5B"})
    expectMfuWithinTheDevice("gpt2", preset, "dgx-h100:8", 64);
  for (const char *preset : {"tiny", "1B"})
    expectMfuWithinTheDevice("llama", preset, "dgx-h100:8", 64);
  // Mixtures of experts: the experts' grouped GEMMs are model FLOPs too.
  expectMfuWithinTheDevice("mixtral", "tiny", "dgx-h100:8", 64);
  expectMfuWithinTheDevice("qwen2_moe", "tiny", "dgx-h100:8", 64);
  // The search's extremes: one GPU, one sequence, a huge batch, 1024 GPUs.
  expectMfuWithinTheDevice("llama", "1B", "dgx-h200:1", 8);
  expectMfuWithinTheDevice("gpt2", "124M", "dgx-h100:1", 1);
  expectMfuWithinTheDevice("gpt2", "124M", "dgx-a100:8", 65536);
  expectMfuWithinTheDevice("llama", "1B", "dgx-h100:1024", 1024);
  expectMfuWithinTheDevice("gpt2", "1.5B", "dgx-h100:1024", 65536);
}

/// A mixture of experts' model FLOPs count every routed copy once: the
/// experts' three GEMMs of N·k rows (forward, input and weight gradients)
/// beside the rest, as for a dense MLP of k experts' width.
TEST(PlanMfu, MixtureOfExpertsCountsTheRoutedExperts) {
  auto flopsOf = [](const std::string &family, std::vector<std::string> sets) {
    Request r;
    r.model.family = family;
    r.model.preset = "tiny";
    r.model.overrides = std::move(sets);
    std::string error;
    EXPECT_TRUE(parseCluster("dgx-h100:1", r.cluster, error)) << error;
    r.globalBatch = 8;
    r.microbatchSizes = {8};
    Result result;
    EXPECT_TRUE(runPlan(r, 0, result, error)) << error;
    return result.modelFlopsPerStep;
  };
  // Mixtral tiny (4 experts, top 2, width 176) against the same model with
  // one expert of width 352 (top 1): the same routed FLOPs per token but
  // for the router's [C, E] product.
  const double moe = flopsOf("mixtral", {});
  const double dense =
      flopsOf("mixtral", {"num_experts=1", "experts_per_token=1", "ffn_hidden=352"});
  EXPECT_NEAR(moe / dense, 1.0, 0.01);
}

} // namespace
