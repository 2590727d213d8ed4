//===- FlopReport.cpp - an out-of-tree llmc pass: FLOPs per layer --------===//
//
// An example pass plugin, built against the installed llmc package
// (find_package(LLMC)) and run inside the training pipeline:
//
//   llmc compile --model gpt2 --preset tiny \
//     --pass-plugin libLLMCFlopReport.so \
//     --insert-pass "after=llmc-optimizer:llmc-example-flop-report{output=flops.txt}"
//
// It counts, per transformer layer, the floating-point operations one
// training step performs in matmuls and attention (forward and backward,
// every microbatch) and the bytes the step's llm ops read and write
// (before any fusion), and records the step total on the module as
// `flop_report.step_flops` so later passes or tests can read it.
//
//===----------------------------------------------------------------------===//

#include "dialects/Annotations/Annotations.h"
#include "dialects/LLM/LLMDialect.h"

#include "mlir/Pass/Pass.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/Plugins/PassPlugin.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

using namespace mlir;
namespace llm = llmc::llm;

namespace {

int64_t elements(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.hasStaticShape() ? tensor.getNumElements() : 0;
}

int64_t bytes(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return 0;
  return tensor.getNumElements() * ((tensor.getElementTypeBitWidth() + 7) / 8);
}

/// 2·M·N·K: every result element is a K-long dot product.
int64_t matmulFlops(llm::MatmulOp op) {
  auto a = cast<RankedTensorType>(op.getA().getType());
  int64_t k = op.getTransposeA() ? a.getDimSize(a.getRank() - 2) : a.getDimSize(a.getRank() - 1);
  return 2 * elements(op.getType()) * k;
}

/// Q·Kᵀ and P·V, each 2·B·H·T·S·D (causal masking not discounted, as
/// Megatron-LM's model-FLOPs formula counts it). Backward does twice that.
int64_t attentionFlops(Value q, Value k) {
  auto qt = cast<RankedTensorType>(q.getType()); // [B, T, H, D]
  auto kt = cast<RankedTensorType>(k.getType()); // [B, S, Hkv, D]
  return 2 * 2 * qt.getDimSize(0) * qt.getDimSize(2) * qt.getDimSize(1) * kt.getDimSize(1) *
         qt.getDimSize(3);
}

struct Totals {
  int64_t flops = 0, bytes = 0, ops = 0;
};

struct FlopReportPass : PassWrapper<FlopReportPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(FlopReportPass)

  FlopReportPass() = default;
  FlopReportPass(const FlopReportPass &other) : PassWrapper(other) {}

  StringRef getArgument() const override { return "llmc-example-flop-report"; }
  StringRef getDescription() const override {
    return "Reports the FLOPs and bytes of one training step per layer (example plugin)";
  }

  Option<std::string> output{*this, "output",
                             llvm::cl::desc("Where the table goes ('-': stderr)"),
                             llvm::cl::init("-")};
  Option<std::string> function{*this, "function",
                               llvm::cl::desc("The step function to count"),
                               llvm::cl::init("train_step")};

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto step = module.lookupSymbol<func::FuncOp>(function);
    if (!step) {
      module.emitError() << "llmc-example-flop-report: no function @" << function
                         << " (insert the pass after llmc-optimizer)";
      return signalPassFailure();
    }
    // Layers in program order; ops outside any layer (embedding, head,
    // loss, optimizer) under "(outside layers)".
    std::vector<std::string> order;
    std::map<std::string, Totals> layers;
    Totals total;
    step.walk([&](Operation *op) {
      if (op->getDialect() != op->getContext()->getLoadedDialect<llm::LLMDialect>())
        return;
      int64_t flops = 0;
      if (auto matmul = dyn_cast<llm::MatmulOp>(op))
        flops = matmulFlops(matmul);
      else if (auto attention = dyn_cast<llm::AttentionOp>(op))
        flops = attentionFlops(attention.getQ(), attention.getK());
      else if (auto grad = dyn_cast<llm::AttentionGradOp>(op))
        flops = 2 * attentionFlops(grad.getQ(), grad.getK());
      int64_t moved = 0;
      for (Type t : op->getOperandTypes())
        moved += bytes(t);
      for (Type t : op->getResultTypes())
        moved += bytes(t);
      std::string layer = "(outside layers)";
      if (auto name = op->getAttrOfType<StringAttr>(llmc::kBlockNameAttr))
        layer = name.getValue().str();
      if (!layers.count(layer))
        order.push_back(layer);
      Totals &t = layers[layer];
      t.flops += flops;
      t.bytes += moved;
      t.ops += 1;
      total.flops += flops;
      total.bytes += moved;
      total.ops += 1;
    });

    std::unique_ptr<llvm::ToolOutputFile> out;
    if (output != "-") {
      std::string error;
      out = openOutputFile(output, &error);
      if (!out) {
        module.emitError() << "llmc-example-flop-report: cannot write '" << output
                           << "': " << error;
        return signalPassFailure();
      }
    }
    llvm::raw_ostream &os = out ? out->os() : llvm::errs();
    os << "flop report of @" << function << " (one step, all microbatches)\n";
    os << llvm::formatv("{0,-18} {1,8} {2,20} {3,16}\n", "layer", "llm ops", "FLOPs", "bytes");
    for (const std::string &layer : order) {
      const Totals &t = layers[layer];
      os << llvm::formatv("{0,-18} {1,8} {2,20} {3,16}\n", layer, t.ops, t.flops, t.bytes);
    }
    os << llvm::formatv("{0,-18} {1,8} {2,20} {3,16}\n", "total", total.ops, total.flops,
                        total.bytes);
    if (out)
      out->keep();
    module->setAttr("flop_report.step_flops",
                    IntegerAttr::get(IntegerType::get(&getContext(), 64), total.flops));
  }
};

} // namespace

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo mlirGetPassPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "LLMCFlopReport", LLVM_VERSION_STRING,
          []() { PassRegistration<FlopReportPass>(); }};
}
