// RUN: llmc-opt %s -split-input-file -verify-diagnostics
// Every qat verifier diagnostic.

func.func @f(%w: tensor<8x8xf32>) {
  // expected-error @+1 {{unknown format 'int2' (expected int8, int4, int3, fp8_e4m3, fp8_e5m2 or nf4)}}
  %a = qat.observe %w {scheme = #qat.scheme<format = "int2">} : tensor<8x8xf32> -> tensor<1x2xf32>
  return
}

// -----

func.func @f(%w: tensor<8x8xf32>) {
  // expected-error @+1 {{unknown granularity 'row' (expected tensor, channel or block)}}
  %a = qat.observe %w {scheme = #qat.scheme<format = "int8", granularity = "row">} : tensor<8x8xf32> -> tensor<1x2xf32>
  return
}

// -----

func.func @f(%w: tensor<8x8xf32>) {
  // expected-error @+1 {{block size 0 is only valid (and then required, >= 1) with block granularity}}
  %a = qat.observe %w {scheme = #qat.scheme<format = "int4", granularity = "block">} : tensor<8x8xf32> -> tensor<1x2xf32>
  return
}

// -----

func.func @f(%w: tensor<8x8xf32>) {
  // expected-error @+1 {{block size 4 is only valid (and then required, >= 1) with block granularity}}
  %a = qat.observe %w {scheme = #qat.scheme<format = "int4", block = 4>} : tensor<8x8xf32> -> tensor<1x2xf32>
  return
}

// -----

func.func @f(%w: tensor<8x8xf32>) {
  // expected-error @+1 {{channel axis must be >= 0, got -1}}
  %a = qat.observe %w {scheme = #qat.scheme<format = "int8", granularity = "channel", axis = -1>} : tensor<8x8xf32> -> tensor<1x2xf32>
  return
}

// -----

func.func @f(%w: tensor<8x8xf32>) {
  // expected-error @+1 {{format 'nf4' is symmetric only}}
  %a = qat.observe %w {scheme = #qat.scheme<format = "nf4", granularity = "block", block = 8, symmetric = false>} : tensor<8x8xf32> -> tensor<1x2xf32>
  return
}

// -----

func.func @f(%w: tensor<8x8xf32>) {
  // expected-error @+1 {{unknown observer 'percentile' (expected minmax, ema or delayed)}}
  %a = qat.observe %w {scheme = #qat.scheme<format = "int8", observer = "percentile">} : tensor<8x8xf32> -> tensor<1x2xf32>
  return
}

// -----

func.func @f(%w: tensor<8x8xf32>) {
  // expected-error @+1 {{ema momentum must be in (0, 1), got 1.000000e+00}}
  %a = qat.observe %w {scheme = #qat.scheme<format = "int8", observer = "ema", momentum = 1.0>} : tensor<8x8xf32> -> tensor<1x2xf32>
  return
}

// -----

func.func @f(%w: tensor<8x8xf32>) {
  // expected-error @+2 {{channel axis 2 is out of range for rank 2}}
  // expected-error @+1 {{'qat.observe' op failed to infer returned types}}
  %a = qat.observe %w {scheme = #qat.scheme<format = "int8", granularity = "channel", axis = 2>} : tensor<8x8xf32> -> tensor<1x2xf32>
  return
}

// -----

func.func @f(%w: tensor<8x12xf32>, %r: tensor<12x2xf32>) {
  // expected-error @+1 {{block size 8 does not divide the last dimension (12)}}
  %a = qat.fake_quant %w range %r {scheme = #qat.scheme<format = "int4", granularity = "block", block = 8>} : tensor<8x12xf32>, tensor<12x2xf32>
  return
}

// -----

func.func @f(%w: tensor<8x8xf32>) {
  // expected-error @+2 {{'qat.observe' op inferred type(s) 'tensor<8x2xf32>' are incompatible with return type(s) of operation 'tensor<1x2xf32>'}}
  // expected-error @+1 {{'qat.observe' op failed to infer returned types}}
  %a = qat.observe %w {scheme = #qat.scheme<format = "int8", granularity = "channel">} : tensor<8x8xf32> -> tensor<1x2xf32>
  return
}

// -----

func.func @f(%w: tensor<8x8xf32>, %r: tensor<1x2xf32>) {
  // expected-error @+1 {{range must be 'tensor<8x2xf32>' ([groups, −min/max]), got 'tensor<1x2xf32>'}}
  %a = qat.fake_quant %w range %r {scheme = #qat.scheme<format = "int8", granularity = "channel", axis = 1>} : tensor<8x8xf32>, tensor<1x2xf32>
  return
}

// -----

func.func @f(%x: tensor<8x8xf32>, %r: tensor<1x2xf32>, %dy: tensor<8x8xbf16>) {
  // expected-error @+1 {{all of {x, dy} have same type}}
  %a = "qat.fake_quant_grad"(%x, %r, %dy) {scheme = #qat.scheme<format = "int8">} : (tensor<8x8xf32>, tensor<1x2xf32>, tensor<8x8xbf16>) -> tensor<8x8xf32>
  return
}

// -----

func.func @f(%x: tensor<8x8xf32>, %r: tensor<2x2xf32>, %dy: tensor<8x8xf32>) {
  // expected-error @+1 {{range must be 'tensor<1x2xf32>' ([groups, −min/max]), got 'tensor<2x2xf32>'}}
  %a = qat.fake_quant_grad %x range %r grad %dy {scheme = #qat.scheme<format = "int8">} : tensor<8x8xf32>, tensor<2x2xf32>
  return
}

// -----

func.func @f(%s: tensor<4xf32>) {
  // expected-error @+1 {{state must be [groups, 2] (−min, max), got 'tensor<4xf32>'}}
  %a = qat.ema %s, %s {momentum = 0.9 : f64} : tensor<4xf32>
  return
}

// -----

func.func @f(%s: tensor<1x2xf32>) {
  // expected-error @+1 {{momentum must be in [0, 1], got 1.500000e+00}}
  %a = qat.ema %s, %s {momentum = 1.5 : f64} : tensor<1x2xf32>
  return
}

// -----

func.func @f(%w: tensor<8x8xf32>) {
  // expected-error @+1 {{outlier columns need an integer format, got 'fp8_e4m3'}}
  %a = qat.observe %w {scheme = #qat.scheme<format = "fp8_e4m3", outlier = 6.0>} : tensor<8x8xf32> -> tensor<1x2xf32>
  return
}

// -----

func.func @f(%w: tensor<8x8xf32>) {
  // expected-error @+1 {{outlier columns need tensor or channel granularity, got block}}
  %a = qat.observe %w {scheme = #qat.scheme<format = "int8", granularity = "block", block = 4, outlier = 6.0>} : tensor<8x8xf32> -> tensor<16x2xf32>
  return
}

// -----

func.func @f(%w: tensor<8x8xf32>) {
  // expected-error @+1 {{outlier threshold must be finite and >= 0 (0: none), got -1.000000e+00}}
  %a = qat.observe %w {scheme = #qat.scheme<format = "int8", outlier = -1.0>} : tensor<8x8xf32> -> tensor<1x2xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>, %r: tensor<1x2xf32>) {
  // expected-error @+1 {{'qat.fake_quant' op needs the columns operand (per-column ranges) for its scheme's outlier threshold}}
  %a = qat.fake_quant %x range %r {scheme = #qat.scheme<format = "int8", outlier = 6.0>} : tensor<4x8xf32>, tensor<1x2xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>, %c: tensor<8x2xf32>) {
  // expected-error @+1 {{'qat.observe' op has columns but its scheme has no outlier threshold}}
  %a = qat.observe %x columns %c {scheme = #qat.scheme<format = "int8">} : tensor<4x8xf32>, tensor<8x2xf32> -> tensor<1x2xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>, %r: tensor<1x2xf32>, %dy: tensor<4x8xf32>, %c: tensor<4x2xf32>) {
  // expected-error @+1 {{'qat.fake_quant_grad' op columns must be 'tensor<8x2xf32>' ([last dimension, −min/max]), got 'tensor<4x2xf32>'}}
  %a = qat.fake_quant_grad %x range %r grad %dy columns %c {scheme = #qat.scheme<format = "int8", outlier = 6.0>} : tensor<4x8xf32>, tensor<1x2xf32>, tensor<4x2xf32>
  return
}

// -----

func.func @f(%c: tensor<8192xi8>, %q: tensor<256xi8>, %s: tensor<1xf32>, %m: tensor<f32>) {
  // expected-error @+1 {{'qat.dequantize_nf4' op absmax_format must be "int8" or "fp8_e4m3", got "fp8"}}
  %w = qat.dequantize_nf4 %c, %q, %s, %m {block = 64 : i64, absmax_format = "fp8"} : tensor<8192xi8>, tensor<256xi8>, tensor<1xf32>, tensor<f32> -> tensor<128x128xf32>
  return
}

// -----

func.func @f(%c: tensor<8192xi8>, %q: tensor<256xi8>, %s: tensor<1xf32>, %m: tensor<f32>) {
  // expected-error @+1 {{'qat.dequantize_nf4' op blocks of 48 must divide the last dimension of 'tensor<128x128xf32>'}}
  %w = qat.dequantize_nf4 %c, %q, %s, %m {block = 48 : i64} : tensor<8192xi8>, tensor<256xi8>, tensor<1xf32>, tensor<f32> -> tensor<128x128xf32>
  return
}

// -----

func.func @f(%c: tensor<8000xi8>, %q: tensor<256xi8>, %s: tensor<1xf32>, %m: tensor<f32>) {
  // expected-error @+1 {{'qat.dequantize_nf4' op codes (two per byte) must be 1-D of 8192 elements for 'tensor<128x128xf32>', got 'tensor<8000xi8>'}}
  %w = qat.dequantize_nf4 %c, %q, %s, %m {block = 64 : i64} : tensor<8000xi8>, tensor<256xi8>, tensor<1xf32>, tensor<f32> -> tensor<128x128xf32>
  return
}

// -----

func.func @f(%c: tensor<8192xi8>, %q: tensor<256xi8>, %s: tensor<2xf32>, %m: tensor<f32>) {
  // expected-error @+1 {{'qat.dequantize_nf4' op absmax_scale (one per 256 blocks) must be 1-D of 1 elements for 'tensor<128x128xf32>', got 'tensor<2xf32>'}}
  %w = qat.dequantize_nf4 %c, %q, %s, %m {block = 64 : i64} : tensor<8192xi8>, tensor<256xi8>, tensor<2xf32>, tensor<f32> -> tensor<128x128xf32>
  return
}

// -----

// A piece of a weight split by tensor parallelism: all three placing
// attributes, inside the whole weight, and the whole weight's scales.
func.func @f(%c: tensor<128x32xi8>, %q: tensor<128x1xi8>, %s: tensor<1xf32>, %m: tensor<f32>) {
  // expected-error @+1 {{'qat.dequantize_nf4' op whole_shape, chunks and piece_offset are given together}}
  %w = qat.dequantize_nf4 %c, %q, %s, %m {block = 64 : i64, whole_shape = array<i64: 128, 128>} : tensor<128x32xi8>, tensor<128x1xi8>, tensor<1xf32>, tensor<f32> -> tensor<128x64xf32>
  return
}

// -----

func.func @f(%c: tensor<128x32xi8>, %q: tensor<128x1xi8>, %s: tensor<1xf32>, %m: tensor<f32>) {
  // expected-error @+1 {{'qat.dequantize_nf4' op the piece 128x64 at piece_offset 0x128 in chunks 1x1 does not lie within whole_shape 128x128 (dimension 1)}}
  %w = qat.dequantize_nf4 %c, %q, %s, %m {block = 64 : i64, whole_shape = array<i64: 128, 128>, chunks = array<i64: 1, 1>, piece_offset = array<i64: 0, 128>} : tensor<128x32xi8>, tensor<128x1xi8>, tensor<1xf32>, tensor<f32> -> tensor<128x64xf32>
  return
}

// -----

func.func @f(%c: tensor<128x32xi8>, %q: tensor<128x1xi8>, %s: tensor<1xf32>, %m: tensor<f32>) {
  // expected-error @+1 {{'qat.dequantize_nf4' op the piece 128x64 at piece_offset 0x32 of whole_shape 128x128 is not in whole blocks of 64 and whole bytes of codes}}
  %w = qat.dequantize_nf4 %c, %q, %s, %m {block = 64 : i64, whole_shape = array<i64: 128, 128>, chunks = array<i64: 1, 1>, piece_offset = array<i64: 0, 32>} : tensor<128x32xi8>, tensor<128x1xi8>, tensor<1xf32>, tensor<f32> -> tensor<128x64xf32>
  return
}

// -----

func.func @f(%c: tensor<128x32xi8>, %q: tensor<128x1xi8>, %s: tensor<1xf32>, %m: tensor<f32>) {
  // expected-error @+1 {{'qat.dequantize_nf4' op absmax_scale (one per 256 blocks) must be 1-D of 2 elements for 'tensor<128x64xf32>', got 'tensor<1xf32>'}}
  %w = qat.dequantize_nf4 %c, %q, %s, %m {block = 64 : i64, whole_shape = array<i64: 256, 128>, chunks = array<i64: 1, 1>, piece_offset = array<i64: 0, 64>} : tensor<128x32xi8>, tensor<128x1xi8>, tensor<1xf32>, tensor<f32> -> tensor<128x64xf32>
  return
}

// -----

func.func @f(%c: tensor<128x16xi8>, %q: tensor<128x1xi8>, %s: tensor<1xf32>, %m: tensor<f32>) {
  // expected-error @+1 {{'qat.dequantize_nf4' op codes (two per byte) must hold 4096 elements for 'tensor<128x64xf32>', got 'tensor<128x16xi8>'}}
  %w = qat.dequantize_nf4 %c, %q, %s, %m {block = 64 : i64, whole_shape = array<i64: 128, 128>, chunks = array<i64: 1, 1>, piece_offset = array<i64: 0, 64>} : tensor<128x16xi8>, tensor<128x1xi8>, tensor<1xf32>, tensor<f32> -> tensor<128x64xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{scheme must be per tensor, symmetric, minmax or delayed, without outlier columns}}
  %a = qat.quantize_grad %x {scheme = #qat.scheme<format = "fp8_e5m2", granularity = "channel", axis = 1>} : tensor<4x8xf32>
  return
}

// -----

func.func @f(%w: tensor<8x8xf32>) {
  // expected-error @+1 {{delayed scaling needs an fp8 format, got 'int8'}}
  %a = qat.observe %w {scheme = #qat.scheme<format = "int8", observer = "delayed", history = 4>} : tensor<8x8xf32> -> tensor<1x2xf32>
  return
}

// -----

func.func @f(%w: tensor<8x8xf32>) {
  // expected-error @+1 {{delayed scaling is per tensor or per slice of dimension 0 (channel axis 0: an amax history per expert), got granularity channel axis 1}}
  %a = qat.observe %w {scheme = #qat.scheme<format = "fp8_e4m3", granularity = "channel", axis = 1, observer = "delayed", history = 4>} : tensor<8x8xf32> -> tensor<8x2xf32>
  return
}

// -----

func.func @f(%w: tensor<8x8xf32>) {
  // expected-error @+1 {{delayed scaling is per tensor or per slice of dimension 0 (channel axis 0: an amax history per expert), got granularity block}}
  %a = qat.observe %w {scheme = #qat.scheme<format = "fp8_e4m3", granularity = "block", block = 4, observer = "delayed", history = 4>} : tensor<8x8xf32> -> tensor<16x2xf32>
  return
}

// -----

func.func @f(%w: tensor<8x8xf32>) {
  // expected-error @+1 {{delayed scaling's amax history length must be >= 1, got 0}}
  %a = qat.observe %w {scheme = #qat.scheme<format = "fp8_e4m3", observer = "delayed">} : tensor<8x8xf32> -> tensor<1x2xf32>
  return
}

// -----

func.func @f(%w: tensor<8x8xf32>) {
  // expected-error @+1 {{delayed scaling's margin must be >= 0, got -1}}
  %a = qat.observe %w {scheme = #qat.scheme<format = "fp8_e4m3", observer = "delayed", history = 4, margin = -1>} : tensor<8x8xf32> -> tensor<1x2xf32>
  return
}

// -----

func.func @f(%w: tensor<8x8xf32>) {
  // expected-error @+1 {{unknown amax algorithm 'mean' (expected max or most_recent)}}
  %a = qat.observe %w {scheme = #qat.scheme<format = "fp8_e4m3", observer = "delayed", history = 4, algo = "mean">} : tensor<8x8xf32> -> tensor<1x2xf32>
  return
}

// -----

func.func @f(%w: tensor<8x8xf32>) {
  // expected-error @+1 {{history, margin and algo need the delayed observer}}
  %a = qat.observe %w {scheme = #qat.scheme<format = "fp8_e4m3", history = 4>} : tensor<8x8xf32> -> tensor<1x2xf32>
  return
}

// -----

func.func @f(%s: tensor<4xf32>, %o: tensor<1x2xf32>) {
  // expected-error @+1 {{'qat.amax_history' op state must be tensor<5xf32> or tensor<Gx5xf32> (per group: the range, then 4 amaxes), got 'tensor<4xf32>'}}
  %a = qat.amax_history %s, %o {scheme = #qat.scheme<format = "fp8_e4m3", observer = "delayed", history = 4>} : tensor<4xf32>, tensor<1x2xf32>
  return
}

// -----

func.func @f(%s: tensor<5xf32>, %o: tensor<2x2xf32>) {
  // expected-error @+1 {{'qat.amax_history' op observed must be 'tensor<1x2xf32>' (a range per history), got 'tensor<2x2xf32>'}}
  %a = qat.amax_history %s, %o {scheme = #qat.scheme<format = "fp8_e4m3", observer = "delayed", history = 4>} : tensor<5xf32>, tensor<2x2xf32>
  return
}

// -----

func.func @f(%s: tensor<3x5xf32>, %o: tensor<1x2xf32>) {
  // expected-error @+1 {{'qat.delayed_range' op observed must be 'tensor<3x2xf32>' (a range per history), got 'tensor<1x2xf32>'}}
  %a = qat.delayed_range %s, %o {scheme = #qat.scheme<format = "fp8_e4m3", observer = "delayed", history = 4>} : tensor<3x5xf32>, tensor<1x2xf32>
  return
}

// -----

func.func @f(%s: tensor<3x4xf32>, %o: tensor<3x2xf32>) {
  // expected-error @+1 {{'qat.amax_history' op state must be tensor<5xf32> or tensor<Gx5xf32> (per group: the range, then 4 amaxes), got 'tensor<3x4xf32>'}}
  %a = qat.amax_history %s, %o {scheme = #qat.scheme<format = "fp8_e4m3", observer = "delayed", history = 4>} : tensor<3x4xf32>, tensor<3x2xf32>
  return
}

// -----

func.func @f(%s: tensor<5xf32>, %o: tensor<1x2xf32>) {
  // expected-error @+1 {{'qat.delayed_range' op needs a delayed scheme, got observer 'minmax'}}
  %a = qat.delayed_range %s, %o {scheme = #qat.scheme<format = "fp8_e4m3">} : tensor<5xf32>, tensor<1x2xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'qat.quantize_grad' op needs the state operand (dY's amax history) for its delayed scheme}}
  %a = qat.quantize_grad %x {scheme = #qat.scheme<format = "fp8_e5m2", observer = "delayed", history = 4>} : tensor<4x8xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>, %s: tensor<5xf32>) {
  // expected-error @+1 {{'qat.quantize_grad' op has a state operand but its scheme is not delayed}}
  %a = qat.quantize_grad %x state %s {scheme = #qat.scheme<format = "fp8_e5m2">} : tensor<4x8xf32>, tensor<5xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>, %r: tensor<1x2xf32>) {
  // expected-error @+1 {{scheme must be fp8 (fp8_e4m3 or fp8_e5m2), symmetric, per tensor or per slice of dimension 0 (channel axis 0), without outlier columns}}
  %c, %s = qat.quantize_fp8 %x range %r {scheme = #qat.scheme<format = "int8">} : tensor<4x8xf32>, tensor<1x2xf32> -> tensor<4x8xf8E4M3FN>, tensor<1xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>, %r: tensor<8x2xf32>) {
  // expected-error @+1 {{scheme must be fp8 (fp8_e4m3 or fp8_e5m2), symmetric, per tensor or per slice of dimension 0 (channel axis 0), without outlier columns}}
  %c, %s = qat.quantize_fp8 %x range %r {scheme = #qat.scheme<format = "fp8_e4m3", granularity = "channel", axis = 1>} : tensor<4x8xf32>, tensor<8x2xf32> -> tensor<4x8xf8E4M3FN>, tensor<1xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>, %r: tensor<1x2xf32>) {
  // expected-error @+1 {{codes must be 'tensor<4x8xf8E5M2>' (x's shape in the scheme's format), got 'tensor<4x8xf8E4M3FN>'}}
  %c, %s = qat.quantize_fp8 %x range %r {scheme = #qat.scheme<format = "fp8_e5m2">} : tensor<4x8xf32>, tensor<1x2xf32> -> tensor<4x8xf8E4M3FN>, tensor<1xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>, %r: tensor<2x2xf32>) {
  // expected-error @+1 {{range must be 'tensor<1x2xf32>'}}
  %c, %s = qat.quantize_fp8 %x range %r {scheme = #qat.scheme<format = "fp8_e4m3">} : tensor<4x8xf32>, tensor<2x2xf32> -> tensor<4x8xf8E4M3FN>, tensor<1xf32>
  return
}

// -----

func.func @f(%a: tensor<4x8xf8E5M2>, %b: tensor<8x16xf8E5M2>, %s: tensor<1xf32>) {
  // expected-error @+1 {{multiplies two E5M2 operands, which no fp8 tensor core does}}
  %c = qat.matmul_fp8 %a, %s, %b, %s : tensor<4x8xf8E5M2>, tensor<1xf32>, tensor<8x16xf8E5M2>, tensor<1xf32> -> tensor<4x16xbf16>
  return
}

// -----

func.func @f(%a: tensor<4x8xf8E4M3FN>, %b: tensor<16x16xf8E5M2>, %s: tensor<1xf32>) {
  // expected-error @+1 {{contraction dims differ: a 'tensor<4x8xf8E4M3FN>' has K = 8, b 'tensor<16x16xf8E5M2>' has K = 16}}
  %c = qat.matmul_fp8 %a, %s, %b, %s : tensor<4x8xf8E4M3FN>, tensor<1xf32>, tensor<16x16xf8E5M2>, tensor<1xf32> -> tensor<4x16xbf16>
  return
}

// -----

func.func @f(%a: tensor<4x8xf8E4M3FN>, %b: tensor<8x16xf8E5M2>, %s: tensor<1xf32>) {
  // expected-error @+1 {{result must have shape [4, 16], got 'tensor<4x8xbf16>'}}
  %c = qat.matmul_fp8 %a, %s, %b, %s : tensor<4x8xf8E4M3FN>, tensor<1xf32>, tensor<8x16xf8E5M2>, tensor<1xf32> -> tensor<4x8xbf16>
  return
}

// -----

func.func @f(%a: tensor<4x8xf8E4M3FN>, %b: tensor<8x16xf8E5M2>, %s: tensor<2xf32>) {
  // expected-error @+1 {{scales must be tensor<1xf32>}}
  %c = qat.matmul_fp8 %a, %s, %b, %s : tensor<4x8xf8E4M3FN>, tensor<2xf32>, tensor<8x16xf8E5M2>, tensor<2xf32> -> tensor<4x16xbf16>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>, %r: tensor<4x2xf32>) {
  // expected-error @+1 {{scale must be 'tensor<4xf32>' (one per group), got 'tensor<1xf32>'}}
  %c, %s = qat.quantize_fp8 %x range %r {scheme = #qat.scheme<format = "fp8_e4m3", granularity = "channel", axis = 0>} : tensor<4x8xf32>, tensor<4x2xf32> -> tensor<4x8xf8E4M3FN>, tensor<1xf32>
  return
}

// -----

func.func @f(%x: tensor<8x16xf8E5M2>, %o: tensor<3xi32>, %w: tensor<2x16x4xf8E5M2>, %s: tensor<1xf32>) {
  // expected-error @+1 {{multiplies two E5M2 operands, which no fp8 tensor core does}}
  %y = qat.grouped_matmul_fp8 %x, %s, %o, %w, %s : tensor<8x16xf8E5M2>, tensor<1xf32>, tensor<3xi32>, tensor<2x16x4xf8E5M2>, tensor<1xf32> -> tensor<8x4xbf16>
  return
}

// -----

func.func @f(%x: tensor<8x16xf8E4M3FN>, %o: tensor<3xi32>, %w: tensor<2x16x4xf8E4M3FN>, %s: tensor<1xf32>) {
  // expected-error @+1 {{w 'tensor<2x16x4xf8E4M3FN>' does not match x 'tensor<8x16xf8E4M3FN>' and 2 groups (stacked weights are [G, F, K] with transpose_b)}}
  %y = qat.grouped_matmul_fp8 %x, %s, %o, %w, %s {transpose_b} : tensor<8x16xf8E4M3FN>, tensor<1xf32>, tensor<3xi32>, tensor<2x16x4xf8E4M3FN>, tensor<1xf32> -> tensor<8x4xbf16>
  return
}

// -----

func.func @f(%x: tensor<8x16xf8E4M3FN>, %o: tensor<3xi32>, %w: tensor<2x16x4xf8E4M3FN>, %s: tensor<1xf32>, %t: tensor<3xf32>) {
  // expected-error @+1 {{w_scale must be tensor<1xf32> or one per group (tensor<2xf32>), got 'tensor<3xf32>'}}
  %y = qat.grouped_matmul_fp8 %x, %s, %o, %w, %t : tensor<8x16xf8E4M3FN>, tensor<1xf32>, tensor<3xi32>, tensor<2x16x4xf8E4M3FN>, tensor<3xf32> -> tensor<8x4xbf16>
  return
}

// -----

func.func @f(%x: tensor<8x16xf8E4M3FN>, %o: tensor<1xi32>, %w: tensor<2x16x4xf8E4M3FN>, %s: tensor<1xf32>) {
  // expected-error @+1 {{offsets must be [G + 1] for G >= 1 groups, got 'tensor<1xi32>'}}
  %y = qat.grouped_matmul_fp8 %x, %s, %o, %w, %s : tensor<8x16xf8E4M3FN>, tensor<1xf32>, tensor<1xi32>, tensor<2x16x4xf8E4M3FN>, tensor<1xf32> -> tensor<8x4xbf16>
  return
}

// -----

func.func @f(%x: tensor<8x16xf8E4M3FN>, %o: tensor<3xi32>, %w: tensor<2x16x4xf8E4M3FN>, %s: tensor<1xf32>) {
  // expected-error @+1 {{result must be [8, 4], got 'tensor<8x16xbf16>'}}
  %y = qat.grouped_matmul_fp8 %x, %s, %o, %w, %s : tensor<8x16xf8E4M3FN>, tensor<1xf32>, tensor<3xi32>, tensor<2x16x4xf8E4M3FN>, tensor<1xf32> -> tensor<8x16xbf16>
  return
}

// -----

func.func @f(%x: tensor<8x16xf8E4M3FN>, %dy: tensor<6x4xf8E5M2>, %o: tensor<3xi32>, %s: tensor<1xf32>) {
  // expected-error @+1 {{x [M, K] and dy [M, F] must have the same rows, got 'tensor<8x16xf8E4M3FN>' and 'tensor<6x4xf8E5M2>'}}
  %dw = qat.grouped_matmul_weight_grad_fp8 %x, %s, %dy, %s, %o : tensor<8x16xf8E4M3FN>, tensor<1xf32>, tensor<6x4xf8E5M2>, tensor<1xf32>, tensor<3xi32> -> tensor<2x16x4xbf16>
  return
}

// -----

func.func @f(%x: tensor<8x16xf8E4M3FN>, %dy: tensor<8x4xf8E5M2>, %o: tensor<3xi32>, %s: tensor<1xf32>) {
  // expected-error @+1 {{result must be [2, 4, 16], got 'tensor<2x16x4xbf16>'}}
  %dw = qat.grouped_matmul_weight_grad_fp8 %x, %s, %dy, %s, %o {transpose_b} : tensor<8x16xf8E4M3FN>, tensor<1xf32>, tensor<8x4xf8E5M2>, tensor<1xf32>, tensor<3xi32> -> tensor<2x16x4xbf16>
  return
}

// -----

func.func @f(%x: tensor<8x16xf8E5M2>, %dy: tensor<8x4xf8E5M2>, %o: tensor<3xi32>, %s: tensor<1xf32>) {
  // expected-error @+1 {{multiplies two E5M2 operands, which no fp8 tensor core does}}
  %dw = qat.grouped_matmul_weight_grad_fp8 %x, %s, %dy, %s, %o : tensor<8x16xf8E5M2>, tensor<1xf32>, tensor<8x4xf8E5M2>, tensor<1xf32>, tensor<3xi32> -> tensor<2x16x4xbf16>
  return
}

// -----

func.func @f(%x: tensor<8x16xf32>, %o: tensor<3xi32>, %s: tensor<17xf32>) {
  // expected-error @+1 {{state must hold 2 histories, one per group of rows, got 'tensor<17xf32>'}}
  %y = qat.quantize_grad %x state %s offsets %o {scheme = #qat.scheme<format = "fp8_e5m2", observer = "delayed", history = 16>} : tensor<8x16xf32>, tensor<17xf32> offsets tensor<3xi32>
  return
}

// -----

func.func @f(%x: tensor<8x16xf32>, %o: tensor<3xi32>, %s: tensor<3x17xf32>) {
  // expected-error @+1 {{state must hold 2 histories, one per group of rows, got 'tensor<3x17xf32>'}}
  %y = qat.quantize_grad %x state %s offsets %o {scheme = #qat.scheme<format = "fp8_e5m2", observer = "delayed", history = 16>} : tensor<8x16xf32>, tensor<3x17xf32> offsets tensor<3xi32>
  return
}

// -----

func.func @f(%x: tensor<8x16xf32>, %s: tensor<2x17xf32>) {
  // expected-error @+1 {{state must hold one history (no offsets), got 'tensor<2x17xf32>'}}
  %y = qat.quantize_grad %x state %s {scheme = #qat.scheme<format = "fp8_e5m2", observer = "delayed", history = 16>} : tensor<8x16xf32>, tensor<2x17xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8x16xf32>, %o: tensor<3xi32>) {
  // expected-error @+1 {{with offsets, x must be the rows [M, F], got 'tensor<2x8x16xf32>'}}
  %y = qat.quantize_grad %x offsets %o {scheme = #qat.scheme<format = "fp8_e5m2">} : tensor<2x8x16xf32> offsets tensor<3xi32>
  return
}

// -----

func.func @f(%x: tensor<8x16xf32>, %r: tensor<3x2xf32>, %o: tensor<3xi32>) {
  // expected-error @+1 {{range must be 'tensor<2x2xf32>' (one per group), got 'tensor<3x2xf32>'}}
  %c, %s = qat.quantize_fp8 %x range %r offsets %o {scheme = #qat.scheme<format = "fp8_e4m3">} : tensor<8x16xf32>, tensor<3x2xf32> offsets tensor<3xi32> -> tensor<8x16xf8E4M3FN>, tensor<2xf32>
  return
}

// -----

func.func @f(%x: tensor<8x16xf32>, %r: tensor<8x2xf32>, %o: tensor<3xi32>) {
  // expected-error @+1 {{with offsets, x must be the rows [M, K] and the scheme per tensor (per group of rows), got 'tensor<8x16xf32>'}}
  %c, %s = qat.quantize_fp8 %x range %r offsets %o {scheme = #qat.scheme<format = "fp8_e4m3", granularity = "channel", axis = 0>} : tensor<8x16xf32>, tensor<8x2xf32> offsets tensor<3xi32> -> tensor<8x16xf8E4M3FN>, tensor<8xf32>
  return
}

// -----

func.func @f(%r: tensor<8x2xf32>, %o: tensor<3xi32>) {
  // expected-error @+1 {{result must be 'tensor<2x2xf32>', got 'tensor<3x2xf32>'}}
  %g = qat.group_ranges %r, %o : tensor<8x2xf32>, tensor<3xi32> -> tensor<3x2xf32>
  return
}

// -----

func.func @f(%r: tensor<8x3xf32>, %o: tensor<3xi32>) {
  // expected-error @+1 {{rows must be [M, 2] ranges, got 'tensor<8x3xf32>'}}
  %g = qat.group_ranges %r, %o : tensor<8x3xf32>, tensor<3xi32> -> tensor<2x2xf32>
  return
}

// -----

func.func @f(%g: tensor<3x2xf32>, %o: tensor<3xi32>) {
  // expected-error @+1 {{groups must be 'tensor<2x2xf32>', got 'tensor<3x2xf32>'}}
  %r = qat.row_ranges %g, %o : tensor<3x2xf32>, tensor<3xi32> -> tensor<8x2xf32>
  return
}

// -----

func.func @f(%g: tensor<2x2xf32>, %o: tensor<3xi32>) {
  // expected-error @+1 {{result must be [M, 2] ranges, got 'tensor<8xf32>'}}
  %r = qat.row_ranges %g, %o : tensor<2x2xf32>, tensor<3xi32> -> tensor<8xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{batch_ranks must be >= 1, and 1 without a delayed scheme, got 2}}
  %a = qat.quantize_grad %x {scheme = #qat.scheme<format = "fp8_e5m2">, batch_ranks = 2} : tensor<4x8xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>, %s: tensor<5xf32>) {
  // expected-error @+1 {{batch_ranks must be >= 1, and 1 without a delayed scheme, got 0}}
  %a = qat.quantize_grad %x state %s {scheme = #qat.scheme<format = "fp8_e5m2", observer = "delayed", history = 4>, batch_ranks = 0} : tensor<4x8xf32>, tensor<5xf32>
  return
}
