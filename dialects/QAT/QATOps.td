//===- QATOps.td - the qat dialect: fake quantization ------*- tablegen -*-===//

#ifndef LLMC_QAT_OPS
#define LLMC_QAT_OPS

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "dialects/Common.td"
include "dialects/Traits.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

def QAT_Dialect : Dialect {
  let name = "qat";
  let cppNamespace = "::llmc::qat";
  let summary = "Quantization-aware training: fake quantization in the forward graph";
  let description = [{
    `qat.fake_quant` quantizes and immediately dequantizes a tensor, so the
    forward pass sees quantization error while values stay floating point;
    its backward is the straight-through estimator, zeroed outside the
    clipping range. Being an op on the forward graph, it composes with
    autodiff, sharding and recomputation like any other.
  }];
  let useDefaultAttributePrinterParser = 1;
}

def QAT_SchemeAttr : AttrDef<QAT_Dialect, "Scheme"> {
  let mnemonic = "scheme";
  let summary = "A quantization scheme: format, granularity, symmetry, range observer";
  let description = [{
    - `format`: `int8` (symmetric range [-127, 127]), `int4` ([-7, 7]), `int3` ([-3, 3]),
      `fp8_e4m3`, `fp8_e5m2` (scaled to the format's largest finite value),
      `nf4` (the 16 NormalFloat levels of QLoRA, absmax-scaled).
    - `granularity`: `tensor` (one scale), `channel` (one per index of
      `axis`), `block` (one per `block` consecutive elements of the last
      dimension).
    - `symmetric`: absmax scaling around zero, or scale + zero point from
      the min and max (integer formats only).
    - `observer`: `minmax` (ranges from the current tensor), `ema`
      (exponential moving average of the ranges with `momentum`, see
      qat.ema) or `delayed` (fp8 formats per tensor only: Transformer
      Engine's delayed scaling, the range from an amax history of the last
      `history` steps, widened by 2^`margin`, the history's `algo` `max` or
      `most_recent`; see qat.amax_history). The llmc-qat pass reads it to
      build the range; qat.observe ignores it, and qat.fake_quant's
      gradient passes dy whole under `delayed` (as a Transformer Engine fp8
      GEMM's backward does: nothing masks the values saturation clipped).
    - `outlier`: 0 (none), or a threshold t > 0 on |x| (integer formats,
      tensor or channel granularity): columns (indices of the last
      dimension) holding an |x| > t stay in high precision, as in
      LLM.int8(). The ops taking such a scheme read the per-column ranges
      of x as their `columns` operand (see qat.fake_quant).

    ```mlir
    #qat.scheme<format = "int4", granularity = "block", block = 64>
    #qat.scheme<format = "int8", granularity = "channel", axis = 0, symmetric = false>
    #qat.scheme<format = "int8", granularity = "tensor", observer = "ema", momentum = 0.99>
    #qat.scheme<format = "int8", outlier = 6.0>
    #qat.scheme<format = "fp8_e4m3", observer = "delayed", history = 16, margin = 1>
    ```
  }];
  let parameters = (ins
    StringRefParameter<"number format">:$format,
    StringRefParameter<"granularity", "\"tensor\"">:$granularity,
    DefaultValuedParameter<"int64_t", "0">:$axis,
    DefaultValuedParameter<"int64_t", "0">:$block,
    DefaultValuedParameter<"bool", "true">:$symmetric,
    StringRefParameter<"range observer", "\"minmax\"">:$observer,
    LLMC_F64Parameter<"EMA momentum", "0.99">:$momentum,
    LLMC_F64Parameter<"outlier-column threshold on |x| (0: none)", "0.0">:$outlier,
    DefaultValuedParameter<"int64_t", "0">:$history,
    DefaultValuedParameter<"int64_t", "0">:$margin,
    StringRefParameter<"the amax a delayed history yields", "\"max\"">:$algo
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Number of independent ranges (scales) for a tensor of this shape.
    int64_t groupCount(::llvm::ArrayRef<int64_t> shape) const;
  }];
}

def QAT_ObserveOp : Op<QAT_Dialect, "observe",
                        [Pure, InferTypeOpAdaptor]> {
  let summary = "The range of each quantization group of a tensor";
  let description = [{
    Per group of `scheme` (1 per tensor, the axis size per channel,
    numel/block per block), the pair [−min, max] of x's values in the group:
    `tensor<Gx2xf32>`. Stored negated-min first so that ranges of pieces of
    one tensor held by several ranks combine with one elementwise-max
    all-reduce. Not differentiable: the range is a statistic, and the
    straight-through estimator passes no gradient to it.

    With an `outlier` threshold in the scheme, `columns` (required then) is
    the per-column range of x (see qat.fake_quant), and the ranges cover
    the elements of the columns that are not outlier columns only.

    ```mlir
    %r = qat.observe %w {scheme = #qat.scheme<format = "int4", granularity = "block", block = 32>}
        : tensor<64x128xf32> -> tensor<256x2xf32>
    %t = qat.observe %x columns %c {scheme = #qat.scheme<format = "int8", outlier = 6.0>}
        : tensor<4x16x128xf32>, tensor<128x2xf32> -> tensor<1x2xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$x, Optional<RankedTensorOf<[F32]>>:$columns,
                       QAT_SchemeAttr:$scheme);
  let results = (outs RankedTensorOf<[F32]>:$range);
  let assemblyFormat = [{
    $x (`columns` $columns^)? attr-dict `:` type($x) (`,` type($columns)^)? `->` type($range)
  }];
  let hasVerifier = 1;
}

def QAT_FakeQuantOp : Op<QAT_Dialect, "fake_quant",
                         [Pure, InferTypeOpAdaptor]> {
  let summary = "Quantize then dequantize with given ranges (straight-through backward)";
  let description = [{
    Forward: x ↦ dequant(quant(x)) under `scheme`, each group with its range
    from `range` (`tensor<Gx2xf32>` of [−min, max], from qat.observe of the
    current tensor or a qat.ema observer). Backward (qat.fake_quant_grad):
    the upstream gradient passes where x lies inside the representable range
    and is zero where x was clipped. The arithmetic is specified in
    common/QuantScheme.h.

    Outlier columns: with an `outlier` threshold t in the scheme, `columns`
    (required then) is `tensor<Cx2xf32>`, the range [−min, max] of each
    index c of x's last dimension over all rows of the whole tensor (a
    qat.observe per channel of the last axis, max-reduced over the ranks
    that split the rows). A column whose range reaches beyond t passes
    through unchanged, gradient included; `range` should then cover the
    other columns only (qat.observe with the same `columns`).

    ```mlir
    %q = qat.fake_quant %w range %r {scheme = #qat.scheme<format = "int4", granularity = "block", block = 32>}
        : tensor<64x128xf32>, tensor<256x2xf32>
    %o = qat.fake_quant %x range %t columns %c {scheme = #qat.scheme<format = "int8", outlier = 6.0>}
        : tensor<4x16x128xf32>, tensor<1x2xf32>, tensor<128x2xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$x, RankedTensorOf<[F32]>:$range,
                       Optional<RankedTensorOf<[F32]>>:$columns, QAT_SchemeAttr:$scheme);
  let results = (outs RankedTensorOf<[AnyFloat]>:$result);
  let assemblyFormat = [{
    $x `range` $range (`columns` $columns^)? attr-dict `:` type($x) `,` type($range)
    (`,` type($columns)^)?
  }];
  let hasVerifier = 1;
}

def QAT_FakeQuantGradOp : Op<QAT_Dialect, "fake_quant_grad",
                             [Pure, AllTypesMatch<["x", "dy"]>,
                              InferTypeOpAdaptor]> {
  let summary = "The straight-through gradient of qat.fake_quant";
  let description = [{
    dx = dy where qat.fake_quant with the same x, range, columns and scheme
    did not clip x (outlier columns are never clipped), 0 where it did.

    ```mlir
    %dx = qat.fake_quant_grad %x range %r grad %dy {scheme = #qat.scheme<format = "int8">}
        : tensor<4x128xf32>, tensor<1x2xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$x, RankedTensorOf<[F32]>:$range,
                       RankedTensorOf<[AnyFloat]>:$dy, Optional<RankedTensorOf<[F32]>>:$columns,
                       QAT_SchemeAttr:$scheme);
  let results = (outs RankedTensorOf<[AnyFloat]>:$dx);
  let assemblyFormat = [{
    $x `range` $range `grad` $dy (`columns` $columns^)? attr-dict `:` type($x) `,` type($range)
    (`,` type($columns)^)?
  }];
  let hasVerifier = 1;
}

def QAT_EmaOp : Op<QAT_Dialect, "ema", [Pure, AllTypesMatch<["state", "observed", "result"]>]> {
  let summary = "An exponential-moving-average range observer";
  let description = [{
    Per group: the observed range where the state is (0, 0) (never
    observed), else momentum · state + (1 − momentum) · observed. The state
    is persistent (`llmc.role = "qat_state"`): the training step returns the
    updated one in its place, and checkpoints keep it.

    ```mlir
    %s1 = qat.ema %s, %r {momentum = 0.99 : f64} : tensor<1x2xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[F32]>:$state, RankedTensorOf<[F32]>:$observed,
                       F64Attr:$momentum);
  let results = (outs RankedTensorOf<[F32]>:$result);
  let assemblyFormat = "$state `,` $observed attr-dict `:` type($state)";
  let hasVerifier = 1;
}

def QAT_QuantizeGradOp : Op<QAT_Dialect, "quantize_grad",
                             [Pure, AllTypesMatch<["x", "result"]>, AttrSizedOperandSegments]> {
  let summary = "The identity, whose gradient is fake-quantized (fp8 training's dY)";
  let description = [{
    Forward: y = x (a view, no kernel). Backward: dx = fake_quant(dy,
    range), range = qat.observe of dy under `scheme`, max-combined over the
    mesh axes `axes` (the ranks that hold pieces of the tensor), so every
    rank quantizes with the range one rank would see on the whole gradient.
    Placed on a matmul's output, it quantizes the gradient both backward
    matmuls read (E5M2 in fp8 training's hybrid recipe, docs/fp8.md).

    Under a `delayed` scheme, `state` (required then) is dY's amax history
    (see qat.amax_history): the backward quantizes dY with the range
    qat.delayed_range reads from it and records dY's range into the
    updated history, which the training step returns in the state's place.
    `batch_ranks` (default 1; delayed only) is how many ranks split the
    batch: each rank's dY is of its share of the batch's mean loss, that
    many times one rank's, so the history records dY's amax divided by it
    and dY is quantized with the history's range times it — every layout
    keeps one rank's history and quantizes as one rank would.

    With `offsets` (a mixture of experts' `[G + 1]` row groups; x `[M, F]`),
    dY is quantized group by group of rows instead, as Transformer Engine
    scales each expert's GEMM: the range of each group (qat.observe per
    row, qat.group_ranges), max-combined over `axes`, given back to its
    rows (qat.row_ranges) for a per-row fake_quant. Under a delayed scheme
    `state` then holds one history per group, `tensor<G x (N+1) x f32>`,
    and each group is quantized with its own history's range.

    ```mlir
    %y = qat.quantize_grad %x {scheme = #qat.scheme<format = "fp8_e5m2">, axes = ["dp"]}
        : tensor<4x16x128xbf16>
    %z = qat.quantize_grad %x state %s {scheme = #qat.scheme<format = "fp8_e5m2",
        observer = "delayed", history = 16>} : tensor<4x16x128xbf16>, tensor<17xf32>
    %e = qat.quantize_grad %h offsets %off {scheme = #qat.scheme<format = "fp8_e5m2">}
        : tensor<128x176xbf16> offsets tensor<5xi32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$x, Optional<RankedTensorOf<[F32]>>:$state,
                       Optional<RankedTensorOf<[I32, I64]>>:$offsets,
                       QAT_SchemeAttr:$scheme, DefaultValuedAttr<StrArrayAttr, "{}">:$axes,
                       DefaultValuedAttr<I64Attr, "1">:$batch_ranks);
  let results = (outs RankedTensorOf<[AnyFloat]>:$result);
  let assemblyFormat = [{
    $x (`state` $state^)? (`offsets` $offsets^)? attr-dict `:` type($x) (`,` type($state)^)?
    (`offsets` type($offsets)^)?
  }];
  let hasVerifier = 1;
}

def QAT_DelayedRangeOp : Op<QAT_Dialect, "delayed_range",
                            [Pure, AllTypesMatch<["observed", "range"]>]> {
  let summary = "The range delayed scaling quantizes with: last step's, from the history";
  let description = [{
    `state` is an amax history (qat.amax_history): `tensor<(history+1)xf32>`
    whose element 0 is the range r the previous steps settled on (0: none
    yet). The result, the `[−min, max]` pair fake_quant reads, is [r, r],
    or [fmax, fmax] (a scale of 1, as Transformer Engine starts) while r is
    0. A state `tensor<G x (history+1) x f32>` is G histories (one per
    expert, or per group of rows), `observed` and the result then
    `tensor<Gx2xf32>`, row by row. `observed` is this step's range of the tensor (qat.observe, combined
    over ranks): it does not move the result, except that a non-finite one
    is passed on as the result, so an inf or NaN in the tensor makes the
    quantized tensor NaN and the step non-finite (saturation would
    otherwise hide an inf).

    ```mlir
    %r = qat.delayed_range %s, %o {scheme = #qat.scheme<format = "fp8_e4m3",
        observer = "delayed", history = 16>} : tensor<17xf32>, tensor<1x2xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[F32]>:$state, RankedTensorOf<[F32]>:$observed,
                       QAT_SchemeAttr:$scheme);
  let results = (outs RankedTensorOf<[F32]>:$range);
  let assemblyFormat = "$state `,` $observed attr-dict `:` type($state) `,` type($observed)";
  let hasVerifier = 1;
}

def QAT_AmaxHistoryOp : Op<QAT_Dialect, "amax_history",
                           [Pure, AllTypesMatch<["state", "result"]>]> {
  let summary = "Delayed scaling's state update: record this step's amax, derive the range";
  let description = [{
    Transformer Engine's `DelayedScaling` recipe as a functional update.
    `state`: `tensor<(N+1)xf32>`, N = the scheme's `history`; element 0
    is the range the next step quantizes with (0: none yet, scale 1),
    elements 1..N the amaxes of the last N steps, the most recent first
    (0 where fewer steps have been seen). `observed` is this step's
    `[−min, max]`; its amax a = max(−min, max). The result shifts a into
    the history (dropping the oldest), takes amax = the history's maximum
    (`algo = max`) or a (`most_recent`), and sets element 0 to
    amax · 2^margin — the range whose scale fmax / range is TE's
    scale = (fmax / amax) / 2^margin — unless amax is not a finite value
    > 0, where the previous range stays (TE keeps the previous scale).
    A state `tensor<G x (N+1) x f32>` is G histories, each updated with its
    row of `observed` (`tensor<Gx2xf32>`), as Transformer Engine keeps an
    amax history per GEMM of a grouped linear layer.

    ```mlir
    %s1 = qat.amax_history %s, %o {scheme = #qat.scheme<format = "fp8_e4m3",
        observer = "delayed", history = 16>} : tensor<17xf32>, tensor<1x2xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[F32]>:$state, RankedTensorOf<[F32]>:$observed,
                       QAT_SchemeAttr:$scheme);
  let results = (outs RankedTensorOf<[F32]>:$result);
  let assemblyFormat = "$state `,` $observed attr-dict `:` type($state) `,` type($observed)";
  let hasVerifier = 1;
}

def QAT_CommitStateOp : Op<QAT_Dialect, "commit_state",
                           [Pure, AllTypesMatch<["state", "candidate", "result"]>]> {
  let summary = "A step's state update, kept only when the step is applied";
  let description = [{
    result = candidate where `norm` (the step's global gradient norm, every
    AdamW update's verdict) is finite, else state unchanged: a skipped
    (non-finite) step leaves amax histories as it leaves parameters. In
    place (result in state's buffer) is allowed.

    ```mlir
    %s2 = qat.commit_state %s, %s1, %norm : tensor<17xf32>, tensor<f32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[F32]>:$state, RankedTensorOf<[F32]>:$candidate,
                       0DTensorOf<[F32]>:$norm);
  let results = (outs RankedTensorOf<[F32]>:$result);
  let assemblyFormat = "$state `,` $candidate `,` $norm attr-dict `:` type($state) `,` type($norm)";
}

def QAT_GroupRangesOp : Op<QAT_Dialect, "group_ranges", [Pure]> {
  let summary = "The range of each group of rows, from the ranges of its rows";
  let description = [{
    `rows` `[M, 2]` holds each row's `[−min, max]` (qat.observe per channel
    of axis 0), `offsets` `[G + 1]` a mixture of experts' row groups (group
    g is rows `[offsets[g], offsets[g+1])`). The result `[G, 2]` is each
    group's range, the elementwise max over its rows; `[0, 0]` for an
    empty group (no values to scale); rows past `offsets[G]` are left out.
    Ranges of one group held by several ranks combine with one max
    all-reduce, as every range does. A statistic: no gradient.

    ```mlir
    %g = qat.group_ranges %r, %off : tensor<128x2xf32>, tensor<5xi32> -> tensor<4x2xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[F32]>:$rows, RankedTensorOf<[I32, I64]>:$offsets);
  let results = (outs RankedTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $rows `,` $offsets attr-dict `:` type($rows) `,` type($offsets) `->` type($result)
  }];
  let hasVerifier = 1;
}

def QAT_RowRangesOp : Op<QAT_Dialect, "row_ranges", [Pure]> {
  let summary = "Each row's range: its group's";
  let description = [{
    `groups` `[G, 2]` (a range per group of rows, qat.group_ranges'),
    `offsets` `[G + 1]`: the result `[M, 2]` gives each row of group g the
    range g, and rows past `offsets[G]` `[0, 0]`, so a per-row
    qat.fake_quant (channel axis 0) quantizes each group with its own
    range. A statistic: no gradient.

    ```mlir
    %r = qat.row_ranges %g, %off : tensor<4x2xf32>, tensor<5xi32> -> tensor<128x2xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[F32]>:$groups, RankedTensorOf<[I32, I64]>:$offsets);
  let results = (outs RankedTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $groups `,` $offsets attr-dict `:` type($groups) `,` type($offsets) `->` type($result)
  }];
  let hasVerifier = 1;
}

def QAT_DequantizeNf4Op : Op<QAT_Dialect, "dequantize_nf4", [Pure, AlwaysRecompute]> {
  let summary = "Expands an NF4 weight with double-quantized block absmax (QLoRA storage)";
  let description = [{
    The QLoRA storage of a frozen weight with `numel` elements, in blocks of
    `block` consecutive elements of its last dimension: `codes` holds the
    NF4 level index of every element, two per byte (element 2k in the low
    nibble of byte k); each block's absmax is stored as an 8-bit `absmax_q`,
    an int8 level (two's complement) or, with `absmax_format = "fp8_e4m3"`,
    an OCP E4M3 number (QLoRA's 8-bit floats), reconstructed as
    level · absmax_scale[g / 256] + absmax_mean. The result is NF4 level ·
    absmax in the result's float type (0 for a block whose absmax is not >
    0), the layout `llmc quantize --scheme nf4:block<N> [--double-quant
    fp8]` writes (common/QuantScheme.h).

    Under tensor parallelism the result is one rank's piece of a 2-D
    weight, and `whole_shape`, `chunks` and `piece_offset` (given together)
    place it in the whole one: each dimension is `chunks` equal chunks
    split alike over the ranks, and the piece holds, of each chunk, the
    indices from `piece_offset` (which `dist.rank_offsets` moves per rank).
    With `held_chunks` the piece holds only that many consecutive chunks
    (a stack of experts split by both tensor and expert parallelism, its
    view's rows a chunk per expert), and `piece_offset` counts from the
    whole weight's start, the first held chunk's start included.
    `codes` and `absmax_q` then hold the piece's (in any shape, usually
    shaped after the piece), and `absmax_scale` the whole weight's: block g
    of the piece reads the scale of its index in the whole weight
    (common/Nf4Piece.h).

    ```mlir
    %w = qat.dequantize_nf4 %codes, %aq, %as, %am {block = 64 : i64}
        : tensor<8192xi8>, tensor<256xi8>, tensor<1xf32>, tensor<f32> -> tensor<128x128xf32>
    %p = qat.dequantize_nf4 %pc, %paq, %as, %am {block = 64 : i64,
            whole_shape = array<i64: 128, 256>, chunks = array<i64: 1, 1>,
            piece_offset = array<i64: 0, 0>, dist.rank_offsets = [#dist.rank_offset<
              mesh = @mesh, attr = "piece_offset", index = 1, axes = ["tp"], stride = 128>]}
        : tensor<128x64xi8>, tensor<128x2xi8>, tensor<2xf32>, tensor<f32> -> tensor<128x128xf32>
    %e = qat.dequantize_nf4 %codes, %aq, %as, %am {block = 64 : i64, absmax_format = "fp8_e4m3"}
        : tensor<8192xi8>, tensor<256xi8>, tensor<1xf32>, tensor<f32> -> tensor<128x128xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[I8]>:$codes, RankedTensorOf<[I8]>:$absmax_q,
                       RankedTensorOf<[F32]>:$absmax_scale, 0DTensorOf<[F32]>:$absmax_mean,
                       I64Attr:$block, OptionalAttr<DenseI64ArrayAttr>:$whole_shape,
                       OptionalAttr<DenseI64ArrayAttr>:$chunks,
                       OptionalAttr<DenseI64ArrayAttr>:$piece_offset,
                       OptionalAttr<DenseI64ArrayAttr>:$held_chunks,
                       DefaultValuedStrAttr<StrAttr, "int8">:$absmax_format);
  let results = (outs RankedTensorOf<[AnyFloat]>:$result);
  let assemblyFormat = [{
    $codes `,` $absmax_q `,` $absmax_scale `,` $absmax_mean attr-dict `:` type($codes) `,`
    type($absmax_q) `,` type($absmax_scale) `,` type($absmax_mean) `->` type($result)
  }];
  let hasVerifier = 1;
}

def QAT_Fp8Tensor : RankedTensorOf<[F8E4M3FN, F8E5M2]>;

def QAT_QuantizeFp8Op : Op<QAT_Dialect, "quantize_fp8", [Pure]> {
  let summary = "fp8 codes of a tensor with one scale (the storage of an fp8 GEMM operand)";
  let description = [{
    What qat.fake_quant computes under a symmetric fp8 `scheme`, per
    tensor or per slice of dimension 0 (`granularity = "channel", axis =
    0`: a stack of experts' weights viewed `[G, A·B]`, one scale each),
    kept as the fp8 numbers and their scales instead of their product:
    `scale` = amax / fmax per group (amax = max of its `range` row's two
    entries, fmax the format's largest finite value: 448 for E4M3, 57344
    for E5M2), `tensor<Gxf32>` for G groups, and
    `codes` = round(x / scale) in the format of `codes`' element type
    (saturating, ties to even; common/Fp8.h). Where amax is not > 0 every
    code is 0 (and the scale 0, or NaN for a NaN amax, which keeps a
    non-finite step non-finite). codes · scale is exactly fake_quant's
    value before it is stored in x's type.

    With `offsets` (a mixture of experts' `[G + 1]` row groups of x `[M,
    K]`), the groups are the rows' groups instead: `range` `[G, 2]` (one
    per group, qat.group_ranges'), `scale` `[G]`, group g's codes those of
    its rows `[offsets[g], offsets[g+1])` with scale g; rows past
    `offsets[G]` get code 0. The scheme is then per tensor (per group).

    ```mlir
    %c, %s = qat.quantize_fp8 %x range %r {scheme = #qat.scheme<format = "fp8_e4m3">}
        : tensor<4x16x128xbf16>, tensor<1x2xf32> -> tensor<4x16x128xf8E4M3FN>, tensor<1xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$x, RankedTensorOf<[F32]>:$range,
                       Optional<RankedTensorOf<[I32, I64]>>:$offsets, QAT_SchemeAttr:$scheme);
  let results = (outs QAT_Fp8Tensor:$codes, RankedTensorOf<[F32]>:$scale);
  let assemblyFormat = [{
    $x `range` $range (`offsets` $offsets^)? attr-dict `:` type($x) `,` type($range)
    (`offsets` type($offsets)^)? `->` type($codes) `,` type($scale)
  }];
  let builders = [OpBuilder<(ins "::mlir::Value":$x, "::mlir::Value":$range,
                                "::mlir::Value":$offsets, "::llmc::qat::SchemeAttr":$scheme)>];
  let extraClassDeclaration = [{ ::mlir::LogicalResult verifyRowGroups(); }];
  let hasVerifier = 1;
}

def QAT_MatmulFp8Op : Op<QAT_Dialect, "matmul_fp8", [Pure, ExpensiveToRecompute]> {
  let summary = "Matrix product of fp8 codes with per-tensor scales, fp32 accumulation";
  let description = [{
    result = (op(a) · op(b)) · a_scale · b_scale, the product of fp8 codes
    (qat.quantize_fp8's) accumulated in fp32 and stored in the result's
    float type; op and the shapes are llm.matmul's (`a` `[..., M, K]`,
    `b` a shared `[K, N]` or batched like `a`, transposes by flag). E4M3
    and E5M2 mix freely, except that two E5M2 operands are refused (no fp8
    tensor core multiplies them; in fp8 training a gradient meets a weight
    or an activation, never another gradient).

    `fast_accumulation` lets the CUDA kernel use cuBLASLt's fast
    accumulation (`CUBLASLT_MATMUL_DESC_FAST_ACCUM`: Hopper's fp8 tensor
    cores keep adding partial sums in their own narrower accumulator
    instead of promoting them to fp32 every few blocks of K), which
    Transformer Engine uses for the forward's products; the CPU sums in
    fp32 either way.

    ```mlir
    %y = qat.matmul_fp8 %x, %sx, %w, %sw {transpose_b}
        : tensor<4x16x128xf8E4M3FN>, tensor<1xf32>, tensor<512x128xf8E4M3FN>, tensor<1xf32>
        -> tensor<4x16x512xbf16>
    ```
  }];
  let arguments = (ins QAT_Fp8Tensor:$a, RankedTensorOf<[F32]>:$a_scale, QAT_Fp8Tensor:$b,
                       RankedTensorOf<[F32]>:$b_scale, UnitAttr:$transpose_a,
                       UnitAttr:$transpose_b, UnitAttr:$fast_accumulation);
  let results = (outs RankedTensorOf<[AnyFloat]>:$result);
  let assemblyFormat = [{
    $a `,` $a_scale `,` $b `,` $b_scale attr-dict `:` type($a) `,` type($a_scale) `,` type($b) `,`
    type($b_scale) `->` type($result)
  }];
  let hasVerifier = 1;
}


def QAT_GroupedMatmulFp8Op : Op<QAT_Dialect, "grouped_matmul_fp8",
                                [Pure, ExpensiveToRecompute]> {
  let summary = "llm.grouped_matmul of fp8 codes, a scale per operand or per group";
  let description = [{
    `llm.grouped_matmul` (each group of rows of `x [M, K]` times its own
    weight of the stack `w`, `[G, K, F]` or with `transpose_b` `[G, F, K]`;
    group g is rows `[offsets[g], offsets[g+1])`, rows past `offsets[G]`
    are zero) on fp8 codes (qat.quantize_fp8's): group g's rows are
    (x's rows · w_g) · x_scale · w_scale[g], the sum accumulated in fp32
    and stored in the result's float type. Each scale is `tensor<1xf32>`
    (one for the whole operand) or `tensor<Gxf32>` (one per group: an
    expert's weight, quantized expert by expert). As qat.matmul_fp8, two
    E5M2 operands are refused.

    ```mlir
    %h = qat.grouped_matmul_fp8 %xc, %xs, %off, %wc, %ws {transpose_b}
        : tensor<128x32xf8E4M3FN>, tensor<1xf32>, tensor<3xi32>, tensor<2x64x32xf8E4M3FN>,
          tensor<2xf32> -> tensor<128x64xbf16>
    ```
  }];
  let arguments = (ins QAT_Fp8Tensor:$x, RankedTensorOf<[F32]>:$x_scale,
                       RankedTensorOf<[I32, I64]>:$offsets, QAT_Fp8Tensor:$w,
                       RankedTensorOf<[F32]>:$w_scale, UnitAttr:$transpose_b);
  let results = (outs RankedTensorOf<[AnyFloat]>:$result);
  let assemblyFormat = [{
    $x `,` $x_scale `,` $offsets `,` $w `,` $w_scale attr-dict `:` type($x) `,` type($x_scale)
    `,` type($offsets) `,` type($w) `,` type($w_scale) `->` type($result)
  }];
  let hasVerifier = 1;
}

def QAT_GroupedMatmulWeightGradFp8Op : Op<QAT_Dialect, "grouped_matmul_weight_grad_fp8",
                                          [Pure, ExpensiveToRecompute]> {
  let summary = "llm.grouped_matmul_weight_grad of fp8 codes";
  let description = [{
    `llm.grouped_matmul_weight_grad` on fp8 codes: for group g's rows of
    `x [M, K]` and `dy [M, F]`, (xᵀ·dy) · x_scale · dy_scale `[K, F]`, or
    with `transpose_b` (dyᵀ·x) · x_scale · dy_scale `[F, K]`, stacked
    `[G, K, F]` (`[G, F, K]`), summed in fp32; a group without rows gets
    zeros, rows past `offsets[G]` are not read. Each scale is
    `tensor<1xf32>` or one per group, `tensor<Gxf32>`.

    ```mlir
    %dw = qat.grouped_matmul_weight_grad_fp8 %xc, %xs, %dc, %ds, %off {transpose_b}
        : tensor<128x32xf8E4M3FN>, tensor<1xf32>, tensor<128x64xf8E5M2>, tensor<1xf32>,
          tensor<3xi32> -> tensor<2x64x32xbf16>
    ```
  }];
  let arguments = (ins QAT_Fp8Tensor:$x, RankedTensorOf<[F32]>:$x_scale, QAT_Fp8Tensor:$dy,
                       RankedTensorOf<[F32]>:$dy_scale, RankedTensorOf<[I32, I64]>:$offsets,
                       UnitAttr:$transpose_b);
  let results = (outs RankedTensorOf<[AnyFloat]>:$result);
  let assemblyFormat = [{
    $x `,` $x_scale `,` $dy `,` $dy_scale `,` $offsets attr-dict `:` type($x) `,` type($x_scale)
    `,` type($dy) `,` type($dy_scale) `,` type($offsets) `->` type($result)
  }];
  let hasVerifier = 1;
}

#endif // LLMC_QAT_OPS
