//===- Passes.td - every llmc pass -------------------------*- tablegen -*-===//
//
// One declaration per pass; the implementation lives in <PassName>.cpp and
// the lit test in test/passes/<pass-flag>.mlir.
//
//===----------------------------------------------------------------------===//

#ifndef LLMC_PASSES
#define LLMC_PASSES

include "mlir/Pass/PassBase.td"

def FlattenBlocks : Pass<"llmc-flatten-blocks", "mlir::func::FuncOp"> {
  let summary = "Inlines llm.block regions, tagging each op with its block";
  let description = [{
    Moves the ops of every `llm.block` into the enclosing function and sets
    the discardable attribute `llmc.block_name` on each, so later passes
    (FSDP, recompute, pipeline) still see the layer structure while
    autodiff and lowering work on straight-line code.
  }];
  let dependentDialects = ["::llmc::llm::LLMDialect"];
}

def Autodiff : Pass<"llmc-autodiff", "mlir::ModuleOp"> {
  let summary = "Derives the gradient function from @forward";
  let description = [{
    Creates `@grad` with the arguments of `@forward`, returning the loss
    followed by the gradient of every trainable parameter (in argument
    order; each result carries `llmc.grad_of = "<param name>"`). Reverse-mode:
    one VJP rule per op (passes/lib/VJPRules.cpp); only values that depend on a
    trainable parameter get gradients. Backward ops carry the location and
    `llmc.block_name` of the forward op they differentiate.
  }];
  let options = [
    Option<"forwardName", "forward", "std::string", "\"forward\"",
           "Function to differentiate">,
    Option<"gradName", "grad", "std::string", "\"grad\"",
           "Name of the generated gradient function">,
  ];
  let dependentDialects = ["::llmc::llm::LLMDialect"];
}

def Optimizer : Pass<"llmc-optimizer", "mlir::ModuleOp"> {
  let summary = "Builds @train_step: microbatch accumulation, clipping, AdamW";
  let description = [{
    From `@grad` creates `@train_step(params, adam m, adam v, tokens[M,B,T],
    targets[M,B,T], lr, step) -> (loss, params', m', v', grad_norm)`: runs the gradient
    function once per microbatch, averages loss and gradients, optionally
    clips by global norm and applies one AdamW update per trainable
    parameter. Weight decay skips the parameter kinds listed in `no-decay`
    (norm gains, biases, embedding tables, recognised by how the graph uses
    them). Arguments and results carry `llmc.role`/`llmc.name`; updated
    state results carry `llmc.tied_to` (the argument they overwrite).
    `optimizer=adamw8bit` stores each moment as uint8 codes (role `adam_m`,
    `adam_v`) plus one fp32 absmax per block of 2048 (`adam_m_absmax`,
    `adam_v_absmax`) and updates with llm.adamw8bit.

    Observer states are threaded through the microbatches in order; an
    amax history (delayed fp8 scaling, `qat.amax_history`) is then
    committed with `qat.commit_state` on the global norm, so a skipped step
    leaves it unchanged as it leaves the parameters.

    `loss-scaling` (fp16) adds the input `loss_scale` after `step`: the
    backward of every microbatch is seeded with it instead of 1 (the
    autodiff seed, marked `llmc.loss_seed`), so the fp16 gradients carry the
    scale, and each AdamW update unscales them (its `loss_scale` operand).
    The output `grad_norm` is then the norm of the scaled gradients; an
    overflow makes it inf, which skips the step on every rank.

    `fp32-gradients` (the default) widens each microbatch's gradient of a
    low-precision (bf16/f16) parameter to fp32 right where the backward
    produces it: accumulation over microbatches, the data-parallel
    all-reduce or ZeRO reduce-scatter, the global norm and AdamW all run on
    fp32 (Megatron's "main grads"). A gradient whose backward ends in a
    tensor-parallel all-reduce (sequence parallelism's norm and bias sums) is
    widened before that sum instead. Off, gradients stay in the parameter's
    type until AdamW widens them.
  }];
  let options = [
    Option<"microbatches", "microbatches", "int64_t", "1", "Microbatches per step">,
    Option<"beta1", "beta1", "double", "0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", "0.95", "AdamW beta2">,
    Option<"epsilon", "epsilon", "double", "1e-8", "AdamW epsilon">,
    Option<"weightDecay", "weight-decay", "double", "0.1", "Decoupled weight decay">,
    Option<"noDecay", "no-decay", "std::string", "\"norm,bias\"",
           "Parameter kinds without weight decay: any of norm, bias, embedding">,
    Option<"maxGradNorm", "max-grad-norm", "double", "1.0",
           "Global gradient-norm clip (0 disables)">,
    Option<"optimizer", "optimizer", "std::string", "\"adamw\"",
           "adamw (fp32 moments) or adamw8bit (moments in 8-bit blocks of 2048)">,
    Option<"lossScaling", "loss-scaling", "bool", "false",
           "Dynamic loss scaling (fp16): seed the backward with the input loss_scale "
           "and unscale in AdamW">,
    Option<"fp32Gradients", "fp32-gradients", "bool", "true",
           "Accumulate, reduce and clip the gradients of bf16/f16 parameters in fp32">,
  ];
  let dependentDialects = ["::llmc::llm::LLMDialect", "::llmc::qat::QATDialect"];
}

def InferenceEntryPoints : Pass<"llmc-inference-entry-points", "mlir::ModuleOp"> {
  let summary = "Derives @logits (and @calibrate) from @forward";
  let description = [{
    Clones `@forward` into `@logits(params, tokens) -> logits`, returning the
    logits operand of the final `llm.cross_entropy` (used by evaluation
    sampling and generation). In both, `qat.ema` observers are frozen
    (momentum 1): inference reads the trained ranges without moving them.
    When @forward has EMA observers, `@calibrate` is @forward with them
    live, returning the loss and each updated observer state (tied to its
    argument): `llmc-run --calibrate N` runs it to set activation ranges
    after training, without changing a weight.
  }];
  let dependentDialects = ["::llmc::llm::LLMDialect"];
}

def WeightQuant : Pass<"llmc-weight-quant", "mlir::ModuleOp"> {
  let summary = "Weight-only quantized inference: matmuls read their weights quantized";
  let description = [{
    Runs on `@forward` of an inference compile (`--weight-quant`), before
    llmc-inference-entry-points. Every `llm.matmul` whose `b` is a 2-D
    parameter W (directly or through one `llm.cast`, as `--precision bf16`
    reads weights) that nothing else reads reads W's quantized storage
    instead — frozen parameters with the names and layout `llmc quantize
    --scheme <scheme>` writes — and W is removed:
    - `nf4:block<N>`: `llm.matmul_nf4` over `W.qweight`, `W.absmax_q`,
      `W.absmax_scale`, `W.absmax_mean` (QLoRA's storage; `double-quant`
      says whether the file's absmax levels are int8 or E4M3, as
      `llmc quantize --double-quant` wrote them);
    - `int8` / `int4` (`:tensor`, `:channel[<axis>]`, `:block<N>`, `:asym`):
      `llm.matmul_int` over `W.qweight`, `W.scale` and, asymmetric,
      `W.zero_point`; a channel axis left out is W's output channel;
    - `fp8` (`fp8_e4m3`; `:tensor`, `:channel[<axis>]`, `:block<N>`):
      `llm.matmul_int {fp8}` over one E4M3 byte per element in
      `W.qweight` and `W.scale`.
    A parameter another op also reads (GPT-2's tied `wte`, read by
    `llm.embedding`) stays in the compute type. A mixture of experts'
    `llm.grouped_matmul` over stacked weights `[G, K, F]` (`[G, F, K]`)
    becomes `llm.grouped_matmul_int` / `llm.grouped_matmul_nf4`, each
    expert's slice quantized as a dense weight of its shape with its own
    scales (`llmc quantize` writes the `:stacked` scheme); the router's
    matmul, whose logits pick the experts, stays in full precision. Under
    tensor parallelism a weight's storage (an expert stack's too, as its
    2-D view `[G·A, B]`) is split with the weight.

    ```mlir
    %y = llm.matmul %x, %w {transpose_b} : tensor<2x1x128xf32>, tensor<512x128xf32> -> ...
    // becomes, with scheme=int8:channel
    %y = llm.matmul_int %x, %codes, %scale
        {bits = 8 : i64, channel_axis = 0 : i64, weight_shape = array<i64: 512, 128>,
         transpose_b} : ...
    ```

    Errors: a scheme weight-only inference does not store, a block that
    does not divide a weight's last dimension, `double-quant` other than
    int8 or fp8, fp8 with an integer scheme, experts whose 4-bit codes do
    not fill whole bytes per expert, a tensor-parallel piece (of a weight
    or of an expert stack) that is not whole blocks or whole bytes, and
    experts split by expert parallelism.
  }];
  let options = [
    Option<"scheme", "scheme", "std::string", "\"nf4:block64\"",
           "The weights' scheme, as `llmc quantize --scheme` takes it">,
    Option<"doubleQuant", "double-quant", "std::string", "\"int8\"",
           "NF4's absmax levels: int8 | fp8 (E4M3), as `llmc quantize --double-quant`">,
  ];
  let dependentDialects = ["::llmc::llm::LLMDialect", "::llmc::qat::QATDialect"];
}

def KvCache : Pass<"llmc-kv-cache", "mlir::ModuleOp"> {
  let summary = "Turns @logits into @prefill or @decode over a paged KV cache";
  let description = [{
    Renames `@logits` to `@<program>` (`@forward` and `@calibrate` are
    dropped: an inference artifact runs only its steps) and rewrites each
    causal `llm.attention` into `llm.kv_cache_write` of the keys and of the
    values into the layer's block pools `[blocks, page, KV, D]` (arguments
    with role `kv_cache`, named `kv/<block>.k` and `.v`, each updated in
    place through a tied result) and an `llm.paged_attention` over them.
    New inputs: `block_table` `[B, max-blocks]` and `cache_positions`
    `[B, T]` (each token's position in its sequence, −1 for padding). The
    head runs on each row's last column: the step returns logits `[B, V]`.
    The graph must take a `positions` input; `llm.rope` ops reading it get
    `position_limit` = max-blocks × page, as positions run past the step's T.

    ```mlir
    %o, %lse = llm.attention %q, %k, %v {causal, scale = 0.25 : f64} : ...
    // becomes
    %kc1 = llm.kv_cache_write %kc, %k, %table, %pos : ...
    %vc1 = llm.kv_cache_write %vc, %v, %table, %pos : ...
    %o = llm.paged_attention %q, %kc1, %vc1, %table, %pos {scale = 0.25 : f64} : ...
    ```

    `cache-type` stores the pools in another type than the keys': bf16 or
    f16 under f32 (rounded on write, widened on read), or one-byte codes,
    `int8` (i8 pools) or `fp8_e4m3` (f8E4M3FN pools), with an f32 scale per
    token slot and kv head (`kv/<block>.k_scale` and `.v_scale`,
    `[blocks, page, KV]`, tied like the pools): the writes quantize,
    attention dequantizes each key and value as it reads it.
  }];
  let options = [
    Option<"program", "program", "std::string", "\"decode\"", "prefill | decode">,
    Option<"page", "page", "int64_t", "16", "Tokens per cache block">,
    Option<"blocks", "blocks", "int64_t", "1", "Blocks in each layer's pool">,
    Option<"maxBlocks", "max-blocks", "int64_t", "1",
           "Blocks per sequence (block_table columns): max context / page, rounded up">,
    Option<"cacheType", "cache-type", "std::string", "\"\"",
           "The pools' element type: empty for the keys' own, f32, bf16, f16, int8 or "
           "fp8_e4m3">,
  ];
  let dependentDialects = ["::llmc::llm::LLMDialect"];
}

def Fp8Matmuls : Pass<"llmc-fp8-matmuls", "mlir::ModuleOp"> {
  let summary = "Matmuls of fp8 fake-quantized operands become fp8 GEMMs on fp8 storage";
  let description = [{
    Runs after autodiff (and recomputation). A `qat.fake_quant` with a per
    tensor, symmetric fp8 scheme whose every reader is a matmul (directly
    or through `llm.reshape`) becomes a `qat.quantize_fp8` (fp8 codes and
    one scale), and each matmul of two such operands a `qat.matmul_fp8`
    that reads the codes (reshaped like the originals). A mixture of
    experts' `llm.grouped_matmul` and `llm.grouped_matmul_weight_grad`
    become `qat.grouped_matmul_fp8` and
    `qat.grouped_matmul_weight_grad_fp8` alike, the stacked experts'
    weight kept with one scale per expert where it was quantized expert by
    expert. Two E5M2 operands are never paired. Everything else is left as
    it is.

    ```mlir
    %c, %s = qat.quantize_fp8 %x range %r {scheme = #qat.scheme<format = "fp8_e4m3">}
        : tensor<4x16x128xbf16>, tensor<1x2xf32> -> tensor<4x16x128xf8E4M3FN>, tensor<1xf32>
    %y = qat.matmul_fp8 %c, %s, %wc, %ws
        : tensor<4x16x128xf8E4M3FN>, tensor<1xf32>, tensor<128x512xf8E4M3FN>, tensor<1xf32>
        -> tensor<4x16x512xbf16>
    ```

    With `fast-accumulation=forward`, the forward's products (and their
    recomputed copies in the backward) are marked `fast_accumulation`, as
    Transformer Engine runs its forward GEMMs; the backward's dX and dW
    products keep fp32 accumulation.
  }];
  let options = [
    Option<"fastAccumulation", "fast-accumulation", "std::string", "\"none\"",
           "Products marked fast_accumulation: forward | none">,
  ];
  let dependentDialects = ["::llmc::llm::LLMDialect", "::llmc::qat::QATDialect"];
}

def PadVocab : Pass<"llmc-pad-vocab", "mlir::ModuleOp"> {
  let summary = "Pads the LM head's vocabulary to a multiple of classes";
  let description = [{
    The first pass on @forward. The weight of the matmul feeding each
    `llm.cross_entropy` (a parameter, `[V, D]` with `transpose_b` or
    `[D, V]`) grows to `Vp`, V rounded up to a multiple of `multiple`, with
    a padding level in its `llmc.shard` (`global_shape` stays the real
    one, so initialisation, checkpoints and weight files see V classes);
    the logits become `[..., Vp]` and the loss gets `num_classes = V`,
    which leaves the padded columns out of the loss and their gradient.
    A tied embedding may read the weight too (token ids never reach the
    padding); any other reader is an error. The model attribute
    `llmc.model` records `padded_vocab_size`. A head that is not a
    parameter's matmul, or a vocabulary that is a multiple already, is
    left as it is; `multiple = 1` pads nothing.

    ```mlir
    %logits = llm.matmul %h, %wte {transpose_b} : tensor<4x64x128xf32>, tensor<320x128xf32>
    %loss = llm.cross_entropy %logits, %targets {num_classes = 257 : i64}
        : tensor<4x64x320xf32>, tensor<4x64xi32>
    ```
  }];
  let options = [
    Option<"multiple", "multiple", "int64_t", "1",
           "Pad the vocabulary to a multiple of this many classes (1: no padding)">,
  ];
  let dependentDialects = ["::llmc::llm::LLMDialect"];
}

def Precision : Pass<"llmc-precision", "mlir::ModuleOp"> {
  let summary = "Mixed precision: bf16 or fp16 compute with fp32 master weights";
  let description = [{
    Rewrites `@forward` so every parameter is cast to the compute type where
    it is used and activations flow in that type; normalization statistics,
    softmax, the loss and the optimizer stay fp32. Runs before autodiff, so
    gradients come out in fp32 through the casts' VJPs.
  }];
  let options = [
    Option<"computeType", "compute-type", "std::string", "\"bf16\"",
           "Compute element type: bf16, f16 or f32 (no-op)">,
  ];
  let dependentDialects = ["::llmc::llm::LLMDialect"];
}

def Shard : Pass<"llmc-shard", "mlir::ModuleOp"> {
  let summary = "Spreads @forward over a device mesh (data and tensor parallel)";
  let description = [{
    Declares `dist.mesh @mesh` from `mesh` ("dp=2,tp=2": axis names and
    sizes, in any order) and records the layout in the module attribute
    `llmc.layout`. Ranks are numbered row-major over the mesh axes in
    `rank-order` (last fastest); by default pp, dp, fsdp, other axes as
    written, then tp, so a tensor-parallel group is a run of consecutive
    ranks (one node). Data parallelism: the batch axes (`dp`, and
    `fsdp` for hybrid sharding) split dimension 0 of every batch-derived
    value, so @forward computes one rank's share of the batch; each rank's
    loss is the mean over its rows, and the optimizer pass averages
    gradients and losses over the batch axes. Ops whose semantics would mix
    batch rows (a transpose moving dimension 0, a slice or concat along it)
    are errors naming the op.
  }];
  let options = [
    Option<"mesh", "mesh", "std::string", "\"\"", "Mesh axes and sizes, e.g. dp=2,tp=2">,
    Option<"zero", "zero", "int64_t", "0", "ZeRO stage over the sharding axis (0-3)">,
    Option<"gradSync", "grad-sync", "std::string", "\"allreduce\"",
           "Data-parallel gradient sync: allreduce | ps (reduce to rank 0 + broadcast)">,
    Option<"rankOrder", "rank-order", "std::string", "\"\"",
           "Mesh axes from slowest to fastest varying rank coordinate (default: "
           "pp,dp,fsdp,<others>,tp)">,
    Option<"sequenceParallel", "sp", "bool", "false",
           "Megatron sequence parallelism: split the residual stream of every "
           "llm.block along the sequence over tp">,
    Option<"sharedTokens", "shared-tokens", "bool", "false",
           "A generation step: every rank holds the whole batch, so ep spreads "
           "the experts over ranks that share the tokens (each computes its "
           "experts' rows; an all-reduce adds them) instead of splitting the "
           "batch">,
  ];
  let dependentDialects = ["::llmc::llm::LLMDialect", "::llmc::dist::DistDialect"];
}

def LoRA : Pass<"llmc-lora", "mlir::ModuleOp"> {
  let summary = "Low-rank adapters beside the chosen matmuls; the base model frozen";
  let description = [{
    Runs on @forward after llmc-shard (and llmc-qat), before autodiff.
    `spec` (the `--lora` flag): `rank=8, alpha=16, targets=qkv,proj,mlp`.
    Every matmul with a weight parameter that a target names gets
    y + (alpha/rank)·(x·A)·B, with A [K, r] uniform in ±1/√K and B [r, N]
    zeros (a transposed weight [N, K]: A [r, K], B [N, r]), named
    `<weight>.lora_A` / `.lora_B`; every other parameter becomes
    `trainable = false`. Targets: `qkv` (projections feeding attention),
    `proj` (the matmul reading attention's output), `mlp` (the other
    matmuls of a layer), `head` (the matmul feeding the loss), a layer
    (`h.3`) or a parameter name or dotted prefix. Under tensor parallelism
    adapters are split like their weight. A target that matches nothing, or
    a rank not below the weight's smaller dimension, is an error.

    `qlora`: each adapted weight W becomes four frozen tensors in QLoRA's
    storage — `W.qweight` (NF4 indices, two per byte), `W.absmax_q` (an
    8-bit level per block of `qlora-block`: int8, or E4M3 with
    `qlora-double-quant=fp8`), `W.absmax_scale` (fp32 per 256 blocks),
    `W.absmax_mean` — the layout `llmc quantize --scheme nf4:block<N>
    [--double-quant fp8]` writes, expanded by qat.dequantize_nf4 right
    before its matmul (and again for the backward: see llmc-recompute).
    Split with its weight under tensor parallelism when the pieces are
    whole blocks; not for a weight another op than its matmul and a lookup
    reads. A mixture of experts' stack is stored as its 2-D view (expert
    after expert), split with the stack under tensor or expert
    parallelism, and expanded before its grouped matmul.
  }];
  let options = [
    Option<"spec", "spec", "std::string", "\"\"", "rank=, alpha=, targets=">,
    Option<"qlora", "qlora", "bool", "false",
           "Store every adapted base weight in NF4 (blocks of qlora-block, double-"
           "quantized absmax) and expand it inside the step">,
    Option<"qloraBlock", "qlora-block", "int64_t", "::llmc::quant::kNf4Block",
           "NF4 block size">,
    Option<"qloraDoubleQuant", "qlora-double-quant", "std::string", "\"int8\"",
           "NF4's absmax levels: int8 | fp8 (E4M3), as `llmc quantize --double-quant`">,
  ];
  let dependentDialects = ["::llmc::llm::LLMDialect", "::llmc::dist::DistDialect",
                           "::llmc::qat::QATDialect"];
}

def QAT : Pass<"llmc-qat", "mlir::ModuleOp"> {
  let summary = "Quantization-aware training: fake-quantize the chosen weights and activations";
  let description = [{
    Runs on @forward after llmc-shard (so it sees each rank's pieces) and
    before autodiff. `spec` (the `--qat` flag) names the schemes and sites:

    ```
    weights=int4:block64:sym, activations=int8:tensor:asym:ema, ops=matmul, skip=embedding,head
    ```

    - `weights=` / `activations=`: format (int8, int4, fp8_e4m3, fp8_e5m2,
      nf4), granularity (tensor; channel[<axis>], default a weight's output
      channel and an activation's last dimension; block<size> along the last
      dimension), sym | asym, observer minmax | ema[<momentum>].
    - `ops=`: which ops' operands are quantized: matmul (its weight and its
      activation input; a mixture of experts' `llm.grouped_matmul` too, its
      stacked experts' weight as one tensor and its routed rows as the
      input), embedding (its table as a weight).
    - `skip=`: `head` (the matmul whose result reaches the loss),
      `embedding`, `router` (the matmuls computing a mixture of experts'
      router logits), a layer (`h.3`) or a parameter
      (`h.0.attn.c_attn.weight`, or any dotted prefix such as `h.0.mlp`). An
      entry that matches nothing is an error. `keep-routers` skips the
      routers of a model that has them and is silent for one that has none
      (`--precision fp8`, which keeps gating in high precision as
      DeepSeek-V3's fp8 recipe does).

    Each site becomes `qat.observe` (the ranges of the current tensor) →
    [`dist.all_reduce max` over the mesh axes that split a quantization
    group: the batch axes for an activation, tensor parallelism where it
    splits a group's elements] → `qat.fake_quant`, so every layout
    quantizes with the ranges one rank would see. With an `ema` observer
    the range comes from `qat.ema` over a persistent state argument
    (`llmc.role = "qat_state"`, named `qat/<site>`), which @forward returns
    updated (`llmc.tied_to`).

    A `delayed` observer (`fp8_e4m3:delayed1024:margin0:max`, fp8 formats
    per tensor; `--precision fp8 --fp8-scaling delayed`) is Transformer
    Engine's delayed scaling: each site gets an amax history as its
    persistent state (`qat/<site>`, `<param>.output_grad` for a gradient),
    quantizes with `qat.delayed_range` of it and records this step's
    combined range with `qat.amax_history`; llmc-optimizer commits the
    updated histories only when the step is applied (`qat.commit_state`).
    A mixture of experts' stacked weights, routed rows and dY keep one
    history per expert (a `[experts, history + 1]` state, sharded over ep
    like the experts).
  }];
  let options = [
    Option<"spec", "spec", "std::string", "\"\"",
           "weights=<scheme>, activations=<scheme>, ops=..., skip=...">,
    Option<"keepRouters", "keep-routers", "bool", "false",
           "Skip the mixture-of-experts routers' matmuls where there are any">,
  ];
  let dependentDialects = ["::llmc::qat::QATDialect", "::llmc::dist::DistDialect"];
}

def FSDP : Pass<"llmc-fsdp", "mlir::ModuleOp"> {
  let summary = "ZeRO-3: keep only parameter shards; gather per block before use";
  let description = [{
    Runs after llmc-optimizer on a ZeRO-3 layout. Each shardable parameter
    becomes a shard argument updated in place; every forward and backward
    use reads an all_gather issued once per (microbatch, block, phase),
    `prefetch` blocks ahead of its use. With `reshard-after-forward=false`
    the forward's gather is kept alive for the backward instead of gathering
    again; with `keep-gathered` each parameter is gathered once per step and
    kept for every microbatch (one gather instead of one per microbatch and
    phase, the stage's full parameters alive for the whole step). Under
    pipeline stages llmc-pipeline-parallel moves each gather into the action
    that uses it.
  }];
  let options = [
    Option<"reshardAfterForward", "reshard-after-forward", "bool", "true",
           "Free gathered parameters after forward and gather again for backward">,
    Option<"keepGathered", "keep-gathered", "bool", "false",
           "Gather each parameter once per step and keep it for every microbatch">,
    Option<"prefetch", "prefetch", "int64_t", "1",
           "Issue a block's gather this many blocks before its first use">,
  ];
  let dependentDialects = ["::llmc::dist::DistDialect"];
}

def Recompute : Pass<"llmc-recompute", "mlir::ModuleOp"> {
  let summary = "Activation recomputation: trade backward FLOPs for activation memory";
  let description = [{
    Works on @train_step (and @grad), per layer (`llm.block`) and microbatch. The forward
    values a layer's backward reads are normally kept from the forward pass
    to the backward; this pass recomputes some of them instead, with clones
    of their forward ops placed just before the layer's backward (marked
    `llmc.backward` and `llmc.recomputed`), so the originals die as soon as
    the forward is done with them.

    - `full`: every value the backward reads is recomputed from the
      layer's input (only the input stays alive between the passes).
    - `selective`: only values made by cheap, memory-heavy ops —
      normalisation, activation functions, dropout, elementwise and shape
      ops — are recomputed, as are the tensor-parallel entry (an identity
      forward) and sequence parallelism's gather of a normalised input (so
      only its 1/t shard is kept, as Megatron does); matmul, attention and
      other collective results are kept (Korthikanti et al.'s selective
      recomputation; llmc's attention never stores its s×s scores, so what
      remains to save is these).
    - `none`: nothing is recomputed but QLoRA base weights.

    In every mode a weight expanded from 4-bit storage (qat.dequantize_nf4)
    is expanded again for the backward rather than kept in full precision.
    `layers` sets the mode per layer (what `--recompute budget=<bytes>`
    chooses). Dropout draws the same mask when recomputed (it depends on seed, step
    and element index only), so recomputation never changes the losses.
  }];
  let options = [
    Option<"mode", "mode", "std::string", "\"none\"", "none | full | selective">,
    Option<"layerModes", "layers", "std::string", "\"\"",
           "Per layer, overriding mode: h.0=full,h.1=selective,... (a mode with +offload, "
           "or offload for none, is that mode here; llmc-offload-activations moves it)">,
  ];
  let dependentDialects = ["::llmc::llm::LLMDialect"];
}

def OffloadActivations : Pass<"llmc-offload-activations", "mlir::ModuleOp"> {
  let summary = "Activation offloading: saved activations in host memory between the passes";
  let description = [{
    Works on @train_step (and @grad), per layer (`llm.block`) and microbatch,
    after recomputation has decided what each layer keeps. Every value a
    chosen layer's forward produces and a backward reads goes to host memory
    through `llm.copy_to_host` right after its last forward use, and comes
    back through `llm.copy_to_device` before the backward reads it: one
    layer ahead (at the start of the backward of the layer that runs before
    it), so on a GPU the copy can overlap that layer's compute, and right
    before its reader when no earlier layer's backward follows the copy
    down. The backward reads the copy; the device arena holds only the
    layers in flight. Copies are exact, so losses do not change.

    `layers` names the layers (empty: every layer). Pipeline stages are not
    supported yet.
  }];
  let options = [
    Option<"layers", "layers", "std::string", "\"\"",
           "Comma-separated layers to offload (empty: every layer)">,
    Option<"prefetch", "prefetch", "bool", "true",
           "Bring a layer's activations back at the start of the backward before its own">,
  ];
  let dependentDialects = ["::llmc::llm::LLMDialect"];
}

def PipelineParallel : Pass<"llmc-pipeline-parallel", "mlir::ModuleOp"> {
  let summary = "Splits the training step into pipeline stages with a microbatch schedule";
  let description = [{
    With a `pp` axis of size p in the mesh: the layers are cut into p·v
    model chunks (balanced by their FLOPs, or by `stage-layout`, layers per
    chunk), chunk c running on stage c mod p. Each op of the single-program
    step goes to its (microbatch, chunk, phase) action; values that cross
    stages travel by dist.send / dist.recv along `pp`; ops outside
    microbatches (gradient sync, the optimizer) run on every stage that
    needs them; the gradient norm is summed over stages and the loss
    broadcast from the last. Each stage becomes a nested module
    `@stage<s>` (`llmc.ranks`: the ranks at that pp coordinate) whose
    programs run the actions in the order of `schedule`. The module gets
    `llmc.pipeline`: the layout, each stage's action order, the expected
    bubble fraction (simulated, and the textbook value) and the most
    microbatches in flight per stage.
  }];
  let options = [
    Option<"schedule", "schedule", "std::string", "\"1f1b\"",
           "naive | gpipe | 1f1b | interleaved | zero-bubble">,
    Option<"virtualStages", "virtual-stages", "int64_t", "1",
           "Model chunks per stage (interleaved)">,
    Option<"stageLayout", "stage-layout", "std::string", "\"\"",
           "Layers per model chunk, e.g. 3,3,2 (default: balanced by FLOPs)">,
  ];
  let dependentDialects = ["::llmc::llm::LLMDialect", "::llmc::dist::DistDialect"];
}

def BucketGradients : Pass<"llmc-bucket-gradients", "mlir::ModuleOp"> {
  let summary = "Fuses gradient all-reduces into buckets, in backward order";
  let description = [{
    Each gradient's all-reduce is issued where backward produces it, so
    communication overlaps the rest of backward; but one collective per
    tensor pays the latency of each. Like PyTorch DDP, this pass groups the
    gradient all-reduces of @train_step (those the optimizer pass marked
    `llmc.gradient_sync`) into buckets of about `bucket-bytes`, in the order
    backward produces them: the members are flattened and concatenated, one
    all-reduce runs where the bucket's last gradient is produced, and each
    member reads its slice back (views; the one copy is the concat).
    `bucket-bytes=0` keeps one all-reduce per gradient.

    ```mlir
    %a = dist.all_reduce %ga ... : tensor<8x8xf32>    // two gradients
    %b = dist.all_reduce %gb ... : tensor<8xf32>
    // becomes
    %fa = llm.reshape %ga : tensor<8x8xf32> to tensor<64xf32>
    %c = llm.concat %fa, %gb {dim = 0 : i64} : ... -> tensor<72xf32>
    %r = dist.all_reduce %c ... : tensor<72xf32>
    %sa = llm.slice %r {offsets = array<i64: 0>} : tensor<72xf32> to tensor<64xf32>
    %a = llm.reshape %sa : tensor<64xf32> to tensor<8x8xf32>
    %b = llm.slice %r {offsets = array<i64: 64>} : tensor<72xf32> to tensor<8xf32>
    ```
  }];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t", "26214400",
           "Close a bucket once it holds this many bytes (0: no buckets)">,
  ];
  let dependentDialects = ["::llmc::llm::LLMDialect", "::llmc::dist::DistDialect"];
}

def OffloadOptimizer : Pass<"llmc-offload-optimizer", "mlir::ModuleOp"> {
  let summary = "ZeRO-Offload: optimizer state in host memory, its update on the host";
  let description = [{
    Runs after llmc-lower-to-exec. The optimizer state (fp32 masters and
    AdamW's moments) moves from the device arena to the host memory space,
    numbered after the arena (`exec.host_bytes` on the module,
    `exec.host_space` on its buffers), and every kernel that reads or writes
    it runs on the host (`exec.on_host`): the AdamW updates, and under mixed
    precision the casts of the updated masters to the parameters' type.
    Device values those kernels read are copied down by `copy_to_host`
    right after their last write (a gradient as soon as it is final); device
    values they write are copied up by `copy_to_device` right after them.
    The arena shrinks by the state's bytes; the memory plan gains `host`
    and `host_optimizer_state`. A collective on the state is an error.
  }];
}

def OffloadWeights : Pass<"llmc-offload-weights", "mlir::ModuleOp"> {
  let summary = "Generation: the last layers' weights in host memory, streamed to the device";
  let description = [{
    Runs after llmc-lower-to-exec on generation steps (`llmc compile
    --inference ... --device-memory <bytes>`). When the arena exceeds
    `device-bytes`, the weights of the last decoder layers (the fewest that
    fit) move to the host memory space (`exec.host_space`), and each step
    copies them (`copy_to_device`) into two device staging slots that take
    turns, one layer ahead of the kernels that read them. The memory plan
    gains `host`, `host_weights` and `weight_staging`. With `layers=host`
    the moved layers' KV-cache pools go to host memory too and the stretch
    of each step running those layers runs on the host (`exec.on_host`),
    with host mirrors of the device buffers it touches, copied in before
    and out after it (`host_kv_cache`, `host_scratch`); nothing is staged.
    With `layers=split` the KV-cache pools go to host memory as under
    `host`; @decode runs the moved layers on the host, @prefill streams
    each one's weights and pools into the staging slots and copies its
    pools back (`copy_to_host`) after its last kernel.
    An arena that fits is left alone; a budget that nothing fits is an
    error naming the least device memory that would do.
  }];
  let options = [
    Option<"deviceBytes", "device-bytes", "int64_t", "0",
           "Device memory per rank in bytes (0: no limit)">,
    Option<"layers", "layers", "std::string", "\"stream\"",
           "What the moved layers do: stream (their weights copied to the device a layer "
           "ahead) | host (run on the host's cores, their KV cache in host memory too) | "
           "split (streamed with their KV cache for @prefill, run on the host for @decode)">,
  ];
}

def MemoryBudget : Pass<"llmc-memory-budget", "mlir::ModuleOp"> {
  let summary = "Fails compilation when a rank's planned arena exceeds the budget";
  let description = [{
    Runs after llmc-lower-to-exec. When any role's (pipeline stage's)
    planned arena is larger than `bytes`, compilation fails before anything
    runs, naming the stage, by how much it is over, the largest contributors
    (parameters, gradients, optimizer state, activations, ...) and the
    options that shrink each.
  }];
  let options = [
    Option<"bytes", "bytes", "int64_t", "0", "Per-rank memory budget in bytes (0: none)">,
  ];
}

def DecomposeCollectives : Pass<"llmc-decompose-collectives", "mlir::ModuleOp"> {
  let summary = "Gathers and scatters along any dimension become dimension-0 ones";
  let description = [{
    The runtime's collectives move whole buffers: a gather concatenates the
    ranks' buffers, a scatter hands out consecutive chunks, i.e. along
    dimension 0. A `dist.all_gather`, `dist.reduce_scatter` or
    `dist.all_slice` along dimension d > 0 (a sequence-parallel gather, a
    vocabulary gather) becomes the dimension-0 collective on a view with the
    rank chunks outermost, plus one `llm.transpose` that moves the chunk
    dimension into place. When every dimension before d has size 1 the
    chunks are already contiguous and only reshapes are needed.

    ```mlir
    %g = dist.all_gather %x on @mesh axes ["tp"] dim 1 : tensor<2x4x8xf32> -> tensor<2x8x8xf32>
    // becomes
    %r = llm.reshape %x : tensor<2x4x8xf32> to tensor<1x2x4x8xf32>
    %a = dist.all_gather %r on @mesh axes ["tp"] dim 0 : tensor<1x2x4x8xf32> -> tensor<2x2x4x8xf32>
    %t = llm.transpose %a {permutation = array<i64: 1, 0, 2, 3>} : tensor<2x2x4x8xf32> to tensor<2x2x4x8xf32>
    %g = llm.reshape %t : tensor<2x2x4x8xf32> to tensor<2x8x8xf32>
    ```
  }];
  let dependentDialects = ["::llmc::llm::LLMDialect", "::llmc::dist::DistDialect"];
}

def LowerToExec : Pass<"llmc-lower-to-exec", "mlir::ModuleOp"> {
  let summary = "Kernel selection, buffer liveness and static arena offsets";
  let description = [{
    Lowers `@train_step`, `@forward` and `@logits` (whichever exist) into
    `exec.program`s. Persistent state (parameters, optimizer moments, inputs,
    outputs) is laid out first under stable names; every other value gets a
    buffer whose lifetime is its first definition to last use, packed by
    the smaller of a first-fit (by start time) and a greedy-by-size
    placement so nothing is allocated during a step. Reshapes and
    contiguous slices become views. The module receives `exec.arena_bytes`
    and the memory-plan attribute `exec.memory_plan`: per program, the peak
    and the bytes live there by category (activation: forward values the
    backward reads; communication: collective and receive results;
    workspace: other temporaries; grad, input, output), the live-bytes
    bound (the most bytes live at one instruction, which no placement's
    peak is below), the activations at the peak by microbatch, each
    category's own peak, and the bytes each layer keeps for its backward
    (a value belongs to the layer whose backward reads it first). The peak
    is the instruction with the most bytes live among those at which the
    arena's top byte is in use.

    With `target=cuda`, each attention op that cuDNN's fused attention may
    run (bf16/f16, head dim a multiple of 8 up to 256, no segment ids) gets
    one more output: a `workspace` buffer (`memref<Nxi8>`, category
    workspace) live only at that instruction, N from the formula of
    common/AttentionWorkspace.h (the backward's dP, 2·B·H·T·S
    bytes, and attention_rope's rotated q and k), so the memory plan holds
    what cuDNN needs and nothing is allocated during a step.

    ```mlir
    exec.kernel "attention_packed_grad" (%qkv, %out, %lse, %dout : ...)
        -> (%dqkv, %ws : memref<4x64x576xbf16>, memref<17055744xi8>) {...}
    ```
  }];
  let options = [
    Option<"target", "target", "std::string", "\"cpu\"",
           "Backend the programs run on (cpu | cuda): cuda plans cuDNN attention's workspaces">,
  ];
  let dependentDialects = ["::llmc::exec::ExecDialect"];
}

def VerifyCollectives : Pass<"llmc-verify-collectives", "mlir::ModuleOp"> {
  let summary = "Proves that the ranks' collectives and point-to-point transfers match";
  let description = [{
    Runs on lowered `exec` programs. Every rank runs, for each program
    kind, the program whose `exec.ranks` attribute lists it (a program
    without one runs on every rank). For every group of ranks a collective
    names (the ranks that differ only in its mesh axes), every member must
    issue the same sequence of collectives on that group — same operation,
    dtype, element count, reduction and root — or the run would hang or
    mix unrelated data: the first difference is a compile error naming both
    ranks, the operation each issues and where it came from. Sends and
    receives must pair up: each send from rank a to rank b (with its tag and
    bytes) has the matching receive on b, in the same order, and no transfer
    leaves the mesh.
  }];
  let dependentDialects = ["::llmc::exec::ExecDialect"];
}

def Fuse : Pass<"llmc-fuse", "mlir::ModuleOp"> {
  let summary = "Rewrites op groups into fused kernels";
  let description = [{
    The last pass on llm ops (after sharding, recomputation, FSDP and the
    pipeline stages), so every fused op is born where no other pass has to
    understand it, and each fusion only matches what those passes left:
    values another op still needs, collectives in between or a LoRA branch
    keep their ops unfused.

    `linear-cross-entropy`: the language-model head and its loss,
    `llm.matmul` → `llm.cross_entropy` (and in training
    `llm.cross_entropy_grad` with the two matmuls of its backward), become
    `llm.linear_cross_entropy(_train)`, which computes the logits
    `chunk_rows` rows at a time, so the whole [rows, V] logits and their
    gradient are never stored: the arena holds a chunk of at most
    `chunk-mb` MiB of logits instead, 4 bytes each on the CPU and the
    head's type's under `target=cuda` (`llmc compile --fuse-chunk-mb`:
    each chunk adds its share into the head's weight gradient, so much
    smaller chunks pass over that gradient many times), in equal chunks
    of a multiple of 128 rows where it fits. f32, bf16 or f16, in the
    head's type; a padded vocabulary's `num_classes` carries over. Under tensor parallelism the vocabulary-parallel
    loss's `llm.reduce_max` and `llm.cross_entropy_partial` become
    `llm.linear_cross_entropy_partial` (its sum rescaled to the
    all-reduced shift by an `llm.fused_elementwise`), and
    `llm.cross_entropy_partial_grad` with its two matmuls
    `llm.linear_cross_entropy_partial_grad`, which computes the logits
    again; the collectives between them stay.

    `bias`, `bias-gelu`: a matmul with a shared weight, the bias `llm.add`
    after it and (`bias-gelu`) the `llm.gelu` after that become one
    `llm.linear` (a GEMM with its epilogue), when the product feeds only
    the add and the ops run in the same part of the step. Where the
    biased value has other readers (`gelu_grad` in training) the fused op
    returns it too (`keep_pre`).

    `bias-grad`: a layer's weight gradient
    `llm.matmul (reshape x), (reshape dy) {transpose_a}` and its bias
    gradient `llm.reduce_sum dy` become one `llm.linear_weight_grad`,
    whose CUDA kernel sums dy's rows in the GEMM's epilogue. On the CPU the
    sum is no cheaper inside the GEMM, so `all` includes it only for
    `target=cuda` (named, it applies on the CPU too, computing what the
    unfused ops do).

    `gelu-grad`, `swiglu-grad`: the data-gradient product `llm.matmul %dy,
    %w` of the layer after a GELU (SwiGLU) and the `llm.gelu_grad %pre, ·`
    (`llm.swiglu_grad %gate, %up, ·`) reading it become one
    `llm.matmul_gelu_grad` (`llm.matmul_swiglu_grad`), placed where the
    backward was, when the product feeds only it and the ops run in the
    same part of the step. On CUDA the GELU's is cuBLASLt's DGELU epilogue.

    `residual` (before `add-norm`): the residual stream's `llm.add` of a
    product (a shared-weight `llm.matmul`, or an `llm.linear` with its bias)
    in the forward becomes that `llm.linear` with the stream as its
    `residual`, added in the GEMM's epilogue, when the product feeds only
    the add, the addend has the product's type and is not computed from
    the product's input (a LoRA branch), and the ops run in the same part
    of the step. The fused op stands where the add was.

    `add-norm`: a residual `llm.add` (operands of one shape) and the
    `llm.layernorm` / `llm.rmsnorm` of its sum become `llm.add_layernorm` /
    `llm.add_rmsnorm` (returning the sum too); a norm's backward whose dx
    only feeds an add becomes `llm.layernorm_grad_add` /
    `llm.rmsnorm_grad_add`. The ops must run in the same part of the step
    (the layer's name may differ: one layer's last add feeds the next
    layer's norm).

    `qkv-split`: an `llm.attention` whose q, k and v are reshaped slices of
    one packed projection (columns 0, H·D and (H + KV)·D) becomes
    `llm.attention_packed`, reading them in place, and each
    `llm.attention_grad` of the same pieces whose gradients are padded back
    and summed becomes `llm.attention_packed_grad`, writing that sum. Not
    when a piece or a gradient has another reader.

    `rope`: an `llm.attention` whose q and k are `llm.rope` of one rotation
    becomes `llm.attention_rope` of the unrotated q and k, and each
    `llm.attention_grad` of the same inputs whose dq and dk feed only the
    inverse ropes becomes `llm.attention_rope_grad`, which returns the
    gradients of the unrotated q and k. Not when a rotated value has
    another reader.

    `multi-tensor-adamw`: a run of the step's `llm.adamw` ops with the same
    step inputs and hyperparameters (weight decay 0 or one shared value),
    the `llm.cast` narrowing each updated fp32 master and the one widening
    each bf16/f16 gradient, become one `llm.multi_tensor_adamw` at the
    run's first update. Operands computed later move up with it when a
    pure llm op or an `all_slice` computes them; a communicating
    collective ends the run. `llm.adamw8bit` stays per tensor.

    `elementwise` (last, taking what the others left): a chain of two or
    more elementwise ops (`add`, `mul`, `scale`, `cast`, `dropout`, `gelu`,
    `silu`, `swiglu` and their gradients) of one part of the step becomes
    one `llm.fused_elementwise`, whose program replays them per element
    and rounds where they stored; a chain value read elsewhere is one more
    result.

    `fusions` is `all`, `none` or a comma-separated list of fusion names.

    ```mlir
    %logits = llm.matmul %h, %w {transpose_b} : ...
    %loss = llm.cross_entropy %logits, %t : ...
    // becomes
    %loss, %scratch = llm.linear_cross_entropy %h, %w, %t {chunk_rows = 64 : i64, transpose_b} : ...

    %m = llm.matmul %x, %w : ...
    %a = llm.add %m, %b : ...
    %g = llm.gelu %a : ...
    %d = llm.gelu_grad %a, %dy : ...
    // becomes
    %g, %a = llm.linear %x, %w, %b {gelu, keep_pre} : ...
    %d = llm.gelu_grad %a, %dy : ...
    ```
  }];
  let options = [
    Option<"fusions", "fusions", "std::string", "\"all\"",
           "all | none | comma-separated fusion names (add-norm, bias, bias-gelu, "
           "bias-grad, elementwise, gelu-grad, linear-cross-entropy, multi-tensor-adamw, qkv-split, "
           "residual, rope, swiglu-grad)">,
    Option<"chunkMb", "chunk-mb", "double", "256",
           "linear-cross-entropy: MiB of logits computed at a time">,
    Option<"target", "target", "std::string", "\"cpu\"",
           "Backend the program runs on (cpu | cuda): `all` includes bias-grad on cuda only">,
  ];
  let dependentDialects = ["::llmc::llm::LLMDialect"];
}

def PlaceStreams : Pass<"llmc-place-streams", "mlir::ModuleOp"> {
  let summary = "Puts communication on its own stream, ordered by events";
  let description = [{
    Runs on lowered `exec` programs. Kernels stay on stream 0 (compute);
    collectives, all_slice, send and recv move to stream 1 (communication),
    so gradient reduction and FSDP gathers overlap compute: a GPU enqueues
    the streams on two CUDA streams, the CPU executor runs stream 1 on a
    thread of its own (`llmc compile --overlap-comm`). The arena planner
    packed buffers assuming one ordered stream, so every pair of
    instructions on different streams that touch overlapping arena bytes
    (read after write, write after read, write after write) gets an
    explicit order: `exec.record_event` after the earlier one on its
    stream, `exec.wait_event` before the later one. A wait already implied
    by an earlier wait on the same stream pair is not repeated. The runtime
    checks the result again before running it (docs/runtime.md).

    ```mlir
    exec.all_reduce %g -> %g group ["dp"] : memref<64xf32> -> memref<64xf32>
    // becomes, when a kernel on stream 0 wrote %g just before:
    exec.record_event 0 stream 0
    exec.wait_event 0 stream 1
    exec.all_reduce %g -> %g group ["dp"] {stream = 1 : i64} : memref<64xf32> -> memref<64xf32>
    ```
  }];
  let dependentDialects = ["::llmc::exec::ExecDialect"];
}

def TargetCuda : Pass<"llmc-target-cuda", "mlir::ModuleOp"> {
  let summary = "Prepares lowered exec programs for the CUDA backend";
  let description = [{
    Places streams and events as `llmc-place-streams` does (on a GPU
    communication always has its own stream) and marks the module
    `exec.backend = "cuda"`. Pipeline transfers (send/recv) become NCCL
    point-to-point calls on the communication stream, which hang unless
    each rank posts them in the order its peer does: sends are reordered
    to match their receives, and a program whose grouped transfers could
    still wait on each other forever is refused with the transfers
    involved (passes/lib/NcclTransfers.h).
  }];
  let dependentDialects = ["::llmc::exec::ExecDialect"];
}

#endif // LLMC_PASSES
