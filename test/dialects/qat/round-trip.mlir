// RUN: llmc-opt %s | llmc-opt | FileCheck %s
// Every qat op and scheme form survives print → parse → print.

// CHECK-LABEL: func.func @schemes
func.func @schemes(%w: tensor<64x128xf32>, %x: tensor<4x16x128xbf16>, %s: tensor<1x2xf32>, %dy: tensor<4x16x128xbf16>) {
  // CHECK: %[[R:.*]] = qat.observe %{{.*}} {scheme = #qat.scheme<format = "int8">} : tensor<64x128xf32> -> tensor<1x2xf32>
  // CHECK-NEXT: qat.fake_quant %{{.*}} range %[[R]] {scheme = #qat.scheme<format = "int8">} : tensor<64x128xf32>, tensor<1x2xf32>
  %r = qat.observe %w {scheme = #qat.scheme<format = "int8">} : tensor<64x128xf32> -> tensor<1x2xf32>
  %a = qat.fake_quant %w range %r {scheme = #qat.scheme<format = "int8">} : tensor<64x128xf32>, tensor<1x2xf32>
  // CHECK: #qat.scheme<format = "int8", granularity = "channel", symmetric = false>} : tensor<64x128xf32> -> tensor<64x2xf32>
  %rc = qat.observe %w {scheme = #qat.scheme<format = "int8", granularity = "channel", axis = 0, symmetric = false>} : tensor<64x128xf32> -> tensor<64x2xf32>
  %b = qat.fake_quant %w range %rc {scheme = #qat.scheme<format = "int8", granularity = "channel", axis = 0, symmetric = false>} : tensor<64x128xf32>, tensor<64x2xf32>
  // CHECK: #qat.scheme<format = "int4", granularity = "block", block = 64>} : tensor<64x128xf32> -> tensor<128x2xf32>
  %rb = qat.observe %w {scheme = #qat.scheme<format = "int4", granularity = "block", block = 64>} : tensor<64x128xf32> -> tensor<128x2xf32>
  // CHECK: #qat.scheme<format = "nf4", granularity = "block", block = 64>
  %n = qat.fake_quant %w range %rb {scheme = #qat.scheme<format = "nf4", granularity = "block", block = 64>} : tensor<64x128xf32>, tensor<128x2xf32>
  // CHECK: #qat.scheme<format = "fp8_e4m3", granularity = "channel", axis = 1>} : tensor<64x128xf32> -> tensor<128x2xf32>
  %rf = qat.observe %w {scheme = #qat.scheme<format = "fp8_e4m3", granularity = "channel", axis = 1>} : tensor<64x128xf32> -> tensor<128x2xf32>
  // CHECK: #qat.scheme<format = "fp8_e5m2">
  %f2 = qat.fake_quant %w range %r {scheme = #qat.scheme<format = "fp8_e5m2">} : tensor<64x128xf32>, tensor<1x2xf32>
  // An EMA observer and the straight-through gradient, on bf16 activations.
  // CHECK: %[[O:.*]] = qat.observe %{{.*}} {scheme = #qat.scheme<format = "int8", observer = "ema", momentum = 9.000000e-01>} : tensor<4x16x128xbf16> -> tensor<1x2xf32>
  // CHECK-NEXT: %[[E:.*]] = qat.ema %{{.*}}, %[[O]] {momentum = 9.000000e-01 : f64} : tensor<1x2xf32>
  // CHECK-NEXT: qat.fake_quant %{{.*}} range %[[E]]
  // CHECK-NEXT: qat.fake_quant_grad %{{.*}} range %[[E]] grad %{{.*}} {scheme = #qat.scheme<format = "int8", observer = "ema", momentum = 9.000000e-01>} : tensor<4x16x128xbf16>, tensor<1x2xf32>
  %o = qat.observe %x {scheme = #qat.scheme<format = "int8", observer = "ema", momentum = 0.9>} : tensor<4x16x128xbf16> -> tensor<1x2xf32>
  %e = qat.ema %s, %o {momentum = 0.9 : f64} : tensor<1x2xf32>
  %q = qat.fake_quant %x range %e {scheme = #qat.scheme<format = "int8", observer = "ema", momentum = 0.9>} : tensor<4x16x128xbf16>, tensor<1x2xf32>
  %dx = qat.fake_quant_grad %x range %e grad %dy {scheme = #qat.scheme<format = "int8", observer = "ema", momentum = 0.9>} : tensor<4x16x128xbf16>, tensor<1x2xf32>
  return
}

// Outlier columns: the per-column ranges as the `columns` operand.
// CHECK-LABEL: func.func @outliers
// CHECK: %[[C:.*]] = qat.observe %{{.*}} {scheme = #qat.scheme<format = "int8", granularity = "channel", axis = 2>} : tensor<4x16x128xbf16> -> tensor<128x2xf32>
// CHECK-NEXT: %[[R:.*]] = qat.observe %{{.*}} columns %[[C]] {scheme = #qat.scheme<format = "int8", symmetric = false, outlier = 6.000000e+00>} : tensor<4x16x128xbf16>, tensor<128x2xf32> -> tensor<1x2xf32>
// CHECK-NEXT: qat.fake_quant %{{.*}} range %[[R]] columns %[[C]] {scheme = #qat.scheme<format = "int8", symmetric = false, outlier = 6.000000e+00>} : tensor<4x16x128xbf16>, tensor<1x2xf32>, tensor<128x2xf32>
// CHECK-NEXT: qat.fake_quant_grad %{{.*}} range %[[R]] grad %{{.*}} columns %[[C]] {scheme = #qat.scheme<format = "int8", symmetric = false, outlier = 6.000000e+00>} : tensor<4x16x128xbf16>, tensor<1x2xf32>, tensor<128x2xf32>
func.func @outliers(%x: tensor<4x16x128xbf16>, %dy: tensor<4x16x128xbf16>) {
  %c = qat.observe %x {scheme = #qat.scheme<format = "int8", granularity = "channel", axis = 2>} : tensor<4x16x128xbf16> -> tensor<128x2xf32>
  %r = qat.observe %x columns %c {scheme = #qat.scheme<format = "int8", symmetric = false, outlier = 6.0>} : tensor<4x16x128xbf16>, tensor<128x2xf32> -> tensor<1x2xf32>
  %q = qat.fake_quant %x range %r columns %c {scheme = #qat.scheme<format = "int8", symmetric = false, outlier = 6.0>} : tensor<4x16x128xbf16>, tensor<1x2xf32>, tensor<128x2xf32>
  %dx = qat.fake_quant_grad %x range %r grad %dy columns %c {scheme = #qat.scheme<format = "int8", symmetric = false, outlier = 6.0>} : tensor<4x16x128xbf16>, tensor<1x2xf32>, tensor<128x2xf32>
  return
}

// CHECK-LABEL: func.func @nf4_storage
// CHECK: qat.dequantize_nf4 %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {block = 64 : i64} : tensor<8192xi8>, tensor<256xi8>, tensor<1xf32>, tensor<f32> -> tensor<128x128xbf16>
func.func @nf4_storage(%c: tensor<8192xi8>, %q: tensor<256xi8>, %s: tensor<1xf32>, %m: tensor<f32>) -> tensor<128x128xbf16> {
  %w = qat.dequantize_nf4 %c, %q, %s, %m {block = 64 : i64} : tensor<8192xi8>, tensor<256xi8>, tensor<1xf32>, tensor<f32> -> tensor<128x128xbf16>
  return %w : tensor<128x128xbf16>
}

// E4M3 absmax levels (`llmc quantize --double-quant fp8`); int8, the
// default, is not printed.
// CHECK-LABEL: func.func @nf4_fp8_levels
// CHECK: qat.dequantize_nf4 %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {absmax_format = "fp8_e4m3", block = 64 : i64} : tensor<8192xi8>
// CHECK: qat.dequantize_nf4 %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {block = 64 : i64} : tensor<8192xi8>
func.func @nf4_fp8_levels(%c: tensor<8192xi8>, %q: tensor<256xi8>, %s: tensor<1xf32>, %m: tensor<f32>) -> (tensor<128x128xf32>, tensor<128x128xf32>) {
  %w = qat.dequantize_nf4 %c, %q, %s, %m {block = 64 : i64, absmax_format = "fp8_e4m3"} : tensor<8192xi8>, tensor<256xi8>, tensor<1xf32>, tensor<f32> -> tensor<128x128xf32>
  %v = qat.dequantize_nf4 %c, %q, %s, %m {block = 64 : i64, absmax_format = "int8"} : tensor<8192xi8>, tensor<256xi8>, tensor<1xf32>, tensor<f32> -> tensor<128x128xf32>
  return %w, %v : tensor<128x128xf32>, tensor<128x128xf32>
}

// Rank 1's piece of a weight split over two ranks (columns in three
// chunks): shaped storage, the whole weight's scales.
// CHECK-LABEL: func.func @nf4_piece
// CHECK: qat.dequantize_nf4 {{.*}} {block = 64 : i64, chunks = array<i64: 1, 3>, piece_offset = array<i64: 0, 64>, whole_shape = array<i64: 128, 384>} : tensor<128x96xi8>, tensor<128x3xi8>, tensor<3xf32>, tensor<f32> -> tensor<128x192xf32>
func.func @nf4_piece(%c: tensor<128x96xi8>, %q: tensor<128x3xi8>, %s: tensor<3xf32>, %m: tensor<f32>) -> tensor<128x192xf32> {
  %w = qat.dequantize_nf4 %c, %q, %s, %m {block = 64 : i64, whole_shape = array<i64: 128, 384>, chunks = array<i64: 1, 3>, piece_offset = array<i64: 0, 64>} : tensor<128x96xi8>, tensor<128x3xi8>, tensor<3xf32>, tensor<f32> -> tensor<128x192xf32>
  return %w : tensor<128x192xf32>
}

// CHECK-LABEL: func.func @quantize_grad
// CHECK: qat.quantize_grad %{{.*}} {axes = ["dp", "tp"], scheme = #qat.scheme<format = "fp8_e5m2">} : tensor<4x16x128xbf16>
// CHECK: qat.quantize_grad %{{.*}} {scheme = #qat.scheme<format = "fp8_e5m2">} : tensor<4x128xf32>
func.func @quantize_grad(%x: tensor<4x16x128xbf16>, %y: tensor<4x128xf32>) {
  %a = qat.quantize_grad %x {scheme = #qat.scheme<format = "fp8_e5m2">, axes = ["dp", "tp"]} : tensor<4x16x128xbf16>
  %b = qat.quantize_grad %y {scheme = #qat.scheme<format = "fp8_e5m2">} : tensor<4x128xf32>
  return
}

// fp8 delayed scaling: an amax history (the range, then 16 amaxes) read by
// delayed_range, updated by amax_history and committed by commit_state.
// CHECK-LABEL: func.func @delayed
// CHECK: %[[R:.*]] = qat.delayed_range %{{.*}}, %{{.*}} {scheme = #qat.scheme<format = "fp8_e4m3", observer = "delayed", history = 16, margin = 1>} : tensor<17xf32>, tensor<1x2xf32>
// CHECK: qat.amax_history %{{.*}}, %{{.*}} {scheme = #qat.scheme<format = "fp8_e4m3", observer = "delayed", history = 16, algo = "most_recent">} : tensor<17xf32>, tensor<1x2xf32>
// CHECK: qat.commit_state %{{.*}}, %{{.*}}, %{{.*}} : tensor<17xf32>, tensor<f32>
// CHECK: qat.quantize_grad %{{.*}} state %{{.*}} {scheme = #qat.scheme<format = "fp8_e5m2", observer = "delayed", history = 16>} : tensor<4x128xf32>, tensor<17xf32>
// CHECK: qat.quantize_grad %{{.*}} state %{{.*}} {batch_ranks = 4 : i64, scheme = #qat.scheme<format = "fp8_e5m2", observer = "delayed", history = 16>} : tensor<4x128xf32>, tensor<17xf32>
func.func @delayed(%s: tensor<17xf32>, %o: tensor<1x2xf32>, %n: tensor<f32>, %y: tensor<4x128xf32>) {
  %r = qat.delayed_range %s, %o {scheme = #qat.scheme<format = "fp8_e4m3", observer = "delayed", history = 16, margin = 1>} : tensor<17xf32>, tensor<1x2xf32>
  %h = qat.amax_history %s, %o {scheme = #qat.scheme<format = "fp8_e4m3", observer = "delayed", history = 16, algo = "most_recent">} : tensor<17xf32>, tensor<1x2xf32>
  %c = qat.commit_state %s, %h, %n : tensor<17xf32>, tensor<f32>
  %q = qat.quantize_grad %y state %s {scheme = #qat.scheme<format = "fp8_e5m2", observer = "delayed", history = 16>} : tensor<4x128xf32>, tensor<17xf32>
  %q4 = qat.quantize_grad %y state %s {scheme = #qat.scheme<format = "fp8_e5m2", observer = "delayed", history = 16>, batch_ranks = 4} : tensor<4x128xf32>, tensor<17xf32>
  return
}

// One history per expert: a [G, N + 1] state, a range per expert, and
// dY's histories per group of rows.
// CHECK-LABEL: func.func @delayed_experts
// CHECK: qat.delayed_range %{{.*}}, %{{.*}} {scheme = #qat.scheme<format = "fp8_e4m3", granularity = "channel", observer = "delayed", history = 16>} : tensor<4x17xf32>, tensor<4x2xf32>
// CHECK: qat.amax_history %{{.*}}, %{{.*}} {scheme = #qat.scheme<format = "fp8_e4m3", observer = "delayed", history = 16>} : tensor<4x17xf32>, tensor<4x2xf32>
// CHECK: qat.quantize_grad %{{.*}} state %{{.*}} offsets %{{.*}} {scheme = #qat.scheme<format = "fp8_e5m2", observer = "delayed", history = 16>} : tensor<8x16xf32>, tensor<4x17xf32> offsets tensor<5xi32>
func.func @delayed_experts(%s: tensor<4x17xf32>, %o: tensor<4x2xf32>, %y: tensor<8x16xf32>, %off: tensor<5xi32>) {
  %r = qat.delayed_range %s, %o {scheme = #qat.scheme<format = "fp8_e4m3", granularity = "channel", observer = "delayed", history = 16>} : tensor<4x17xf32>, tensor<4x2xf32>
  %h = qat.amax_history %s, %o {scheme = #qat.scheme<format = "fp8_e4m3", observer = "delayed", history = 16>} : tensor<4x17xf32>, tensor<4x2xf32>
  %q = qat.quantize_grad %y state %s offsets %off {scheme = #qat.scheme<format = "fp8_e5m2", observer = "delayed", history = 16>} : tensor<8x16xf32>, tensor<4x17xf32> offsets tensor<5xi32>
  return
}

// fp8 GEMM operands and their product (llmc-fp8-matmuls).
// CHECK-LABEL: func.func @fp8_gemm
func.func @fp8_gemm(%x: tensor<4x16x128xbf16>, %r: tensor<1x2xf32>, %w: tensor<512x128xbf16>, %dy: tensor<4x16x512xbf16>) -> (tensor<4x16x512xbf16>, tensor<4x16x128xbf16>) {
  // CHECK: %[[XC:.*]], %[[XS:.*]] = qat.quantize_fp8 %{{.*}} range %{{.*}} {scheme = #qat.scheme<format = "fp8_e4m3">} : tensor<4x16x128xbf16>, tensor<1x2xf32> -> tensor<4x16x128xf8E4M3FN>, tensor<1xf32>
  %xc, %xs = qat.quantize_fp8 %x range %r {scheme = #qat.scheme<format = "fp8_e4m3">} : tensor<4x16x128xbf16>, tensor<1x2xf32> -> tensor<4x16x128xf8E4M3FN>, tensor<1xf32>
  %wc, %ws = qat.quantize_fp8 %w range %r {scheme = #qat.scheme<format = "fp8_e4m3">} : tensor<512x128xbf16>, tensor<1x2xf32> -> tensor<512x128xf8E4M3FN>, tensor<1xf32>
  // CHECK: qat.quantize_fp8 %{{.*}} -> tensor<4x16x512xf8E5M2>, tensor<1xf32>
  %dc, %ds = qat.quantize_fp8 %dy range %r {scheme = #qat.scheme<format = "fp8_e5m2">} : tensor<4x16x512xbf16>, tensor<1x2xf32> -> tensor<4x16x512xf8E5M2>, tensor<1xf32>
  // CHECK: qat.matmul_fp8 %[[XC]], %[[XS]], %{{.*}}, %{{.*}} {transpose_b} : tensor<4x16x128xf8E4M3FN>, tensor<1xf32>, tensor<512x128xf8E4M3FN>, tensor<1xf32> -> tensor<4x16x512xbf16>
  %y = qat.matmul_fp8 %xc, %xs, %wc, %ws {transpose_b} : tensor<4x16x128xf8E4M3FN>, tensor<1xf32>, tensor<512x128xf8E4M3FN>, tensor<1xf32> -> tensor<4x16x512xbf16>
  // CHECK: qat.matmul_fp8 {{.*}} : tensor<4x16x512xf8E5M2>, tensor<1xf32>, tensor<512x128xf8E4M3FN>, tensor<1xf32> -> tensor<4x16x128xbf16>
  %dx = qat.matmul_fp8 %dc, %ds, %wc, %ws : tensor<4x16x512xf8E5M2>, tensor<1xf32>, tensor<512x128xf8E4M3FN>, tensor<1xf32> -> tensor<4x16x128xbf16>
  return %y, %dx : tensor<4x16x512xbf16>, tensor<4x16x128xbf16>
}

// A mixture of experts' products on fp8 codes: the stacked weights with a
// scale per expert (a per-slice scheme on the view [G, A·B]).
// CHECK-LABEL: func.func @fp8_experts
func.func @fp8_experts(%x: tensor<8x16xbf16>, %rx: tensor<1x2xf32>, %off: tensor<3xi32>, %w: tensor<2x512xbf16>, %rw: tensor<2x2xf32>, %dy: tensor<8x32xf8E5M2>, %ds: tensor<1xf32>) -> (tensor<8x32xbf16>, tensor<2x32x16xbf16>) {
  %xc, %xs = qat.quantize_fp8 %x range %rx {scheme = #qat.scheme<format = "fp8_e4m3">} : tensor<8x16xbf16>, tensor<1x2xf32> -> tensor<8x16xf8E4M3FN>, tensor<1xf32>
  // CHECK: qat.quantize_fp8 {{.*}} {scheme = #qat.scheme<format = "fp8_e4m3", granularity = "channel">} : tensor<2x512xbf16>, tensor<2x2xf32> -> tensor<2x512xf8E4M3FN>, tensor<2xf32>
  %vc, %ws = qat.quantize_fp8 %w range %rw {scheme = #qat.scheme<format = "fp8_e4m3", granularity = "channel">} : tensor<2x512xbf16>, tensor<2x2xf32> -> tensor<2x512xf8E4M3FN>, tensor<2xf32>
  %wc = llm.reshape %vc : tensor<2x512xf8E4M3FN> to tensor<2x32x16xf8E4M3FN>
  // CHECK: qat.grouped_matmul_fp8 {{.*}} {transpose_b} : tensor<8x16xf8E4M3FN>, tensor<1xf32>, tensor<3xi32>, tensor<2x32x16xf8E4M3FN>, tensor<2xf32> -> tensor<8x32xbf16>
  %y = qat.grouped_matmul_fp8 %xc, %xs, %off, %wc, %ws {transpose_b} : tensor<8x16xf8E4M3FN>, tensor<1xf32>, tensor<3xi32>, tensor<2x32x16xf8E4M3FN>, tensor<2xf32> -> tensor<8x32xbf16>
  // CHECK: qat.grouped_matmul_weight_grad_fp8 {{.*}} {transpose_b} : tensor<8x16xf8E4M3FN>, tensor<1xf32>, tensor<8x32xf8E5M2>, tensor<1xf32>, tensor<3xi32> -> tensor<2x32x16xbf16>
  %dw = qat.grouped_matmul_weight_grad_fp8 %xc, %xs, %dy, %ds, %off {transpose_b} : tensor<8x16xf8E4M3FN>, tensor<1xf32>, tensor<8x32xf8E5M2>, tensor<1xf32>, tensor<3xi32> -> tensor<2x32x16xbf16>
  return %y, %dw : tensor<8x32xbf16>, tensor<2x32x16xbf16>
}

// A mixture of experts' rows quantized group by group (llmc-qat, dY's
// backward): the groups' ranges from the rows', given back to the rows;
// their fp8 codes with a scale per group.
// CHECK-LABEL: func.func @row_groups
func.func @row_groups(%x: tensor<8x16xbf16>, %off: tensor<3xi32>) -> (tensor<8x16xbf16>, tensor<8x16xf8E4M3FN>, tensor<2xf32>, tensor<8x16xbf16>) {
  %r = qat.observe %x {scheme = #qat.scheme<format = "fp8_e4m3", granularity = "channel">} : tensor<8x16xbf16> -> tensor<8x2xf32>
  // CHECK: qat.group_ranges %{{.*}}, %{{.*}} : tensor<8x2xf32>, tensor<3xi32> -> tensor<2x2xf32>
  %g = qat.group_ranges %r, %off : tensor<8x2xf32>, tensor<3xi32> -> tensor<2x2xf32>
  // CHECK: qat.row_ranges %{{.*}}, %{{.*}} : tensor<2x2xf32>, tensor<3xi32> -> tensor<8x2xf32>
  %rows = qat.row_ranges %g, %off : tensor<2x2xf32>, tensor<3xi32> -> tensor<8x2xf32>
  %q = qat.fake_quant %x range %rows {scheme = #qat.scheme<format = "fp8_e4m3", granularity = "channel">} : tensor<8x16xbf16>, tensor<8x2xf32>
  // CHECK: qat.quantize_fp8 %{{.*}} range %{{.*}} offsets %{{.*}} {scheme = #qat.scheme<format = "fp8_e4m3">} : tensor<8x16xbf16>, tensor<2x2xf32> offsets tensor<3xi32> -> tensor<8x16xf8E4M3FN>, tensor<2xf32>
  %c, %s = qat.quantize_fp8 %x range %g offsets %off {scheme = #qat.scheme<format = "fp8_e4m3">} : tensor<8x16xbf16>, tensor<2x2xf32> offsets tensor<3xi32> -> tensor<8x16xf8E4M3FN>, tensor<2xf32>
  // CHECK: qat.quantize_grad %{{.*}} offsets %{{.*}} {axes = ["dp"], scheme = #qat.scheme<format = "fp8_e5m2">} : tensor<8x16xbf16> offsets tensor<3xi32>
  %d = qat.quantize_grad %x offsets %off {scheme = #qat.scheme<format = "fp8_e5m2">, axes = ["dp"]} : tensor<8x16xbf16> offsets tensor<3xi32>
  return %q, %c, %s, %d : tensor<8x16xbf16>, tensor<8x16xf8E4M3FN>, tensor<2xf32>, tensor<8x16xbf16>
}
