// RUN: llmc-opt %s --llmc-fp8-matmuls | FileCheck %s --implicit-check-not=fast_accumulation
// RUN: llmc-opt %s --llmc-fp8-matmuls=fast-accumulation=forward | FileCheck %s --check-prefix=FAST
// RUN: not llmc-opt %s --llmc-fp8-matmuls=fast-accumulation=all 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: llmc model gpt2 --preset tiny --set n_layer=1 -o %t.mlir
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="mesh=dp=2,tp=2 precision=fp8 emit=train" | FileCheck %s --check-prefix=TRAIN --implicit-check-not=qat.fake_quant
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="precision=fp8 recompute=full emit=train" | FileCheck %s --check-prefix=RECOMPUTE
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="precision=fp8 fp8-fast-accumulation=none recompute=full emit=train" | FileCheck %s --check-prefix=EXACT --implicit-check-not=fast_accumulation
// RUN: llmc model mixtral --preset tiny --set n_layer=1 -o %t.moe.mlir
// RUN: llmc-opt %t.moe.mlir --llmc-train-pipeline="mesh=ep=2,tp=2 precision=fp8 emit=train" | FileCheck %s --check-prefix=MOE --implicit-check-not=qat.fake_quant --implicit-check-not=qat.row_ranges

// BAD: llmc-fp8-matmuls: fast-accumulation must be forward or none, got 'all'

// One linear layer's three products, as autodiff leaves them: y = q(x)·q(w),
// dx = q(dy)·q(w)ᵀ, dw = q(x)ᵀ·q(dy) over the folded batch. Each operand is
// quantized once, kept as fp8 codes and a scale, reshaped as its copy was.
// CHECK-LABEL: func.func @linear
// CHECK-DAG: %[[XC:.*]], %[[XS:.*]] = qat.quantize_fp8 %arg0 range %{{.*}} {llmc.microbatch = 1 : i64, scheme = #qat.scheme<format = "fp8_e4m3">} : tensor<4x8x32xbf16>, tensor<1x2xf32> -> tensor<4x8x32xf8E4M3FN>, tensor<1xf32>
// CHECK-DAG: %[[WC:.*]], %[[WS:.*]] = qat.quantize_fp8 %arg1 range %{{.*}} -> tensor<32x64xf8E4M3FN>, tensor<1xf32>
// CHECK-DAG: %[[DC:.*]], %[[DS:.*]] = qat.quantize_fp8 %arg2 range %{{.*}} -> tensor<4x8x64xf8E5M2>, tensor<1xf32>
// CHECK-DAG: %[[Y:.*]] = qat.matmul_fp8 %[[XC]], %[[XS]], %[[WC]], %[[WS]] {llmc.microbatch = 1 : i64} : tensor<4x8x32xf8E4M3FN>, tensor<1xf32>, tensor<32x64xf8E4M3FN>, tensor<1xf32> -> tensor<4x8x64xbf16>
// CHECK-DAG: %[[DX:.*]] = qat.matmul_fp8 %[[DC]], %[[DS]], %[[WC]], %[[WS]] {transpose_b}
// CHECK-DAG: %[[X2:.*]] = llm.reshape %[[XC]] : tensor<4x8x32xf8E4M3FN> to tensor<32x32xf8E4M3FN>
// CHECK-DAG: %[[D2:.*]] = llm.reshape %[[DC]] : tensor<4x8x64xf8E5M2> to tensor<32x64xf8E5M2>
// CHECK-DAG: %[[DW:.*]] = qat.matmul_fp8 %[[X2]], %[[XS]], %[[D2]], %[[DS]] {transpose_a}
// CHECK-NOT: qat.fake_quant
// CHECK-NOT: llm.matmul
// CHECK: return %[[Y]], %[[DX]], %[[DW]]
func.func @linear(%x: tensor<4x8x32xbf16>, %w: tensor<32x64xbf16>, %dy: tensor<4x8x64xbf16>) -> (tensor<4x8x64xbf16>, tensor<4x8x32xbf16>, tensor<32x64xbf16>) {
  %rx = qat.observe %x {scheme = #qat.scheme<format = "fp8_e4m3">} : tensor<4x8x32xbf16> -> tensor<1x2xf32>
  %qx = qat.fake_quant %x range %rx {scheme = #qat.scheme<format = "fp8_e4m3">, llmc.microbatch = 1 : i64} : tensor<4x8x32xbf16>, tensor<1x2xf32>
  %rw = qat.observe %w {scheme = #qat.scheme<format = "fp8_e4m3">} : tensor<32x64xbf16> -> tensor<1x2xf32>
  %qw = qat.fake_quant %w range %rw {scheme = #qat.scheme<format = "fp8_e4m3">} : tensor<32x64xbf16>, tensor<1x2xf32>
  %y = llm.matmul %qx, %qw {llmc.microbatch = 1 : i64} : tensor<4x8x32xbf16>, tensor<32x64xbf16> -> tensor<4x8x64xbf16>
  %rd = qat.observe %dy {scheme = #qat.scheme<format = "fp8_e5m2">} : tensor<4x8x64xbf16> -> tensor<1x2xf32>
  %qd = qat.fake_quant %dy range %rd {scheme = #qat.scheme<format = "fp8_e5m2">} : tensor<4x8x64xbf16>, tensor<1x2xf32>
  %dx = llm.matmul %qd, %qw {transpose_b} : tensor<4x8x64xbf16>, tensor<32x64xbf16> -> tensor<4x8x32xbf16>
  %x2 = llm.reshape %qx : tensor<4x8x32xbf16> to tensor<32x32xbf16>
  %d2 = llm.reshape %qd : tensor<4x8x64xbf16> to tensor<32x64xbf16>
  %dw = llm.matmul %x2, %d2 {transpose_a} : tensor<32x32xbf16>, tensor<32x64xbf16> -> tensor<32x64xbf16>
  return %y, %dx, %dw : tensor<4x8x64xbf16>, tensor<4x8x32xbf16>, tensor<32x64xbf16>
}

// fast-accumulation=forward: the forward's product and its recomputed copy
// are marked, autodiff's dX and dW are not.
// CHECK-LABEL: func.func @annotated
// FAST-LABEL: func.func @annotated
// FAST-DAG: qat.matmul_fp8 {{.*}} {fast_accumulation} : tensor<8x32xf8E4M3FN>
// FAST-DAG: qat.matmul_fp8 {{.*}} {fast_accumulation, llmc.backward, llmc.recomputed} : tensor<8x32xf8E4M3FN>
// FAST-DAG: qat.matmul_fp8 {{.*}} {llmc.backward, transpose_b} : tensor<8x64xf8E5M2>
// FAST-DAG: qat.matmul_fp8 {{.*}} {llmc.backward, transpose_a} : tensor<8x32xf8E4M3FN>
func.func @annotated(%x: tensor<8x32xf32>, %w: tensor<32x64xf32>, %dy: tensor<8x64xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x32xf32>, tensor<32x64xf32>) {
  %rx = qat.observe %x {scheme = #qat.scheme<format = "fp8_e4m3">} : tensor<8x32xf32> -> tensor<1x2xf32>
  %qx = qat.fake_quant %x range %rx {scheme = #qat.scheme<format = "fp8_e4m3">} : tensor<8x32xf32>, tensor<1x2xf32>
  %rw = qat.observe %w {scheme = #qat.scheme<format = "fp8_e4m3">} : tensor<32x64xf32> -> tensor<1x2xf32>
  %qw = qat.fake_quant %w range %rw {scheme = #qat.scheme<format = "fp8_e4m3">} : tensor<32x64xf32>, tensor<1x2xf32>
  %y = llm.matmul %qx, %qw : tensor<8x32xf32>, tensor<32x64xf32> -> tensor<8x64xf32>
  %y2 = llm.matmul %qx, %qw {llmc.backward, llmc.recomputed} : tensor<8x32xf32>, tensor<32x64xf32> -> tensor<8x64xf32>
  %rd = qat.observe %dy {scheme = #qat.scheme<format = "fp8_e5m2">} : tensor<8x64xf32> -> tensor<1x2xf32>
  %qd = qat.fake_quant %dy range %rd {scheme = #qat.scheme<format = "fp8_e5m2">, llmc.backward} : tensor<8x64xf32>, tensor<1x2xf32>
  %dx = llm.matmul %qd, %qw {llmc.backward, transpose_b} : tensor<8x64xf32>, tensor<32x64xf32> -> tensor<8x32xf32>
  %dw = llm.matmul %qx, %qd {llmc.backward, transpose_a} : tensor<8x32xf32>, tensor<8x64xf32> -> tensor<32x64xf32>
  return %y, %y2, %dx, %dw : tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x32xf32>, tensor<32x64xf32>
}

// Left as they are: a quantized value something else also reads (and so
// every product of it), a product with one operand not quantized, two E5M2
// gradients, an integer format, and per-channel fp8 scales.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: qat.quantize_fp8
// CHECK-NOT: qat.matmul_fp8
// CHECK-COUNT-5: llm.matmul
// CHECK-NOT: llm.matmul
// CHECK: return
func.func @kept(%x: tensor<8x32xf32>, %w: tensor<32x64xf32>, %v: tensor<32x64xf32>, %g: tensor<8x64xf32>) -> (tensor<8x64xf32>, tensor<8x32xf32>, tensor<8x64xf32>, tensor<32x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>) {
  %r = qat.observe %x {scheme = #qat.scheme<format = "fp8_e4m3">} : tensor<8x32xf32> -> tensor<1x2xf32>
  %qx = qat.fake_quant %x range %r {scheme = #qat.scheme<format = "fp8_e4m3">} : tensor<8x32xf32>, tensor<1x2xf32>
  %rw = qat.observe %w {scheme = #qat.scheme<format = "fp8_e4m3">} : tensor<32x64xf32> -> tensor<1x2xf32>
  %qw = qat.fake_quant %w range %rw {scheme = #qat.scheme<format = "fp8_e4m3">} : tensor<32x64xf32>, tensor<1x2xf32>
  %shared = llm.matmul %qx, %qw : tensor<8x32xf32>, tensor<32x64xf32> -> tensor<8x64xf32>
  %half = llm.matmul %qx, %v : tensor<8x32xf32>, tensor<32x64xf32> -> tensor<8x64xf32>
  %rg = qat.observe %g {scheme = #qat.scheme<format = "fp8_e5m2">} : tensor<8x64xf32> -> tensor<1x2xf32>
  %qg = qat.fake_quant %g range %rg {scheme = #qat.scheme<format = "fp8_e5m2">} : tensor<8x64xf32>, tensor<1x2xf32>
  %gg = llm.matmul %qg, %qg {transpose_a} : tensor<8x64xf32>, tensor<8x64xf32> -> tensor<64x64xf32>
  %ri = qat.observe %v {scheme = #qat.scheme<format = "int8">} : tensor<32x64xf32> -> tensor<1x2xf32>
  %qi = qat.fake_quant %v range %ri {scheme = #qat.scheme<format = "int8">} : tensor<32x64xf32>, tensor<1x2xf32>
  %int = llm.matmul %qx, %qi : tensor<8x32xf32>, tensor<32x64xf32> -> tensor<8x64xf32>
  %rc = qat.observe %w {scheme = #qat.scheme<format = "fp8_e4m3", granularity = "channel", axis = 1>} : tensor<32x64xf32> -> tensor<64x2xf32>
  %qc = qat.fake_quant %w range %rc {scheme = #qat.scheme<format = "fp8_e4m3", granularity = "channel", axis = 1>} : tensor<32x64xf32>, tensor<64x2xf32>
  %chan = llm.matmul %qx, %qc : tensor<8x32xf32>, tensor<32x64xf32> -> tensor<8x64xf32>
  return %shared, %qx, %half, %qw, %int, %chan : tensor<8x64xf32>, tensor<8x32xf32>, tensor<8x64xf32>, tensor<32x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>
}

// A mixture of experts' three products, as autodiff leaves them: the
// routed rows times each expert's weight, dX = q(dy)·q(w)ᵀ expert by
// expert, dW per expert. The stack's per-expert quantization (a per-slice
// scheme on the view [G, A·B]) keeps one scale per expert.
// CHECK-LABEL: func.func @experts
// CHECK-DAG: %[[XC:.*]], %[[XS:.*]] = qat.quantize_fp8 %arg0 range {{.*}} -> tensor<8x16xf8E4M3FN>, tensor<1xf32>
// CHECK-DAG: %[[VC:.*]], %[[WS:.*]] = qat.quantize_fp8 %{{.*}} range {{.*}} granularity = "channel"{{.*}} -> tensor<2x512xf8E4M3FN>, tensor<2xf32>
// CHECK-DAG: %[[WC:.*]] = llm.reshape %[[VC]] : tensor<2x512xf8E4M3FN> to tensor<2x32x16xf8E4M3FN>
// CHECK-DAG: %[[DC:.*]], %[[DS:.*]] = qat.quantize_fp8 %arg3 range {{.*}} -> tensor<8x32xf8E5M2>, tensor<1xf32>
// CHECK-DAG: %[[Y:.*]] = qat.grouped_matmul_fp8 %[[XC]], %[[XS]], %arg1, %[[WC]], %[[WS]] {transpose_b} : {{.*}} -> tensor<8x32xbf16>
// CHECK-DAG: %[[DX:.*]] = qat.grouped_matmul_fp8 %[[DC]], %[[DS]], %arg1, %[[WC]], %[[WS]] : {{.*}} -> tensor<8x16xbf16>
// CHECK-DAG: %[[DW:.*]] = qat.grouped_matmul_weight_grad_fp8 %[[XC]], %[[XS]], %[[DC]], %[[DS]], %arg1 {transpose_b} : {{.*}} -> tensor<2x32x16xbf16>
// CHECK-NOT: qat.fake_quant
// CHECK-NOT: llm.grouped_matmul
// CHECK: return %[[Y]], %[[DX]], %[[DW]]
func.func @experts(%x: tensor<8x16xbf16>, %off: tensor<3xi32>, %w: tensor<2x32x16xbf16>, %dy: tensor<8x32xbf16>) -> (tensor<8x32xbf16>, tensor<8x16xbf16>, tensor<2x32x16xbf16>) {
  %rx = qat.observe %x {scheme = #qat.scheme<format = "fp8_e4m3">} : tensor<8x16xbf16> -> tensor<1x2xf32>
  %qx = qat.fake_quant %x range %rx {scheme = #qat.scheme<format = "fp8_e4m3">} : tensor<8x16xbf16>, tensor<1x2xf32>
  %vw = llm.reshape %w : tensor<2x32x16xbf16> to tensor<2x512xbf16>
  %rw = qat.observe %vw {scheme = #qat.scheme<format = "fp8_e4m3", granularity = "channel">} : tensor<2x512xbf16> -> tensor<2x2xf32>
  %qv = qat.fake_quant %vw range %rw {scheme = #qat.scheme<format = "fp8_e4m3", granularity = "channel">} : tensor<2x512xbf16>, tensor<2x2xf32>
  %qw = llm.reshape %qv : tensor<2x512xbf16> to tensor<2x32x16xbf16>
  %y = llm.grouped_matmul %qx, %off, %qw {transpose_b} : tensor<8x16xbf16>, tensor<3xi32>, tensor<2x32x16xbf16>
  %rd = qat.observe %dy {scheme = #qat.scheme<format = "fp8_e5m2">} : tensor<8x32xbf16> -> tensor<1x2xf32>
  %qd = qat.fake_quant %dy range %rd {scheme = #qat.scheme<format = "fp8_e5m2">} : tensor<8x32xbf16>, tensor<1x2xf32>
  %dx = llm.grouped_matmul %qd, %off, %qw : tensor<8x32xbf16>, tensor<3xi32>, tensor<2x32x16xbf16>
  %dw = llm.grouped_matmul_weight_grad %qx, %qd, %off {transpose_b} : tensor<8x16xbf16>, tensor<8x32xbf16>, tensor<3xi32> -> tensor<2x32x16xbf16>
  return %y, %dx, %dw : tensor<8x32xbf16>, tensor<8x16xbf16>, tensor<2x32x16xbf16>
}

// The routed rows and dY quantized group by group of rows (llmc-qat's
// per-row fake_quant of qat.row_ranges): their codes keep the groups'
// ranges, a scale per group; the rows' ranges go unused.
// CHECK-LABEL: func.func @experts_row_groups
// CHECK-DAG: %[[GX:.*]] = qat.group_ranges %{{.*}}, %arg1 : tensor<8x2xf32>, tensor<3xi32> -> tensor<2x2xf32>
// CHECK-DAG: %[[XC:.*]], %[[XS:.*]] = qat.quantize_fp8 %arg0 range %[[GX]] offsets %arg1 {scheme = #qat.scheme<format = "fp8_e4m3">} : tensor<8x16xbf16>, tensor<2x2xf32> offsets tensor<3xi32> -> tensor<8x16xf8E4M3FN>, tensor<2xf32>
// CHECK-DAG: %[[DC:.*]], %[[DS:.*]] = qat.quantize_fp8 %arg3 range %{{.*}} offsets %arg1 {scheme = #qat.scheme<format = "fp8_e5m2">} {{.*}} -> tensor<8x32xf8E5M2>, tensor<2xf32>
// CHECK-DAG: %[[Y:.*]] = qat.grouped_matmul_fp8 %[[XC]], %[[XS]], %arg1, %{{.*}}, %{{.*}} {transpose_b} : tensor<8x16xf8E4M3FN>, tensor<2xf32>
// CHECK-DAG: %[[DW:.*]] = qat.grouped_matmul_weight_grad_fp8 %[[XC]], %[[XS]], %[[DC]], %[[DS]], %arg1 {transpose_b}
// CHECK-NOT: qat.row_ranges
// CHECK-NOT: qat.fake_quant
// CHECK: return %[[Y]], %[[DW]]
func.func @experts_row_groups(%x: tensor<8x16xbf16>, %off: tensor<3xi32>, %w: tensor<2x32x16xbf16>, %dy: tensor<8x32xbf16>) -> (tensor<8x32xbf16>, tensor<2x32x16xbf16>) {
  %rr = qat.observe %x {scheme = #qat.scheme<format = "fp8_e4m3", granularity = "channel">} : tensor<8x16xbf16> -> tensor<8x2xf32>
  %gx = qat.group_ranges %rr, %off : tensor<8x2xf32>, tensor<3xi32> -> tensor<2x2xf32>
  %rx = qat.row_ranges %gx, %off : tensor<2x2xf32>, tensor<3xi32> -> tensor<8x2xf32>
  %qx = qat.fake_quant %x range %rx {scheme = #qat.scheme<format = "fp8_e4m3", granularity = "channel">} : tensor<8x16xbf16>, tensor<8x2xf32>
  %rw = qat.observe %w {scheme = #qat.scheme<format = "fp8_e4m3">} : tensor<2x32x16xbf16> -> tensor<1x2xf32>
  %qw = qat.fake_quant %w range %rw {scheme = #qat.scheme<format = "fp8_e4m3">} : tensor<2x32x16xbf16>, tensor<1x2xf32>
  %y = llm.grouped_matmul %qx, %off, %qw {transpose_b} : tensor<8x16xbf16>, tensor<3xi32>, tensor<2x32x16xbf16>
  %rd = qat.observe %dy {scheme = #qat.scheme<format = "fp8_e5m2", granularity = "channel">} : tensor<8x32xbf16> -> tensor<8x2xf32>
  %gd = qat.group_ranges %rd, %off : tensor<8x2xf32>, tensor<3xi32> -> tensor<2x2xf32>
  %rdr = qat.row_ranges %gd, %off : tensor<2x2xf32>, tensor<3xi32> -> tensor<8x2xf32>
  %qd = qat.fake_quant %dy range %rdr {scheme = #qat.scheme<format = "fp8_e5m2", granularity = "channel">} : tensor<8x32xbf16>, tensor<8x2xf32>
  %dw = llm.grouped_matmul_weight_grad %qx, %qd, %off {transpose_b} : tensor<8x16xbf16>, tensor<8x32xbf16>, tensor<3xi32> -> tensor<2x32x16xbf16>
  return %y, %dw : tensor<8x32xbf16>, tensor<2x32x16xbf16>
}

// Left as they are: rows quantized by the groups of other offsets than
// the product's.
// CHECK-LABEL: func.func @kept_row_groups
// CHECK-NOT: qat.quantize_fp8
// CHECK: llm.grouped_matmul
// CHECK: return
func.func @kept_row_groups(%x: tensor<8x16xf32>, %off: tensor<3xi32>, %other: tensor<3xi32>, %w: tensor<2x32x16xf32>) -> tensor<8x32xf32> {
  %rr = qat.observe %x {scheme = #qat.scheme<format = "fp8_e4m3", granularity = "channel">} : tensor<8x16xf32> -> tensor<8x2xf32>
  %gx = qat.group_ranges %rr, %other : tensor<8x2xf32>, tensor<3xi32> -> tensor<2x2xf32>
  %rx = qat.row_ranges %gx, %other : tensor<2x2xf32>, tensor<3xi32> -> tensor<8x2xf32>
  %qx = qat.fake_quant %x range %rx {scheme = #qat.scheme<format = "fp8_e4m3", granularity = "channel">} : tensor<8x16xf32>, tensor<8x2xf32>
  %rw = qat.observe %w {scheme = #qat.scheme<format = "fp8_e4m3">} : tensor<2x32x16xf32> -> tensor<1x2xf32>
  %qw = qat.fake_quant %w range %rw {scheme = #qat.scheme<format = "fp8_e4m3">} : tensor<2x32x16xf32>, tensor<1x2xf32>
  %y = llm.grouped_matmul %qx, %off, %qw {transpose_b} : tensor<8x16xf32>, tensor<3xi32>, tensor<2x32x16xf32>
  return %y : tensor<8x32xf32>
}

// Left as they are: a stack quantized per row of each expert (the view
// [G·A, B]: its scales are not one per expert), and a per-slice scheme on
// an operand that is not a stack of experts (the rows).
// CHECK-LABEL: func.func @kept_experts
// CHECK-NOT: qat.quantize_fp8
// CHECK-NOT: qat.grouped_matmul_fp8
// CHECK-COUNT-2: llm.grouped_matmul
// CHECK: return
func.func @kept_experts(%x: tensor<8x16xf32>, %off: tensor<3xi32>, %w: tensor<2x32x16xf32>) -> (tensor<8x32xf32>, tensor<8x32xf32>) {
  %rx = qat.observe %x {scheme = #qat.scheme<format = "fp8_e4m3">} : tensor<8x16xf32> -> tensor<1x2xf32>
  %qx = qat.fake_quant %x range %rx {scheme = #qat.scheme<format = "fp8_e4m3">} : tensor<8x16xf32>, tensor<1x2xf32>
  %vw = llm.reshape %w : tensor<2x32x16xf32> to tensor<64x16xf32>
  %rw = qat.observe %vw {scheme = #qat.scheme<format = "fp8_e4m3", granularity = "channel">} : tensor<64x16xf32> -> tensor<64x2xf32>
  %qv = qat.fake_quant %vw range %rw {scheme = #qat.scheme<format = "fp8_e4m3", granularity = "channel">} : tensor<64x16xf32>, tensor<64x2xf32>
  %qw = llm.reshape %qv : tensor<64x16xf32> to tensor<2x32x16xf32>
  %rows = llm.grouped_matmul %qx, %off, %qw {transpose_b} : tensor<8x16xf32>, tensor<3xi32>, tensor<2x32x16xf32>
  %ry = qat.observe %x {scheme = #qat.scheme<format = "fp8_e4m3", granularity = "channel">} : tensor<8x16xf32> -> tensor<8x2xf32>
  %qy = qat.fake_quant %x range %ry {scheme = #qat.scheme<format = "fp8_e4m3", granularity = "channel">} : tensor<8x16xf32>, tensor<8x2xf32>
  %rv = qat.observe %w {scheme = #qat.scheme<format = "fp8_e4m3">} : tensor<2x32x16xf32> -> tensor<1x2xf32>
  %qt = qat.fake_quant %w range %rv {scheme = #qat.scheme<format = "fp8_e4m3">} : tensor<2x32x16xf32>, tensor<1x2xf32>
  %sliced = llm.grouped_matmul %qy, %off, %qt {transpose_b} : tensor<8x16xf32>, tensor<3xi32>, tensor<2x32x16xf32>
  return %rows, %sliced : tensor<8x32xf32>, tensor<8x32xf32>
}

// --precision fp8 through the whole pipeline (dp2 × tp2): the attention
// block's QKV product in the forward, then in the backward dY's E5M2 codes
// read by dX's product (with the forward's weight codes) and dW's (with
// the forward's input codes, rows folded); no fake quantization is left.
// TRAIN-LABEL: func.func @grad(
// TRAIN: %[[WC:[^,]*]], %[[WS:[^ ]*]] = qat.quantize_fp8 %arg4 range {{.*}} -> tensor<128x192xf8E4M3FN>, tensor<1xf32>
// TRAIN-NEXT: qat.observe
// TRAIN-NEXT: dist.all_reduce
// TRAIN-NEXT: %[[XC:[^,]*]], %[[XS:[^ ]*]] = qat.quantize_fp8 {{.*}} -> tensor<4x128x128xf8E4M3FN>, tensor<1xf32>
// TRAIN-NEXT: qat.matmul_fp8 %[[XC]], %[[XS]], %[[WC]], %[[WS]] {fast_accumulation, llmc.block_name = "h.0"} {{.*}} -> tensor<4x128x192xbf16>
// TRAIN: %[[DC:[^,]*]], %[[DS:[^ ]*]] = qat.quantize_fp8 {{.*}}format = "fp8_e5m2"{{.*}} -> tensor<4x128x192xf8E5M2>, tensor<1xf32>
// TRAIN-NEXT: qat.matmul_fp8 %[[DC]], %[[DS]], %[[WC]], %[[WS]] {llmc.backward, llmc.block_name = "h.0", transpose_b}
// TRAIN-NEXT: %[[XR:.*]] = llm.reshape %[[XC]] {{.*}} to tensor<512x128xf8E4M3FN>
// TRAIN-NEXT: %[[DR:.*]] = llm.reshape %[[DC]] {{.*}} to tensor<512x192xf8E5M2>
// TRAIN-NEXT: qat.matmul_fp8 %[[XR]], %[[XS]], %[[DR]], %[[DS]] {llmc.backward, llmc.block_name = "h.0", transpose_a} {{.*}} -> tensor<128x192xbf16>
// TRAIN-LABEL: func.func @train_step(

// Full recomputation (--precision fp8's default fast accumulation): the
// block's four forward products, and again in the backward the three
// whose outputs the backward reads, are marked; its eight backward
// products are not.
// RECOMPUTE-LABEL: func.func @grad(
// RECOMPUTE-COUNT-4: qat.matmul_fp8 {{.*}} {fast_accumulation, llmc.block_name = "h.0"}
// RECOMPUTE-COUNT-3: qat.matmul_fp8 {{.*}} {fast_accumulation, llmc.backward, llmc.block_name = "h.0", llmc.recomputed}
// RECOMPUTE-NOT: fast_accumulation
// RECOMPUTE-LABEL: func.func @train_step(
// EXACT-LABEL: func.func @grad(
// EXACT-COUNT-15: qat.matmul_fp8
// EXACT-NOT: qat.matmul_fp8
// EXACT-LABEL: func.func @train_step(

// --precision fp8 on a mixture of experts under ep2 × tp2: each rank's
// two experts, split by tp, quantized expert by expert (a scale each), and
// so are their routed rows and dY; the gate, up and down products and
// their dX and dW read those codes; no fake quantization is left, nor the
// rows' ranges it read.
// MOE-LABEL: func.func @grad(
// MOE: %[[WC:[^,]*]], %[[WS:[^ ]*]] = qat.quantize_fp8 {{.*}}granularity = "channel"{{.*}} : tensor<2x11264xbf16>, tensor<2x2xf32> -> tensor<2x11264xf8E4M3FN>, tensor<2xf32>
// MOE: %[[XC:[^,]*]], %[[XS:[^ ]*]] = qat.quantize_fp8 {{.*}} offsets %local_offsets {{.*}} -> tensor<{{[0-9]+}}x128xf8E4M3FN>, tensor<2xf32>
// MOE-NEXT: %[[GATE:.*]] = qat.grouped_matmul_fp8 %[[XC]], %[[XS]], %local_offsets, %{{[0-9]+}}, %[[WS]] {llmc.block_name = "layers.0", transpose_b}
// MOE-COUNT-2: qat.grouped_matmul_fp8 {{.*}} {llmc.block_name = "layers.0", transpose_b}
// MOE-COUNT-3: qat.grouped_matmul_weight_grad_fp8 {{.*}} {llmc.backward, llmc.block_name = "layers.0", transpose_b}
// MOE-NOT: llm.grouped_matmul
// MOE-LABEL: func.func @train_step(
