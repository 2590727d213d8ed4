//===- LLMOps.td - llm dialect ops -------------------------*- tablegen -*-===//
//
// Forward ops are what models are written in. Backward ops (`*_grad`,
// `reduce_sum`, `pad`) are what the autodiff pass emits; they are ordinary ops
// so every later pass (sharding, recompute, lowering) treats both alike.
//
//===----------------------------------------------------------------------===//

#ifndef LLMC_LLM_OPS
#define LLMC_LLM_OPS

include "dialects/LLM/LLMDialect.td"
include "dialects/LLM/LLMAttrs.td"
include "dialects/Traits.td"
include "dialects/LLM/LLMInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"

class LLM_PureOp<string mnemonic, list<Trait> traits = []>
    : LLM_Op<mnemonic, !listconcat([Pure, InferTypeOpAdaptor], traits)>;

//===----------------------------------------------------------------------===//
// Structure
//===----------------------------------------------------------------------===//

def LLM_BlockOp : LLM_Op<"block", [SingleBlock, RecursiveMemoryEffects]> {
  let summary = "A transformer layer: the unit of sharding, staging and recompute";
  let description = [{
    Groups the ops of one layer. The region may use any value defined above
    it (the layer's parameters are function arguments); it yields the layer's
    outputs. FSDP gathers a block's parameters together, the pipeline pass
    assigns whole blocks to stages, and recomputation replays a block.

    ```mlir
    %h1 = llm.block "h.0" -> tensor<4x64x128xf32> {
      %y = llm.gelu %h0 : tensor<4x64x128xf32>
      llm.yield %y : tensor<4x64x128xf32>
    }
    ```
  }];
  let arguments = (ins StrAttr:$name);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$name attr-dict-with-keyword (`->` type($results)^)? $body";
  let hasVerifier = 1;
}

def LLM_YieldOp : LLM_Op<"yield", [Pure, Terminator, HasParent<"BlockOp">,
                                   ReturnLike]> {
  let summary = "Ends an llm.block, giving its results";
  let description = [{
    ```mlir
    llm.yield %y : tensor<4x64x128xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$values);
  let assemblyFormat = "attr-dict ($values^ `:` type($values))?";
}

def LLM_FillOp : LLM_Op<"fill", [Pure, KeepsPrecision]> {
  let summary = "A tensor with every element equal to one value";
  let description = [{
    ```mlir
    %zeros = llm.fill 0.0 : tensor<64x128xf32>
    ```
  }];
  let arguments = (ins F64Attr:$value);
  let results = (outs LLM_FloatTensor:$result);
  let assemblyFormat = "$value attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

def LLM_MatmulOp : LLM_PureOp<"matmul", [ExpensiveToRecompute, DeclareOpInterfaceMethods<LLM_RowSplitOpInterface>]> {
  let summary = "Matrix product over the last two dimensions";
  let description = [{
    `a` is `[..., M, K]` (`[..., K, M]` with `transpose_a`); `b` is either a
    matrix `[K, N]` (`[N, K]` with `transpose_b`) applied to every leading
    index of `a`, or has the same leading dimensions as `a`. The result is
    `[..., M, N]` in `a`'s element type; accumulation is always fp32 or wider.

    ```mlir
    %y = llm.matmul %x, %w : tensor<4x64x128xf32>, tensor<128x512xf32> -> tensor<4x64x512xf32>
    %s = llm.matmul %a, %b {transpose_b} : tensor<8x16x32xf32>, tensor<8x16x32xf32> -> tensor<8x16x16xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$a, LLM_FloatTensor:$b,
                       UnitAttr:$transpose_a, UnitAttr:$transpose_b);
  let results = (outs LLM_FloatTensor:$result);
  let assemblyFormat = "$a `,` $b attr-dict `:` type($a) `,` type($b) `->` type($result)";
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class LLM_BroadcastBinaryOp<string mnemonic, string what>
    : LLM_PureOp<mnemonic, [Positionwise]> {
  let summary = "Elementwise " # what # " with trailing broadcast of rhs";
  let description = [{
    `rhs` has the shape of `lhs` or of a suffix of it (a bias `[N]` against
    `[B, T, N]`); it is repeated over the leading dimensions. The result has
    `lhs`'s type.

    ```mlir
    %y = llm.}] # mnemonic # [{ %x, %b : tensor<4x64x128xf32>, tensor<128xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$lhs, LLM_FloatTensor:$rhs);
  let results = (outs LLM_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
}

def LLM_AddOp : LLM_BroadcastBinaryOp<"add", "sum">;
def LLM_MulOp : LLM_BroadcastBinaryOp<"mul", "product">;

class LLM_UnaryOp<string mnemonic, string sum, string example, list<Trait> traits = []>
    : LLM_PureOp<mnemonic, !listconcat([Positionwise], traits)> {
  let summary = sum;
  let description = [{
    ```mlir
    }] # example # [{
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$x);
  let results = (outs LLM_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
}

def LLM_GeluOp : LLM_UnaryOp<"gelu",
  "GELU, tanh approximation (as GPT-2): 0.5x(1+tanh(√(2/π)(x+0.044715x³)))",
  "%y = llm.gelu %x : tensor<4x64x512xf32>", [ColumnParallelInterior]>;
def LLM_SiluOp : LLM_UnaryOp<"silu", "SiLU: x·sigmoid(x)",
  "%y = llm.silu %x : tensor<4x64x512xf32>", [ColumnParallelInterior]>;
def LLM_SigmoidOp : LLM_UnaryOp<"sigmoid",
  "Logistic sigmoid: 1 / (1 + exp(−x)) (Qwen-MoE's shared-expert gate)",
  "%g = llm.sigmoid %x : tensor<256x1xf32>">;

def LLM_ScaleOp : LLM_PureOp<"scale", [Positionwise]> {
  let summary = "Multiplies every element by a constant";
  let description = [{
    ```mlir
    %y = llm.scale %x {factor = 0.5 : f64} : tensor<4x64xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$x, F64Attr:$factor);
  let results = (outs LLM_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
}

def LLM_GegluOp : LLM_PureOp<"geglu", [Positionwise, ColumnParallelInterior,
                                        AllTypesMatch<["gate", "up"]>]> {
  let summary = "GeGLU gate: gelu(gate) · up (tanh GELU, as Gemma's MLP)";
  let description = [{
    ```mlir
    %h = llm.geglu %gate, %up : tensor<4x64x344xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$gate, LLM_FloatTensor:$up);
  let results = (outs LLM_FloatTensor:$result);
  let assemblyFormat = "$gate `,` $up attr-dict `:` type($gate)";
}

def LLM_SoftcapOp : LLM_PureOp<"softcap", [Positionwise]> {
  let summary = "Soft-cap: cap·tanh(x / cap)";
  let description = [{
    Squashes every element smoothly into (−cap, cap), as Gemma 2 caps its
    final logits (final_logit_softcapping) before the loss and sampling.

    ```mlir
    %y = llm.softcap %x {cap = 30.0 : f64} : tensor<4x64x256xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$x, F64Attr:$cap);
  let results = (outs LLM_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
  let hasVerifier = 1;
}

def LLM_SwigluOp : LLM_PureOp<"swiglu", [Positionwise, ColumnParallelInterior,
                                          AllTypesMatch<["gate", "up"]>]> {
  let summary = "SwiGLU gate: silu(gate) · up";
  let description = [{
    ```mlir
    %h = llm.swiglu %gate, %up : tensor<4x64x344xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$gate, LLM_FloatTensor:$up);
  let results = (outs LLM_FloatTensor:$result);
  let assemblyFormat = "$gate `,` $up attr-dict `:` type($gate)";
}

def LLM_DropoutOp : LLM_PureOp<"dropout", [Positionwise]> {
  let summary = "Seeded inverted dropout";
  let description = [{
    Zeroes each element with probability `rate` and scales the rest by
    1/(1-rate). The mask is a pure function of (`seed`, training step,
    element index), so applying the same op to the upstream gradient is its
    backward. `rate = 0` is the identity.

    When `x` is one rank's piece of a larger tensor, `global_shape` and
    `offsets` (per dimension, where the piece starts) make the element
    index the global one, so every layout draws the mask a single rank
    would: `index = Σ_d (i_d + offsets[d]) · stride_d(global_shape)`.

    ```mlir
    %y = llm.dropout %x {rate = 0.1 : f64, seed = 7 : i64} : tensor<4x64x128xf32>
    %z = llm.dropout %x {rate = 0.1 : f64, seed = 7 : i64, global_shape = array<i64: 8, 64, 128>,
                         offsets = array<i64: 4, 0, 0>} : tensor<4x64x128xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$x, F64Attr:$rate, I64Attr:$seed,
                       OptionalAttr<DenseI64ArrayAttr>:$global_shape,
                       OptionalAttr<DenseI64ArrayAttr>:$offsets);
  let results = (outs LLM_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
  let hasVerifier = 1;
}

def LLM_CastOp : LLM_Op<"cast", [Pure, Positionwise, KeepsPrecision]> {
  let summary = "Converts element type (fp32 ↔ bf16 ↔ f16), same shape";
  let description = [{
    ```mlir
    %h = llm.cast %x : tensor<4x64xf32> to tensor<4x64xbf16>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$x);
  let results = (outs LLM_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `to` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Normalization, embedding, position
//===----------------------------------------------------------------------===//

def LLM_LayerNormOp : LLM_PureOp<"layernorm", [Positionwise, AllTypesMatch<["gamma", "beta"]>]> {
  let summary = "Layer normalization over the last dimension";
  let description = [{
    y = (x − mean) / √(var + ε) · gamma + beta, statistics over the last
    dimension (biased variance), computed in fp32.

    ```mlir
    %y = llm.layernorm %x, %g, %b {epsilon = 1.0e-5 : f64} : tensor<4x64x128xf32>, tensor<128xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$x, LLM_FloatTensor:$gamma,
                       LLM_FloatTensor:$beta, F64Attr:$epsilon);
  let results = (outs LLM_FloatTensor:$result);
  let assemblyFormat = "$x `,` $gamma `,` $beta attr-dict `:` type($x) `,` type($gamma)";
  let hasVerifier = 1;
}

def LLM_RMSNormOp : LLM_PureOp<"rmsnorm", [Positionwise]> {
  let summary = "RMS normalization over the last dimension";
  let description = [{
    y = x / √(mean(x²) + ε) · gamma, or with `unit_offset` · (1 + gamma)
    (Gemma's RMSNorm, whose weights hold the offset from 1; the sum is
    formed in fp32 inside the kernel, whatever gamma's storage type).

    ```mlir
    %y = llm.rmsnorm %x, %g {epsilon = 1.0e-5 : f64} : tensor<4x64x128xf32>, tensor<128xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$x, LLM_FloatTensor:$gamma, F64Attr:$epsilon,
                       UnitAttr:$unit_offset);
  let results = (outs LLM_FloatTensor:$result);
  let assemblyFormat = "$x `,` $gamma attr-dict `:` type($x) `,` type($gamma)";
  let hasVerifier = 1;
}

def LLM_AddLayerNormOp : LLM_PureOp<"add_layernorm", [Positionwise,
    AllTypesMatch<["a", "b"]>, AllTypesMatch<["gamma", "beta"]>]> {
  let summary = "A residual add and the layernorm of its sum, as one kernel";
  let description = [{
    `sum = a + b`, `y = layernorm(sum, gamma, beta)`: what `llm.add` and
    `llm.layernorm` give, rounded as they round (the sum to the element type
    before the statistics). The sum is a result because the residual stream
    goes on with it. llmc-fuse's `add-norm` forms it. With `bias` (`[C]`,
    gamma's type) the sum is `a + (b + bias)`, `b + bias` rounded as the
    `llm.add` of a bias would: a row-parallel projection's bias, which
    tensor parallelism adds after the all-reduce, joins the same pass.

    ```mlir
    %s, %y = llm.add_layernorm %x, %h, %g, %b {epsilon = 1.0e-5 : f64}
        : tensor<4x64x128xf32>, tensor<128xf32>
    %s, %y = llm.add_layernorm %x, %p, %g, %b bias %pb {epsilon = 1.0e-5 : f64}
        : tensor<4x64x128xf32>, tensor<128xf32> bias tensor<128xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$a, LLM_FloatTensor:$b, LLM_FloatTensor:$gamma,
                       LLM_FloatTensor:$beta, Optional<LLM_FloatTensor>:$bias,
                       F64Attr:$epsilon);
  let results = (outs LLM_FloatTensor:$sum, LLM_FloatTensor:$y);
  let assemblyFormat = [{
    $a `,` $b `,` $gamma `,` $beta (`bias` $bias^)? attr-dict `:` type($a) `,` type($gamma)
    (`bias` type($bias)^)?
  }];
  let hasVerifier = 1;
}

def LLM_AddRMSNormOp : LLM_PureOp<"add_rmsnorm", [Positionwise,
    AllTypesMatch<["a", "b"]>]> {
  let summary = "A residual add and the rmsnorm of its sum, as one kernel";
  let description = [{
    `sum = a + b`, `y = rmsnorm(sum, gamma)`: what `llm.add` and
    `llm.rmsnorm` give, rounded as they round. llmc-fuse's `add-norm` forms
    it.

    ```mlir
    %s, %y = llm.add_rmsnorm %x, %h, %g {epsilon = 1.0e-5 : f64}
        : tensor<4x64x128xf32>, tensor<128xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$a, LLM_FloatTensor:$b, LLM_FloatTensor:$gamma,
                       F64Attr:$epsilon, UnitAttr:$unit_offset);
  let results = (outs LLM_FloatTensor:$sum, LLM_FloatTensor:$y);
  let assemblyFormat = "$a `,` $b `,` $gamma attr-dict `:` type($a) `,` type($gamma)";
  let hasVerifier = 1;
}

def LLM_EmbeddingOp : LLM_PureOp<"embedding", [DeclareOpInterfaceMethods<LLM_RowSplitOpInterface>]> {
  let summary = "Looks up rows of a table by integer id";
  let description = [{
    `table` is `[V, D]`; `ids` has any shape `S` with values in [0, V); the
    result is `S × [D]`.

    A vocabulary-parallel shard sets `vocab_size` (rows of the whole table)
    and `row_offset` (the id of this table's first row): ids of other
    shards give zero rows, so summing the shards' results over the ranks
    gives the lookup in the whole table. `vocab_size = 0` means the table is
    whole.

    ```mlir
    %e = llm.embedding %wte, %tokens : tensor<256x128xf32>, tensor<4x64xi32>
    %p = llm.embedding %shard, %tokens {row_offset = 128 : i64, vocab_size = 256 : i64}
        : tensor<128x128xf32>, tensor<4x64xi32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$table, LLM_IndexTensor:$ids,
                       DefaultValuedAttr<I64Attr, "0">:$row_offset,
                       DefaultValuedAttr<I64Attr, "0">:$vocab_size);
  let results = (outs LLM_FloatTensor:$result);
  let assemblyFormat = "$table `,` $ids attr-dict `:` type($table) `,` type($ids)";
  let hasVerifier = 1;
}

def LLM_RopeOp : LLM_PureOp<"rope"> {
  let summary = "Rotary position embedding (half-split convention)";
  let description = [{
    `x` is `[B, T, H, D]` with even D. Position t rotates the pair
    (x[i], x[i + D/2]) by the angle t·theta^(−2i/D), as in the Hugging Face
    Llama code (`rotate_half`). `inverse` rotates by the negative angle,
    which is the backward. The optional `positions` `[B, T]` (values in
    [0, T), or in [0, `position_limit`) when given: a decode step's
    positions run past its T) replace t, so packed documents each start at
    position 0.

    `scaling_factor`, `low_freq_factor`, `high_freq_factor` and
    `original_max_positions` (all four or none) rescale the rate
    theta^(−2i/D) as Llama 3.1 does (Hugging Face `"rope_type": "llama3"`):
    with L = `original_max_positions`, a wavelength 2π/rate longer than
    L / `low_freq_factor` is stretched `scaling_factor` times, one shorter
    than L / `high_freq_factor` is kept, and those between blend the two
    (common/RopeScaling.h).

    ```mlir
    %qr = llm.rope %q {theta = 10000.0 : f64} : tensor<4x64x8x16xf32>
    %pr = llm.rope %q positions %pos : tensor<4x64xi32> {theta = 10000.0 : f64}
        : tensor<4x64x8x16xf32>
    %sr = llm.rope %q {theta = 500000.0 : f64, scaling_factor = 8.0 : f64,
                       low_freq_factor = 1.0 : f64, high_freq_factor = 4.0 : f64,
                       original_max_positions = 8192 : i64} : tensor<4x64x8x16xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$x, Optional<LLM_IndexTensor>:$positions,
                       F64Attr:$theta, UnitAttr:$inverse,
                       OptionalAttr<I64Attr>:$position_limit,
                       OptionalAttr<F64Attr>:$scaling_factor,
                       OptionalAttr<F64Attr>:$low_freq_factor,
                       OptionalAttr<F64Attr>:$high_freq_factor,
                       OptionalAttr<I64Attr>:$original_max_positions);
  let results = (outs LLM_FloatTensor:$result);
  let assemblyFormat = [{
    $x (`positions` $positions^ `:` type($positions))? attr-dict `:` type($x)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Attention and loss
//===----------------------------------------------------------------------===//

def LLM_AttentionOp : LLM_PureOp<"attention", [ExpensiveToRecompute, F32TrailingResults,
                                              AllTypesMatch<["k", "v"]>]> {
  let summary = "Scaled dot-product attention with GQA/MQA and packing";
  let description = [{
    `q` is `[B, T, H, D]`; `k` and `v` are `[B, T, KV, D]` with H divisible
    by KV (KV = H: multi-head, 1: multi-query, else grouped-query; query head
    h reads kv head h / (H / KV)). `causal` masks future positions.
    The optional `segment_ids` `[B, T]` confines attention to equal ids
    (packed sequences). A `window` (>= 1, causal only) confines query i
    further to the keys in (i − window, i], itself and the window − 1 before
    it (Mistral's sliding window). A `softcap` c (> 0) caps every score
    s = scale·q·k to c·tanh(s / c) before the masks and the softmax (Gemma
    2's attn_logit_softcapping); the backward multiplies the score gradient
    by 1 − tanh². Results: the output `[B, T, H, D]` and the per-row
    log-sum-exp `[B, H, T]` in fp32, which the backward reuses.

    ```mlir
    %o, %lse = llm.attention %q, %k, %v {causal, scale = 0.25 : f64}
        : tensor<4x64x8x16xf32>, tensor<4x64x8x16xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$q, LLM_FloatTensor:$k, LLM_FloatTensor:$v,
                       Optional<LLM_IndexTensor>:$segment_ids,
                       F64Attr:$scale, UnitAttr:$causal, OptionalAttr<I64Attr>:$window,
                       OptionalAttr<F64Attr>:$softcap);
  let results = (outs LLM_FloatTensor:$out, LLM_FloatTensor:$lse);
  let assemblyFormat = [{
    $q `,` $k `,` $v (`segments` $segment_ids^ `:` type($segment_ids))? attr-dict
    `:` type($q) `,` type($k)
  }];
  let hasVerifier = 1;
}

// The packed forms infer their types from attributes (heads, kv_heads),
// which a parse hands over as a dictionary rather than as properties, so
// they implement the interface's full form (LLM_PureOp's adaptor form sees
// properties only).
class LLM_PackedAttentionOp<string mnemonic, list<Trait> traits = []>
    : LLM_Op<mnemonic, !listconcat([Pure, DeclareOpInterfaceMethods<InferTypeOpInterface>],
                                   traits)>;

def LLM_AttentionPackedOp : LLM_PackedAttentionOp<"attention_packed", [ExpensiveToRecompute,
                                                                       F32TrailingResults]> {
  let summary = "Attention reading q, k and v in place from one packed projection";
  let description = [{
    `qkv` is `[B, T, (H + 2·KV)·D]` with H = `heads`, KV = `kv_heads`: each
    row holds the H query heads, then the KV key heads, then the KV value
    heads (GPT-2's c_attn output; under tensor parallelism a rank's share of
    it, whose heads are the rank's). It computes what `attention` computes
    from the slices
    `q = reshape(slice(qkv, [0, 0, 0]))` `[B, T, H, D]`,
    `k = reshape(slice(qkv, [0, 0, H·D]))` and
    `v = reshape(slice(qkv, [0, 0, (H + KV)·D]))` `[B, T, KV, D]`,
    reading them as strided views instead of copies (llmc-fuse's
    `qkv-split`). Mask, attributes and results are `attention`'s.

    ```mlir
    %o, %lse = llm.attention_packed %qkv {causal, heads = 4 : i64, kv_heads = 4 : i64,
                                          scale = 0.25 : f64} : tensor<4x64x192xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$qkv, Optional<LLM_IndexTensor>:$segment_ids,
                       I64Attr:$heads, I64Attr:$kv_heads, F64Attr:$scale, UnitAttr:$causal,
                       OptionalAttr<I64Attr>:$window,
                       OptionalAttr<F64Attr>:$softcap);
  let results = (outs LLM_FloatTensor:$out, LLM_FloatTensor:$lse);
  let assemblyFormat = [{
    $qkv (`segments` $segment_ids^ `:` type($segment_ids))? attr-dict `:` type($qkv)
  }];
  let hasVerifier = 1;
}

def LLM_AttentionRopeOp : LLM_PureOp<"attention_rope", [ExpensiveToRecompute, F32TrailingResults,
                                                AllTypesMatch<["k", "v"]>,
                                                AttrSizedOperandSegments]> {
  let summary = "Attention of q and k rotated by RoPE as their tiles are read";
  let description = [{
    `attention` of `rope(q)`, `rope(k)` and `v`, where `rope` is `llm.rope`
    with the same `theta`, `positions` and Llama 3 scaling attributes
    (`scaling_factor`, `low_freq_factor`, `high_freq_factor`,
    `original_max_positions`: all four or none), applied while the
    kernels load q and k, so the rotated tensors are never stored
    (llmc-fuse's `rope`). With bf16 or f16 storage each rotated element
    is rounded to that type, as `llm.rope` stores it.

    ```mlir
    %o, %lse = llm.attention_rope %q, %k, %v {causal, scale = 0.25 : f64, theta = 10000.0 : f64}
        : tensor<4x64x8x16xf32>, tensor<4x64x2x16xf32>
    %o2, %lse2 = llm.attention_rope %q, %k, %v positions %pos : tensor<4x64xi32>
        segments %seg : tensor<4x64xi32> {causal, scale = 0.25 : f64, theta = 10000.0 : f64}
        : tensor<4x64x8x16xf32>, tensor<4x64x2x16xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$q, LLM_FloatTensor:$k, LLM_FloatTensor:$v,
                       Optional<LLM_IndexTensor>:$positions,
                       Optional<LLM_IndexTensor>:$segment_ids,
                       F64Attr:$scale, UnitAttr:$causal, F64Attr:$theta,
                       OptionalAttr<F64Attr>:$scaling_factor,
                       OptionalAttr<F64Attr>:$low_freq_factor,
                       OptionalAttr<F64Attr>:$high_freq_factor,
                       OptionalAttr<I64Attr>:$original_max_positions,
                       OptionalAttr<I64Attr>:$window,
                       OptionalAttr<F64Attr>:$softcap);
  let results = (outs LLM_FloatTensor:$out, LLM_FloatTensor:$lse);
  let assemblyFormat = [{
    $q `,` $k `,` $v (`positions` $positions^ `:` type($positions))?
    (`segments` $segment_ids^ `:` type($segment_ids))? attr-dict `:` type($q) `,` type($k)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Paged KV cache: what llmc-kv-cache rewrites attention into for inference
//===----------------------------------------------------------------------===//

def LLM_KvCacheWriteOp : LLM_PureOp<"kv_cache_write"> {
  let summary = "Writes one attention input (keys or values) into a paged cache";
  let description = [{
    `cache` is a pool of blocks `[NB, P, KV, D]` (P tokens per block);
    `rows` (the new keys or values) is `[B, T, KV, D]`; `block_table` `[B, M]` names, per row, the
    pool block holding positions [i·P, (i+1)·P) of that row's sequence;
    `positions` `[B, T]` is each token's position in its sequence, negative
    for padding (not written). The result is the cache with token (b, t)
    stored at block `block_table[b, p / P]`, slot `p % P`. Tied to the cache
    state, it is written in place: only the addressed slots change.

    The cache holds `rows`' type, a 16-bit float under f32 rows (rounded to
    nearest even on the way in), or one-byte codes: `i8` (int8) or
    `f8E4M3FN` (fp8 E4M3). A cache of codes takes a scale pool
    `[NB, P, KV]` f32 and returns it updated as a second result: each
    token's row of D values per kv head gets `s = absmax(row) / 127` (int8)
    or `/ 448` (E4M3's largest value) and codes `round_even(x / s)`
    (int8, clamped to ±127) or the E4M3 rounding of `x / s` (to nearest
    even, saturated), all in fp32 (an all-zero row stores s = 0 and zero
    codes); a code reads back as its value times `s`
    (common/KvCacheCodes.h).

    ```mlir
    %kc1 = llm.kv_cache_write %kc, %k, %table, %pos
        : tensor<64x16x4x32xf32>, tensor<8x1x4x32xf32>, tensor<8x8xi32>, tensor<8x1xi32>
    %qc1, %ks1 = llm.kv_cache_write %qc, %k, %table, %pos scales %ks : tensor<64x16x4xf32>
        : tensor<64x16x4x32xi8>, tensor<8x1x4x32xf32>, tensor<8x8xi32>, tensor<8x1xi32>
    %fc1, %fs1 = llm.kv_cache_write %fc, %k, %table, %pos scales %fs : tensor<64x16x4xf32>
        : tensor<64x16x4x32xf8E4M3FN>, tensor<8x1x4x32xf32>, tensor<8x8xi32>, tensor<8x1xi32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat, I8]>:$cache, LLM_FloatTensor:$rows,
                       LLM_IndexTensor:$block_table, LLM_IndexTensor:$positions,
                       Optional<RankedTensorOf<[F32]>>:$scales);
  let results = (outs RankedTensorOf<[AnyFloat, I8]>:$result,
                      Optional<RankedTensorOf<[F32]>>:$new_scales);
  let assemblyFormat = [{
    $cache `,` $rows `,` $block_table `,` $positions (`scales` $scales^ `:` type($scales))?
    attr-dict `:` type($cache) `,` type($rows) `,` type($block_table) `,` type($positions)
  }];
  let hasVerifier = 1;
}

def LLM_PagedAttentionOp : LLM_PureOp<"paged_attention", [ExpensiveToRecompute,
                                                          AllTypesMatch<["k_cache", "v_cache"]>]> {
  let summary = "Causal attention of new queries over a paged KV cache";
  let description = [{
    `q` is `[B, T, H, D]`; `k_cache` and `v_cache` are block pools
    `[NB, P, KV, D]` addressed through `block_table` `[B, M]` as in
    `kv_cache_write`. Query (b, t) at position p = `positions[b, t]` attends
    to positions 0..p of row b's sequence (with a `window`, only to
    p − window + 1..p, as `attention`'s window; a `softcap` caps the
    scores as `attention`'s; query head h reads kv head
    h / (H / KV)); rows with p < 0 are padding and give zeros. Softmax in
    fp32; the result has q's type.

    The pools hold q's type, a 16-bit float under an f32 q, or int8 or fp8
    E4M3 codes (`i8`, `f8E4M3FN`); pools of codes come with their scale
    pools `[NB, P, KV]` f32 (`scales`: the keys', then the values'), and
    each key and value is read as its code's value · scale as it is used.

    ```mlir
    %o = llm.paged_attention %q, %kc, %vc, %table, %pos {scale = 0.17 : f64}
        : tensor<8x1x4x32xf32>, tensor<64x16x4x32xf32>, tensor<8x8xi32>, tensor<8x1xi32>
    %o8 = llm.paged_attention %q, %qk, %qv, %table, %pos scales %ks, %vs
        : tensor<64x16x4xf32>, tensor<64x16x4xf32> {scale = 0.17 : f64}
        : tensor<8x1x4x32xf32>, tensor<64x16x4x32xi8>, tensor<8x8xi32>, tensor<8x1xi32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$q, RankedTensorOf<[AnyFloat, I8]>:$k_cache,
                       RankedTensorOf<[AnyFloat, I8]>:$v_cache,
                       LLM_IndexTensor:$block_table, LLM_IndexTensor:$positions,
                       Variadic<RankedTensorOf<[F32]>>:$scales, F64Attr:$scale,
                       OptionalAttr<I64Attr>:$window,
                       OptionalAttr<F64Attr>:$softcap);
  let results = (outs LLM_FloatTensor:$out);
  let assemblyFormat = [{
    $q `,` $k_cache `,` $v_cache `,` $block_table `,` $positions
    (`scales` $scales^ `:` type($scales))? attr-dict `:` type($q) `,`
    type($k_cache) `,` type($block_table) `,` type($positions)
  }];
  let hasVerifier = 1;
}

def LLM_CrossEntropyOp : LLM_Op<"cross_entropy", [Pure, KeepsPrecision]> {
  let summary = "Softmax cross-entropy, mean over non-ignored targets";
  let description = [{
    `logits` is `S × [V]`, `targets` is `S` with values in [0, V) or equal to
    `ignore_index`. The result is the fp32 mean negative log-likelihood over
    the targets that are not ignored (0 if all are).

    With `num_classes` > 0 only the first `num_classes` columns are classes
    (targets in [0, num_classes)); the rest pad the vocabulary (llmc-pad-vocab)
    and are left out of the max and the sum, and get a gradient of exactly 0.

    ```mlir
    %loss = llm.cross_entropy %logits, %targets {ignore_index = -1 : i64}
        : tensor<4x64x256xf32>, tensor<4x64xi32>
    %padded = llm.cross_entropy %logits, %targets {num_classes = 250 : i64}
        : tensor<4x64x256xf32>, tensor<4x64xi32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$logits, LLM_IndexTensor:$targets,
                       DefaultValuedAttr<I64Attr, "-1">:$ignore_index,
                       DefaultValuedAttr<I64Attr, "0">:$num_classes);
  let results = (outs LLM_F32Scalar:$loss);
  let assemblyFormat = "$logits `,` $targets attr-dict `:` type($logits) `,` type($targets)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Fused ops: what llmc-fuse rewrites op groups into (never written by hand)
//===----------------------------------------------------------------------===//

class LLM_LinearCrossEntropyBase<string mnemonic, list<Trait> traits = []>
    : LLM_PureOp<mnemonic, traits> {
  code commonDescription = [{
    The language-model head and the softmax cross-entropy in one kernel:
    `logits = h · wᵀ` (`w` is `[V, D]`, the tied-embedding layout, with
    `transpose_b`; else `[D, V]`), computed `chunk_rows` rows at a time into
    `scratch` (`[chunk_rows, V]` f32), so the whole `[rows, V]` logits are
    never stored. `h` is `[..., D]` with one target per row; the loss is
    the mean over the targets that are not `ignore_index`, as
    `cross_entropy`'s. `h` and `w` (and `dh`, `dw`) share one float type;
    in bf16 or f16 the logits and their gradient are rounded to it where
    the unfused `matmul` and `cross_entropy_grad` store them.
  }];
  code classesDescription = [{

    With `num_classes` > 0 only the first `num_classes` of the V columns
    are classes, as in `cross_entropy`: the padding of a padded vocabulary
    is left out of the loss and gets no gradient, so `dw`'s rows (columns)
    for it are exactly 0. When the training form's weight gradient sums
    over several chunks in bf16 or f16, the scratch has `D` more rows: the
    `[V, D]` (or `[D, V]`) fp32 sum of the chunks' `dw`, rounded once.
  }];
}

def LLM_LinearCrossEntropyOp : LLM_LinearCrossEntropyBase<"linear_cross_entropy"> {
  let summary = "LM head + cross-entropy, forward only, in row chunks";
  let description = commonDescription # classesDescription # [{

    ```mlir
    %loss, %scratch = llm.linear_cross_entropy %h, %w, %targets
        {chunk_rows = 64 : i64, transpose_b}
        : tensor<4x64x128xf32>, tensor<256x128xf32>, tensor<4x64xi32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$h, LLM_FloatTensor:$w, LLM_IndexTensor:$targets,
                       I64Attr:$chunk_rows, UnitAttr:$transpose_b,
                       DefaultValuedAttr<I64Attr, "-1">:$ignore_index,
                       DefaultValuedAttr<I64Attr, "0">:$num_classes);
  let results = (outs LLM_F32Scalar:$loss, LLM_FloatTensor:$scratch);
  let assemblyFormat = [{
    $h `,` $w `,` $targets attr-dict `:` type($h) `,` type($w) `,` type($targets)
  }];
  let hasVerifier = 1;
}

def LLM_LinearCrossEntropyTrainOp
    : LLM_LinearCrossEntropyBase<"linear_cross_entropy_train"> {
  let summary = "LM head + cross-entropy with its backward, in row chunks";
  let description = commonDescription # classesDescription # [{
    With the loss's gradient `dloss` known before the forward (the loss
    seed), each chunk's `(softmax − onehot)·dloss/count` is formed in
    `scratch` right after its logits and multiplied into `dh` (`h`'s
    shape) and `dw` (`w`'s), the gradients `cross_entropy_grad` and the two
    matmuls after it would give. With `frozen_weight` (a head that is not
    trained, as under LoRA) there is no `dw` and no product forming it.

    ```mlir
    %loss, %dh, %dw, %scratch = llm.linear_cross_entropy_train %h, %w, %targets, %seed
        {chunk_rows = 64 : i64, transpose_b}
        : tensor<4x64x128xf32>, tensor<256x128xf32>, tensor<4x64xi32>
    %loss, %dh, %scratch = llm.linear_cross_entropy_train %h, %w, %targets, %seed
        {chunk_rows = 64 : i64, transpose_b, frozen_weight}
        : tensor<4x64x128xf32>, tensor<256x128xf32>, tensor<4x64xi32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$h, LLM_FloatTensor:$w, LLM_IndexTensor:$targets,
                       LLM_F32Scalar:$dloss, I64Attr:$chunk_rows, UnitAttr:$transpose_b,
                       DefaultValuedAttr<I64Attr, "-1">:$ignore_index,
                       UnitAttr:$frozen_weight,
                       DefaultValuedAttr<I64Attr, "0">:$num_classes);
  let results = (outs LLM_F32Scalar:$loss, LLM_FloatTensor:$dh, Optional<LLM_FloatTensor>:$dw,
                      LLM_FloatTensor:$scratch);
  let assemblyFormat = [{
    $h `,` $w `,` $targets `,` $dloss attr-dict `:` type($h) `,` type($w) `,` type($targets)
  }];
  let hasVerifier = 1;
}

class LLM_LinearCrossEntropyShardBase<string mnemonic, list<Trait> traits = []>
    : LLM_LinearCrossEntropyBase<mnemonic, traits> {
  code shardDescription = [{
    The vocabulary-parallel head: `w` holds the classes [`class_offset`,
    `class_offset` + V) of `num_classes` (a rank's shard; columns past
    `num_classes` are the padding of the last shard and count for
    nothing), so `scratch` is `[chunk_rows, V]` for this shard's V. The
    cross-rank reductions stay outside the op, as collectives between the
    forward op and the backward one.
  }];
}

def LLM_LinearCrossEntropyPartialOp
    : LLM_LinearCrossEntropyShardBase<"linear_cross_entropy_partial"> {
  let summary = "LM head + one vocabulary shard's loss statistics, in row chunks";
  let description = commonDescription # shardDescription # [{

    Per row: `max`, the largest logit of the shard (−inf for a shard of
    padding only); `sumexp`, Σ exp(logit − max) over the shard; and
    `target_logit`, the target's logit when the target is one of the
    shard's classes, else 0 (also for ignored targets). `reduce_max` and
    `cross_entropy_partial` on the head's logits, except that the sum is
    relative to the shard's own maximum: scaled by exp(max − shift) it is
    `cross_entropy_partial`'s for the shift that the all-reduce of `max`
    gives.

    ```mlir
    %max, %sumexp, %target, %scratch = llm.linear_cross_entropy_partial %h, %w, %targets
        {chunk_rows = 64 : i64, num_classes = 256 : i64, transpose_b}
        : tensor<4x64x128xf32>, tensor<128x128xf32>, tensor<4x64xi32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$h, LLM_FloatTensor:$w, LLM_IndexTensor:$targets,
                       I64Attr:$chunk_rows, UnitAttr:$transpose_b,
                       DefaultValuedAttr<I64Attr, "0">:$class_offset, I64Attr:$num_classes,
                       DefaultValuedAttr<I64Attr, "-1">:$ignore_index);
  let results = (outs RankedTensorOf<[F32]>:$max, RankedTensorOf<[F32]>:$sumexp,
                      RankedTensorOf<[F32]>:$target_logit, LLM_FloatTensor:$scratch);
  let assemblyFormat = [{
    $h `,` $w `,` $targets attr-dict `:` type($h) `,` type($w) `,` type($targets)
  }];
  let hasVerifier = 1;
}

def LLM_LinearCrossEntropyPartialGradOp
    : LLM_LinearCrossEntropyShardBase<"linear_cross_entropy_partial_grad",
        [AllTypesMatch<["shift", "dsumexp", "dtarget_logit"]>]> {
  let summary = "Backward of a vocabulary-parallel LM head, in row chunks";
  let description = commonDescription # shardDescription # [{

    Recomputes each chunk's logits, forms `cross_entropy_partial_grad`'s
    `dsumexp · exp(logit − shift)` (plus `dtarget_logit` at the target's
    column) in `scratch` and multiplies it into `dh` (`h`'s shape: this
    shard's part of h's gradient, summed over the ranks by the all-reduce
    that follows) and `dw` (`w`'s), what `cross_entropy_partial_grad` and
    the two matmuls after it give. `shift`, `dsumexp` and `dtarget_logit`
    are the per-row fp32 statistics of `cross_entropy_finish_grad`. With
    `frozen_weight` there is no `dw`.

    ```mlir
    %dh, %dw, %scratch = llm.linear_cross_entropy_partial_grad %h, %w, %targets, %shift, %ds, %dt
        {chunk_rows = 64 : i64, num_classes = 256 : i64, transpose_b}
        : tensor<4x64x128xf32>, tensor<128x128xf32>, tensor<4x64xi32>, tensor<4x64xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$h, LLM_FloatTensor:$w, LLM_IndexTensor:$targets,
                       RankedTensorOf<[F32]>:$shift, RankedTensorOf<[F32]>:$dsumexp,
                       RankedTensorOf<[F32]>:$dtarget_logit,
                       I64Attr:$chunk_rows, UnitAttr:$transpose_b,
                       DefaultValuedAttr<I64Attr, "0">:$class_offset, I64Attr:$num_classes,
                       DefaultValuedAttr<I64Attr, "-1">:$ignore_index,
                       UnitAttr:$frozen_weight);
  let results = (outs LLM_FloatTensor:$dh, Optional<LLM_FloatTensor>:$dw,
                      LLM_FloatTensor:$scratch);
  let assemblyFormat = [{
    $h `,` $w `,` $targets `,` $shift `,` $dsumexp `,` $dtarget_logit attr-dict `:`
    type($h) `,` type($w) `,` type($targets) `,` type($shift)
  }];
  let hasVerifier = 1;
}

def LLM_MatmulNf4Op : LLM_PureOp<"matmul_nf4", [ExpensiveToRecompute]> {
  let summary = "x · W with W kept in NF4 storage, expanded inside the product";
  let description = [{
    Weight-only quantized inference (what llmc-weight-quant rewrites an
    `llm.matmul` reading a parameter into): `W`, of shape `weight_shape`
    (`[K, N]`, or `[N, K]` with `transpose_b`), is stored as
    `qat.dequantize_nf4` reads it — `codes` (NF4 level indices, two per
    byte), one 8-bit `absmax_q` per block of `block` consecutive elements
    of its last dimension (an int8 level, or an E4M3 number with
    `absmax_format = "fp8_e4m3"`), `absmax_scale` (fp32, one per 256
    blocks) and `absmax_mean` — the layout `llmc quantize --scheme
    nf4:block<N> [--double-quant fp8]` writes. The result is `x · W` (`x · Wᵀ` with `transpose_b`), `[..., N]`
    in `x`'s type, equal to `llm.matmul %x, (qat.dequantize_nf4 ...)`; the
    kernel expands W a tile at a time and never stores all of it. Under
    tensor parallelism W is one rank's piece, placed in the whole weight by
    `whole_shape`, `chunks` and `piece_offset` as `qat.dequantize_nf4`'s
    are (the storage holds the piece's codes and absmax levels and the
    whole weight's scales).

    ```mlir
    %y = llm.matmul_nf4 %x, %codes, %aq, %as, %am
        {block = 64 : i64, weight_shape = array<i64: 512, 128>, transpose_b}
        : tensor<2x1x128xf32>, tensor<32768xi8>, tensor<1024xi8>, tensor<4xf32>, tensor<f32>
        -> tensor<2x1x512xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$x, RankedTensorOf<[I8]>:$codes,
                       RankedTensorOf<[I8]>:$absmax_q, RankedTensorOf<[F32]>:$absmax_scale,
                       0DTensorOf<[F32]>:$absmax_mean, I64Attr:$block,
                       DenseI64ArrayAttr:$weight_shape, UnitAttr:$transpose_b,
                       OptionalAttr<DenseI64ArrayAttr>:$whole_shape,
                       OptionalAttr<DenseI64ArrayAttr>:$chunks,
                       OptionalAttr<DenseI64ArrayAttr>:$piece_offset,
                       DefaultValuedStrAttr<StrAttr, "int8">:$absmax_format);
  let results = (outs LLM_FloatTensor:$result);
  let assemblyFormat = [{
    $x `,` $codes `,` $absmax_q `,` $absmax_scale `,` $absmax_mean attr-dict `:` type($x) `,`
    type($codes) `,` type($absmax_q) `,` type($absmax_scale) `,` type($absmax_mean) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def LLM_MatmulIntOp : LLM_PureOp<"matmul_int", [ExpensiveToRecompute]> {
  let summary = "x · W with W kept as int8, int4 or fp8 codes, expanded inside the product";
  let description = [{
    Weight-only quantized inference with an integer or fp8 scheme (what
    llmc-weight-quant rewrites an `llm.matmul` reading a parameter into
    under `--weight-quant int8:... / int4:... / fp8:...`): `W`, of shape
    `weight_shape` (`[K, N]`, or `[N, K]` with `transpose_b`), is stored as
    `llmc quantize` writes it — `codes` (`bits` = 8: one two's-complement
    byte per element, or with `fp8` one E4M3 bit pattern per element; 4:
    two 4-bit levels per byte, low nibble first), one fp32 `scale` per
    group and, for an asymmetric integer scheme, one int32 `zero_point` per
    group. Groups: `block` consecutive elements of W's last dimension, or
    one per index of `channel_axis`, or (neither) one for all of W.
    Element value: `float(level − zero_point) · scale`, or with `fp8` the
    code's exact value times `scale`. The result is `x · W` (`x · Wᵀ` with
    `transpose_b`), `[..., N]` in `x`'s type; the kernel expands W a tile
    at a time and never stores all of it.

    ```mlir
    %y = llm.matmul_int %x, %codes, %scale
        {bits = 8 : i64, channel_axis = 0 : i64, weight_shape = array<i64: 512, 128>,
         transpose_b}
        : tensor<2x1x128xf32>, tensor<65536xi8>, tensor<512xf32> -> tensor<2x1x512xf32>
    %z = llm.matmul_int %x, %codes, %scale
        {bits = 8 : i64, fp8, weight_shape = array<i64: 512, 128>, transpose_b}
        : tensor<2x1x128xf32>, tensor<65536xi8>, tensor<1xf32> -> tensor<2x1x512xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$x, RankedTensorOf<[I8]>:$codes,
                       RankedTensorOf<[F32]>:$scale,
                       Optional<RankedTensorOf<[I32]>>:$zero_point, I64Attr:$bits,
                       UnitAttr:$fp8,
                       OptionalAttr<I64Attr>:$block, OptionalAttr<I64Attr>:$channel_axis,
                       DenseI64ArrayAttr:$weight_shape, UnitAttr:$transpose_b);
  let results = (outs LLM_FloatTensor:$result);
  let assemblyFormat = [{
    $x `,` $codes `,` $scale (`,` $zero_point^)? attr-dict `:` type($x) `,` type($codes) `,`
    type($scale) (`,` type($zero_point)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

def LLM_LinearOp : LLM_PureOp<"linear", [ExpensiveToRecompute, AttrSizedOperandSegments]> {
  let summary = "x · w with its epilogue (bias, GELU, residual) as one kernel";
  let description = [{
    A matmul with its epilogue: `y = x · w + bias + residual` (`w` is
    `[K, N]`, or `[N, K]` with `transpose_b`; `x` is `[..., K]`, `bias`
    `[N]`, `residual` and `y` `[..., N]`), each term optional but one of
    them present (without both it is a matmul), and with `gelu`
    `y = gelu(x · w + bias)` (`llm.gelu`'s tanh approximation; it needs the
    bias and takes no residual). `keep_pre` (with `gelu` only) also returns
    the pre-activation `x · w + bias`, which `gelu_grad` reads in training.
    The result is what `matmul`, then `add` of the bias, then `add` of the
    residual (or `gelu`) give, each rounded to the operands' element type.

    ```mlir
    %y = llm.linear %x, %w, %b : tensor<4x64x128xf32>, tensor<128x384xf32>, tensor<384xf32>
    %h, %pre = llm.linear %x, %w1, %b1 {gelu, keep_pre}
        : tensor<4x64x128xf32>, tensor<128x512xf32>, tensor<512xf32>
    %s = llm.linear %a, %wo, %bo residual %r
        : tensor<4x64x128xf32>, tensor<128x128xf32>, tensor<128xf32> residual tensor<4x64x128xf32>
    %t = llm.linear %a, %wo residual %r {transpose_b}
        : tensor<4x64x128xf32>, tensor<128x128xf32> residual tensor<4x64x128xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$x, LLM_FloatTensor:$w,
                       Optional<LLM_FloatTensor>:$bias, Optional<LLM_FloatTensor>:$residual,
                       UnitAttr:$transpose_b, UnitAttr:$gelu, UnitAttr:$keep_pre);
  let results = (outs LLM_FloatTensor:$y, Optional<LLM_FloatTensor>:$pre);
  let assemblyFormat = [{
    $x `,` $w (`,` $bias^)? (`residual` $residual^)? attr-dict `:` type($x) `,` type($w)
    (`,` type($bias)^)? (`residual` type($residual)^)?
  }];
}

def LLM_MatmulGeluGradOp : LLM_PureOp<"matmul_gelu_grad", [ExpensiveToRecompute]> {
  let summary = "x · w with GELU's backward (and its bias gradient) as its epilogue";
  let description = [{
    `gelu_grad(pre, x · w)`: in an MLP's backward, `x · w` is the gradient
    of GELU's output (the down projection's data-gradient product) and
    `pre` GELU's input, so the result is the gradient of GELU's input.
    With `bias_grad` a second result `db` `[N]` sums the result's rows:
    the gradient of the bias GELU's input was made with (cuBLASLt's
    DGELU_BGRAD). `w` is `[K, N]`, or `[N, K]` with `transpose_b`; `x` is
    `[..., K]` and `pre` and the result `[..., N]`. The results are what
    `matmul`, `gelu_grad` and `reduce_sum` give, the product rounded to the
    operands' element type. llmc-fuse's `gelu-grad` forms it.

    ```mlir
    %dpre = llm.matmul_gelu_grad %dy, %w, %pre {transpose_b}
        : tensor<4x64x128xf32>, tensor<512x128xf32>, tensor<4x64x512xf32>
    %dpre2, %db = llm.matmul_gelu_grad %dy, %w, %pre {bias_grad, transpose_b}
        : tensor<4x64x128xf32>, tensor<512x128xf32>, tensor<4x64x512xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$x, LLM_FloatTensor:$w, LLM_FloatTensor:$pre,
                       UnitAttr:$transpose_b, UnitAttr:$bias_grad);
  let results = (outs LLM_FloatTensor:$dpre, Optional<LLM_FloatTensor>:$db);
  let assemblyFormat = "$x `,` $w `,` $pre attr-dict `:` type($x) `,` type($w) `,` type($pre)";
}

def LLM_MatmulSwigluGradOp : LLM_PureOp<"matmul_swiglu_grad",
                                        [ExpensiveToRecompute, AllTypesMatch<["gate", "up"]>]> {
  let summary = "x · w with SwiGLU's backward as its epilogue, as one kernel";
  let description = [{
    `swiglu_grad(gate, up, x · w)`: in a SwiGLU MLP's backward, `x · w` is
    the gradient of `swiglu(gate, up)` (the down projection's
    data-gradient product), so the results are the gradients of `gate`
    and `up`. `w` is `[K, N]`, or `[N, K]` with `transpose_b`; `x` is
    `[..., K]` and `gate`, `up` and both results `[..., N]`. The results
    are what `matmul` then `swiglu_grad` give, the product rounded to the
    operands' element type. llmc-fuse's `swiglu-grad` forms it.

    ```mlir
    %dgate, %dup = llm.matmul_swiglu_grad %dy, %w, %gate, %up {transpose_b}
        : tensor<4x64x128xf32>, tensor<352x128xf32>, tensor<4x64x352xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$x, LLM_FloatTensor:$w, LLM_FloatTensor:$gate,
                       LLM_FloatTensor:$up, UnitAttr:$transpose_b);
  let results = (outs LLM_FloatTensor:$dgate, LLM_FloatTensor:$dup);
  let assemblyFormat = [{
    $x `,` $w `,` $gate `,` $up attr-dict `:` type($x) `,` type($w) `,` type($gate)
  }];
}

def LLM_LinearWeightGradOp : LLM_PureOp<"linear_weight_grad", [ExpensiveToRecompute]> {
  let summary = "A linear layer's weight and bias gradients, as one kernel";
  let description = [{
    `dw = xᵀ · dy` (`[K, N]`, summed over every row) and `db` = the sum of
    `dy`'s rows (`[N]`), for `x` `[..., K]` and `dy` `[..., N]` with as many
    rows: what `matmul (reshape x), (reshape dy) {transpose_a}` and
    `reduce_sum dy` give for a layer `y = x · w + b` with `w` `[K, N]`, in the
    operands' element type. llmc-fuse's `bias-grad` forms it (`all`
    includes it for CUDA only, where the bias gradient is the
    weight-gradient GEMM's epilogue).

    ```mlir
    %dw, %db = llm.linear_weight_grad %x, %dy : tensor<4x64x128xf32>, tensor<4x64x512xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$x, LLM_FloatTensor:$dy);
  let results = (outs LLM_FloatTensor:$dw, LLM_FloatTensor:$db);
  let assemblyFormat = "$x `,` $dy attr-dict `:` type($x) `,` type($dy)";
}

def LLM_FusedElementwiseOp : LLM_Op<"fused_elementwise", [Pure]> {
  let summary = "A chain of elementwise ops as one generated loop";
  let description = [{
    Evaluates `program` per element over the results' common shape: a
    straight-line list of instructions, five words each, `{opcode, dtype,
    a, b, c}` (common/ElementwiseProgram.h lists the opcodes), where
    instruction `i` defines register `i` from earlier registers. Each
    instruction computes in fp32, as the unfused op's kernel does, then
    rounds to `dtype` (0 f32, 1 bf16, 2 f16), where that op stored its
    result; `yields` names the register of each result. The assembly
    writes the program one instruction per register, `rI = opcode
    operands : dtype` (no dtype: f32; dialects/LLM/ElementwiseProgramSyntax.h);
    the words an opcode does not use must be 0. Every input has the
    results' shape or a suffix of it (a bias `[N]`, a scalar), repeated
    over the leading dimensions. llmc-fuse's `elementwise` forms it from
    chains of `add`, `mul`, `scale`, `cast`, `dropout`, `gelu`, `silu`,
    `swiglu` and their gradients; the kernels write a result in place over
    an input of its type when asked (each element is read before it is
    written). When the results are one rank's piece of a larger tensor,
    `global_shape` and `offsets` make every dropout instruction's mask
    index the element's global index, as they do on `llm.dropout`.

    ```mlir
    // add (add %a, %b), %c
    %y = llm.fused_elementwise(%a, %b, %c)
        [r0 = load 0, r1 = load 1, r2 = add r0, r1, r3 = load 2, r4 = add r2, r3] yields r4
        : (tensor<4x64x128xf32>, tensor<4x64x128xf32>, tensor<128xf32>) -> tensor<4x64x128xf32>
    ```
  }];
  let arguments = (ins Variadic<LLM_FloatTensor>:$inputs, DenseI64ArrayAttr:$program,
                       DenseI64ArrayAttr:$yields,
                       OptionalAttr<DenseI64ArrayAttr>:$global_shape,
                       OptionalAttr<DenseI64ArrayAttr>:$offsets);
  let results = (outs Variadic<LLM_FloatTensor>:$outs);
  let assemblyFormat = [{
    `(` $inputs `)` custom<ElementwiseProgram>($program, $yields) attr-dict `:`
    functional-type($inputs, $outs)
  }];
  let hasVerifier = 1;
}

def LLM_ReduceMaxOp : LLM_PureOp<"reduce_max"> {
  let summary = "Maximum over the last dimension, in fp32";
  let description = [{
    `x` is `S × [N]`; the result is `S` (fp32). It has no VJP: it serves as
    a numerical shift (through `llm.stop_gradient`), never as a value that
    is differentiated.

    With `num_classes` > 0, `x` holds the classes [`class_offset`,
    `class_offset` + N) of a vocabulary of `num_classes` and those past it
    (a padded vocabulary's last shard) are left out.

    ```mlir
    %m = llm.reduce_max %logits : tensor<4x64x256xbf16> -> tensor<4x64xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$x, DefaultValuedAttr<I64Attr, "0">:$class_offset,
                       DefaultValuedAttr<I64Attr, "0">:$num_classes);
  let results = (outs RankedTensorOf<[F32]>:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
}

def LLM_StopGradientOp : LLM_Op<"stop_gradient", [Pure, AllTypesMatch<["x", "result"]>]> {
  let summary = "The identity, through which no gradient flows";
  let description = [{
    Marks a value that the loss is mathematically invariant to (such as the
    shift of a log-sum-exp): autodiff treats the result as a constant.

    ```mlir
    %c = llm.stop_gradient %m : tensor<4x64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$x);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
}

def LLM_CopyToHostOp : LLM_Op<"copy_to_host", [Pure, AllTypesMatch<["x", "result"]>]> {
  let summary = "The identity, whose result lives in host memory";
  let description = [{
    Activation offloading (`llmc-offload-activations`): a value the forward
    saves for the backward leaves the device arena after its last forward
    use. The lowering places the result in the host memory space beside
    the arena and runs the `copy_to_host` kernel; only `llm.copy_to_device`
    may read it.

    ```mlir
    %h = llm.copy_to_host %a : tensor<4x64x128xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$x);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
  let hasVerifier = 1;
}

def LLM_CopyToDeviceOp : LLM_Op<"copy_to_device", [Pure, AllTypesMatch<["x", "result"]>]> {
  let summary = "The identity, bringing an offloaded value back to the device";
  let description = [{
    Reads the result of an `llm.copy_to_host` and gives it a device buffer
    again, before the backward that reads it (one layer ahead, so on a GPU
    the copy can run beside the layer before it).

    ```mlir
    %d = llm.copy_to_device %h : tensor<4x64x128xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$x);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
  let hasVerifier = 1;
}

def LLM_CrossEntropyPartialOp : LLM_PureOp<"cross_entropy_partial"> {
  let summary = "One vocabulary shard's share of a softmax cross-entropy";
  let description = [{
    `logits` is `S × [V_local]`: classes [`class_offset`, `class_offset` +
    V_local) of `num_classes`. With `shift` (`S`, fp32; the maximum over all
    shards, so no exponent overflows) each row gives
    `sumexp = Σ_j exp(logits[j] − shift)` and `target_logit` =
    logits[target − class_offset] when the target is one of this shard's
    classes, else 0 (also for ignored targets). Summed over the shards these
    complete `llm.cross_entropy_finish`'s inputs (Megatron's
    vocabulary-parallel cross-entropy).

    ```mlir
    %s, %t = llm.cross_entropy_partial %logits, %targets, %shift
        {class_offset = 128 : i64, num_classes = 256 : i64, ignore_index = -1 : i64}
        : tensor<4x64x128xf32>, tensor<4x64xi32>, tensor<4x64xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$logits, LLM_IndexTensor:$targets,
                       RankedTensorOf<[F32]>:$shift,
                       DefaultValuedAttr<I64Attr, "0">:$class_offset,
                       I64Attr:$num_classes,
                       DefaultValuedAttr<I64Attr, "-1">:$ignore_index);
  let results = (outs RankedTensorOf<[F32]>:$sumexp, RankedTensorOf<[F32]>:$target_logit);
  let assemblyFormat = "$logits `,` $targets `,` $shift attr-dict `:` type($logits) `,` "
                       "type($targets) `,` type($shift)";
  let hasVerifier = 1;
}

def LLM_CrossEntropyFinishOp : LLM_Op<"cross_entropy_finish",
    [Pure, AllTypesMatch<["sumexp", "shift", "target_logit"]>]> {
  let summary = "Softmax cross-entropy from per-row log-sum-exp parts";
  let description = [{
    From `sumexp`, `shift` and `target_logit` (all `S`, fp32; the sums over
    every vocabulary shard of `llm.cross_entropy_partial`), the mean over
    targets that are not `ignore_index` of `log(sumexp) + shift −
    target_logit` (0 if all are ignored).

    ```mlir
    %loss = llm.cross_entropy_finish %s, %shift, %t, %targets {ignore_index = -1 : i64}
        : tensor<4x64xf32>, tensor<4x64xi32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[F32]>:$sumexp, RankedTensorOf<[F32]>:$shift,
                       RankedTensorOf<[F32]>:$target_logit, LLM_IndexTensor:$targets,
                       DefaultValuedAttr<I64Attr, "-1">:$ignore_index);
  let results = (outs LLM_F32Scalar:$loss);
  let assemblyFormat = "$sumexp `,` $shift `,` $target_logit `,` $targets attr-dict `:` "
                       "type($sumexp) `,` type($targets)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Shape
//===----------------------------------------------------------------------===//

def LLM_ReshapeOp : LLM_Op<"reshape", [Pure, DeclareOpInterfaceMethods<LLM_RowSplitOpInterface>]> {
  let summary = "Same elements, row-major, new static shape";
  let description = [{
    ```mlir
    %q4 = llm.reshape %q : tensor<4x64x128xf32> to tensor<4x64x8x16xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$x);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `to` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def LLM_TransposeOp : LLM_Op<"transpose", [Pure, DeclareOpInterfaceMethods<LLM_RowSplitOpInterface>]> {
  let summary = "Permutes dimensions: result dim i is input dim permutation[i]";
  let description = [{
    ```mlir
    %t = llm.transpose %x {permutation = array<i64: 0, 2, 1, 3>} : tensor<4x64x8x16xf32> to tensor<4x8x64x16xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$x, DenseI64ArrayAttr:$permutation);
  let results = (outs LLM_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `to` type($result)";
  let hasVerifier = 1;
}

def LLM_SliceOp : LLM_Op<"slice", [Pure, DeclareOpInterfaceMethods<LLM_RowSplitOpInterface>]> {
  let summary = "A static box of the input: start offsets, result shape";
  let description = [{
    ```mlir
    %q = llm.slice %qkv {offsets = array<i64: 0, 0, 0>} : tensor<4x64x384xf32> to tensor<4x64x128xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$x, DenseI64ArrayAttr:$offsets);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `to` type($result)";
  let hasVerifier = 1;
}

def LLM_PadOp : LLM_Op<"pad", [Pure, DeclareOpInterfaceMethods<LLM_RowSplitOpInterface>]> {
  let summary = "Places the input at offsets inside a zero tensor (slice's backward)";
  let description = [{
    ```mlir
    %g = llm.pad %dq {offsets = array<i64: 0, 0, 0>} : tensor<4x64x128xf32> to tensor<4x64x384xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$x, DenseI64ArrayAttr:$offsets);
  let results = (outs LLM_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `to` type($result)";
  let hasVerifier = 1;
}

def LLM_ConcatOp : LLM_Op<"concat", [Pure, DeclareOpInterfaceMethods<LLM_RowSplitOpInterface>]> {
  let summary = "Joins tensors along one dimension";
  let description = [{
    ```mlir
    %qkv = llm.concat %q, %k, %v {dim = 2 : i64} : tensor<4x64x128xf32>, tensor<4x64x128xf32>, tensor<4x64x128xf32> -> tensor<4x64x384xf32>
    ```
  }];
  let arguments = (ins Variadic<LLM_FloatTensor>:$inputs, I64Attr:$dim);
  let results = (outs LLM_FloatTensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs) `->` type($result)";
  let hasVerifier = 1;
}

def LLM_ReduceSumOp : LLM_Op<"reduce_sum", [Pure, MixesBatchRows]> {
  let summary = "Sums over leading dimensions down to a suffix shape (broadcast's backward)";
  let description = [{
    ```mlir
    %db = llm.reduce_sum %dy : tensor<4x64x128xf32> to tensor<128xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$x);
  let results = (outs LLM_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `to` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Backward ops (emitted by autodiff)
//===----------------------------------------------------------------------===//

def LLM_EmbeddingGradOp : LLM_Op<"embedding_grad", [Pure]> {
  let summary = "Scatter-adds output gradients into a table-shaped gradient";
  let description = [{
    `row_offset` and `vocab_size` as in `llm.embedding`: only ids of this
    shard's rows contribute.

    ```mlir
    %dwte = llm.embedding_grad %tokens, %de : tensor<4x64xi32>, tensor<4x64x128xf32> to tensor<256x128xf32>
    ```
  }];
  let arguments = (ins LLM_IndexTensor:$ids, LLM_FloatTensor:$dy,
                       DefaultValuedAttr<I64Attr, "0">:$row_offset,
                       DefaultValuedAttr<I64Attr, "0">:$vocab_size);
  let results = (outs LLM_FloatTensor:$result);
  let assemblyFormat = "$ids `,` $dy attr-dict `:` type($ids) `,` type($dy) `to` type($result)";
  let hasVerifier = 1;
}

def LLM_LayerNormGradOp : LLM_PureOp<"layernorm_grad", [AllTypesMatch<["x", "dy"]>]> {
  let summary = "Backward of layernorm: dx, dgamma, dbeta";
  let description = [{
    Recomputes the row statistics from `x` (cheaper than storing them).

    ```mlir
    %dx, %dg, %db = llm.layernorm_grad %x, %g, %dy {epsilon = 1.0e-5 : f64} : tensor<4x64x128xf32>, tensor<128xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$x, LLM_FloatTensor:$gamma,
                       LLM_FloatTensor:$dy, F64Attr:$epsilon);
  let results = (outs LLM_FloatTensor:$dx, LLM_FloatTensor:$dgamma,
                      LLM_FloatTensor:$dbeta);
  let assemblyFormat = "$x `,` $gamma `,` $dy attr-dict `:` type($x) `,` type($gamma)";
}

def LLM_RMSNormGradOp : LLM_PureOp<"rmsnorm_grad", [AllTypesMatch<["x", "dy"]>]> {
  let summary = "Backward of rmsnorm: dx, dgamma";
  let description = [{
    ```mlir
    %dx, %dg = llm.rmsnorm_grad %x, %g, %dy {epsilon = 1.0e-5 : f64} : tensor<4x64x128xf32>, tensor<128xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$x, LLM_FloatTensor:$gamma,
                       LLM_FloatTensor:$dy, F64Attr:$epsilon, UnitAttr:$unit_offset);
  let results = (outs LLM_FloatTensor:$dx, LLM_FloatTensor:$dgamma);
  let assemblyFormat = "$x `,` $gamma `,` $dy attr-dict `:` type($x) `,` type($gamma)";
}

def LLM_LayerNormGradAddOp : LLM_PureOp<"layernorm_grad_add",
    [AllTypesMatch<["x", "dy", "addend"]>]> {
  let summary = "Backward of layernorm with another gradient added to dx";
  let description = [{
    `layernorm_grad`'s dx plus `addend`, dgamma, dbeta, as one kernel: where
    a residual stream's gradient meets the gradient through the norm.
    Rounded as `llm.layernorm_grad` then `llm.add` round (dx to the element
    type before the sum). llmc-fuse's `add-norm` forms it.

    ```mlir
    %dx, %dg, %db = llm.layernorm_grad_add %x, %g, %dy, %dres {epsilon = 1.0e-5 : f64}
        : tensor<4x64x128xf32>, tensor<128xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$x, LLM_FloatTensor:$gamma,
                       LLM_FloatTensor:$dy, LLM_FloatTensor:$addend, F64Attr:$epsilon);
  let results = (outs LLM_FloatTensor:$dx, LLM_FloatTensor:$dgamma,
                      LLM_FloatTensor:$dbeta);
  let assemblyFormat = "$x `,` $gamma `,` $dy `,` $addend attr-dict `:` type($x) `,` type($gamma)";
  let hasVerifier = 1;
}

def LLM_RMSNormGradAddOp : LLM_PureOp<"rmsnorm_grad_add",
    [AllTypesMatch<["x", "dy", "addend"]>]> {
  let summary = "Backward of rmsnorm with another gradient added to dx";
  let description = [{
    `rmsnorm_grad`'s dx plus `addend`, and dgamma, as one kernel, rounded as
    `llm.rmsnorm_grad` then `llm.add` round. llmc-fuse's `add-norm` forms
    it.

    ```mlir
    %dx, %dg = llm.rmsnorm_grad_add %x, %g, %dy, %dres {epsilon = 1.0e-5 : f64}
        : tensor<4x64x128xf32>, tensor<128xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$x, LLM_FloatTensor:$gamma,
                       LLM_FloatTensor:$dy, LLM_FloatTensor:$addend, F64Attr:$epsilon,
                       UnitAttr:$unit_offset);
  let results = (outs LLM_FloatTensor:$dx, LLM_FloatTensor:$dgamma);
  let assemblyFormat = "$x `,` $gamma `,` $dy `,` $addend attr-dict `:` type($x) `,` type($gamma)";
  let hasVerifier = 1;
}

class LLM_UnaryGradOp<string mnemonic, string of>
    : LLM_PureOp<mnemonic, [AllTypesMatch<["x", "dy"]>]> {
  let summary = "Backward of " # of # ": dy · " # of # "'(x)";
  let description = [{
    ```mlir
    %dx = llm.}] # mnemonic # [{ %x, %dy : tensor<4x64x512xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$x, LLM_FloatTensor:$dy);
  let results = (outs LLM_FloatTensor:$result);
  let assemblyFormat = "$x `,` $dy attr-dict `:` type($x)";
}

def LLM_GeluGradOp : LLM_UnaryGradOp<"gelu_grad", "gelu">;
def LLM_SiluGradOp : LLM_UnaryGradOp<"silu_grad", "silu">;
def LLM_SigmoidGradOp : LLM_UnaryGradOp<"sigmoid_grad", "sigmoid">;

def LLM_GegluGradOp : LLM_PureOp<"geglu_grad", [AllTypesMatch<["gate", "up", "dy"]>]> {
  let summary = "Backward of geglu: dgate, dup";
  let description = [{
    ```mlir
    %dgate, %dup = llm.geglu_grad %gate, %up, %dy : tensor<4x64x344xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$gate, LLM_FloatTensor:$up, LLM_FloatTensor:$dy);
  let results = (outs LLM_FloatTensor:$dgate, LLM_FloatTensor:$dup);
  let assemblyFormat = "$gate `,` $up `,` $dy attr-dict `:` type($gate)";
}

def LLM_SoftcapGradOp : LLM_PureOp<"softcap_grad", [AllTypesMatch<["x", "dy"]>]> {
  let summary = "Backward of softcap: dy·(1 − tanh²(x / cap))";
  let description = [{
    ```mlir
    %dx = llm.softcap_grad %x, %dy {cap = 30.0 : f64} : tensor<4x64x256xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$x, LLM_FloatTensor:$dy, F64Attr:$cap);
  let results = (outs LLM_FloatTensor:$result);
  let assemblyFormat = "$x `,` $dy attr-dict `:` type($x)";
  let hasVerifier = 1;
}

def LLM_SwigluGradOp : LLM_PureOp<"swiglu_grad", [AllTypesMatch<["gate", "up", "dy"]>]> {
  let summary = "Backward of swiglu: dgate, dup";
  let description = [{
    ```mlir
    %dgate, %dup = llm.swiglu_grad %gate, %up, %dy : tensor<4x64x344xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$gate, LLM_FloatTensor:$up, LLM_FloatTensor:$dy);
  let results = (outs LLM_FloatTensor:$dgate, LLM_FloatTensor:$dup);
  let assemblyFormat = "$gate `,` $up `,` $dy attr-dict `:` type($gate)";
}

def LLM_AttentionGradOp : LLM_PureOp<"attention_grad", [AllTypesMatch<["k", "v"]>, AllTypesMatch<["q", "out", "dout"]>]> {
  let summary = "Backward of attention: dq, dk, dv";
  let description = [{
    Takes the forward inputs, output and log-sum-exp and the output
    gradient. For GQA/MQA, dk and dv sum over the query heads sharing a kv
    head.

    ```mlir
    %dq, %dk, %dv = llm.attention_grad %q, %k, %v, %o, %lse, %do {causal, scale = 0.25 : f64}
        : tensor<4x64x8x16xf32>, tensor<4x64x8x16xf32>, tensor<4x8x64xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$q, LLM_FloatTensor:$k, LLM_FloatTensor:$v,
                       LLM_FloatTensor:$out, LLM_FloatTensor:$lse, LLM_FloatTensor:$dout,
                       Optional<LLM_IndexTensor>:$segment_ids,
                       F64Attr:$scale, UnitAttr:$causal, OptionalAttr<I64Attr>:$window,
                       OptionalAttr<F64Attr>:$softcap);
  let results = (outs LLM_FloatTensor:$dq, LLM_FloatTensor:$dk, LLM_FloatTensor:$dv);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $out `,` $lse `,` $dout
    (`segments` $segment_ids^ `:` type($segment_ids))? attr-dict `:` type($q) `,` type($k) `,` type($lse)
  }];
  let hasVerifier = 1;
}

def LLM_AttentionPackedGradOp : LLM_PackedAttentionOp<"attention_packed_grad",
                                                      [AllTypesMatch<["out", "dout"]>]> {
  let summary = "Backward of attention_packed: dq, dk, dv in one packed gradient";
  let description = [{
    `dqkv` has `qkv`'s shape and holds dq, dk and dv where `qkv` holds q, k
    and v: the sum of the three zero-padded gradients the slices'
    backward would add up, written in place.

    ```mlir
    %dqkv = llm.attention_packed_grad %qkv, %o, %lse, %do {causal, heads = 4 : i64,
                                                           kv_heads = 4 : i64, scale = 0.25 : f64}
        : tensor<4x64x192xf32>, tensor<4x64x4x16xf32>, tensor<4x4x64xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$qkv, LLM_FloatTensor:$out, LLM_FloatTensor:$lse,
                       LLM_FloatTensor:$dout, Optional<LLM_IndexTensor>:$segment_ids,
                       I64Attr:$heads, I64Attr:$kv_heads, F64Attr:$scale, UnitAttr:$causal,
                       OptionalAttr<I64Attr>:$window,
                       OptionalAttr<F64Attr>:$softcap);
  let results = (outs LLM_FloatTensor:$dqkv);
  let assemblyFormat = [{
    $qkv `,` $out `,` $lse `,` $dout (`segments` $segment_ids^ `:` type($segment_ids))? attr-dict
    `:` type($qkv) `,` type($out) `,` type($lse)
  }];
  let hasVerifier = 1;
}

def LLM_AttentionRopeGradOp : LLM_PureOp<"attention_rope_grad", [AllTypesMatch<["k", "v"]>,
                                   AllTypesMatch<["q", "out", "dout"]>, AttrSizedOperandSegments]> {
  let summary = "Backward of attention_rope: dq, dk of the unrotated q, k, and dv";
  let description = [{
    `attention_grad` of the rotated q and k, whose dq and dk are then
    rotated back (`llm.rope` with `inverse`, the rotation's transpose)
    before they are stored; with bf16 or f16 storage rounded to that type
    where `attention_grad` and the inverse `llm.rope` store them.

    ```mlir
    %dq, %dk, %dv = llm.attention_rope_grad %q, %k, %v, %o, %lse, %do
        {causal, scale = 0.25 : f64, theta = 10000.0 : f64}
        : tensor<4x64x8x16xf32>, tensor<4x64x2x16xf32>, tensor<4x8x64xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$q, LLM_FloatTensor:$k, LLM_FloatTensor:$v,
                       LLM_FloatTensor:$out, LLM_FloatTensor:$lse, LLM_FloatTensor:$dout,
                       Optional<LLM_IndexTensor>:$positions,
                       Optional<LLM_IndexTensor>:$segment_ids,
                       F64Attr:$scale, UnitAttr:$causal, F64Attr:$theta,
                       OptionalAttr<F64Attr>:$scaling_factor,
                       OptionalAttr<F64Attr>:$low_freq_factor,
                       OptionalAttr<F64Attr>:$high_freq_factor,
                       OptionalAttr<I64Attr>:$original_max_positions,
                       OptionalAttr<I64Attr>:$window,
                       OptionalAttr<F64Attr>:$softcap);
  let results = (outs LLM_FloatTensor:$dq, LLM_FloatTensor:$dk, LLM_FloatTensor:$dv);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $out `,` $lse `,` $dout (`positions` $positions^ `:` type($positions))?
    (`segments` $segment_ids^ `:` type($segment_ids))? attr-dict
    `:` type($q) `,` type($k) `,` type($lse)
  }];
  let hasVerifier = 1;
}

def LLM_CrossEntropyGradOp : LLM_PureOp<"cross_entropy_grad"> {
  let summary = "Backward of cross_entropy: (softmax − onehot) · dloss / count";
  let description = [{
    `num_classes` as in `cross_entropy`: columns past it get 0.

    ```mlir
    %dlogits = llm.cross_entropy_grad %logits, %targets, %dloss {ignore_index = -1 : i64}
        : tensor<4x64x256xf32>, tensor<4x64xi32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$logits, LLM_IndexTensor:$targets,
                       LLM_F32Scalar:$dloss,
                       DefaultValuedAttr<I64Attr, "-1">:$ignore_index,
                       DefaultValuedAttr<I64Attr, "0">:$num_classes);
  let results = (outs LLM_FloatTensor:$result);
  let assemblyFormat = "$logits `,` $targets `,` $dloss attr-dict `:` type($logits) `,` type($targets)";
  let hasVerifier = 1;
}

def LLM_CrossEntropyPartialGradOp : LLM_PureOp<"cross_entropy_partial_grad",
    [AllTypesMatch<["shift", "dsumexp", "dtarget_logit"]>]> {
  let summary = "Backward of cross_entropy_partial w.r.t. logits";
  let description = [{
    `dlogits[j] = dsumexp · exp(logits[j] − shift)`, plus `dtarget_logit` at
    the target's column when the target is this shard's.

    ```mlir
    %dl = llm.cross_entropy_partial_grad %logits, %targets, %shift, %ds, %dt
        {class_offset = 0 : i64, num_classes = 256 : i64, ignore_index = -1 : i64}
        : tensor<4x64x256xf32>, tensor<4x64xi32>, tensor<4x64xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$logits, LLM_IndexTensor:$targets,
                       RankedTensorOf<[F32]>:$shift, RankedTensorOf<[F32]>:$dsumexp,
                       RankedTensorOf<[F32]>:$dtarget_logit,
                       DefaultValuedAttr<I64Attr, "0">:$class_offset,
                       I64Attr:$num_classes,
                       DefaultValuedAttr<I64Attr, "-1">:$ignore_index);
  let results = (outs LLM_FloatTensor:$result);
  let assemblyFormat = "$logits `,` $targets `,` $shift `,` $dsumexp `,` $dtarget_logit "
                       "attr-dict `:` type($logits) `,` type($targets) `,` type($shift)";
}

def LLM_CrossEntropyFinishGradOp : LLM_PureOp<"cross_entropy_finish_grad"> {
  let summary = "Backward of cross_entropy_finish: dsumexp, dshift, dtarget_logit";
  let description = [{
    With n the number of targets that are not ignored and g = dloss / n, per
    row that is not ignored: `dsumexp = g / sumexp`, `dshift = g`,
    `dtarget_logit = −g`; all 0 on ignored rows.

    ```mlir
    %ds, %dm, %dt = llm.cross_entropy_finish_grad %s, %targets, %dloss {ignore_index = -1 : i64}
        : tensor<4x64xf32>, tensor<4x64xi32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[F32]>:$sumexp, LLM_IndexTensor:$targets,
                       LLM_F32Scalar:$dloss,
                       DefaultValuedAttr<I64Attr, "-1">:$ignore_index);
  let results = (outs RankedTensorOf<[F32]>:$dsumexp, RankedTensorOf<[F32]>:$dshift,
                      RankedTensorOf<[F32]>:$dtarget_logit);
  let assemblyFormat = "$sumexp `,` $targets `,` $dloss attr-dict `:` type($sumexp) `,` "
                       "type($targets)";
}

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

def LLM_GlobalNormOp : LLM_Op<"global_norm", [Pure, MixesBatchRows]> {
  let summary = "L2 norm (or, with `squared`, its square) over all inputs, in fp32";
  let description = [{
    `squared` returns Σx² instead of √(Σx²), so norms of shards on different
    ranks can be summed before the square root.

    ```mlir
    %n = llm.global_norm %g0, %g1 : tensor<256x128xf32>, tensor<128xf32>
    %s = llm.global_norm %g0 {squared} : tensor<256x128xf32>
    ```
  }];
  let arguments = (ins Variadic<LLM_FloatTensor>:$inputs, UnitAttr:$squared);
  let results = (outs LLM_F32Scalar:$result);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs)";
  let hasVerifier = 1;
}

def LLM_SqrtOp : LLM_UnaryOp<"sqrt", "Elementwise square root",
  "%n = llm.sqrt %s : tensor<f32>">;

def LLM_AdamWOp : LLM_PureOp<"adamw", [MixesBatchRows, AttrSizedOperandSegments,
    AllTypesMatch<["param", "grad", "m", "v"]>]> {
  let summary = "One AdamW update of a parameter and its moments";
  let description = [{
    With g' = g · min(1, max_grad_norm / (grad_norm + 1e-6)) when
    `grad_norm` is given and `max_grad_norm` > 0 (else g' = g), t = step:
    m' = β1 m + (1−β1) g'; v' = β2 v + (1−β2) g'²;
    p' = p − lr (m'/(1−β1^t) / (√(v'/(1−β2^t)) + ε) + weight_decay · p).
    `lr` and `step` are runtime scalars. A `grad_norm` that is not finite
    (inf or NaN) skips the step: p', m', v' are p, m, v bit for bit.

    With fp16 loss scaling the gradients arrive multiplied by the runtime
    scalar `loss_scale` (which needs `grad_norm`, their norm as given):
    g is read as g / loss_scale and the clip uses grad_norm / loss_scale,
    so unscaling costs no pass of its own.

    ```mlir
    %p1, %m1, %v1 = llm.adamw %p, %g, %m, %v, %lr, %step norm %n
        {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64,
         weight_decay = 0.1 : f64, max_grad_norm = 1.0 : f64} : tensor<128xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$param, LLM_FloatTensor:$grad,
                       LLM_FloatTensor:$m, LLM_FloatTensor:$v,
                       LLM_F32Scalar:$lr, LLM_F32Scalar:$step,
                       Optional<LLM_F32Scalar>:$grad_norm,
                       Optional<LLM_F32Scalar>:$loss_scale,
                       F64Attr:$beta1, F64Attr:$beta2, F64Attr:$epsilon,
                       F64Attr:$weight_decay, F64Attr:$max_grad_norm);
  let results = (outs LLM_FloatTensor:$new_param, LLM_FloatTensor:$new_m,
                      LLM_FloatTensor:$new_v);
  let assemblyFormat = [{
    $param `,` $grad `,` $m `,` $v `,` $lr `,` $step (`norm` $grad_norm^)?
    (`loss_scale` $loss_scale^)? attr-dict `:` type($param)
  }];
  let hasVerifier = 1;
}

def LLM_AdamW8bitOp : LLM_PureOp<"adamw8bit", [MixesBatchRows, AttrSizedOperandSegments,
    AllTypesMatch<["param", "grad"]>,
    AllTypesMatch<["m_codes", "v_codes", "new_m_codes", "new_v_codes"]>,
    AllTypesMatch<["m_absmax", "v_absmax", "new_m_absmax", "new_v_absmax"]>]> {
  let summary = "One AdamW update with 8-bit block-wise quantized moments";
  let description = [{
    llm.adamw's update, with m and v stored as uint8 codes (shape of the
    parameter) and one fp32 absolute maximum per block of 2048 elements of
    the flattened state (Dettmers et al.'s block-wise dynamic quantization;
    the exact arithmetic is common/Adam8bit.h). Each step decodes a block,
    updates it in fp32 and re-encodes it with the block's new absmax, so the
    moments cost 2 bytes per parameter instead of 8. All-zero codes and
    absmax are a fresh state. A non-finite `grad_norm` skips the step: every
    result is its input, bit for bit. `loss_scale` unscales as in llm.adamw.

    ```mlir
    %p1, %mc1, %ma1, %vc1, %va1 = llm.adamw8bit %p, %g, %mc, %ma, %vc, %va, %lr, %step norm %n
        {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64,
         weight_decay = 0.1 : f64, max_grad_norm = 1.0 : f64}
        : tensor<4096xf32>, tensor<4096xi8>, tensor<2xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$param, LLM_FloatTensor:$grad,
                       RankedTensorOf<[I8]>:$m_codes, RankedTensorOf<[F32]>:$m_absmax,
                       RankedTensorOf<[I8]>:$v_codes, RankedTensorOf<[F32]>:$v_absmax,
                       LLM_F32Scalar:$lr, LLM_F32Scalar:$step,
                       Optional<LLM_F32Scalar>:$grad_norm,
                       Optional<LLM_F32Scalar>:$loss_scale,
                       F64Attr:$beta1, F64Attr:$beta2, F64Attr:$epsilon,
                       F64Attr:$weight_decay, F64Attr:$max_grad_norm);
  let results = (outs LLM_FloatTensor:$new_param,
                      RankedTensorOf<[I8]>:$new_m_codes, RankedTensorOf<[F32]>:$new_m_absmax,
                      RankedTensorOf<[I8]>:$new_v_codes, RankedTensorOf<[F32]>:$new_v_absmax);
  let assemblyFormat = [{
    $param `,` $grad `,` $m_codes `,` $m_absmax `,` $v_codes `,` $v_absmax `,` $lr `,` $step
    (`norm` $grad_norm^)? (`loss_scale` $loss_scale^)? attr-dict
    `:` type($param) `,` type($m_codes) `,` type($m_absmax)
  }];
  let hasVerifier = 1;
}

def LLM_MultiTensorAdamWOp : LLM_PureOp<"multi_tensor_adamw", [MixesBatchRows,
    AttrSizedOperandSegments]> {
  let summary = "llm.adamw on several tensors at once, and the casts that follow";
  let description = [{
    For each tensor i, exactly `llm.adamw %params[i], %grads[i], %m[i],
    %v[i], %lr, %step` with the same `norm` and `loss_scale`, the shared
    hyperparameters, and weight decay `weight_decay` where `decay[i]` is 1
    (0 where it is 0). The gradient may be of another float type than the
    parameter (a bf16 gradient read as the `cast` to f32 the unfused step
    makes; the widening is exact). Then, for each index k of `cast_of`, the
    updated parameter `cast_of[k]` rounded to `cast_type` (nearest even), as
    `llm.cast` rounds it: the bf16/f16 working copy of an fp32 master. A
    non-finite norm skips the update (every moment and parameter keeps its
    value bit for bit); the casts are then of the unchanged parameters.

    Results, one variadic list: the updated parameters, then the m's, then
    the v's (each of its input's type), then the casts. llmc-fuse's
    `multi-tensor-adamw` forms it from a step's adamw ops, so a backend
    updates every tensor in one launch.

    ```mlir
    %r:7 = llm.multi_tensor_adamw params(%p0, %p1 : tensor<8xf32>, tensor<4xf32>)
        grads(%g0, %g1 : tensor<8xf32>, tensor<4xf32>)
        m(%m0, %m1 : tensor<8xf32>, tensor<4xf32>) v(%v0, %v1 : tensor<8xf32>, tensor<4xf32>)
        lr %lr step %step norm %n
        {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64,
         weight_decay = 0.1 : f64, max_grad_norm = 1.0 : f64, decay = array<i64: 1, 0>,
         cast_of = array<i64: 0>, cast_type = bf16}
    ```
  }];
  let arguments = (ins Variadic<LLM_FloatTensor>:$params, Variadic<LLM_FloatTensor>:$grads,
                       Variadic<LLM_FloatTensor>:$m, Variadic<LLM_FloatTensor>:$v,
                       LLM_F32Scalar:$lr, LLM_F32Scalar:$step,
                       Optional<LLM_F32Scalar>:$grad_norm,
                       Optional<LLM_F32Scalar>:$loss_scale,
                       F64Attr:$beta1, F64Attr:$beta2, F64Attr:$epsilon,
                       F64Attr:$weight_decay, F64Attr:$max_grad_norm,
                       DenseI64ArrayAttr:$decay, DenseI64ArrayAttr:$cast_of,
                       OptionalAttr<TypeAttr>:$cast_type);
  let results = (outs Variadic<LLM_FloatTensor>:$results);
  let assemblyFormat = [{
    `params` `(` $params `:` type($params) `)` `grads` `(` $grads `:` type($grads) `)`
    `m` `(` $m `:` type($m) `)` `v` `(` $v `:` type($v) `)`
    `lr` $lr `step` $step (`norm` $grad_norm^)? (`loss_scale` $loss_scale^)? attr-dict
  }];
  let extraClassDeclaration = [{
    /// Tensors updated.
    size_t getNumTensors() { return getParams().size(); }
    /// Tensor i's updated parameter, m and v.
    ::mlir::Value getNewParam(size_t i) { return getResults()[i]; }
    ::mlir::Value getNewM(size_t i) { return getResults()[getNumTensors() + i]; }
    ::mlir::Value getNewV(size_t i) { return getResults()[2 * getNumTensors() + i]; }
    /// The k-th cast: tensor getCastOf()[k]'s updated parameter rounded.
    ::mlir::Value getCast(size_t k) { return getResults()[3 * getNumTensors() + k]; }
  }];
  let hasVerifier = 1;
}

include "dialects/LLM/MoEOps.td"

#endif // LLMC_LLM_OPS
