//===- QATOps.td - the qat dialect: fake quantization ------*- tablegen -*-===//

#ifndef LLMC_QAT_OPS
#define LLMC_QAT_OPS

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "dialects/Common.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

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
      (exponential moving average of the ranges with `momentum`; the op then
      carries the observer state, see qat.fake_quant).

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

def QAT_FakeQuantOp : Op<QAT_Dialect, "fake_quant", [Pure]> {
  let summary = "Quantize then dequantize (straight-through backward)";
  let description = [{
    Forward: x ↦ dequant(quant(x)) under `scheme`. Backward: the upstream
    gradient passes where x lies inside the representable range and is zero
    where x was clipped.

    With an `ema` observer the op takes the observer state — the running
    [min, max] of each quantization group, `tensor<Gx2xf32>` with G the
    group count (1 per tensor, the axis size per channel, numel/block per
    block) — and returns the updated state as a second result, so the state
    is an ordinary value the optimizer-state machinery checkpoints.

    ```mlir
    %q = qat.fake_quant %w {scheme = #qat.scheme<format = "int4", granularity = "block", block = 32>}
        : (tensor<64x128xf32>) -> tensor<64x128xf32>
    %a, %s1 = qat.fake_quant %x state %s {scheme = #qat.scheme<format = "int8", observer = "ema">}
        : (tensor<4x64x128xf32>, tensor<1x2xf32>) -> (tensor<4x64x128xf32>, tensor<1x2xf32>)
    ```
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$x,
                       Optional<RankedTensorOf<[F32]>>:$state,
                       QAT_SchemeAttr:$scheme);
  let results = (outs RankedTensorOf<[AnyFloat]>:$result,
                      Optional<RankedTensorOf<[F32]>>:$new_state);
  let assemblyFormat = [{
    $x (`state` $state^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // LLMC_QAT_OPS
