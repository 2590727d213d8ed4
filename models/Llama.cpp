//===- Llama.cpp - Llama-style models as an llm graph ---------------------===//
//
// Llama 2/3 as in the Hugging Face implementation: RMSNorm pre-norm blocks,
// separate q/k/v projections with grouped-query attention (n_kv_head kv
// heads; 1 = multi-query), rotary embeddings (half-split convention; Llama
// 3.1's frequency scaling when rope_scaling = llama3), SwiGLU MLP, no
// biases, optional tied output head. Linear weights are [out, in] (y = x·Wᵀ)
// with HF names without the "model." prefix.
//
// Qwen2/2.5, Qwen3, Mistral, Mixtral and Qwen-MoE are this block too: Qwen2
// adds biases to the q, k and v projections; Qwen3 has heads head_dim wide
// and normalises each head's q and k (an RMSNorm over head_dim, its own
// weights q_norm and k_norm shared by the heads) before RoPE, with biases on
// q, k, v and o only when attention_bias is set; Mistral's attention may see only a
// window of the latest keys (sliding_window); Mixtral's MLP is a mixture of
// experts (models/MixtureOfExperts.cpp), whose router statistics each block
// passes on beside the hidden state, to the loss; Qwen-MoE has Qwen2's
// attention and a mixture of experts with a shared expert in its sparse
// layers, a dense MLP in the others.
//
//===----------------------------------------------------------------------===//

#include "dialects/Annotations/Annotations.h"
#include "models/GraphBuilder.h"
#include "models/MixtureOfExperts.h"
#include "models/Models.h"

#include <cmath>

using namespace mlir;

namespace llmc {

OwningOpRef<ModuleOp> buildLlama(MLIRContext *context, const ModelConfig &c) {
  GraphBuilder b(context, c.family);
  const int64_t B = c.batchSize, T = c.seqLen, C = c.nEmbd, V = c.vocabSize;
  const int64_t H = c.nHead, KV = c.nKvHead, D = c.headDim(), F = c.ffnHidden;
  const double std = c.initStd;

  Value embed = b.param("embed_tokens.weight", {V, C}, "normal", std);
  struct Layer {
    Value inNorm, q, k, v, qBias, kBias, vBias, o, oBias, qNorm, kNorm, postNorm, gate, up, down;
    ExpertWeights experts;
  };
  std::vector<Layer> layers;
  for (int64_t l = 0; l < c.nLayer; ++l) {
    std::string p = "layers." + std::to_string(l) + ".";
    Layer L;
    L.inNorm = b.param(p + "input_layernorm.weight", {C}, "ones");
    L.q = b.param(p + "self_attn.q_proj.weight", {H * D, C}, "normal", std);
    L.k = b.param(p + "self_attn.k_proj.weight", {KV * D, C}, "normal", std);
    L.v = b.param(p + "self_attn.v_proj.weight", {KV * D, C}, "normal", std);
    if (c.qkvBias()) {
      L.qBias = b.param(p + "self_attn.q_proj.bias", {H * D}, "zeros");
      L.kBias = b.param(p + "self_attn.k_proj.bias", {KV * D}, "zeros");
      L.vBias = b.param(p + "self_attn.v_proj.bias", {KV * D}, "zeros");
    }
    L.o = b.param(p + "self_attn.o_proj.weight", {C, H * D}, "normal", std);
    if (c.outputBias())
      L.oBias = b.param(p + "self_attn.o_proj.bias", {C}, "zeros");
    if (c.qwen3Attention()) {
      L.qNorm = b.param(p + "self_attn.q_norm.weight", {D}, "ones");
      L.kNorm = b.param(p + "self_attn.k_norm.weight", {D}, "ones");
    }
    L.postNorm = b.param(p + "post_attention_layernorm.weight", {C}, "ones");
    if (c.sparseLayer(l)) {
      L.experts = declareExperts(b, c, p);
    } else {
      L.gate = b.param(p + "mlp.gate_proj.weight", {F, C}, "normal", std);
      L.up = b.param(p + "mlp.up_proj.weight", {F, C}, "normal", std);
      L.down = b.param(p + "mlp.down_proj.weight", {C, F}, "normal", std);
    }
    layers.push_back(L);
  }
  Value norm = b.param("norm.weight", {C}, "ones");
  Value head = c.tieEmbeddings ? embed : b.param("lm_head.weight", {V, C}, "normal", std);

  Value tokens = b.input("tokens", {B, T});
  Value targets = b.input("targets", {B, T});
  // Packed rows: rotary positions restart at every document, which attends
  // only to itself. Inference rows continue a cached sequence at their positions.
  Value segments = c.packed() ? b.input("segments", {B, T}) : Value();
  Value positions = c.takesPositions() ? b.input("positions", {B, T}) : Value();

  const RopeScaling scaling = c.ropeScalingParameters();
  Value x = b.embedding(embed, tokens);
  RouterSums sums = c.moe() ? startRouterSums(b, c) : RouterSums();
  for (int64_t l = 0; l < c.nLayer; ++l) {
    const Layer &L = layers[l];
    SmallVector<Value> out = b.blockValues("layers." + std::to_string(l), [&] {
      Value h = b.rmsnorm(x, L.inNorm, c.normEps);
      // x·Wᵀ (+ bias, Qwen2's q, k and v).
      auto project = [&](Value w, Value bias) {
        Value y = b.matmul(h, w, true);
        return bias ? b.add(y, bias) : y;
      };
      // Qwen3's per-head norm of q and k, before the rotation.
      auto heads = [&](Value y, int64_t n, Value norm) {
        Value split = b.reshape(y, {B, T, n, D});
        return norm ? b.rmsnorm(split, norm, c.normEps) : split;
      };
      Value q = b.rope(heads(project(L.q, L.qBias), H, L.qNorm), positions, c.ropeTheta, scaling);
      Value k = b.rope(heads(project(L.k, L.kBias), KV, L.kNorm), positions, c.ropeTheta, scaling);
      Value v = b.reshape(project(L.v, L.vBias), {B, T, KV, D});
      Value att = b.attention(q, k, v, segments, c.attentionScale(), c.windowOfLayer(l));
      Value o = b.matmul(b.reshape(att, {B, T, H * D}), L.o, true);
      Value r = b.add(x, b.dropout(L.oBias ? b.add(o, L.oBias) : o, c.dropout));
      Value h2 = b.rmsnorm(r, L.postNorm, c.normEps);
      Value mlp;
      if (c.sparseLayer(l)) {
        mlp = mixtureOfExperts(b, c, L.experts, h2, sums);
      } else {
        Value act = b.swiglu(b.matmul(h2, L.gate, true), b.matmul(h2, L.up, true));
        mlp = b.matmul(act, L.down, true);
      }
      Value out = b.add(r, b.dropout(mlp, c.dropout));
      // A dense layer of a mixture-of-experts model passes the sums on unchanged.
      if (c.moe())
        return SmallVector<Value>{out, sums.probSum, sums.counts, sums.zSum};
      return SmallVector<Value>{out};
    });
    x = out[0];
    if (c.moe())
      sums = {out[1], out[2], out[3]};
  }
  x = b.rmsnorm(x, norm, c.normEps);
  Value logits = b.matmul(x, head, /*transposeB=*/true);
  Value loss = b.crossEntropy(logits, targets);
  return b.finish(c.moe() ? addRouterLosses(b, c, loss, sums, c.sparseLayerCount()) : loss);
}

OwningOpRef<ModuleOp> buildModel(MLIRContext *context, const ModelConfig &config) {
  OwningOpRef<ModuleOp> module = config.family == "gpt2" ? buildGPT2(context, config)
                                 : config.gemma()        ? buildGemma(context, config)
                                                         : buildLlama(context, config);
  OpBuilder b(context);
  SmallVector<NamedAttribute> model = {
      b.getNamedAttr("family", b.getStringAttr(config.family)),
      b.getNamedAttr("vocab_size", b.getI64IntegerAttr(config.vocabSize)),
      b.getNamedAttr("n_layer", b.getI64IntegerAttr(config.nLayer)),
      b.getNamedAttr("n_head", b.getI64IntegerAttr(config.nHead)),
      b.getNamedAttr("n_embd", b.getI64IntegerAttr(config.nEmbd)),
      b.getNamedAttr("seq_len", b.getI64IntegerAttr(config.seqLen)),
      // The rest of the config: what a Hugging Face config.json is checked
      // against when weights load from one, and what `llmc export-hf` writes.
      b.getNamedAttr("n_kv_head", b.getI64IntegerAttr(config.nKvHead)),
      b.getNamedAttr("ffn_hidden", b.getI64IntegerAttr(config.ffnHidden)),
      b.getNamedAttr("max_positions", b.getI64IntegerAttr(config.maxPositions)),
      b.getNamedAttr("tie_embeddings", b.getI64IntegerAttr(config.tieEmbeddings)),
      b.getNamedAttr("norm_eps", b.getF64FloatAttr(config.normEps)),
      b.getNamedAttr("rope_theta", b.getF64FloatAttr(config.ropeTheta)),
  };
  if (config.slidingWindow > 0)
    model.push_back(b.getNamedAttr("sliding_window", b.getI64IntegerAttr(config.slidingWindow)));
  if (config.moe()) {
    model.push_back(b.getNamedAttr("num_experts", b.getI64IntegerAttr(config.numExperts)));
    model.push_back(
        b.getNamedAttr("experts_per_token", b.getI64IntegerAttr(config.expertsPerToken)));
    model.push_back(
        b.getNamedAttr("router_aux_loss_coef", b.getF64FloatAttr(config.routerAuxLossCoef)));
    model.push_back(
        b.getNamedAttr("output_router_logits", b.getI64IntegerAttr(config.outputRouterLogits)));
    model.push_back(
        b.getNamedAttr("router_z_loss_coef", b.getF64FloatAttr(config.routerZLossCoef)));
    model.push_back(b.getNamedAttr("norm_topk_prob", b.getI64IntegerAttr(config.normTopkProb)));
    model.push_back(b.getNamedAttr("scoring_func", b.getStringAttr(config.scoringFunc)));
    model.push_back(
        b.getNamedAttr("routed_scaling_factor", b.getF64FloatAttr(config.routedScalingFactor)));
    if (config.moeCapacityFactor > 0)
      model.push_back(
          b.getNamedAttr("moe_capacity_factor", b.getF64FloatAttr(config.moeCapacityFactor)));
  }
  if (config.qwenMoe()) {
    model.push_back(b.getNamedAttr("moe_ffn_hidden", b.getI64IntegerAttr(config.moeFfnHidden)));
    if (config.qwen2Moe())
      model.push_back(b.getNamedAttr("shared_expert_ffn_hidden",
                                     b.getI64IntegerAttr(config.sharedExpertFfnHidden)));
    model.push_back(
        b.getNamedAttr("decoder_sparse_step", b.getI64IntegerAttr(config.decoderSparseStep)));
    std::string dense;
    for (int64_t layer : config.mlpOnlyLayers)
      dense += (dense.empty() ? "" : ",") + std::to_string(layer);
    model.push_back(b.getNamedAttr("mlp_only_layers", b.getStringAttr(dense)));
  }
  if (config.qwen3Attention()) {
    model.push_back(b.getNamedAttr("head_dim", b.getI64IntegerAttr(config.headDim())));
    model.push_back(b.getNamedAttr("attention_bias", b.getI64IntegerAttr(config.attentionBias)));
  }
  if (config.gemma()) {
    model.push_back(b.getNamedAttr("head_dim", b.getI64IntegerAttr(config.headDim())));
    model.push_back(
        b.getNamedAttr("query_pre_attn_scalar", b.getF64FloatAttr(config.queryPreAttnScalar > 0
                                                                      ? config.queryPreAttnScalar
                                                                      : double(config.headDim()))));
    model.push_back(b.getNamedAttr("attn_softcap", b.getF64FloatAttr(config.attnSoftcap)));
    model.push_back(b.getNamedAttr("final_softcap", b.getF64FloatAttr(config.finalSoftcap)));
  }
  if (config.gemma3()) {
    model.push_back(
        b.getNamedAttr("sliding_window_pattern", b.getI64IntegerAttr(config.slidingWindowPattern)));
    model.push_back(
        b.getNamedAttr("rope_local_base_freq", b.getF64FloatAttr(config.ropeLocalTheta)));
  }
  if (config.ropeScaling != "none") {
    model.push_back(b.getNamedAttr("rope_scaling", b.getStringAttr(config.ropeScaling)));
    model.push_back(b.getNamedAttr("rope_factor", b.getF64FloatAttr(config.ropeFactor)));
    model.push_back(
        b.getNamedAttr("rope_low_freq_factor", b.getF64FloatAttr(config.ropeLowFreqFactor)));
    model.push_back(
        b.getNamedAttr("rope_high_freq_factor", b.getF64FloatAttr(config.ropeHighFreqFactor)));
    model.push_back(b.getNamedAttr("rope_original_max_positions",
                                   b.getI64IntegerAttr(config.ropeOriginalMaxPositions)));
  }
  // llmc-run cuts packed rows at this token (artifact metadata model.doc_separator).
  if (config.packed())
    model.push_back(b.getNamedAttr("doc_separator", b.getI64IntegerAttr(config.docSeparator)));
  (*module)->setAttr(kModelAttr, b.getDictionaryAttr(model));
  return module;
}

ParamStats countParameters(ModuleOp module) {
  ParamStats stats;
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward)
    return stats;
  for (unsigned i = 0; i < forward.getNumArguments(); ++i)
    if (llm::ParamAttr p = llm::getParamAttr(forward, i)) {
      int64_t n = cast<RankedTensorType>(forward.getArgument(i).getType()).getNumElements();
      stats.total += n;
      stats.tensors += 1;
      if (p.getTrainable())
        stats.trainable += n;
    }
  return stats;
}

} // namespace llmc
