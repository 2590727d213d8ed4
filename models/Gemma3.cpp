//===- Gemma3.cpp - Gemma 3's text model as an llm graph ------------------===//
//
// Gemma 3 as transformers 4.51's Gemma3ForCausalLM computes it: Gemma 2's
// block (models/Gemma2.cpp: embeddings scaled by √hidden_size, (1 + w)
// RMSNorms before and after each sublayer, GeGLU, heads head_dim wide,
// scores scaled by query_pre_attn_scalar^−½) with
//
//   q, k = rope(q_norm(q)), rope(k_norm(k))   per head, over head_dim
//
// where q_norm and k_norm are (1 + w) RMSNorms of one head's width, shared
// by the heads. Layers come in local and global kinds (Gemma3Attention:
// `is_sliding = bool((layer_idx + 1) % sliding_window_pattern)`): a local
// layer sees only the last sliding_window keys and rotates by RoPE base
// rope_local_base_freq, unscaled; a global layer sees every earlier key and
// rotates by rope_theta with rope_scaling (none, or linear). The logits
// are soft-capped when final_logit_softcapping is set; the attention scores
// never are (Gemma3Attention does not pass attn_logit_softcapping on, and
// ModelConfig refuses a value). Under tensor parallelism the norms'
// weights stay whole on every rank while the heads split, so their
// gradients are partial sums the pass completes (passes/lib/TensorParallel.cpp).
//
//===----------------------------------------------------------------------===//

#include "models/GraphBuilder.h"
#include "models/Models.h"

#include <cmath>

using namespace mlir;

namespace llmc {
namespace {

struct Gemma3Layer {
  Value inNorm, q, k, v, qNorm, kNorm, o, postAttnNorm, preFfnNorm, postFfnNorm, gate, up, down;
};

Gemma3Layer declareLayer(GraphBuilder &b, const ModelConfig &c, int64_t l) {
  const int64_t C = c.nEmbd, H = c.nHead, KV = c.nKvHead, D = c.headDim(), F = c.ffnHidden;
  const double std = c.initStd;
  std::string p = "layers." + std::to_string(l) + ".";
  Gemma3Layer L;
  L.inNorm = b.param(p + "input_layernorm.weight", {C}, "zeros");
  L.q = b.param(p + "self_attn.q_proj.weight", {H * D, C}, "normal", std);
  L.k = b.param(p + "self_attn.k_proj.weight", {KV * D, C}, "normal", std);
  L.v = b.param(p + "self_attn.v_proj.weight", {KV * D, C}, "normal", std);
  L.o = b.param(p + "self_attn.o_proj.weight", {C, H * D}, "normal", std);
  L.qNorm = b.param(p + "self_attn.q_norm.weight", {D}, "zeros");
  L.kNorm = b.param(p + "self_attn.k_norm.weight", {D}, "zeros");
  L.postAttnNorm = b.param(p + "post_attention_layernorm.weight", {C}, "zeros");
  L.preFfnNorm = b.param(p + "pre_feedforward_layernorm.weight", {C}, "zeros");
  L.postFfnNorm = b.param(p + "post_feedforward_layernorm.weight", {C}, "zeros");
  L.gate = b.param(p + "mlp.gate_proj.weight", {F, C}, "normal", std);
  L.up = b.param(p + "mlp.up_proj.weight", {F, C}, "normal", std);
  L.down = b.param(p + "mlp.down_proj.weight", {C, F}, "normal", std);
  return L;
}

} // namespace

OwningOpRef<ModuleOp> buildGemma3(MLIRContext *context, const ModelConfig &c) {
  GraphBuilder b(context, c.family);
  const int64_t B = c.batchSize, T = c.seqLen, C = c.nEmbd, V = c.vocabSize;
  const int64_t H = c.nHead, KV = c.nKvHead, D = c.headDim();

  Value embed = b.param("embed_tokens.weight", {V, C}, "normal", c.initStd);
  std::vector<Gemma3Layer> layers;
  for (int64_t l = 0; l < c.nLayer; ++l) layers.push_back(declareLayer(b, c, l));
  Value norm = b.param("norm.weight", {C}, "zeros");
  Value head = c.tieEmbeddings ? embed : b.param("lm_head.weight", {V, C}, "normal", c.initStd);

  Value tokens = b.input("tokens", {B, T});
  Value targets = b.input("targets", {B, T});
  Value segments = c.packed() ? b.input("segments", {B, T}) : Value();
  Value positions = c.takesPositions() ? b.input("positions", {B, T}) : Value();

  // Gemma3RMSNorm: x / rms(x) · (1 + w), the 1 + w formed in fp32.
  auto norm1p = [&](Value x, Value w) { return b.rmsnorm(x, w, c.normEps, /*unitOffset=*/true); };
  // Gemma3TextScaledWordEmbedding multiplies by √hidden_size as a tensor
  // of the weights' dtype: rounded to fp32 here.
  Value x = b.scale(b.embedding(embed, tokens), double(float(std::sqrt(double(C)))));
  for (int64_t l = 0; l < c.nLayer; ++l) {
    const Gemma3Layer &L = layers[l];
    const double theta = c.ropeThetaOfLayer(l);
    const RopeScaling scaling = c.ropeScalingOfLayer(l);
    x = b.block("layers." + std::to_string(l), [&] {
      Value h = norm1p(x, L.inNorm);
      // Each head normalised over its head_dim, then rotated.
      auto heads = [&](Value w, Value headNorm, int64_t n) {
        Value y = norm1p(b.reshape(b.matmul(h, w, true), {B, T, n, D}), headNorm);
        return b.rope(y, positions, theta, scaling);
      };
      Value q = heads(L.q, L.qNorm, H);
      Value k = heads(L.k, L.kNorm, KV);
      Value v = b.reshape(b.matmul(h, L.v, true), {B, T, KV, D});
      Value att = b.attention(q, k, v, segments, c.attentionScale(), c.windowOfLayer(l));
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
