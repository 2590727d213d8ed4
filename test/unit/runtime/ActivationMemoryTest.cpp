//===- ActivationMemoryTest.cpp - Korthikanti et al.'s per-layer formulas -===//

#include "runtime/ActivationMemory.h"

#include <gtest/gtest.h>

namespace {

// GPT-3 175B's layer from the paper's Table 2 setting (s = 2048, b = 1,
// h = 12288, a = 96, t = 8), in bytes per layer.
llmc::ActivationShape gpt3(int64_t t, bool sp) {
  llmc::ActivationShape x;
  x.s = 2048, x.b = 1, x.h = 12288, x.a = 96, x.t = t, x.sequenceParallel = sp;
  x.gptLayer = true;
  return x;
}

TEST(ActivationMemory, FormulasMatchThePapersTable) {
  double sbh = 2048.0 * 12288;
  double attention = 5.0 * 96 * 2048 / 12288; // 5as/h = 80
  EXPECT_DOUBLE_EQ(llmc::korthikantiBytes(gpt3(1, false), "none"), sbh * (34 + attention));
  EXPECT_DOUBLE_EQ(llmc::korthikantiBytes(gpt3(8, false), "none"),
                   sbh * (10 + 24.0 / 8 + attention / 8));
  EXPECT_DOUBLE_EQ(llmc::korthikantiBytes(gpt3(8, true), "none"), sbh / 8 * (34 + attention));
  EXPECT_DOUBLE_EQ(llmc::korthikantiBytes(gpt3(8, false), "selective"), sbh * (10 + 24.0 / 8));
  EXPECT_DOUBLE_EQ(llmc::korthikantiBytes(gpt3(8, true), "selective"), sbh * 34 / 8);
  EXPECT_DOUBLE_EQ(llmc::korthikantiBytes(gpt3(8, false), "full"), 2 * sbh);
  EXPECT_DOUBLE_EQ(llmc::korthikantiBytes(gpt3(8, true), "full"), 2 * sbh / 8);
  EXPECT_EQ(llmc::korthikantiFormula(gpt3(8, true), "none"), "sbh/t (34 + 5as/h)");
  EXPECT_EQ(llmc::korthikantiFormula(gpt3(1, false), "selective"), "34sbh");
}

TEST(ActivationMemory, ShapeComesFromMetadataAndMesh) {
  llmc::Artifact a;
  a.metadata = {{"model.seq_len", "128"}, {"model.n_embd", "64"},   {"model.n_head", "4"},
                {"model.family", "gpt2"}, {"model.batch_size", "8"}, {"precision", "bf16"},
                {"data_parallel_axes", "dp,fsdp"}, {"sequence_parallel", "1"}};
  a.mesh = {{"pp", 2}, {"dp", 2}, {"fsdp", 2}, {"tp", 2}};
  llmc::ActivationShape x = llmc::activationShape(a);
  EXPECT_EQ(x.s, 128);
  EXPECT_EQ(x.b, 2); // 8 rows over dp × fsdp
  EXPECT_EQ(x.h, 64);
  EXPECT_EQ(x.a, 4);
  EXPECT_EQ(x.t, 2);
  EXPECT_TRUE(x.sequenceParallel);
  EXPECT_EQ(x.elementBytes, 2);
  EXPECT_TRUE(x.gptLayer);
}

TEST(ActivationMemory, PerLayerModesOverrideTheDefault) {
  llmc::Artifact a;
  a.metadata = {{"recompute", "budget"}, {"recompute.layers", "h.0=full,h.1=selective"}};
  a.memory.savedPerLayer = {{"h.0", 1}, {"h.1", 2}, {"h.2", 3}};
  std::map<std::string, std::string> modes = llmc::recomputeModes(a);
  EXPECT_EQ(modes["h.0"], "full");
  EXPECT_EQ(modes["h.1"], "selective");
  EXPECT_EQ(modes["h.2"], "none");
}

} // namespace
