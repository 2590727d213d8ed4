//===- KvCacheTest.cpp - a cached step computes the model's logits --------===//
//
// One GQA attention layer's @logits, and the @prefill step llmc-kv-cache
// makes of it, evaluated by the double-precision reference interpreter: a
// prefill of a whole sequence (positions 0..T-1 on shuffled pages) over an
// f32 cache gives exactly the model's logits at the last position; a bf16
// cache the same (the interpreter keeps floats exact, as its casts do); an
// int8 or fp8 E4M3 cache the reference's quantized keys and values (the
// interpreter passes the pools' element type on as the codes' format), so
// scale pools that change exactly at the written slots, codes whose
// largest is the format's top one, and logits a little off the exact
// ones. This checks the rewrite and the interpreter's operand mapping
// apart from any kernel's rounding.
//
//===----------------------------------------------------------------------===//

#include "compiler/Compiler.h"
#include "compiler/Interpreter.h"
#include "passes/Passes.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace mlir;
using llmc::ref::RefTensor;

namespace {

/// B = 2 rows of T = 8 tokens, width 32, 4 query heads and 2 kv heads of 8.
const char *kLayer = R"mlir(
func.func @logits(%w: tensor<32x32xf32> {llm.param = #llm.param<name = "wte", init = "normal", scale = 0.5>},
                  %wq: tensor<32x32xf32> {llm.param = #llm.param<name = "wq", init = "normal", scale = 0.5>},
                  %wk: tensor<32x16xf32> {llm.param = #llm.param<name = "wk", init = "normal", scale = 0.5>},
                  %wv: tensor<32x16xf32> {llm.param = #llm.param<name = "wv", init = "normal", scale = 0.5>},
                  %tokens: tensor<2x8xi32> {llmc.name = "tokens", llmc.role = "input"},
                  %positions: tensor<2x8xi32> {llmc.name = "positions", llmc.role = "input"})
    -> (tensor<2x8x32xf32> {llmc.name = "logits", llmc.role = "output"}) {
  %x = llm.embedding %w, %tokens : tensor<32x32xf32>, tensor<2x8xi32>
  %h = llm.block "h.0" -> tensor<2x8x32xf32> {
    %q2 = llm.matmul %x, %wq : tensor<2x8x32xf32>, tensor<32x32xf32> -> tensor<2x8x32xf32>
    %k2 = llm.matmul %x, %wk : tensor<2x8x32xf32>, tensor<32x16xf32> -> tensor<2x8x16xf32>
    %v2 = llm.matmul %x, %wv : tensor<2x8x32xf32>, tensor<32x16xf32> -> tensor<2x8x16xf32>
    %q = llm.reshape %q2 : tensor<2x8x32xf32> to tensor<2x8x4x8xf32>
    %k = llm.reshape %k2 : tensor<2x8x16xf32> to tensor<2x8x2x8xf32>
    %v = llm.reshape %v2 : tensor<2x8x16xf32> to tensor<2x8x2x8xf32>
    %o, %lse = llm.attention %q, %k, %v {causal, scale = 0.35 : f64} : tensor<2x8x4x8xf32>, tensor<2x8x2x8xf32>
    %r = llm.reshape %o : tensor<2x8x4x8xf32> to tensor<2x8x32xf32>
    llm.yield %r : tensor<2x8x32xf32>
  }
  %logits = llm.matmul %h, %w {transpose_b} : tensor<2x8x32xf32>, tensor<32x32xf32> -> tensor<2x8x32xf32>
  return %logits : tensor<2x8x32xf32>
}
)mlir";

constexpr int64_t kPage = 4, kBlocks = 6, kMaxBlocks = 3;

std::vector<int64_t> shapeOf(Type type) {
  auto t = cast<RankedTensorType>(type);
  return std::vector<int64_t>(t.getShape().begin(), t.getShape().end());
}

/// Arguments for `func` by name: parameters random (seeded by their
/// position, so both functions get the same), tokens, positions 0..7,
/// two pages per row out of order, caches zero.
std::vector<RefTensor> argsFor(func::FuncOp func) {
  std::vector<RefTensor> args;
  for (BlockArgument arg : func.getArguments()) {
    RefTensor t = RefTensor::zeros(shapeOf(arg.getType()));
    auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "llmc.name");
    std::string n = name ? name.getValue().str() : "";
    if (n == "tokens") {
      for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = static_cast<double>((7 * i + 3) % 32);
    } else if (n == "positions" || n == "cache_positions") {
      for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = static_cast<double>(i % 8);
    } else if (n == "block_table") {
      t.data = {3, 0, -1, 5, 1, -1};
    } else if (n.rfind("kv/", 0) != 0) { // a parameter
      std::mt19937_64 rng(100 + arg.getArgNumber());
      std::normal_distribution<double> normal(0.0, 0.5);
      for (double &v : t.data) v = normal(rng);
    }
    args.push_back(std::move(t));
  }
  return args;
}

/// @prefill over a `cacheType` cache, interpreted; its results.
std::vector<RefTensor> prefill(MLIRContext &context, const std::string &cacheType) {
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kLayer, &context);
  EXPECT_TRUE(module);
  llmc::KvCacheOptions options;
  options.program = "prefill";
  options.page = kPage;
  options.blocks = kBlocks;
  options.maxBlocks = kMaxBlocks;
  options.cacheType = cacheType;
  PassManager pm(&context);
  pm.addPass(llmc::createKvCache(options));
  EXPECT_TRUE(succeeded(pm.run(*module)));
  auto step = module->lookupSymbol<func::FuncOp>("prefill");
  FailureOr<std::vector<RefTensor>> results = llmc::interpret(step, argsFor(step));
  EXPECT_TRUE(succeeded(results));
  return succeeded(results) ? *results : std::vector<RefTensor>{};
}

/// The scale and code pools of a prefill over a cache of codes whose
/// largest code value is `top`.
void expectWrittenSlots(const std::vector<RefTensor> &got, double top) {
  for (int which : {2, 4}) {
    const RefTensor &codes = got[which - 1], &scales = got[which];
    ASSERT_EQ(scales.shape, (std::vector<int64_t>{kBlocks, kPage, 2}));
    for (int64_t page = 0; page < kBlocks; ++page)
      for (int64_t slot = 0; slot < kPage * 2; ++slot) {
        const int64_t head = page * kPage * 2 + slot;
        const bool written = page != 2 && page != 4;
        EXPECT_EQ(scales.data[head] > 0, written) << "page " << page << " slot " << slot;
        double largest = 0;
        for (int64_t e = 0; e < 8; ++e)
          largest = std::max(largest, std::fabs(codes.data[head * 8 + e]));
        EXPECT_EQ(largest, written ? top : 0.0);
      }
  }
}

TEST(KvCacheStep, PrefillOverEachCacheTypeGivesTheModelsLogits) {
  MLIRContext context;
  llmc::prepareContext(context);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kLayer, &context);
  ASSERT_TRUE(module);
  auto logits = module->lookupSymbol<func::FuncOp>("logits");
  FailureOr<std::vector<RefTensor>> full = llmc::interpret(logits, argsFor(logits));
  ASSERT_TRUE(succeeded(full));
  // The model's logits at each row's last position, [2, 32].
  RefTensor want = RefTensor::zeros({2, 32});
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t v = 0; v < 32; ++v) want.data[b * 32 + v] = (*full)[0].data[(b * 8 + 7) * 32 + v];
  double range = 0;
  for (double x : want.data) range = std::max(range, std::fabs(x));

  for (const char *type : {"", "f32", "bf16"}) {
    SCOPED_TRACE(std::string("cache-type '") + type + "'");
    std::vector<RefTensor> got = prefill(context, type);
    ASSERT_EQ(got.size(), 3u); // logits, k and v pools
    ASSERT_EQ(got[0].shape, want.shape);
    for (size_t i = 0; i < want.data.size(); ++i)
      EXPECT_NEAR(got[0].data[i], want.data[i], 1e-12 * range);
  }

  // int8: codes up to ±127; fp8: up to ±448, with 3 mantissa bits a step
  // near the top of 32/448 of the row's amax against int8's 1/127, so a
  // looser bound (measured 5.5e-3 and 1.6e-2 of the logits' range).
  struct Codes {
    const char *type;
    double top, bound;
  };
  for (Codes c : {Codes{"int8", 127.0, 2e-2}, Codes{"fp8_e4m3", 448.0, 5e-2}}) {
    SCOPED_TRACE(std::string("cache-type '") + c.type + "'");
    std::vector<RefTensor> got = prefill(context, c.type);
    ASSERT_EQ(got.size(), 5u); // logits, k codes and scales, v codes and scales
    double worst = 0;
    for (size_t i = 0; i < want.data.size(); ++i)
      worst = std::max(worst, std::fabs(got[0].data[i] - want.data[i]) / range);
    EXPECT_GT(worst, 0.0) << "the cache's codes changed nothing";
    EXPECT_LT(worst, c.bound);
    // Rows 0 and 1 wrote pages {3, 0} and {5, 1}: every slot of those,
    // each kv head, has a scale; pages 2 and 4 none; each written
    // (slot, head) has a code of ±top.
    expectWrittenSlots(got, c.top);
  }
}

} // namespace
