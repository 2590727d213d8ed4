//===- Gemma.cpp - Gemma 2 and Gemma 3's text model as llm graphs ---------===//
//
// Gemma 2 as transformers 4.44's Gemma2ForCausalLM computes it, and Gemma
// 3's text model as transformers 4.51's Gemma3ForCausalLM does:
//
//   x = embed(tokens) · √hidden_size
//   per layer:  x += post_attention_norm(attention(input_norm(x)))
//               x += post_feedforward_norm(geglu_mlp(pre_feedforward_norm(x)))
//   logits = final_softcap(norm(x) · headᵀ)
//
// Every RMSNorm multiplies by (1 + w) (rmsnorm's unit_offset): the
// parameters hold w as Hugging Face stores it (initialised to zeros), so
// checkpoints load and export unchanged; the kernels form 1 + w and the
// normalised product in fp32 and round once, as Gemma2RMSNorm and
// Gemma3RMSNorm do. Attention: RoPE, grouped-query heads head_dim wide
// (not hidden / heads), scores scaled by query_pre_attn_scalar^−½. The MLP
// is GeGLU with the tanh GELU (gelu_pytorch_tanh). The final logits are
// soft-capped (final_logit_softcapping) before the loss, which keeps the
// head matmul and the loss apart: the fused head + loss never sees the cap.
//
// Gemma 2: scores soft-capped (attn_logit_softcapping); layers with an even
// index see only the last sliding_window keys (Gemma2Attention: `not
// bool(layer_idx % 2)`).
//
// Gemma 3: q, k = rope(q_norm(q)), rope(k_norm(k)) per head, over head_dim,
// q_norm and k_norm (1 + w) RMSNorms of one head's width shared by the
// heads. Layers are local or global (Gemma3Attention: `is_sliding =
// bool((layer_idx + 1) % sliding_window_pattern)`): a local layer sees
// only the last sliding_window keys and rotates by rope_local_base_freq,
// unscaled; a global one sees every earlier key and rotates by rope_theta
// with rope_scaling (none, or linear) — ModelConfig's windowOfLayer,
// ropeThetaOfLayer and ropeScalingOfLayer. The scores are never soft-capped
// (Gemma3Attention does not pass attn_logit_softcapping on, and ModelConfig
// refuses a value). Under tensor parallelism the norms' weights stay whole
// on every rank while the heads split, so their gradients are partial sums
// the pass completes (passes/lib/TensorParallel.cpp).
//
//===----------------------------------------------------------------------===//

#include "models/GraphBuilder.h"
#include "models/Models.h"

#include <cmath>

using namespace mlir;

namespace llmc {
namespace {

struct GemmaLayer {
  Value inNorm, q, k, v, qNorm, kNorm, o, postAttnNorm, preFfnNorm, postFfnNorm, gate, up, down;
};

GemmaLayer declareLayer(GraphBuilder &b, const ModelConfig &c, int64_t l) {
  const int64_t C = c.nEmbd, H = c.nHead, KV = c.nKvHead, D = c.headDim(), F = c.ffnHidden;
  const double std = c.initStd;
  std::string p = "layers." + std::to_string(l) + ".";
  GemmaLayer L;
  L.inNorm = b.param(p + "input_layernorm.weight", {C}, "zeros");
  L.q = b.param(p + "self_attn.q_proj.weight", {H * D, C}, "normal", std);
  L.k = b.param(p + "self_attn.k_proj.weight", {KV * D, C}, "normal", std);
  L.v = b.param(p + "self_attn.v_proj.weight", {KV * D, C}, "normal", std);
  L.o = b.param(p + "self_attn.o_proj.weight", {C, H * D}, "normal", std);
  if (c.gemma3()) {
    L.qNorm = b.param(p + "self_attn.q_norm.weight", {D}, "zeros");
    L.kNorm = b.param(p + "self_attn.k_norm.weight", {D}, "zeros");
  }
  L.postAttnNorm = b.param(p + "post_attention_layernorm.weight", {C}, "zeros");
  L.preFfnNorm = b.param(p + "pre_feedforward_layernorm.weight", {C}, "zeros");
  L.postFfnNorm = b.param(p + "post_feedforward_layernorm.weight", {C}, "zeros");
  L.gate = b.param(p + "mlp.gate_proj.weight", {F, C}, "normal", std);
  L.up = b.param(p + "mlp.up_proj.weight", {F, C}, "normal", std);
  L.down = b.param(p + "mlp.down_proj.weight", {C, F}, "normal", std);
  return L;
}

} // namespace

OwningOpRef<ModuleOp> buildGemma(MLIRContext *context, const ModelConfig &c) {
  GraphBuilder b(context, c.family);
  const int64_t B = c.batchSize, T = c.seqLen, C = c.nEmbd, V = c.vocabSize;
  const int64_t H = c.nHead, KV = c.nKvHead, D = c.headDim();

  Value embed = b.param("embed_tokens.weight", {V, C}, "normal", c.initStd);
  std::vector<GemmaLayer> layers;
  for (int64_t l = 0; l < c.nLayer; ++l) layers.push_back(declareLayer(b, c, l));
  Value norm = b.param("norm.weight", {C}, "zeros");
  Value head = c.tieEmbeddings ? embed : b.param("lm_head.weight", {V, C}, "normal", c.initStd);

  Value tokens = b.input("tokens", {B, T});
  Value targets = b.input("targets", {B, T});
  Value segments = c.packed() ? b.input("segments", {B, T}) : Value();
  Value positions = c.takesPositions() ? b.input("positions", {B, T}) : Value();

  auto norm1p = [&](Value x, Value w) { return b.rmsnorm(x, w, c.normEps, /*unitOffset=*/true); };
  // transformers multiplies by the normalizer as a tensor of the weights'
  // dtype: √hidden_size rounded to fp32 here.
  Value x = b.scale(b.embedding(embed, tokens), double(float(std::sqrt(double(C)))));
  for (int64_t l = 0; l < c.nLayer; ++l) {
    const GemmaLayer &L = layers[l];
    const double theta = c.ropeThetaOfLayer(l);
    const RopeScaling scaling = c.ropeScalingOfLayer(l);
    x = b.block("layers." + std::to_string(l), [&] {
      Value h = norm1p(x, L.inNorm);
      // Each head (normalised over its head_dim in Gemma 3), then rotated.
      auto heads = [&](Value w, Value headNorm, int64_t n) {
        Value y = b.reshape(b.matmul(h, w, true), {B, T, n, D});
        return b.rope(headNorm ? norm1p(y, headNorm) : y, positions, theta, scaling);
      };
      Value q = heads(L.q, L.qNorm, H);
      Value k = heads(L.k, L.kNorm, KV);
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
