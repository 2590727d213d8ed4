//===- ModelsTest.cpp - model builders: presets, counts, configs ----------===//

#include "compiler/Compiler.h"
#include "models/Models.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace mlir;

namespace {

int64_t countFor(const std::string &family, const std::string &preset) {
  MLIRContext context;
  llmc::prepareContext(context);
  llvm::Expected<llmc::ModelConfig> config = llmc::presetConfig(family, preset);
  EXPECT_TRUE(static_cast<bool>(config));
  if (!config) {
    llvm::consumeError(config.takeError());
    return -1;
  }
  // Parameter counts do not depend on the batch shape; keep the graph small.
  config->batchSize = 1;
  config->seqLen = 8;
  OwningOpRef<ModuleOp> module = llmc::buildModel(&context, *config);
  EXPECT_TRUE(succeeded(verify(*module)));
  return llmc::countParameters(*module).total;
}

// Published counts: GPT-2 as in the Hugging Face checkpoints (tied head,
// vocabulary 50257 unpadded); Llama 3.2 1B (tied embeddings).
TEST(Models, GPT2ParameterCountsMatchPublished) {
  EXPECT_EQ(countFor("gpt2", "124M"), 124439808);
  EXPECT_EQ(countFor("gpt2", "350M"), 354823168);
  EXPECT_EQ(countFor("gpt2", "774M"), 774030080);
  EXPECT_EQ(countFor("gpt2", "1.5B"), 1557611200);
}

TEST(Models, LlamaParameterCountMatchesPublished) {
  EXPECT_EQ(countFor("llama", "1B"), 1235814400);
}

TEST(Models, EveryPresetVerifies) {
  for (const char *family : {"gpt2", "llama"})
    for (const std::string &preset : llmc::presetNames(family)) {
      SCOPED_TRACE(std::string(family) + " " + preset);
      EXPECT_GT(countFor(family, preset), 0);
    }
}

TEST(Models, OverridesAndValidation) {
  llmc::ModelConfig config = cantFail(llmc::presetConfig("llama", "tiny"));
  EXPECT_FALSE(static_cast<bool>(llmc::applyOverride(config, "n_kv_head=1")));
  EXPECT_EQ(config.nKvHead, 1);
  EXPECT_FALSE(static_cast<bool>(llmc::applyOverride(config, "num_hidden_layers=3")));
  EXPECT_EQ(config.nLayer, 3);
  EXPECT_FALSE(static_cast<bool>(config.validate()));

  llvm::Error unknown = llmc::applyOverride(config, "bogus=1");
  ASSERT_TRUE(static_cast<bool>(unknown));
  EXPECT_NE(llvm::toString(std::move(unknown)).find("unknown config key 'bogus'"),
            std::string::npos);
  llvm::Error bad = llmc::applyOverride(config, "n_head=four");
  ASSERT_TRUE(static_cast<bool>(bad));
  EXPECT_NE(llvm::toString(std::move(bad)).find("bad value 'four'"), std::string::npos);

  config.nKvHead = 3;
  llvm::Error invalid = config.validate();
  ASSERT_TRUE(static_cast<bool>(invalid));
  EXPECT_NE(llvm::toString(std::move(invalid)).find("divisible by n_kv_head"), std::string::npos);

  llvm::Expected<llmc::ModelConfig> missing = llmc::presetConfig("gpt2", "7B");
  ASSERT_FALSE(static_cast<bool>(missing));
  EXPECT_NE(llvm::toString(missing.takeError()).find("unknown preset '7B'"), std::string::npos);
}

TEST(Models, HuggingFaceConfigJson) {
  llvm::SmallString<128> path;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("llmc-config", "json", path));
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    os << R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64,
              "num_hidden_layers": 2, "num_attention_heads": 8,
              "num_key_value_heads": 2, "intermediate_size": 160,
              "vocab_size": 300, "rms_norm_eps": 1e-6, "rope_theta": 500000.0,
              "tie_word_embeddings": true, "max_position_embeddings": 32})";
  }
  llmc::ModelConfig config = cantFail(llmc::presetConfig("llama", "tiny"));
  EXPECT_FALSE(static_cast<bool>(llmc::applyConfigJson(config, path)));
  EXPECT_EQ(config.nEmbd, 64);
  EXPECT_EQ(config.nKvHead, 2);
  EXPECT_EQ(config.vocabSize, 300);
  EXPECT_TRUE(config.tieEmbeddings);
  EXPECT_DOUBLE_EQ(config.ropeTheta, 500000.0);
  EXPECT_EQ(config.seqLen, 32);
  EXPECT_FALSE(static_cast<bool>(config.validate()));
  llvm::sys::fs::remove(path);
}

} // namespace
