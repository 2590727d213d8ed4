//===- QATOps.td - the qat dialect: fake quantization ------*- tablegen -*-===//

#ifndef LLMC_QAT_OPS
#define LLMC_QAT_OPS

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "dialects/Common.td"
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
    - `format`: `int8` (symmetric range [-127, 127]), `int4` ([-7, 7]),
      `fp8_e4m3`, `fp8_e5m2` (scaled to the format's largest finite value),
      `nf4` (the 16 NormalFloat levels of QLoRA, absmax-scaled).
    - `granularity`: `tensor` (one scale), `channel` (one per index of
      `axis`), `block` (one per `block` consecutive elements of the last
      dimension).
    - `symmetric`: absmax scaling around zero, or scale + zero point from
      the min and max (integer formats only).
    - `observer`: `minmax` (ranges from the current tensor) or `ema`
      (exponential moving average of the ranges with `momentum`, see
      qat.ema). The llmc-qat pass reads it to build the range; qat.observe
      and qat.fake_quant ignore it.

    ```mlir
    #qat.scheme<format = "int4", granularity = "block", block = 64>
    #qat.scheme<format = "int8", granularity = "channel", axis = 0, symmetric = false>
    #qat.scheme<format = "int8", granularity = "tensor", observer = "ema", momentum = 0.99>
    ```
  }];
  let parameters = (ins
    StringRefParameter<"number format">:$format,
    StringRefParameter<"granularity", "\"tensor\"">:$granularity,
    DefaultValuedParameter<"int64_t", "0">:$axis,
    DefaultValuedParameter<"int64_t", "0">:$block,
    DefaultValuedParameter<"bool", "true">:$symmetric,
    StringRefParameter<"range observer", "\"minmax\"">:$observer,
    LLMC_F64Parameter<"EMA momentum", "0.99">:$momentum
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

    ```mlir
    %r = qat.observe %w {scheme = #qat.scheme<format = "int4", granularity = "block", block = 32>}
        : tensor<64x128xf32> -> tensor<256x2xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$x, QAT_SchemeAttr:$scheme);
  let results = (outs RankedTensorOf<[F32]>:$range);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($range)";
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
    kernels/QuantScheme.h.

    ```mlir
    %q = qat.fake_quant %w range %r {scheme = #qat.scheme<format = "int4", granularity = "block", block = 32>}
        : tensor<64x128xf32>, tensor<256x2xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$x, RankedTensorOf<[F32]>:$range,
                       QAT_SchemeAttr:$scheme);
  let results = (outs RankedTensorOf<[AnyFloat]>:$result);
  let assemblyFormat = "$x `range` $range attr-dict `:` type($x) `,` type($range)";
  let hasVerifier = 1;
}

def QAT_FakeQuantGradOp : Op<QAT_Dialect, "fake_quant_grad",
                             [Pure, AllTypesMatch<["x", "dy"]>,
                              InferTypeOpAdaptor]> {
  let summary = "The straight-through gradient of qat.fake_quant";
  let description = [{
    dx = dy where qat.fake_quant with the same x, range and scheme did not
    clip x, 0 where it did.

    ```mlir
    %dx = qat.fake_quant_grad %x range %r grad %dy {scheme = #qat.scheme<format = "int8">}
        : tensor<4x128xf32>, tensor<1x2xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$x, RankedTensorOf<[F32]>:$range,
                       RankedTensorOf<[AnyFloat]>:$dy, QAT_SchemeAttr:$scheme);
  let results = (outs RankedTensorOf<[AnyFloat]>:$dx);
  let assemblyFormat = "$x `range` $range `grad` $dy attr-dict `:` type($x) `,` type($range)";
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

#endif // LLMC_QAT_OPS
