//===- GraphBuilder.h - a small DSL for writing llm graphs ------*- C++ -*-===//
//
// Model builders read like the model: `b.matmul(h, w)`, `b.layernorm(...)`.
// The builder declares parameters as @forward arguments, computes the result
// types the ops that need explicit ones, and wraps layers in llm.block.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_MODELS_GRAPHBUILDER_H
#define LLMC_MODELS_GRAPHBUILDER_H

#include "common/RopeScaling.h"
#include "dialects/LLM/LLMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <functional>
#include <string>

namespace llmc {

class GraphBuilder {
public:
  /// Starts `func.func @forward` in a new module.
  GraphBuilder(mlir::MLIRContext *context, llvm::StringRef modelName);

  /// Declares a parameter argument (appended before the batch arguments);
  /// a frozen one (`trainable` false) is loaded and checkpointed but takes
  /// no optimizer step.
  mlir::Value param(llvm::StringRef name, llvm::ArrayRef<int64_t> shape, llvm::StringRef init,
                    double scale = 0.0, bool trainable = true);
  /// Declares a batch argument (i32), e.g. "tokens".
  mlir::Value input(llvm::StringRef name, llvm::ArrayRef<int64_t> shape);

  mlir::Value matmul(mlir::Value a, mlir::Value b, bool transposeB = false);
  mlir::Value add(mlir::Value a, mlir::Value b);
  /// An f32 tensor of zeros.
  mlir::Value zeros(llvm::ArrayRef<int64_t> shape);
  mlir::Value gelu(mlir::Value x);
  /// 1 / (1 + exp(−x)).
  mlir::Value sigmoid(mlir::Value x);
  mlir::Value swiglu(mlir::Value gate, mlir::Value up);
  mlir::Value geglu(mlir::Value gate, mlir::Value up);
  mlir::Value scale(mlir::Value x, double factor);
  /// cap·tanh(x / cap).
  mlir::Value softcap(mlir::Value x, double cap);
  mlir::Value dropout(mlir::Value x, double rate);
  mlir::Value layernorm(mlir::Value x, mlir::Value gamma, mlir::Value beta, double eps);
  /// x / rms(x) · gamma, or · (1 + gamma) with `unitOffset` (Gemma).
  mlir::Value rmsnorm(mlir::Value x, mlir::Value gamma, double eps, bool unitOffset = false);
  mlir::Value embedding(mlir::Value table, mlir::Value ids);
  /// `positions` [B, T] (may be null: 0..T−1 in every row); `scaling`:
  /// Llama 3's frequency scaling when set.
  mlir::Value rope(mlir::Value x, mlir::Value positions, double theta,
                   const RopeScaling &scaling = {});
  /// Causal; `segments` [B, T] (may be null) keeps each packed document to
  /// itself; a `window` > 0 to the keys in (i − window, i]; a `softcap` > 0
  /// caps the scores to softcap·tanh(s / softcap).
  mlir::Value attention(mlir::Value q, mlir::Value k, mlir::Value v, mlir::Value segments,
                        double scale, int64_t window = 0, double softcap = 0.0);
  mlir::Value crossEntropy(mlir::Value logits, mlir::Value targets);

  /// llm.moe_route's results (dialects/LLM/MoEOps.td).
  struct MoeRouting {
    mlir::Value weights, experts, positions, offsets, probSum, counts, zSum;
  };
  /// How moe_route scores the experts: softmax, or sigmoid with an
  /// optional bias [E] that only steers the choice; the weights times
  /// `scale` either way.
  struct RouterScoring {
    bool sigmoid;
    double scale;
    mlir::Value bias;
  };
  /// Top-k softmax routing of router logits [N, E].
  MoeRouting moeRoute(mlir::Value logits, int64_t topK, bool normalize) {
    return moeRoute(logits, topK, normalize, RouterScoring{false, 1.0, mlir::Value()});
  }
  /// Top-k routing of router logits [N, E], scored as `scoring` says.
  MoeRouting moeRoute(mlir::Value logits, int64_t topK, bool normalize,
                      const RouterScoring &scoring);
  /// x [N, C] copied to its experts' rows [N·k, C].
  mlir::Value moeDispatch(mlir::Value x, mlir::Value positions);
  /// ys [N·k, C] summed back per token by the routing weights: [N, C].
  mlir::Value moeCombine(mlir::Value ys, mlir::Value positions, mlir::Value weights);
  /// Expert-sorted rows xs [R, C] (offsets [E + 1]) with each expert's
  /// first `capacity` kept, packed into `parts` slots of `slot` rows
  /// (llm.moe_pack): {packed [parts·slot, C], kept [parts, E / parts]}.
  std::pair<mlir::Value, mlir::Value> moePack(mlir::Value xs, mlir::Value offsets, int64_t capacity,
                                              int64_t parts, int64_t slot);
  /// Received slots to groups by local expert: {grouped, group offsets}.
  std::pair<mlir::Value, mlir::Value> moeRegroup(mlir::Value received, mlir::Value counts);
  mlir::Value moeUngroup(mlir::Value grouped, mlir::Value counts);
  /// The slots back to expert-sorted rows [rows, C], dropped rows zero.
  mlir::Value moeUnpack(mlir::Value packed, mlir::Value offsets, mlir::Value kept, int64_t rows);
  /// auxScale·Σ counts·probSum + zScale·zSum (llm.router_loss).
  mlir::Value routerLoss(mlir::Value probSum, mlir::Value counts, mlir::Value zSum, double auxScale,
                         double zScale);
  /// Each expert's rows of x times its slice of the stacked weights ([E, F, K]
  /// with transposeB).
  mlir::Value groupedMatmul(mlir::Value x, mlir::Value offsets, mlir::Value weights,
                            bool transposeB);
  mlir::Value reshape(mlir::Value x, llvm::ArrayRef<int64_t> shape);
  mlir::Value slice(mlir::Value x, llvm::ArrayRef<int64_t> offsets,
                    llvm::ArrayRef<int64_t> sizes);

  /// Emits `body` inside `llm.block "name"`, returning what it returns.
  mlir::Value block(llvm::StringRef name, const std::function<mlir::Value()> &body);
  /// The same for a layer with several outputs (a mixture-of-experts
  /// layer's running router statistics beside the hidden state).
  llvm::SmallVector<mlir::Value>
  blockValues(llvm::StringRef name, const std::function<llvm::SmallVector<mlir::Value>()> &body);

  /// Finishes @forward returning `loss`; the module is verified by the caller.
  mlir::OwningOpRef<mlir::ModuleOp> finish(mlir::Value loss);

private:
  mlir::Location loc(llvm::StringRef what);
  mlir::RankedTensorType type(llvm::ArrayRef<int64_t> shape, mlir::Type element);

  mlir::MLIRContext *context;
  mlir::OpBuilder builder;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::func::FuncOp func;
  std::string modelName;
  unsigned paramCount = 0;
  int64_t dropoutSites = 0;
  std::string currentBlock;
};

} // namespace llmc

#endif
