//===- Gemma2.cpp - Gemma 2 as an llm graph -------------------------------===//
//
// Gemma 2 as transformers 4.44's Gemma2ForCausalLM computes it:
//
//   x = embed(tokens) · √hidden_size
//   per layer:  x += post_attention_norm(attention(input_norm(x)))
//               x += post_feedforward_norm(geglu_mlp(pre_feedforward_norm(x)))
//   logits = final_softcap(norm(x) · embedᵀ)
//
// Every RMSNorm multiplies by (1 + w) (rmsnorm's unit_offset): the
// parameters hold w as Hugging Face stores it (initialised to zeros), so
// checkpoints load and export unchanged; the kernels form 1 + w and the
// normalised product in fp32 and round once, as Gemma2RMSNorm does.
// Attention: RoPE, grouped-query heads head_dim wide (not hidden / heads),
// scores scaled by query_pre_attn_scalar^−½ and soft-capped
// (attn_logit_softcapping); layers with an even index see only the last
// sliding_window keys (Gemma2Attention: `not bool(layer_idx % 2)`). The MLP
// is GeGLU with the tanh GELU (gelu_pytorch_tanh). The final logits are
// soft-capped (final_logit_softcapping) before the loss, which keeps the
// head matmul and the loss apart: the fused head + loss never sees the cap.
//
//===----------------------------------------------------------------------===//

#include "models/GraphBuilder.h"
#include "models/Models.h"

#include <cmath>

using namespace mlir;

namespace llmc {
namespace {

struct Gemma2Layer {
  Value inNorm, q, k, v, o, postAttnNorm, preFfnNorm, postFfnNorm, gate, up, down;
};

Gemma2Layer declareLayer(GraphBuilder &b, const ModelConfig &c, int64_t l) {
  const int64_t C = c.nEmbd, H = c.nHead, KV = c.nKvHead, D = c.headDim(), F = c.ffnHidden;
  const double std = c.initStd;
  std::string p = "layers." + std::to_string(l) + ".";
  Gemma2Layer L;
  L.inNorm = b.param(p + "input_layernorm.weight", {C}, "zeros");
  L.q = b.param(p + "self_attn.q_proj.weight", {H * D, C}, "normal", std);
  L.k = b.param(p + "self_attn.k_proj.weight", {KV * D, C}, "normal", std);
  L.v = b.param(p + "self_attn.v_proj.weight", {KV * D, C}, "normal", std);
  L.o = b.param(p + "self_attn.o_proj.weight", {C, H * D}, "normal", std);
  L.postAttnNorm = b.param(p + "post_attention_layernorm.weight", {C}, "zeros");
  L.preFfnNorm = b.param(p + "pre_feedforward_layernorm.weight", {C}, "zeros");
  L.postFfnNorm = b.param(p + "post_feedforward_layernorm.weight", {C}, "zeros");
  L.gate = b.param(p + "mlp.gate_proj.weight", {F, C}, "normal", std);
  L.up = b.param(p + "mlp.up_proj.weight", {F, C}, "normal", std);
  L.down = b.param(p + "mlp.down_proj.weight", {C, F}, "normal", std);
  return L;
}

} // namespace

OwningOpRef<ModuleOp> buildGemma2(MLIRContext *context, const ModelConfig &c) {
  GraphBuilder b(context, c.family);
  const int64_t B = c.batchSize, T = c.seqLen, C = c.nEmbd, V = c.vocabSize;
  const int64_t H = c.nHead, KV = c.nKvHead, D = c.headDim();

  Value embed = b.param("embed_tokens.weight", {V, C}, "normal", c.initStd);
  std::vector<Gemma2Layer> layers;
  for (int64_t l = 0; l < c.nLayer; ++l) layers.push_back(declareLayer(b, c, l));
  Value norm = b.param("norm.weight", {C}, "zeros");
  Value head = c.tieEmbeddings ? embed : b.param("lm_head.weight", {V, C}, "normal", c.initStd);

  Value tokens = b.input("tokens", {B, T});
  Value targets = b.input("targets", {B, T});
  Value segments = c.packed() ? b.input("segments", {B, T}) : Value();
  Value positions = c.takesPositions() ? b.input("positions", {B, T}) : Value();

  // Gemma2RMSNorm: x / rms(x) · (1 + w), the 1 + w formed in fp32.
  auto norm1p = [&](Value x, Value w) { return b.rmsnorm(x, w, c.normEps, /*unitOffset=*/true); };
  // transformers multiplies by the normalizer as a tensor of the hidden
  // dtype: √hidden_size rounded to fp32 here.
  Value x = b.scale(b.embedding(embed, tokens), double(float(std::sqrt(double(C)))));
  for (int64_t l = 0; l < c.nLayer; ++l) {
    const Gemma2Layer &L = layers[l];
    x = b.block("layers." + std::to_string(l), [&] {
      Value h = norm1p(x, L.inNorm);
      Value q = b.rope(b.reshape(b.matmul(h, L.q, true), {B, T, H, D}), positions, c.ropeTheta);
      Value k = b.rope(b.reshape(b.matmul(h, L.k, true), {B, T, KV, D}), positions, c.ropeTheta);
      Value v = b.reshape(b.matmul(h, L.v, true), {B, T, KV, D});
      Value att =
          b.attention(q, k, v, segments, c.attentionScale(), c.windowOfLayer(l), c.attnSoftcap);
      Value projected = b.matmul(b.reshape(att, {B, T, H * D}), L.o, true);
      Value r = b.add(x, b.dropout(norm1p(projected, L.postAttnNorm), c.dropout));
      Value h2 = norm1p(r, L.preFfnNorm);
      Value act = b.geglu(b.matmul(h2, L.gate, true), b.matmul(h2, L.up, true));
      Value mlp = b.matmul(act, L.down, true);
      return b.add(r, b.dropout(norm1p(mlp, L.postFfnNorm), c.dropout));
    });
  }
  x = norm1p(x, norm);
  Value logits = b.matmul(x, head, /*transposeB=*/true);
  if (c.finalSoftcap > 0)
    logits = b.softcap(logits, c.finalSoftcap);
  return b.finish(b.crossEntropy(logits, targets));
}

} // namespace llmc
