//===- MoEOps.td - mixture-of-experts ops ------------------*- tablegen -*-===//
//
// A mixture-of-experts layer is written with five ops, each a plain kernel:
//
//   %w, %e, %pos, %off, %psum, %cnt, %z = llm.moe_route %logits {top_k = 2}
//   %xs  = llm.moe_dispatch %x, %pos           // token copies, expert-sorted
//   %h   = llm.grouped_matmul %xs, %off, %w1 {transpose_b}  // w1 [E, F, C]
//   ...                                          // any positionwise ops
//   %ys  = llm.grouped_matmul %h, %off, %w2 {transpose_b}   // w2 [E, C, F]
//   %y   = llm.moe_combine %ys, %pos weights %w  // Σ_j w[n,j]·ys[pos[n,j]]
//
// Routing is dropless: each of the N tokens is copied to exactly top_k
// experts, so the sorted copies are always N·top_k rows and every shape is
// static; how many rows each expert receives is data (`offsets`), read by
// the grouped matmul at run time. The experts' weights are stacked, one
// parameter [E, …] per projection (Hugging Face's per-expert tensors are
// its slices), so expert parallelism splits them along dimension 0.
//
//===----------------------------------------------------------------------===//

def LLM_MoERouteOp : LLM_PureOp<"moe_route", [KeepsPrecision]> {
  let summary = "Top-k softmax or sigmoid routing of tokens to experts, sorted by expert";
  let description = [{
    For router logits `[N, E]` (any float type; computed in fp32):

    - `p = softmax(logits)` per token; the `top_k` largest (ties: the lower
      expert index first) give `experts [N, k]` (i32) in descending order
      and `weights [N, k]` (f32): `p` of each, or with `normalize` `p`
      divided by the chosen ones' sum (Mixtral; Qwen-MoE's
      `norm_topk_prob`).
    - `positions [N, k]` (i32): where copy j of token n lands among the
      N·k expert-sorted rows — a stable sort by expert, then token, then j;
      `offsets [E + 1]` (i32): expert e's rows are `[offsets[e],
      offsets[e+1])`.
    - For the auxiliary losses: `prob_sum [E]` = Σₙ p[n, e], `counts [E]`
      = the copies expert e received (as f32; no gradient), `z_sum` =
      Σₙ logsumexp(logits[n])² (the router z-loss's sum).

    With `score = "sigmoid"` (DeepSeek-V3's scoring_func) each expert's
    score is `s = σ(logits)` instead, independently of the others:

    - the choice is the top_k of `s + bias` (`bias [E]`, f32, optional:
      DeepSeek-V3's e_score_correction_bias, which steers the choice and
      nothing else), or without a bias of the logits (σ is monotone);
    - `weights` are the chosen experts' `s`, with `normalize` divided by
      their sum;
    - `prob_sum` adds the scores normalised over all E experts,
      `s[n, e] / Σₑ' s[n, e']` (DeepSeek-V3's s′ of its balance loss), so
      the load-balancing loss is defined as for softmax; `z_sum` is still
      the logits' logsumexp².

    Either way the weights are finally multiplied by `scale` (DeepSeek's
    routed_scaling_factor; default 1).

    ```mlir
    %w, %e, %pos, %off, %psum, %cnt, %z = llm.moe_route %logits {top_k = 2 : i64, normalize}
        : tensor<64x8xf32>
    %w2, %e2, %pos2, %off2, %psum2, %cnt2, %z2 = llm.moe_route %logits bias %b
        {top_k = 2 : i64, normalize, score = "sigmoid", scale = 2.5 : f64}
        : tensor<64x8xf32> bias tensor<8xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$logits, Optional<LLM_FloatTensor>:$bias,
                       I64Attr:$top_k, UnitAttr:$normalize,
                       DefaultValuedAttr<StrAttr, "\"softmax\"">:$score,
                       DefaultValuedAttr<F64Attr, "1.0">:$scale);
  let results = (outs LLM_FloatTensor:$weights, LLM_IndexTensor:$experts,
                      LLM_IndexTensor:$positions, LLM_IndexTensor:$offsets,
                      LLM_FloatTensor:$prob_sum, LLM_FloatTensor:$counts,
                      LLM_F32Scalar:$z_sum);
  let assemblyFormat = [{
    $logits (`bias` $bias^)? attr-dict `:` type($logits) (`bias` type($bias)^)?
  }];
}

def LLM_MoERouteGradOp : LLM_PureOp<"moe_route_grad"> {
  let summary = "Backward of moe_route: dlogits from dweights, dprob_sum, dz_sum";
  let description = [{
    The gradient of the logits through the chosen weights (the softmax, or
    with `normalize` the softmax over the chosen experts; with `score =
    "sigmoid"` each chosen expert's σ, coupled to the others only by the
    renormalisation), `prob_sum` and `z_sum`; `experts` are the forward's
    choices, `score`, `normalize` and `scale` its attributes (the bias
    only chose the experts: it takes no gradient and is not needed here).

    ```mlir
    %dl = llm.moe_route_grad %logits, %e, %dw, %dpsum, %dz {normalize}
        : tensor<64x8xf32>, tensor<64x2xi32>, tensor<64x2xf32>, tensor<8xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$logits, LLM_IndexTensor:$experts,
                       LLM_FloatTensor:$dweights, LLM_FloatTensor:$dprob_sum,
                       LLM_F32Scalar:$dz_sum, UnitAttr:$normalize,
                       DefaultValuedAttr<StrAttr, "\"softmax\"">:$score,
                       DefaultValuedAttr<F64Attr, "1.0">:$scale);
  let results = (outs LLM_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $experts `,` $dweights `,` $dprob_sum `,` $dz_sum attr-dict `:` type($logits)
    `,` type($experts) `,` type($dweights) `,` type($dprob_sum)
  }];
}

def LLM_MoEDispatchOp : LLM_PureOp<"moe_dispatch"> {
  let summary = "Copies each token to its experts' rows: out[positions[n, j]] = x[n]";
  let description = [{
    `x [N, C]`, `positions [N, k]` a permutation of `0 .. N·k−1`; the
    result is `[N·k, C]` of x's type. With `weights [N, k]` (f32) each copy
    is scaled: `out[positions[n, j]] = weights[n, j]·x[n]` (moe_combine's
    backward).

    ```mlir
    %xs = llm.moe_dispatch %x, %pos : tensor<64x32xf32>, tensor<64x2xi32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$x, LLM_IndexTensor:$positions,
                       Optional<LLM_FloatTensor>:$weights);
  let results = (outs LLM_FloatTensor:$result);
  let assemblyFormat = [{
    $x `,` $positions (`weights` $weights^)? attr-dict `:` type($x) `,` type($positions)
    (`weights` type($weights)^)?
  }];
}

def LLM_MoECombineOp : LLM_PureOp<"moe_combine"> {
  let summary = "Sums each token's expert rows: y[n] = Σ_j weights[n, j]·ys[positions[n, j]]";
  let description = [{
    `ys [N·k, C]`, `positions [N, k]`; the result is `[N, C]` of ys's type,
    summed in fp32 over j in order and rounded once. Without `weights` each
    row counts once (moe_dispatch's backward).

    ```mlir
    %y = llm.moe_combine %ys, %pos weights %w : tensor<128x32xf32>, tensor<64x2xi32>
        weights tensor<64x2xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$ys, LLM_IndexTensor:$positions,
                       Optional<LLM_FloatTensor>:$weights);
  let results = (outs LLM_FloatTensor:$result);
  let assemblyFormat = [{
    $ys `,` $positions (`weights` $weights^)? attr-dict `:` type($ys) `,` type($positions)
    (`weights` type($weights)^)?
  }];
}

def LLM_MoECombineWeightGradOp : LLM_PureOp<"moe_combine_weight_grad"> {
  let summary = "dweights[n, j] = ⟨ys[positions[n, j]], dy[n]⟩ (fp32)";
  let description = [{
    The gradient of moe_combine's weights (and of moe_dispatch's, with the
    dispatched gradient as `ys` and x as `dy`), accumulated in fp32.

    ```mlir
    %dw = llm.moe_combine_weight_grad %ys, %pos, %dy
        : tensor<128x32xf32>, tensor<64x2xi32>, tensor<64x32xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$ys, LLM_IndexTensor:$positions, LLM_FloatTensor:$dy);
  let results = (outs LLM_FloatTensor:$result);
  let assemblyFormat = "$ys `,` $positions `,` $dy attr-dict `:` type($ys) `,` type($positions) `,` type($dy)";
}

def LLM_GroupedMatmulOp : LLM_PureOp<"grouped_matmul", [ExpensiveToRecompute]> {
  let summary = "Each group of rows times its own weight: experts as one op";
  let description = [{
    `x [M, K]`; `offsets [G + 1]` (i32, data): group g is rows
    `[offsets[g], offsets[g+1])`, `offsets[0] = 0`, `offsets[G] <= M`; the
    groups' weights stacked, `[G, K, F]` or with `transpose_b` `[G, F, K]`
    (each slice Hugging Face's Linear layout). The result `[M, F]` holds
    each group's rows times its weight, as `llm.matmul` computes them; rows
    past `offsets[G]` (an expert-parallel buffer sized for the worst case)
    are zero.

    ```mlir
    %h = llm.grouped_matmul %xs, %off, %w {transpose_b}
        : tensor<128x32xf32>, tensor<3xi32>, tensor<2x64x32xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$x, LLM_IndexTensor:$offsets,
                       LLM_FloatTensor:$weights, UnitAttr:$transpose_b);
  let results = (outs LLM_FloatTensor:$result);
  let assemblyFormat = [{
    $x `,` $offsets `,` $weights attr-dict `:` type($x) `,` type($offsets) `,` type($weights)
  }];
}

def LLM_GroupedMatmulIntOp : LLM_PureOp<"grouped_matmul_int", [ExpensiveToRecompute]> {
  let summary = "grouped_matmul with each expert's weight kept as int8, int4 or fp8 codes";
  let description = [{
    Weight-only quantized inference of a mixture of experts (what
    llmc-weight-quant rewrites an `llm.grouped_matmul` reading a parameter
    into under `--weight-quant int8:... / int4:... / fp8:...`): `x [M, K]`
    and `offsets [G + 1]` as `llm.grouped_matmul` reads them; the stacked
    weights, of shape `weight_shape` (`[G, K, F]`, or `[G, F, K]` with
    `transpose_b`), stored expert after expert, each expert's slice as
    `llm.matmul_int` stores a weight of that slice's shape with the same
    `bits`, `fp8`, `block` and `channel_axis` (0 or 1, within the slice):
    `codes` (each expert's bytes, whole bytes per expert), `scale` and,
    asymmetric, `zero_point` (each expert's groups, expert after expert).
    So every expert has its own scales — `llmc quantize` writes the scheme
    with `:stacked`. The result is what `llm.grouped_matmul` gives on the
    dequantized weights; the kernel multiplies each expert's rows against
    that expert's codes and never expands the whole stack.

    ```mlir
    %h = llm.grouped_matmul_int %xs, %off, %codes, %scale
        {bits = 4 : i64, block = 32 : i64, weight_shape = array<i64: 4, 176, 128>, transpose_b}
        : tensor<64x128xf32>, tensor<5xi32>, tensor<45056xi8>, tensor<2816xf32>
        -> tensor<64x176xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$x, LLM_IndexTensor:$offsets, RankedTensorOf<[I8]>:$codes,
                       RankedTensorOf<[F32]>:$scale,
                       Optional<RankedTensorOf<[I32]>>:$zero_point, I64Attr:$bits,
                       UnitAttr:$fp8,
                       OptionalAttr<I64Attr>:$block, OptionalAttr<I64Attr>:$channel_axis,
                       DenseI64ArrayAttr:$weight_shape, UnitAttr:$transpose_b);
  let results = (outs LLM_FloatTensor:$result);
  let assemblyFormat = [{
    $x `,` $offsets `,` $codes `,` $scale (`,` $zero_point^)? attr-dict `:` type($x) `,`
    type($offsets) `,` type($codes) `,` type($scale) (`,` type($zero_point)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

def LLM_GroupedMatmulNf4Op : LLM_PureOp<"grouped_matmul_nf4", [ExpensiveToRecompute]> {
  let summary = "grouped_matmul with the stacked experts' weights kept in NF4 storage";
  let description = [{
    `llm.grouped_matmul` over NF4 storage (`--weight-quant nf4`): the
    stacked weights of shape `weight_shape` (`[G, K, F]`, or `[G, F, K]`
    with `transpose_b`) stored as `llm.matmul_nf4` stores a weight, the
    stack read flat: `codes` (two level indices per byte), an 8-bit
    `absmax_q` per block of `block` elements of the last dimension (so
    per expert), `absmax_scale` (fp32, one per 256 blocks of the whole
    stack) and `absmax_mean`. Each expert's slice must be whole bytes. The
    kernel multiplies each expert's rows against its own codes. Under
    tensor parallelism the stack is one rank's piece, the storage that of
    its 2-D view `[G·rows, cols]`, placed in the whole stack's view by
    `whole_shape`, `chunks` and `piece_offset` as `llm.matmul_nf4`'s piece
    is (each expert's rows split within the expert: a chunk per expert);
    the storage holds the piece's codes and absmax levels and the whole
    stack's scales. Under expert parallelism as well, the piece holds the
    chunks of its own experts only: `held_chunks` counts them, and
    `piece_offset` then counts from the whole stack's start.

    ```mlir
    %h = llm.grouped_matmul_nf4 %xs, %off, %codes, %aq, %as, %am
        {block = 64 : i64, weight_shape = array<i64: 4, 176, 128>, transpose_b}
        : tensor<64x128xf32>, tensor<5xi32>, tensor<45056xi8>, tensor<1408xi8>, tensor<6xf32>,
          tensor<f32> -> tensor<64x176xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$x, LLM_IndexTensor:$offsets, RankedTensorOf<[I8]>:$codes,
                       RankedTensorOf<[I8]>:$absmax_q, RankedTensorOf<[F32]>:$absmax_scale,
                       0DTensorOf<[F32]>:$absmax_mean, I64Attr:$block,
                       DenseI64ArrayAttr:$weight_shape, UnitAttr:$transpose_b,
                       OptionalAttr<DenseI64ArrayAttr>:$whole_shape,
                       OptionalAttr<DenseI64ArrayAttr>:$chunks,
                       OptionalAttr<DenseI64ArrayAttr>:$piece_offset,
                       OptionalAttr<DenseI64ArrayAttr>:$held_chunks,
                       DefaultValuedStrAttr<StrAttr, "int8">:$absmax_format);
  let results = (outs LLM_FloatTensor:$result);
  let assemblyFormat = [{
    $x `,` $offsets `,` $codes `,` $absmax_q `,` $absmax_scale `,` $absmax_mean attr-dict `:`
    type($x) `,` type($offsets) `,` type($codes) `,` type($absmax_q) `,` type($absmax_scale) `,`
    type($absmax_mean) `->` type($result)
  }];
  let hasVerifier = 1;
}

def LLM_GroupedMatmulWeightGradOp : LLM_Op<"grouped_matmul_weight_grad",
    [Pure, ExpensiveToRecompute, MixesBatchRows]> {
  let summary = "Backward of grouped_matmul for its weights: one gradient per group";
  let description = [{
    For group g's rows of `x [M, K]` and `dy [M, F]`: `xᵀ·dy [K, F]`, or
    with `transpose_b` `dyᵀ·x [F, K]`, stacked `[G, K, F]` (`[G, F, K]`); a
    group without rows gets zeros; rows past `offsets[G]` are not read.

    ```mlir
    %dw = llm.grouped_matmul_weight_grad %xs, %dh, %off {transpose_b}
        : tensor<128x32xf32>, tensor<128x64xf32>, tensor<3xi32> -> tensor<2x64x32xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$x, LLM_FloatTensor:$dy, LLM_IndexTensor:$offsets,
                       UnitAttr:$transpose_b);
  let results = (outs LLM_FloatTensor:$result);
  let assemblyFormat = [{
    $x `,` $dy `,` $offsets attr-dict `:` type($x) `,` type($dy) `,` type($offsets) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def LLM_RouterLossOp : LLM_Op<"router_loss", [Pure, KeepsPrecision]> {
  let summary = "The router losses: aux_scale·Σₑ counts·prob_sum + z_scale·z_sum";
  let description = [{
    From a model's router statistics (moe_route's `prob_sum`, `counts` and
    `z_sum`, summed over its layers): the load-balancing loss
    `aux_scale · Σₑ counts[e]·prob_sum[e]` plus the z-loss
    `z_scale · z_sum`, accumulated in double and rounded once. `counts`
    takes no gradient.

    Under data parallelism each rank holds its rows' sums: llmc-shard sums
    `counts` over the batch axes and multiplies both scales by the number
    of ranks, so that the ranks' losses average to the whole batch's (the
    load-balancing loss is linear in `prob_sum` once the counts are the
    whole batch's).

    ```mlir
    %l = llm.router_loss %psum, %cnt, %z {aux_scale = 1.0e-03 : f64, z_scale = 0.0 : f64}
        : tensor<8xf32>, tensor<8xf32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$prob_sum, LLM_FloatTensor:$counts, LLM_F32Scalar:$z_sum,
                       F64Attr:$aux_scale, F64Attr:$z_scale);
  let results = (outs LLM_F32Scalar:$result);
  let assemblyFormat = "$prob_sum `,` $counts `,` $z_sum attr-dict `:` type($prob_sum) `,` type($counts)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Expert parallelism: the local ops around a fixed-size all-to-all
//===----------------------------------------------------------------------===//
//
// With the E experts split over P ranks (rank p owns the El = E / P
// consecutive experts p·El .. p·El + El − 1), each rank sends every peer a
// slot of S rows, GShard-style: static shapes, one all-to-all of P·S rows.
//
//   %packed, %kept = llm.moe_pack %xs, %off {capacity = C}  // slot p: rank p's experts
//                          (group %counts: the capacity counted over the batch's ranks)
//   ... all-to-all of %packed [P·S, C] and %kept [P, El] ...
//   %g, %loff = llm.moe_regroup %recv, %counts  // source-major → expert-major
//   %h = llm.grouped_matmul %g, %loff, ...      // El experts, rows past the total: none
//   %y = llm.moe_ungroup %h2, %counts           // expert-major → source-major
//   ... all-to-all back ...
//   %ys = llm.moe_unpack %back, %off, %kept     // dropped tokens' rows: zero
//
// All four only copy rows (no arithmetic). Counts and offsets are data:
// invalid ones (decreasing, negative, a slot overflowing) make the outputs
// NaN, so the loss shows it, rather than read or write outside a tensor.

def LLM_I32Tensor : RankedTensorOf<[I32]>;

def LLM_MoEPackOp : LLM_Op<"moe_pack", [Pure]> {
  let summary = "Packs expert-sorted rows into one fixed slot per rank";
  let description = [{
    `xs [R, C]` holds expert e's rows at `[offsets[e], offsets[e+1])`
    (moe_dispatch's result, `offsets [E + 1]` moe_route's). The results'
    types give the ranks P and the slot size S: `packed [P·S, C]` (xs's
    type), `kept [P, El]` (i32) with E = P·El. For expert e = p·El + j,
    `kept[p][j]` is its row count n_e, or `min(n_e, capacity)` when
    `capacity > 0` (the expert's first rows win, as Switch and GShard keep
    the earliest tokens); those rows are copied in order into slot p from
    row `p·S + Σ_{j' < j} kept[p][j']`. Every other row of `packed` is
    zero. Invalid offsets (offsets[0] ≠ 0, decreasing, offsets[E] ≠ R) or
    a slot overflowing (Σ_j kept[p][j] > S) make `packed` NaN and `kept`
    all 0.

    The capacity is the whole batch's: when D ranks split the batch (data
    or expert parallelism), `group_counts [D, E]` (f32, moe_route's
    `counts` of each of them, gathered in batch order: row q is rank q's)
    and `group_position` (this rank's q, default 0; `dist.rank_offsets`
    makes it rank-dependent) let rank q keep of expert e only what the
    ranks before it left: `kept = clamp(capacity − prior_e, 0, n_e)` with
    `prior_e = Σ_{q' < q} group_counts[q'][e]`, still its first rows. So
    every layout drops the tokens one rank holding the whole batch would.
    Group counts that are not integers in `[0, 2³¹)`, or whose row q is not
    this rank's n_e (a position or gather out of step), are invalid data
    like bad offsets: `packed` NaN, `kept` all 0. Group counts need
    `capacity > 0`.

    ```mlir
    %packed, %kept = llm.moe_pack %xs, %off {capacity = 6 : i64}
        : tensor<24x32xbf16>, tensor<9xi32> -> tensor<32x32xbf16>, tensor<2x4xi32>
    %p2, %k2 = llm.moe_pack %xs, %off group %gcounts {capacity = 24 : i64,
                                                       group_position = array<i64: 1>}
        : tensor<24x32xbf16>, tensor<9xi32> group tensor<4x8xf32>
        -> tensor<32x32xbf16>, tensor<2x4xi32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$xs, LLM_IndexTensor:$offsets,
                       Optional<LLM_FloatTensor>:$group_counts,
                       DefaultValuedAttr<I64Attr, "0">:$capacity,
                       OptionalAttr<DenseI64ArrayAttr>:$group_position);
  let results = (outs LLM_FloatTensor:$packed, LLM_I32Tensor:$kept);
  let assemblyFormat = [{
    $xs `,` $offsets (`group` $group_counts^)? attr-dict `:` type($xs) `,` type($offsets)
    (`group` type($group_counts)^)? `->` type($packed) `,` type($kept)
  }];
  let builders = [
    // A pack whose capacity counts this rank's rows only (or none).
    OpBuilder<(ins "::mlir::Type":$packed, "::mlir::Type":$kept, "::mlir::Value":$xs,
                   "::mlir::Value":$offsets, "::mlir::IntegerAttr":$capacity), [{
      build($_builder, $_state, packed, kept, xs, offsets, /*group_counts=*/::mlir::Value(),
            capacity, /*group_position=*/nullptr);
    }]>
  ];
  let hasVerifier = 1;
}

def LLM_MoEUnpackOp : LLM_Op<"moe_unpack", [Pure]> {
  let summary = "moe_pack's transpose: slot rows back to expert-sorted rows";
  let description = [{
    `packed [P·S, F]`, `offsets [E + 1]`, `kept [P, El]` (E = P·El) as
    moe_pack made them; the result `y [R, F]` (packed's type, R = offsets[E]
    at run time) holds `y[offsets[e] + i] = packed[p·S + Σ_{j' < j}
    kept[p][j'] + i]` for `i < kept[p][j]`, e = p·El + j; the rows of
    dropped tokens (i ≥ kept) are zero. Invalid offsets, a kept count
    outside `[0, n_e]` or a slot overflowing make `y` NaN.

    ```mlir
    %ys = llm.moe_unpack %back, %off, %kept
        : tensor<32x32xbf16>, tensor<9xi32>, tensor<2x4xi32> -> tensor<24x32xbf16>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$packed, LLM_IndexTensor:$offsets,
                       LLM_IndexTensor:$kept);
  let results = (outs LLM_FloatTensor:$result);
  let assemblyFormat = [{
    $packed `,` $offsets `,` $kept attr-dict `:` type($packed) `,` type($offsets) `,` type($kept)
    `->` type($result)
  }];
  let hasVerifier = 1;
}

def LLM_MoERegroupOp : LLM_PureOp<"moe_regroup"> {
  let summary = "Received slots (source-major) to this rank's experts' groups";
  let description = [{
    `recv [P·S, C]` is source-major: slot q (rows `[q·S, (q+1)·S)`) holds
    source q's rows for this rank's El experts in expert order,
    `counts[q][j]` of them for local expert j (`counts [P, El]`, the
    sources' kept rows). `grouped` (recv's type) is expert-major: for each
    j, for each q, source q's rows of expert j; `local_offsets [El + 1]`
    (i32) are the groups' bounds for llm.grouped_matmul, rows past the
    total are zero. Invalid counts (negative, or a source's summing past S)
    make `grouped` NaN and `local_offsets` {0, …, 0, P·S}, so the NaN rows
    flow on through the next grouped matmul.

    ```mlir
    %g, %loff = llm.moe_regroup %recv, %counts : tensor<32x32xbf16>, tensor<2x4xi32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$recv, LLM_IndexTensor:$counts);
  let results = (outs LLM_FloatTensor:$grouped, LLM_I32Tensor:$local_offsets);
  let assemblyFormat = "$recv `,` $counts attr-dict `:` type($recv) `,` type($counts)";
}

def LLM_MoEUngroupOp : LLM_PureOp<"moe_ungroup"> {
  let summary = "moe_regroup's transpose: expert-major groups back to source slots";
  let description = [{
    `grouped [P·S, F]` in moe_regroup's order for `counts [P, El]`; the
    result `[P·S, F]` (grouped's type) is source-major again, each source's
    rows in slot q in expert order; rows of a slot past that source's total
    are zero. Invalid counts make it NaN.

    ```mlir
    %back = llm.moe_ungroup %h, %counts : tensor<32x32xbf16>, tensor<2x4xi32>
    ```
  }];
  let arguments = (ins LLM_FloatTensor:$grouped, LLM_IndexTensor:$counts);
  let results = (outs LLM_FloatTensor:$result);
  let assemblyFormat = "$grouped `,` $counts attr-dict `:` type($grouped) `,` type($counts)";
}
