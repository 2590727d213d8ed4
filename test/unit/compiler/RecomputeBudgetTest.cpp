//===- RecomputeBudgetTest.cpp - the recompute ladder and its search ------===//

#include "compiler/Compiler.h"
#include "compiler/RecomputeBudget.h"
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
TEST(RecomputeBudget, ChoosesTheCheapestLevelThatFits) {
  TinyModel tiny;
  std::vector<std::string> layers = llmc::layerNames(*tiny.module);
  llmc::CompileOptions options;
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
