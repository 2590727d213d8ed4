//===- RecomputeBudgetTest.cpp - the recompute ladder and its search ------===//

#include "compiler/RecomputeBudget.h"
#include "compiler/Compiler.h"
#include "compiler/RecomputePrice.h"
#include "models/Models.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace mlir;

namespace {

TEST(RecomputeBudget, LadderGoesSelectiveThenFullFromTheFirstLayer) {
  std::vector<std::string> layers = {"h.0", "h.1", "h.2"};
  EXPECT_EQ(llmc::recomputeLevel(layers, 0), "");
  EXPECT_EQ(llmc::recomputeLevel(layers, 1), "h.0=selective");
  EXPECT_EQ(llmc::recomputeLevel(layers, 3), "h.0=selective,h.1=selective,h.2=selective");
  EXPECT_EQ(llmc::recomputeLevel(layers, 4), "h.0=full,h.1=selective,h.2=selective");
  EXPECT_EQ(llmc::recomputeLevel(layers, 6), "h.0=full,h.1=full,h.2=full");
}

TEST(RecomputeBudget, LadderOffloadsTheFirstLayersInputsLast) {
  std::vector<std::string> layers = {"h.0", "h.1", "h.2"};
  EXPECT_EQ(llmc::recomputeLevel(layers, 7), "h.0=full+offload,h.1=full,h.2=full");
  EXPECT_EQ(llmc::recomputeLevel(layers, 9), "h.0=full+offload,h.1=full+offload,h.2=full+offload");
}

// A layer keeping 8 MiB per microbatch, 5 MiB after selective
// recomputation (0.1 ms) and 0.5 MiB after full (2 ms): offloading its 8 MiB
// costs 2 · 8 MiB over the host link, each way once per microbatch.
llmc::LayerCosts layerByHand(const std::string &name) {
  llmc::LayerCosts layer;
  layer.name = name;
  layer.keptBytes = {8 << 20, 5 << 20, 512 << 10};
  layer.recomputeSeconds = {0, 1e-4, 2e-3};
  return layer;
}

TEST(RecomputePrice, OffloadCostsTwoCopiesPerMicrobatch) {
  llmc::PriceModel model{100e9, 2};
  llmc::LayerCosts layer = layerByHand("h.0");
  EXPECT_DOUBLE_EQ(llmc::offloadSeconds(8 << 20, model), 2.0 * (8 << 20) * 2 / 100e9);
  EXPECT_DOUBLE_EQ(llmc::choiceOf(layer, model, "full+offload").seconds,
                   2e-3 + 2.0 * (512 << 10) * 2 / 100e9);
  EXPECT_DOUBLE_EQ(llmc::choiceOf(layer, model, "selective").deviceBytes, 5 << 20);
  EXPECT_DOUBLE_EQ(llmc::choiceOf(layer, model, "offload").deviceBytes, 0);
  EXPECT_DOUBLE_EQ(llmc::choiceOf(layer, model, "").seconds, 0);
  // Without a host link only the recomputation modes are choices.
  EXPECT_EQ(llmc::layerChoices(layer, llmc::PriceModel{0, 1}).size(), 3u);
  EXPECT_EQ(llmc::layerChoices(layer, model).size(), 6u);
}

// A fast link (100 GB/s: 0.17 ms to move 8 MiB down and up) saves more
// bytes per second than selective recomputation (3 MiB for 0.1 ms):
// offloading comes first, and every layer is offloaded before anything is
// recomputed.
TEST(RecomputePrice, OffloadingWinsOverAFastLink) {
  std::vector<llmc::LayerCosts> layers = {layerByHand("h.0"), layerByHand("h.1")};
  auto ladder = llmc::pricedLadder(layers, llmc::PriceModel{100e9, 1});
  ASSERT_EQ(ladder.size(), 3u);
  EXPECT_EQ(llmc::layerModes(layers, ladder[1]), "h.0=offload");
  EXPECT_EQ(llmc::layerModes(layers, ladder[2]), "h.0=offload,h.1=offload");
}

// A slow link (1 GB/s: 16.8 ms for the same copies) loses to recomputing:
// selective, then full, for every layer from the first, and only at the
// end the input full recomputation keeps, offloaded (0.5 MiB costs 1 ms).
TEST(RecomputePrice, OffloadingLosesOverASlowLink) {
  std::vector<llmc::LayerCosts> layers = {layerByHand("h.0"), layerByHand("h.1")};
  llmc::PriceModel model{1e9, 1};
  auto ladder = llmc::pricedLadder(layers, model);
  ASSERT_EQ(ladder.size(), 7u);
  EXPECT_EQ(llmc::layerModes(layers, ladder[1]), "h.0=selective");
  EXPECT_EQ(llmc::layerModes(layers, ladder[2]), "h.0=selective,h.1=selective");
  EXPECT_EQ(llmc::layerModes(layers, ladder[4]), "h.0=full,h.1=full");
  EXPECT_EQ(llmc::layerModes(layers, ladder[5]), "h.0=full+offload,h.1=full");
  EXPECT_DOUBLE_EQ(llmc::planSeconds(layers, model, ladder[4]), 4e-3);
  // Without a host link the priced ladder is the fixed one.
  std::vector<std::string> names = {"h.0", "h.1"};
  auto fixed = llmc::pricedLadder(layers, llmc::PriceModel{0, 1});
  ASSERT_EQ(fixed.size(), 5u);
  for (size_t level = 0; level < fixed.size(); ++level)
    EXPECT_EQ(llmc::layerModes(layers, fixed[level]), llmc::recomputeLevel(names, level));
}

// Layers that differ: the one whose values cost least to offload per byte
// goes first, whatever its place; equal prices go to the earlier layer.
TEST(RecomputePrice, CheaperLayersFirstThenEarlierLayers) {
  std::vector<llmc::LayerCosts> layers = {layerByHand("h.0"), layerByHand("h.1"),
                                          layerByHand("h.2")};
  layers[2].recomputeSeconds = {0, 5e-5, 1e-3}; // h.2 recomputes twice as fast
  auto ladder = llmc::pricedLadder(layers, llmc::PriceModel{1e9, 1});
  EXPECT_EQ(llmc::layerModes(layers, ladder[1]), "h.2=selective");
  EXPECT_EQ(llmc::layerModes(layers, ladder[2]), "h.0=selective,h.2=selective");
  std::vector<std::string> parsed = llmc::parseLayerModes(layers, "h.2=full+offload,h.0=offload");
  EXPECT_EQ(parsed, (std::vector<std::string>{"offload", "none", "full+offload"}));
}

struct TinyModel {
  explicit TinyModel(int64_t layers = 3, int64_t rows = 0) {
    llmc::prepareContext(context);
    llvm::Expected<llmc::ModelConfig> config = llmc::presetConfig("gpt2", "tiny");
    EXPECT_TRUE(static_cast<bool>(config));
    config->nLayer = layers;
    if (rows)
      config->batchSize = rows;
    module = llmc::buildModel(&context, *config);
  }
  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

TEST(RecomputeBudget, LayersAreTheModelsBlocksInOrder) {
  TinyModel tiny;
  EXPECT_EQ(llmc::layerNames(*tiny.module), (std::vector<std::string>{"h.0", "h.1", "h.2"}));
}

// Against plans measured here: the budget between two levels' arenas
// chooses the upper one; one that fits without recomputation chooses none.
// Over a slow host link (1 MB/s) offloading never pays: the ladder's order.
TEST(RecomputeBudget, ChoosesTheCheapestLevelThatFits) {
  TinyModel tiny;
  std::vector<std::string> layers = llmc::layerNames(*tiny.module);
  llmc::CompileOptions options;
  options.hostBw = 0.001;
  std::vector<int64_t> arena;
  for (size_t level = 0; level <= 2 * layers.size(); ++level) {
    options.recomputeLayers = llmc::recomputeLevel(layers, level);
    FailureOr<int64_t> bytes = llmc::plannedArenaBytes(*tiny.module, options);
    ASSERT_TRUE(succeeded(bytes));
    arena.push_back(*bytes);
  }
  ASSERT_LT(arena[1], arena[0]);
  ASSERT_LT(arena[layers.size() + 1], arena[layers.size()]);

  options.recomputeLayers.clear();
  options.memoryBudgetBytes = arena[0];
  EXPECT_EQ(*llmc::chooseRecompute(*tiny.module, options), "");
  options.memoryBudgetBytes = arena[0] - 1;
  EXPECT_EQ(*llmc::chooseRecompute(*tiny.module, options), "h.0=selective");
  options.memoryBudgetBytes = arena[layers.size()] - 1;
  FailureOr<std::string> chosen = llmc::chooseRecompute(*tiny.module, options);
  ASSERT_TRUE(succeeded(chosen));
  EXPECT_EQ(chosen->substr(0, 8), "h.0=full");
  options.recomputeLayers = *chosen;
  EXPECT_LE(*llmc::plannedArenaBytes(*tiny.module, options), options.memoryBudgetBytes);
}

// Over a fast host link (1 TB/s) keeping a layer's values in host memory
// costs less than recomputing any of them: the budget that selective
// recomputation of the first layer would meet offloads it instead, and
// the choice's price is that layer's copies. On the CPU target's own
// link (a 15.1 GB/s memcpy) offloading still beats selective
// recomputation of this model; on the CUDA target's (PCIe, 64 GB/s,
// against an H100's recomputation) it loses.
TEST(RecomputeBudget, OffloadsInsteadOfRecomputingWhereTheLinkIsCheaper) {
  TinyModel tiny;
  std::vector<std::string> layers = llmc::layerNames(*tiny.module);
  llmc::CompileOptions options;
  FailureOr<int64_t> none = llmc::plannedArenaBytes(*tiny.module, options);
  ASSERT_TRUE(succeeded(none));
  options.memoryBudgetBytes = *none - 1;
  options.hostBw = 1000;
  llmc::RecomputeChoice priced;
  FailureOr<std::string> chosen = llmc::chooseRecompute(*tiny.module, options, "llmc", &priced);
  ASSERT_TRUE(succeeded(chosen));
  EXPECT_EQ(*chosen, "h.0=offload");
  EXPECT_EQ(priced.layers, *chosen);
  EXPECT_EQ(priced.price.substr(0, 12), "h.0=offload:");
  EXPECT_GT(priced.seconds, 0);
  options.recomputeLayers = *chosen;
  EXPECT_LE(*llmc::plannedArenaBytes(*tiny.module, options), options.memoryBudgetBytes);

  options.recomputeLayers.clear();
  options.hostBw = 0; // the target's
  chosen = llmc::chooseRecompute(*tiny.module, options);
  ASSERT_TRUE(succeeded(chosen));
  EXPECT_EQ(*chosen, "h.0=offload");
  options.target = "cuda";
  chosen = llmc::chooseRecompute(*tiny.module, options, "llmc", &priced);
  ASSERT_TRUE(succeeded(chosen));
  EXPECT_EQ(chosen->find("offload"), std::string::npos) << *chosen;
  EXPECT_NE(priced.basis.find("64 GB/s"), std::string::npos) << priced.basis;
}

// Where the layers' inputs dominate the peak even under full
// recomputation (many rows), a budget between full recomputation and every
// input offloaded chooses the fewest offloaded layers that fit; pipeline
// stages, which offloading does not support, never get them.
TEST(RecomputeBudget, OffloadsInputsWhenRecomputingEveryLayerDoesNotFit) {
  TinyModel wide(/*layers=*/6, /*rows=*/32);
  std::vector<std::string> layers = llmc::layerNames(*wide.module);
  llmc::CompileOptions options;
  options.recomputeLayers = llmc::recomputeLevel(layers, 2 * layers.size());
  FailureOr<int64_t> full = llmc::plannedArenaBytes(*wide.module, options);
  options.recomputeLayers = llmc::recomputeLevel(layers, 3 * layers.size());
  FailureOr<int64_t> offloaded = llmc::plannedArenaBytes(*wide.module, options);
  ASSERT_TRUE(succeeded(full) && succeeded(offloaded));
  ASSERT_LT(*offloaded, *full);

  options.recomputeLayers.clear();
  options.memoryBudgetBytes = *full - 1;
  FailureOr<std::string> chosen = llmc::chooseRecompute(*wide.module, options);
  ASSERT_TRUE(succeeded(chosen));
  EXPECT_EQ(chosen->substr(0, 16), "h.0=full+offload");
  options.recomputeLayers = *chosen;
  EXPECT_LE(*llmc::plannedArenaBytes(*wide.module, options), options.memoryBudgetBytes);

  options.recomputeLayers.clear();
  options.mesh = "pp=2";
  options.microbatches = 2;
  chosen = llmc::chooseRecompute(*wide.module, options);
  ASSERT_TRUE(succeeded(chosen));
  EXPECT_EQ(chosen->find("offload"), std::string::npos) << *chosen;
}

} // namespace
