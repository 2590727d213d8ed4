// RUN: llmc-opt %s -split-input-file -verify-diagnostics
// Every qat verifier diagnostic.

func.func @f(%w: tensor<8x8xf32>) {
  // expected-error @+1 {{unknown format 'int3' (expected int8, int4, fp8_e4m3, fp8_e5m2 or nf4)}}
  %a = qat.fake_quant %w {scheme = #qat.scheme<format = "int3">} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return
}

// -----

func.func @f(%w: tensor<8x8xf32>) {
  // expected-error @+1 {{unknown granularity 'row' (expected tensor, channel or block)}}
  %a = qat.fake_quant %w {scheme = #qat.scheme<format = "int8", granularity = "row">} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return
}

// -----

func.func @f(%w: tensor<8x8xf32>) {
  // expected-error @+1 {{block size 0 is only valid (and then required, >= 1) with block granularity}}
  %a = qat.fake_quant %w {scheme = #qat.scheme<format = "int4", granularity = "block">} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return
}

// -----

func.func @f(%w: tensor<8x8xf32>) {
  // expected-error @+1 {{block size 4 is only valid (and then required, >= 1) with block granularity}}
  %a = qat.fake_quant %w {scheme = #qat.scheme<format = "int4", block = 4>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return
}

// -----

func.func @f(%w: tensor<8x8xf32>) {
  // expected-error @+1 {{channel axis must be >= 0, got -1}}
  %a = qat.fake_quant %w {scheme = #qat.scheme<format = "int8", granularity = "channel", axis = -1>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return
}

// -----

func.func @f(%w: tensor<8x8xf32>) {
  // expected-error @+1 {{format 'nf4' is symmetric only}}
  %a = qat.fake_quant %w {scheme = #qat.scheme<format = "nf4", granularity = "block", block = 8, symmetric = false>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return
}

// -----

func.func @f(%w: tensor<8x8xf32>) {
  // expected-error @+1 {{unknown observer 'percentile' (expected minmax or ema)}}
  %a = qat.fake_quant %w {scheme = #qat.scheme<format = "int8", observer = "percentile">} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return
}

// -----

func.func @f(%w: tensor<8x8xf32>, %s: tensor<1x2xf32>) {
  // expected-error @+1 {{ema momentum must be in (0, 1), got 1.000000e+00}}
  %a, %b = qat.fake_quant %w state %s {scheme = #qat.scheme<format = "int8", observer = "ema", momentum = 1.0>} : (tensor<8x8xf32>, tensor<1x2xf32>) -> (tensor<8x8xf32>, tensor<1x2xf32>)
  return
}

// -----

func.func @f(%w: tensor<8x8xf32>) {
  // expected-error @+1 {{result type must equal the input type 'tensor<8x8xf32>'}}
  %a = qat.fake_quant %w {scheme = #qat.scheme<format = "int8">} : (tensor<8x8xf32>) -> tensor<8x8xbf16>
  return
}

// -----

func.func @f(%w: tensor<8x8xf32>) {
  // expected-error @+1 {{channel axis 2 is out of range for rank 2}}
  %a = qat.fake_quant %w {scheme = #qat.scheme<format = "int8", granularity = "channel", axis = 2>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return
}

// -----

func.func @f(%w: tensor<8x12xf32>) {
  // expected-error @+1 {{block size 8 does not divide the last dimension (12)}}
  %a = qat.fake_quant %w {scheme = #qat.scheme<format = "int4", granularity = "block", block = 8>} : (tensor<8x12xf32>) -> tensor<8x12xf32>
  return
}

// -----

func.func @f(%w: tensor<8x8xf32>) {
  // expected-error @+1 {{an ema observer needs a state operand and a new_state result}}
  %a = qat.fake_quant %w {scheme = #qat.scheme<format = "int8", observer = "ema">} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return
}

// -----

func.func @f(%w: tensor<8x8xf32>, %s: tensor<1x2xf32>) {
  // expected-error @+1 {{only an ema observer carries state}}
  %a, %b = qat.fake_quant %w state %s {scheme = #qat.scheme<format = "int8">} : (tensor<8x8xf32>, tensor<1x2xf32>) -> (tensor<8x8xf32>, tensor<1x2xf32>)
  return
}

// -----

func.func @f(%w: tensor<8x8xf32>, %s: tensor<1x2xf32>) {
  // expected-error @+1 {{observer state must be 'tensor<8x2xf32>' ([groups, min/max])}}
  %a, %b = qat.fake_quant %w state %s {scheme = #qat.scheme<format = "int8", granularity = "channel", observer = "ema">} : (tensor<8x8xf32>, tensor<1x2xf32>) -> (tensor<8x8xf32>, tensor<1x2xf32>)
  return
}
