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

struct TinyModel {
  TinyModel() {
    llmc::prepareContext(context);
    llvm::Expected<llmc::ModelConfig> config = llmc::presetConfig("gpt2", "tiny");
    EXPECT_TRUE(static_cast<bool>(config));
    config->nLayer = 3;
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

} // namespace
