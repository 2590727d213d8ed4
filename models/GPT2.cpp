//===- GPT2.cpp - GPT-2 as an llm graph -----------------------------------===//
//
// GPT-2 (Radford et al. 2019) as in the Hugging Face implementation: learned
// position embeddings, pre-LayerNorm blocks, fused QKV projection, tanh-GELU
// MLP, final LayerNorm, output head tied to the token embedding. Weights use
// HF's Conv1D layout ([in, out], y = x·W + b) and HF's names without the
// "transformer." prefix, so HF checkpoints map one to one. Residual output
// projections are initialised with std 0.02/√(2·n_layer) (GPT-2 paper §2.3).
//
//===----------------------------------------------------------------------===//

#include "models/GraphBuilder.h"
#include "models/Models.h"

#include <cmath>

using namespace mlir;

namespace llmc {

OwningOpRef<ModuleOp> buildGPT2(MLIRContext *context, const ModelConfig &c) {
  GraphBuilder b(context, "gpt2");
  const int64_t B = c.batchSize, T = c.seqLen, C = c.nEmbd, V = c.vocabSize;
  const int64_t H = c.nHead, D = c.headDim(), F = c.ffnHidden;
  const double std = c.initStd, projStd = c.initStd / std::sqrt(2.0 * c.nLayer);

  Value wte = b.param("wte.weight", {V, C}, "normal", std);
  Value wpe = b.param("wpe.weight", {c.maxPositions, C}, "normal", std);
  struct Layer {
    Value ln1g, ln1b, attnW, attnB, projW, projB, ln2g, ln2b, fcW, fcB, fcProjW, fcProjB;
  };
  std::vector<Layer> layers;
  for (int64_t l = 0; l < c.nLayer; ++l) {
    std::string p = "h." + std::to_string(l) + ".";
    Layer L;
    L.ln1g = b.param(p + "ln_1.weight", {C}, "ones");
    L.ln1b = b.param(p + "ln_1.bias", {C}, "zeros");
    L.attnW = b.param(p + "attn.c_attn.weight", {C, 3 * C}, "normal", std);
    L.attnB = b.param(p + "attn.c_attn.bias", {3 * C}, "zeros");
    L.projW = b.param(p + "attn.c_proj.weight", {C, C}, "normal", projStd);
    L.projB = b.param(p + "attn.c_proj.bias", {C}, "zeros");
    L.ln2g = b.param(p + "ln_2.weight", {C}, "ones");
    L.ln2b = b.param(p + "ln_2.bias", {C}, "zeros");
    L.fcW = b.param(p + "mlp.c_fc.weight", {C, F}, "normal", std);
    L.fcB = b.param(p + "mlp.c_fc.bias", {F}, "zeros");
    L.fcProjW = b.param(p + "mlp.c_proj.weight", {F, C}, "normal", projStd);
    L.fcProjB = b.param(p + "mlp.c_proj.bias", {C}, "zeros");
    layers.push_back(L);
  }
  Value lnfG = b.param("ln_f.weight", {C}, "ones");
  Value lnfB = b.param("ln_f.bias", {C}, "zeros");
  Value head = c.tieEmbeddings ? wte : b.param("lm_head.weight", {V, C}, "normal", std);

  Value tokens = b.input("tokens", {B, T});
  Value targets = b.input("targets", {B, T});
  // Packed rows: positions restart at every document, which attends only to
  // itself. Inference rows continue a cached sequence at their positions.
  Value segments = c.packed() ? b.input("segments", {B, T}) : Value();
  Value positions = c.takesPositions() ? b.embedding(wpe, b.input("positions", {B, T}))
                                       : b.slice(wpe, {0, 0}, {T, C});

  Value x = b.add(b.embedding(wte, tokens), positions);
  x = b.dropout(x, c.dropout);
  for (int64_t l = 0; l < c.nLayer; ++l) {
    const Layer &L = layers[l];
    x = b.block("h." + std::to_string(l), [&] {
      Value h = b.layernorm(x, L.ln1g, L.ln1b, c.normEps);
      Value qkv = b.add(b.matmul(h, L.attnW), L.attnB);
      auto head4 = [&](int64_t part) {
        return b.reshape(b.slice(qkv, {0, 0, part * C}, {B, T, C}), {B, T, H, D});
      };
      Value att =
          b.attention(head4(0), head4(1), head4(2), segments, 1.0 / std::sqrt(double(D)));
      Value proj = b.add(b.matmul(b.reshape(att, {B, T, C}), L.projW), L.projB);
      Value r = b.add(x, b.dropout(proj, c.dropout));
      Value h2 = b.layernorm(r, L.ln2g, L.ln2b, c.normEps);
      Value fc = b.gelu(b.add(b.matmul(h2, L.fcW), L.fcB));
      Value mlp = b.add(b.matmul(fc, L.fcProjW), L.fcProjB);
      return b.add(r, b.dropout(mlp, c.dropout));
    });
  }
  x = b.layernorm(x, lnfG, lnfB, c.normEps);
  Value logits = b.matmul(x, head, /*transposeB=*/true);
  return b.finish(b.crossEntropy(logits, targets));
}

} // namespace llmc
