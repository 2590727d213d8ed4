// RUN: llmc-opt %s -split-input-file -verify-diagnostics
// Every llm verifier and shape-inference diagnostic.

// expected-error @+1 {{parameter name must not be empty}}
func.func @f(%w: tensor<4xf32> {llm.param = #llm.param<name = "", init = "zeros">}) { return }

// -----

// expected-error @+1 {{unknown initializer 'gaussian'}}
func.func @f(%w: tensor<4xf32> {llm.param = #llm.param<name = "w", init = "gaussian">}) { return }

// -----

// expected-error @+1 {{initializer 'normal' needs scale > 0}}
func.func @f(%w: tensor<4xf32> {llm.param = #llm.param<name = "w", init = "normal">}) { return }

// -----

// expected-error @+1 {{unknown llm argument attribute 'llm.weight'}}
func.func @f(%w: tensor<4xf32> {llm.weight = 1 : i64}) { return }

// -----

// expected-error @+1 {{'llm.param' on argument 0 must be a #llm.param attribute}}
func.func @f(%w: tensor<4xf32> {llm.param = 1 : i64}) { return }

// -----

// expected-error @+1 {{parameter argument 0 must be a statically shaped float tensor (or, frozen, i8 or i32 storage), got 'tensor<4xi32>'}}
func.func @f(%w: tensor<4xi32> {llm.param = #llm.param<name = "w", init = "zeros">}) { return }

// -----

func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{needs a non-empty name}}
  %y = llm.block "" -> tensor<4xf32> {
    llm.yield %x : tensor<4xf32>
  }
  return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{body must end with llm.yield}}
  %y = llm.block "b" -> tensor<4xf32> {
    "func.return"() : () -> ()
  }
  return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{yields 1 value(s) whose types do not match its 1 result type(s)}}
  %y = llm.block "b" -> tensor<8xf32> {
    llm.yield %x : tensor<4xf32>
  }
  return
}

// -----

func.func @f(%a: tensor<4xf32>, %b: tensor<4x4xf32>) {
  // expected-error @+2 {{operand a must have rank >= 2, got 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %c = llm.matmul %a, %b : tensor<4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  return
}

// -----

func.func @f(%a: tensor<2x4x4xf32>, %b: tensor<2x2x4x4xf32>) {
  // expected-error @+2 {{operand b must be a matrix or have a's rank (3), got 2x2x4x4}}
  // expected-error @+1 {{failed to infer returned types}}
  %c = llm.matmul %a, %b : tensor<2x4x4xf32>, tensor<2x2x4x4xf32> -> tensor<2x4x4xf32>
  return
}

// -----

func.func @f(%a: tensor<4x4xf32>, %b: tensor<4x4xbf16>) {
  // expected-error @+2 {{a and b must have the same element type, got 'f32' and 'bf16'}}
  // expected-error @+1 {{failed to infer returned types}}
  %c = llm.matmul %a, %b : tensor<4x4xf32>, tensor<4x4xbf16> -> tensor<4x4xf32>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>, %b: tensor<4x4xf32>) {
  // expected-error @+2 {{contraction sizes differ: a has 8, b has 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %c = llm.matmul %a, %b : tensor<4x8xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  return
}

// -----

func.func @f(%a: tensor<2x4x4xf32>, %b: tensor<3x4x4xf32>) {
  // expected-error @+2 {{batch dimensions differ: 2 vs 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %c = llm.matmul %a, %b : tensor<2x4x4xf32>, tensor<3x4x4xf32> -> tensor<2x4x4xf32>
  return
}

// -----

func.func @f(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>) {
  // expected-error @+2 {{'llm.matmul' op inferred type(s) 'tensor<4x4xf32>' are incompatible with return type(s) of operation 'tensor<4x8xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %c = llm.matmul %a, %b : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{rhs shape 4 is not a suffix of lhs shape 4x8}}
  %c = llm.add %a, %b : tensor<4x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @f(%a: tensor<8xf32>, %b: tensor<8xbf16>) {
  // expected-error @+1 {{lhs and rhs must have the same element type, got 'f32' and 'bf16'}}
  %c = llm.mul %a, %b : tensor<8xf32>, tensor<8xbf16>
  return
}

// -----

func.func @f(%a: tensor<8xf32>) {
  // expected-error @+1 {{rate must be in [0, 1), got 1.000000e+00}}
  %c = llm.dropout %a {rate = 1.0 : f64, seed = 1 : i64} : tensor<8xf32>
  return
}

// -----

func.func @f(%a: tensor<8xf32>) {
  // expected-error @+1 {{cannot change the shape: 'tensor<8xf32>' to 'tensor<4xbf16>'}}
  %c = llm.cast %a : tensor<8xf32> to tensor<4xbf16>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{gamma must be [8] to match the last dimension of the input, got 4}}
  %y = llm.layernorm %x, %g, %g {epsilon = 1.0e-5 : f64} : tensor<2x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{epsilon must be >= 0}}
  %y = llm.layernorm %x, %g, %g {epsilon = -1.0 : f64} : tensor<2x8xf32>, tensor<8xf32>
  return
}

// -----

func.func @f(%x: tensor<f32>, %g: tensor<1xf32>) {
  // expected-error @+1 {{input must have rank >= 1}}
  %y = llm.rmsnorm %x, %g {epsilon = 1.0e-5 : f64} : tensor<f32>, tensor<1xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{epsilon must be >= 0}}
  %y = llm.rmsnorm %x, %g {epsilon = -1.0 : f64} : tensor<2x8xf32>, tensor<8xf32>
  return
}

// -----

func.func @f(%t: tensor<4x8x2xf32>, %ids: tensor<2xi32>) {
  // expected-error @+1 {{table must be [vocab, dim], got 4x8x2}}
  %y = llm.embedding %t, %ids : tensor<4x8x2xf32>, tensor<2xi32>
  return
}

// -----

func.func @f(%x: tensor<2x8x4x7xf32>) {
  // expected-error @+1 {{rope input must be [B, T, heads, head_dim] with even head_dim, got 2x8x4x7}}
  %y = llm.rope %x {theta = 10000.0 : f64} : tensor<2x8x4x7xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8x4x8xf32>) {
  // expected-error @+1 {{theta must be > 0}}
  %y = llm.rope %x {theta = 0.0 : f64} : tensor<2x8x4x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8x4x8xf32>) {
  // expected-error @+1 {{scaling_factor, low_freq_factor, high_freq_factor and original_max_positions go together (Llama 3 scaling)}}
  %y = llm.rope %x {theta = 10000.0 : f64, scaling_factor = 8.0 : f64} : tensor<2x8x4x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8x4x8xf32>) {
  // expected-error @+1 {{scaling_factor must be > 0}}
  %y = llm.rope %x {theta = 10000.0 : f64, scaling_factor = 0.0 : f64, low_freq_factor = 1.0 : f64, high_freq_factor = 4.0 : f64, original_max_positions = 64 : i64} : tensor<2x8x4x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8x4x8xf32>) {
  // expected-error @+1 {{low_freq_factor (4.000000e+00) and high_freq_factor (4.000000e+00) must satisfy 0 < low < high}}
  %y = llm.rope %x {theta = 10000.0 : f64, scaling_factor = 8.0 : f64, low_freq_factor = 4.0 : f64, high_freq_factor = 4.0 : f64, original_max_positions = 64 : i64} : tensor<2x8x4x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8x4x8xf32>) {
  // expected-error @+1 {{original_max_positions must be >= 1}}
  %y = llm.rope %x {theta = 10000.0 : f64, scaling_factor = 8.0 : f64, low_freq_factor = 1.0 : f64, high_freq_factor = 4.0 : f64, original_max_positions = 0 : i64} : tensor<2x8x4x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8x4x8xf32>, %pos: tensor<2x4xi32>) {
  // expected-error @+1 {{positions must be [2, 8], got 2x4}}
  %y = llm.rope %x positions %pos : tensor<2x4xi32> {theta = 10000.0 : f64} : tensor<2x8x4x8xf32>
  return
}

// -----

func.func @f(%q: tensor<2x8x32xf32>, %k: tensor<2x8x4x8xf32>) {
  // expected-error @+1 {{q and k must be [B, T, heads, head_dim], got 2x8x32 and 2x8x4x8}}
  %o, %l = llm.attention %q, %k, %k {scale = 1.0 : f64} : tensor<2x8x32xf32>, tensor<2x8x4x8xf32>
  return
}

// -----

func.func @f(%q: tensor<2x8x4x8xf32>, %k: tensor<2x8x4x8xbf16>) {
  // expected-error @+1 {{q and k must have the same element type, got 'f32' and 'bf16'}}
  %o, %l = llm.attention %q, %k, %k {scale = 1.0 : f64} : tensor<2x8x4x8xf32>, tensor<2x8x4x8xbf16>
  return
}

// -----

func.func @f(%q: tensor<2x8x4x8xf32>, %k: tensor<3x8x4x8xf32>) {
  // expected-error @+1 {{q batch 2 differs from k batch 3}}
  %o, %l = llm.attention %q, %k, %k {scale = 1.0 : f64} : tensor<2x8x4x8xf32>, tensor<3x8x4x8xf32>
  return
}

// -----

func.func @f(%q: tensor<2x8x4x8xf32>, %k: tensor<2x8x4x16xf32>) {
  // expected-error @+1 {{q head_dim 8 differs from k head_dim 16}}
  %o, %l = llm.attention %q, %k, %k {scale = 1.0 : f64} : tensor<2x8x4x8xf32>, tensor<2x8x4x16xf32>
  return
}

// -----

func.func @f(%q: tensor<2x8x4x8xf32>, %k: tensor<2x8x3x8xf32>) {
  // expected-error @+1 {{query heads (4) must be a multiple of kv heads (3)}}
  %o, %l = llm.attention %q, %k, %k {scale = 1.0 : f64} : tensor<2x8x4x8xf32>, tensor<2x8x3x8xf32>
  return
}

// -----

func.func @f(%q: tensor<2x8x4x8xf32>, %k: tensor<2x4x4x8xf32>) {
  // expected-error @+1 {{causal attention needs equal q and k lengths, got 8 and 4}}
  %o, %l = llm.attention %q, %k, %k {causal, scale = 1.0 : f64} : tensor<2x8x4x8xf32>, tensor<2x4x4x8xf32>
  return
}

// -----

func.func @f(%q: tensor<2x8x4x8xf32>, %s: tensor<2x4xi32>) {
  // expected-error @+1 {{segment_ids must be [2, 8] with equal q and k lengths, got 2x4}}
  %o, %l = llm.attention %q, %q, %q segments %s : tensor<2x4xi32> {scale = 1.0 : f64} : tensor<2x8x4x8xf32>, tensor<2x8x4x8xf32>
  return
}

// -----

func.func @f(%q: tensor<2x8x4x8xf32>) {
  // expected-error @+1 {{scale must be > 0}}
  %o, %l = llm.attention %q, %q, %q {scale = 0.0 : f64} : tensor<2x8x4x8xf32>, tensor<2x8x4x8xf32>
  return
}

// -----

func.func @f(%q: tensor<2x8x4x8xf32>, %lse: tensor<2x8x4xf32>) {
  // expected-error @+1 {{lse must be 'tensor<2x4x8xf32>', got 'tensor<2x8x4xf32>'}}
  %a, %b, %c = llm.attention_grad %q, %q, %q, %q, %lse, %q {scale = 1.0 : f64} : tensor<2x8x4x8xf32>, tensor<2x8x4x8xf32>, tensor<2x8x4xf32>
  return
}

// -----

func.func @f(%q: tensor<2x8x4x8xf32>, %lse: tensor<2x4x8xf32>) {
  // expected-error @+1 {{scale must be > 0}}
  %a, %b, %c = llm.attention_grad %q, %q, %q, %q, %lse, %q {scale = -1.0 : f64} : tensor<2x8x4x8xf32>, tensor<2x8x4x8xf32>, tensor<2x4x8xf32>
  return
}

// -----

func.func @f(%qkv: tensor<2x8x4x16xf32>) {
  // expected-error @+1 {{qkv must be [B, T, (heads + 2·kv_heads)·head_dim], got 2x8x4x16}}
  %o, %l = llm.attention_packed %qkv {heads = 2 : i64, kv_heads = 1 : i64, scale = 1.0 : f64} : tensor<2x8x4x16xf32>
  return
}

// -----

func.func @f(%qkv: tensor<2x8x64xf32>) {
  // expected-error @+1 {{heads (3) must be a positive multiple of kv_heads (2)}}
  %o, %l = llm.attention_packed %qkv {heads = 3 : i64, kv_heads = 2 : i64, scale = 1.0 : f64} : tensor<2x8x64xf32>
  return
}

// -----

func.func @f(%qkv: tensor<2x8x60xf32>) {
  // expected-error @+1 {{qkv's last dimension (60) must be a positive multiple of heads + 2·kv_heads (8)}}
  %o, %l = llm.attention_packed %qkv {heads = 4 : i64, kv_heads = 2 : i64, scale = 1.0 : f64} : tensor<2x8x60xf32>
  return
}

// -----

func.func @f(%qkv: tensor<2x8x64xf32>, %s: tensor<2x4xi32>) {
  // expected-error @+1 {{segment_ids must be [2, 8], got 2x4}}
  %o, %l = llm.attention_packed %qkv segments %s : tensor<2x4xi32> {heads = 4 : i64, kv_heads = 2 : i64, scale = 1.0 : f64} : tensor<2x8x64xf32>
  return
}

// -----

func.func @f(%qkv: tensor<2x8x64xf32>) {
  // expected-error @+1 {{scale must be > 0}}
  %o, %l = llm.attention_packed %qkv {heads = 4 : i64, kv_heads = 2 : i64, scale = 0.0 : f64} : tensor<2x8x64xf32>
  return
}

// -----

func.func @f(%qkv: tensor<2x8x64xf32>, %o: tensor<2x8x2x8xf32>, %lse: tensor<2x4x8xf32>) {
  // expected-error @+1 {{out must be 'tensor<2x8x4x8xf32>', got 'tensor<2x8x2x8xf32>'}}
  %d = llm.attention_packed_grad %qkv, %o, %lse, %o {heads = 4 : i64, kv_heads = 2 : i64, scale = 1.0 : f64} : tensor<2x8x64xf32>, tensor<2x8x2x8xf32>, tensor<2x4x8xf32>
  return
}

// -----

func.func @f(%qkv: tensor<2x8x64xf32>, %o: tensor<2x8x4x8xf32>, %lse: tensor<2x8x4xf32>) {
  // expected-error @+1 {{lse must be 'tensor<2x4x8xf32>', got 'tensor<2x8x4xf32>'}}
  %d = llm.attention_packed_grad %qkv, %o, %lse, %o {heads = 4 : i64, kv_heads = 2 : i64, scale = 1.0 : f64} : tensor<2x8x64xf32>, tensor<2x8x4x8xf32>, tensor<2x8x4xf32>
  return
}

// -----

func.func @f(%qkv: tensor<2x8x64xf32>, %o: tensor<2x8x4x8xf32>, %lse: tensor<2x4x8xf32>) {
  // expected-error @+1 {{scale must be > 0}}
  %d = llm.attention_packed_grad %qkv, %o, %lse, %o {heads = 4 : i64, kv_heads = 2 : i64, scale = -1.0 : f64} : tensor<2x8x64xf32>, tensor<2x8x4x8xf32>, tensor<2x4x8xf32>
  return
}

// -----

func.func @f(%q: tensor<2x8x4x7xf32>) {
  // expected-error @+1 {{rotated q and k need an even head_dim, got 7}}
  %o, %l = llm.attention_rope %q, %q, %q {scale = 1.0 : f64, theta = 10000.0 : f64} : tensor<2x8x4x7xf32>, tensor<2x8x4x7xf32>
  return
}

// -----

func.func @f(%q: tensor<2x8x4x8xf32>, %p: tensor<2x4xi32>) {
  // expected-error @+1 {{positions must be [2, 8], got 2x4}}
  %o, %l = llm.attention_rope %q, %q, %q positions %p : tensor<2x4xi32> {scale = 1.0 : f64, theta = 10000.0 : f64} : tensor<2x8x4x8xf32>, tensor<2x8x4x8xf32>
  return
}

// -----

func.func @f(%q: tensor<2x8x4x8xf32>) {
  // expected-error @+1 {{theta must be > 0}}
  %o, %l = llm.attention_rope %q, %q, %q {scale = 1.0 : f64, theta = 0.0 : f64} : tensor<2x8x4x8xf32>, tensor<2x8x4x8xf32>
  return
}

// -----

func.func @f(%q: tensor<2x8x4x8xf32>) {
  // expected-error @+1 {{scaling_factor, low_freq_factor, high_freq_factor and original_max_positions go together (Llama 3 scaling)}}
  %o, %l = llm.attention_rope %q, %q, %q {scale = 1.0 : f64, theta = 10000.0 : f64, scaling_factor = 8.0 : f64} : tensor<2x8x4x8xf32>, tensor<2x8x4x8xf32>
  return
}

// -----

func.func @f(%q: tensor<2x8x4x8xf32>) {
  // expected-error @+1 {{scale must be > 0}}
  %o, %l = llm.attention_rope %q, %q, %q {scale = 0.0 : f64, theta = 10000.0 : f64} : tensor<2x8x4x8xf32>, tensor<2x8x4x8xf32>
  return
}

// -----

func.func @f(%q: tensor<2x8x4x8xf32>, %lse: tensor<2x8x4xf32>) {
  // expected-error @+1 {{lse must be 'tensor<2x4x8xf32>', got 'tensor<2x8x4xf32>'}}
  %a, %b, %c = llm.attention_rope_grad %q, %q, %q, %q, %lse, %q {scale = 1.0 : f64, theta = 10000.0 : f64} : tensor<2x8x4x8xf32>, tensor<2x8x4x8xf32>, tensor<2x8x4xf32>
  return
}

// -----

func.func @f(%q: tensor<2x8x4x8xf32>, %lse: tensor<2x4x8xf32>) {
  // expected-error @+1 {{low_freq_factor (2.000000e+00) and high_freq_factor (1.000000e+00) must satisfy 0 < low < high}}
  %a, %b, %c = llm.attention_rope_grad %q, %q, %q, %q, %lse, %q {scale = 1.0 : f64, theta = 10000.0 : f64, scaling_factor = 8.0 : f64, low_freq_factor = 2.0 : f64, high_freq_factor = 1.0 : f64, original_max_positions = 16 : i64} : tensor<2x8x4x8xf32>, tensor<2x8x4x8xf32>, tensor<2x4x8xf32>
  return
}

// -----

func.func @f(%l: tensor<f32>, %t: tensor<i32>) {
  // expected-error @+1 {{logits must have a vocabulary dimension}}
  %y = llm.cross_entropy %l, %t : tensor<f32>, tensor<i32>
  return
}

// -----

func.func @f(%l: tensor<2x8x16xf32>, %t: tensor<2x4xi32>) {
  // expected-error @+1 {{targets must be 2x8 to match logits 2x8x16, got 2x4}}
  %y = llm.cross_entropy %l, %t : tensor<2x8x16xf32>, tensor<2x4xi32>
  return
}

// -----

func.func @f(%l: tensor<2x8x16xf32>, %t: tensor<2x4xi32>, %d: tensor<f32>) {
  // expected-error @+1 {{targets must be 2x8 to match logits 2x8x16, got 2x4}}
  %y = llm.cross_entropy_grad %l, %t, %d : tensor<2x8x16xf32>, tensor<2x4xi32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{cannot change the element type: 'f32' to 'bf16'}}
  %y = llm.reshape %x : tensor<2x8xf32> to tensor<16xbf16>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{element count differs: 2x8 to 15}}
  %y = llm.reshape %x : tensor<2x8xf32> to tensor<15xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{permutation has 3 entries for a rank-2 input}}
  %y = llm.transpose %x {permutation = array<i64: 0, 1, 2>} : tensor<2x8xf32> to tensor<8x2xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{permutation is not a permutation of 0..1}}
  %y = llm.transpose %x {permutation = array<i64: 1, 1>} : tensor<2x8xf32> to tensor<8x2xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{result type must be 'tensor<8x2xf32>', got 'tensor<2x8xf32>'}}
  %y = llm.transpose %x {permutation = array<i64: 1, 0>} : tensor<2x8xf32> to tensor<2x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{cannot change the element type}}
  %y = llm.slice %x {offsets = array<i64: 0, 0>} : tensor<2x8xf32> to tensor<2x4xbf16>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{offsets, input and result must have the same rank}}
  %y = llm.slice %x {offsets = array<i64: 0>} : tensor<2x8xf32> to tensor<2x4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{box of size 4 at offset 6 exceeds dimension 1 of size 8}}
  %y = llm.slice %x {offsets = array<i64: 0, 6>} : tensor<2x8xf32> to tensor<2x4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{box of size 4 at offset 5 exceeds dimension 1 of size 8}}
  %y = llm.pad %x {offsets = array<i64: 0, 5>} : tensor<2x4xf32> to tensor<2x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{dim 2 out of range for rank 2}}
  %y = llm.concat %x, %x {dim = 2 : i64} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4xf32>, %z: tensor<2x4xbf16>) {
  // expected-error @+1 {{inputs must share element type and rank}}
  %y = llm.concat %x, %z {dim = 1 : i64} : tensor<2x4xf32>, tensor<2x4xbf16> -> tensor<2x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4xf32>, %z: tensor<3x4xf32>) {
  // expected-error @+1 {{inputs differ in dimension 0, which is not the concatenation dimension}}
  %y = llm.concat %x, %z {dim = 1 : i64} : tensor<2x4xf32>, tensor<3x4xf32> -> tensor<2x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{result type must be 'tensor<2x8xf32>', got 'tensor<2x9xf32>'}}
  %y = llm.concat %x, %x {dim = 1 : i64} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x9xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{needs at least one input}}
  %y = "llm.concat"() <{dim = 0 : i64}> : () -> tensor<2x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{result shape 2 is not a suffix of input shape 2x4}}
  %y = llm.reduce_sum %x : tensor<2x4xf32> to tensor<2xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{cannot change the element type}}
  %y = llm.reduce_sum %x : tensor<2x4xf32> to tensor<4xbf16>
  return
}

// -----

func.func @f(%ids: tensor<2xi32>, %dy: tensor<3x8xf32>) {
  // expected-error @+1 {{dy must be ids' shape plus a feature dimension}}
  %y = llm.embedding_grad %ids, %dy : tensor<2xi32>, tensor<3x8xf32> to tensor<16x8xf32>
  return
}

// -----

func.func @f(%ids: tensor<2xi32>, %dy: tensor<2x8xf32>) {
  // expected-error @+1 {{result must be [vocab, 8]}}
  %y = llm.embedding_grad %ids, %dy : tensor<2xi32>, tensor<2x8xf32> to tensor<16x4xf32>
  return
}

// -----

func.func @f(%ids: tensor<2xi32>, %dy: tensor<2x8xf32>) {
  // expected-error @+1 {{result and dy must share an element type}}
  %y = llm.embedding_grad %ids, %dy : tensor<2xi32>, tensor<2x8xf32> to tensor<16x8xbf16>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{gamma must be [8] to match the last dimension of the input, got 4}}
  %a, %b, %c = llm.layernorm_grad %x, %g, %x {epsilon = 1.0e-5 : f64} : tensor<2x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{gamma must be [8] to match the last dimension of the input, got 4}}
  %a, %b = llm.rmsnorm_grad %x, %g, %x {epsilon = 1.0e-5 : f64} : tensor<2x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{needs at least one input}}
  %n = "llm.global_norm"() : () -> tensor<f32>
  return
}

// -----

func.func @f(%p: tensor<8xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{beta1 and beta2 must be in [0, 1), got 1.000000e+00 and 9.500000e-01}}
  %a, %b, %c = llm.adamw %p, %p, %p, %p, %s, %s {beta1 = 1.0 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64, max_grad_norm = 0.0 : f64} : tensor<8xf32>
  return
}

// -----

func.func @f(%p: tensor<8xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{epsilon must be > 0}}
  %a, %b, %c = llm.adamw %p, %p, %p, %p, %s, %s {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 0.0 : f64, weight_decay = 0.0 : f64, max_grad_norm = 0.0 : f64} : tensor<8xf32>
  return
}

// -----

func.func @f(%p: tensor<4096xf32>, %c: tensor<4096xi8>, %a: tensor<1xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{moment absmax must be tensor<2xf32> (one per 2048 elements), got 'tensor<1xf32>'}}
  %0:5 = llm.adamw8bit %p, %p, %c, %a, %c, %a, %s, %s {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64, max_grad_norm = 0.0 : f64} : tensor<4096xf32>, tensor<4096xi8>, tensor<1xf32>
  return
}

// -----

func.func @f(%p: tensor<8xf32>, %c: tensor<4xi8>, %a: tensor<1xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{moment codes must have the parameter's shape 'tensor<8xf32>', got 'tensor<4xi8>'}}
  %0:5 = llm.adamw8bit %p, %p, %c, %a, %c, %a, %s, %s {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64, max_grad_norm = 0.0 : f64} : tensor<8xf32>, tensor<4xi8>, tensor<1xf32>
  return
}

// -----

func.func @f(%p: tensor<8xf32>, %c: tensor<8xi8>, %a: tensor<1xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{beta1 and beta2 must be in [0, 1)}}
  %0:5 = llm.adamw8bit %p, %p, %c, %a, %c, %a, %s, %s {beta1 = 0.9 : f64, beta2 = 1.5 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64, max_grad_norm = 0.0 : f64} : tensor<8xf32>, tensor<8xi8>, tensor<1xf32>
  return
}

// -----

func.func @f(%p: tensor<8xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{weight_decay and max_grad_norm must be >= 0}}
  %a, %b, %c = llm.adamw %p, %p, %p, %p, %s, %s {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = -0.1 : f64, max_grad_norm = 0.0 : f64} : tensor<8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{global_shape and offsets go together}}
  %y = llm.dropout %x {rate = 0.1 : f64, seed = 1 : i64, global_shape = array<i64: 4, 4>} : tensor<2x4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{global_shape and offsets must have one entry per dimension (2)}}
  %y = llm.dropout %x {rate = 0.1 : f64, seed = 1 : i64, global_shape = array<i64: 4>, offsets = array<i64: 0>} : tensor<2x4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{dimension 0: a piece of 2 at offset 3 does not fit in 4}}
  %y = llm.dropout %x {rate = 0.1 : f64, seed = 1 : i64, global_shape = array<i64: 4, 4>, offsets = array<i64: 3, 0>} : tensor<2x4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{global_shape and offsets place dropout's mask, but the program has no dropout}}
  %y = llm.fused_elementwise(%x) [r0 = load 0, r1 = gelu r0] yields r1 {global_shape = array<i64: 4, 4>, offsets = array<i64: 2, 0>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{dimension 1: a piece of 4 at offset 1 does not fit in 4}}
  %y = llm.fused_elementwise(%x) [r0 = load 0, r1 = dropout r0 seed 1 rate 0.1] yields r1 {global_shape = array<i64: 4, 4>, offsets = array<i64: 2, 1>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @f(%w: tensor<8x4xf32>, %ids: tensor<3xi32>) {
  // expected-error @+1 {{row_offset needs vocab_size (the whole table's rows)}}
  %e = llm.embedding %w, %ids {row_offset = 8 : i64} : tensor<8x4xf32>, tensor<3xi32>
  return
}

// -----

func.func @f(%w: tensor<8x4xf32>, %ids: tensor<3xi32>) {
  // expected-error @+1 {{rows [8, 16) do not fit in a vocabulary of 12}}
  %e = llm.embedding %w, %ids {row_offset = 8 : i64, vocab_size = 12 : i64} : tensor<8x4xf32>, tensor<3xi32>
  return
}

// -----

func.func @f(%ids: tensor<3xi32>, %dy: tensor<3x4xf32>) {
  // expected-error @+1 {{rows [-1, 7) do not fit in a vocabulary of 12}}
  %g = llm.embedding_grad %ids, %dy {row_offset = -1 : i64, vocab_size = 12 : i64} : tensor<3xi32>, tensor<3x4xf32> to tensor<8x4xf32>
  return
}

// -----

func.func @f(%x: tensor<f32>) {
  // expected-error @+2 {{input must have rank >= 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %m = llm.reduce_max %x : tensor<f32> -> tensor<f32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %t: tensor<2xi32>, %m: tensor<2xf32>) {
  // expected-error @+1 {{classes [4, 12) do not fit in num_classes = 10}}
  %s, %tl = llm.cross_entropy_partial %x, %t, %m {class_offset = 4 : i64, num_classes = 10 : i64} : tensor<2x8xf32>, tensor<2xi32>, tensor<2xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %t: tensor<2xi32>, %m: tensor<3xf32>) {
  // expected-error @+1 {{shift must be 2, got 3}}
  %s, %tl = llm.cross_entropy_partial %x, %t, %m {num_classes = 8 : i64} : tensor<2x8xf32>, tensor<2xi32>, tensor<3xf32>
  return
}

// -----

func.func @f(%h: tensor<2x8xf32>, %w: tensor<8x8xf32>, %t: tensor<2xi32>) {
  // expected-error @+1 {{classes [4, 12) do not fit in num_classes = 10}}
  %m, %s, %tl, %sc = llm.linear_cross_entropy_partial %h, %w, %t {chunk_rows = 2 : i64, class_offset = 4 : i64, num_classes = 10 : i64} : tensor<2x8xf32>, tensor<8x8xf32>, tensor<2xi32>
  return
}

// -----

func.func @f(%h: tensor<2x8xf32>, %w: tensor<8x8xf32>, %t: tensor<2xi32>, %d: tensor<3xf32>) {
  // expected-error @+1 {{shift must be 2, got 3}}
  %dh, %dw, %sc = llm.linear_cross_entropy_partial_grad %h, %w, %t, %d, %d, %d {chunk_rows = 2 : i64, num_classes = 8 : i64} : tensor<2x8xf32>, tensor<8x8xf32>, tensor<2xi32>, tensor<3xf32>
  return
}

// -----

func.func @f(%h: tensor<2x8xf32>, %w: tensor<8x8xf32>, %t: tensor<2xi32>, %d: tensor<2xf32>) {
  // expected-error @+1 {{chunk_rows must be >= 1, got 0}}
  %dh, %dw, %sc = llm.linear_cross_entropy_partial_grad %h, %w, %t, %d, %d, %d {chunk_rows = 0 : i64, num_classes = 8 : i64} : tensor<2x8xf32>, tensor<8x8xf32>, tensor<2xi32>, tensor<2xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %t: tensor<2xi32>, %m: tensor<2xf32>, %d: tensor<3xf32>) {
  // expected-error @+1 {{'llm.cross_entropy_partial_grad' op failed to verify that all of {shift, dsumexp, dtarget_logit} have same type}}
  %g = "llm.cross_entropy_partial_grad"(%x, %t, %m, %d, %d) {num_classes = 8 : i64} : (tensor<2x8xf32>, tensor<2xi32>, tensor<2xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x8xf32>
  return
}


// -----

func.func @f(%s: tensor<3xf32>, %t: tensor<2xi32>) {
  // expected-error @+1 {{sumexp must be 2, got 3}}
  %l = llm.cross_entropy_finish %s, %s, %s, %t : tensor<3xf32>, tensor<2xi32>
  return
}

// -----

func.func @f(%s: tensor<3xf32>, %t: tensor<2xi32>, %d: tensor<f32>) {
  // expected-error @+1 {{sumexp must be 2, got 3}}
  %a, %b, %c = llm.cross_entropy_finish_grad %s, %t, %d : tensor<3xf32>, tensor<2xi32>
  return
}

// -----

func.func @f(%x: tensor<2x64xf32>, %c: tensor<4096xi8>, %q: tensor<128xi8>, %s: tensor<1xf32>, %m: tensor<f32>) {
  // expected-error @+1 {{blocks of 48 must divide the weight's last dimension (64x128)}}
  %y = llm.matmul_nf4 %x, %c, %q, %s, %m {block = 48 : i64, weight_shape = array<i64: 64, 128>} : tensor<2x64xf32>, tensor<4096xi8>, tensor<128xi8>, tensor<1xf32>, tensor<f32> -> tensor<2x128xf32>
  return
}

// -----

func.func @f(%x: tensor<2x64xf32>, %c: tensor<4000xi8>, %q: tensor<128xi8>, %s: tensor<1xf32>, %m: tensor<f32>) {
  // expected-error @+1 {{codes (two per byte) must hold 4096 elements for a weight 64x128, got 'tensor<4000xi8>'}}
  %y = llm.matmul_nf4 %x, %c, %q, %s, %m {block = 64 : i64, weight_shape = array<i64: 64, 128>} : tensor<2x64xf32>, tensor<4000xi8>, tensor<128xi8>, tensor<1xf32>, tensor<f32> -> tensor<2x128xf32>
  return
}

// -----

func.func @f(%x: tensor<2x64xf32>, %c: tensor<4096xi8>, %q: tensor<64xi8>, %s: tensor<1xf32>, %m: tensor<f32>) {
  // expected-error @+1 {{absmax_q (one per block) must hold 128 elements}}
  %y = llm.matmul_nf4 %x, %c, %q, %s, %m {block = 64 : i64, weight_shape = array<i64: 64, 128>} : tensor<2x64xf32>, tensor<4096xi8>, tensor<64xi8>, tensor<1xf32>, tensor<f32> -> tensor<2x128xf32>
  return
}

// -----

func.func @f(%x: tensor<2x64xf32>, %c: tensor<4096xi8>, %q: tensor<128xi8>, %s: tensor<2xf32>, %m: tensor<f32>) {
  // expected-error @+1 {{absmax_scale (one per 256 blocks) must hold 1 elements}}
  %y = llm.matmul_nf4 %x, %c, %q, %s, %m {block = 64 : i64, weight_shape = array<i64: 64, 128>} : tensor<2x64xf32>, tensor<4096xi8>, tensor<128xi8>, tensor<2xf32>, tensor<f32> -> tensor<2x128xf32>
  return
}

// -----

func.func @f(%x: tensor<2x64xf32>, %c: tensor<4096xi8>, %q: tensor<128xi8>, %s: tensor<1xf32>, %m: tensor<f32>) {
  // expected-error @+1 {{'llm.matmul_nf4' op absmax_format must be "int8" or "fp8_e4m3", got "fp8_e5m2"}}
  %y = llm.matmul_nf4 %x, %c, %q, %s, %m {block = 64 : i64, weight_shape = array<i64: 64, 128>, absmax_format = "fp8_e5m2"} : tensor<2x64xf32>, tensor<4096xi8>, tensor<128xi8>, tensor<1xf32>, tensor<f32> -> tensor<2x128xf32>
  return
}

// -----

// A piece of a weight split by tensor parallelism (rows 64..127 of 128):
// inside the whole weight, with the whole weight's scales.
func.func @f(%x: tensor<2x64xf32>, %c: tensor<64x64xi8>, %q: tensor<64x2xi8>, %s: tensor<1xf32>, %m: tensor<f32>) {
  // expected-error @+1 {{the piece 64x128 at piece_offset 96x0 in chunks 1x1 does not lie within whole_shape 128x128 (dimension 0)}}
  %y = llm.matmul_nf4 %x, %c, %q, %s, %m {block = 64 : i64, weight_shape = array<i64: 64, 128>, whole_shape = array<i64: 128, 128>, chunks = array<i64: 1, 1>, piece_offset = array<i64: 96, 0>} : tensor<2x64xf32>, tensor<64x64xi8>, tensor<64x2xi8>, tensor<1xf32>, tensor<f32> -> tensor<2x128xf32>
  return
}

// -----

func.func @f(%x: tensor<2x64xf32>, %c: tensor<64x64xi8>, %q: tensor<64x2xi8>, %s: tensor<1xf32>, %m: tensor<f32>) {
  // expected-error @+1 {{absmax_scale (one per 256 blocks) must hold 4 elements for a weight 64x128, got 'tensor<1xf32>'}}
  %y = llm.matmul_nf4 %x, %c, %q, %s, %m {block = 64 : i64, weight_shape = array<i64: 64, 128>, whole_shape = array<i64: 512, 128>, chunks = array<i64: 1, 1>, piece_offset = array<i64: 64, 0>} : tensor<2x64xf32>, tensor<64x64xi8>, tensor<64x2xi8>, tensor<1xf32>, tensor<f32> -> tensor<2x128xf32>
  return
}

// -----

func.func @f(%x: tensor<2x64xf32>, %c: tensor<4096xi8>, %q: tensor<128xi8>, %s: tensor<1xf32>, %m: tensor<f32>) {
  // expected-error @+2 {{contraction sizes differ: x has 64, the weight 64x128 has 128}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = llm.matmul_nf4 %x, %c, %q, %s, %m {block = 64 : i64, weight_shape = array<i64: 64, 128>, transpose_b} : tensor<2x64xf32>, tensor<4096xi8>, tensor<128xi8>, tensor<1xf32>, tensor<f32> -> tensor<2x128xf32>
  return
}

// -----

func.func @f(%x: tensor<2x64xf32>, %c: tensor<4096xi8>, %q: tensor<128xi8>, %s: tensor<1xf32>, %m: tensor<f32>) {
  // expected-error @+1 {{weight_shape must be 2-D, got 8192}}
  %y = llm.matmul_nf4 %x, %c, %q, %s, %m {block = 64 : i64, weight_shape = array<i64: 8192>} : tensor<2x64xf32>, tensor<4096xi8>, tensor<128xi8>, tensor<1xf32>, tensor<f32> -> tensor<2x128xf32>
  return
}

// -----

func.func @f(%x: tensor<4xf32>, %w: tensor<4x4xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{x must be [..., K] (rank >= 2) and w a matrix, got 4 and 4x4}}
  %y = llm.linear %x, %w, %b : tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4xf32>, %w: tensor<4x4xbf16>, %b: tensor<4xf32>) {
  // expected-error @+1 {{x and w must have the same element type, got 'f32' and 'bf16'}}
  %y = llm.linear %x, %w, %b : tensor<2x4xf32>, tensor<4x4xbf16>, tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4xf32>, %w: tensor<4x4xf32>, %b: tensor<4xbf16>) {
  // expected-error @+1 {{x and bias must have the same element type, got 'f32' and 'bf16'}}
  %y = llm.linear %x, %w, %b : tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xbf16>
  return
}

// -----

func.func @f(%x: tensor<2x4xf32>, %w: tensor<8x4xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{w 8x4 does not match x's width 4 (w is [K, N])}}
  %y = llm.linear %x, %w, %b : tensor<2x4xf32>, tensor<8x4xf32>, tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4xf32>, %w: tensor<4x8xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{w 4x8 does not match x's width 4 (w is [N, K] with transpose_b)}}
  %y = llm.linear %x, %w, %b {transpose_b} : tensor<2x4xf32>, tensor<4x8xf32>, tensor<8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4xf32>, %w: tensor<4x8xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{bias must be [8], got 4}}
  %y = llm.linear %x, %w, %b : tensor<2x4xf32>, tensor<4x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4xf32>, %w: tensor<4x8xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{keep_pre needs gelu (without it the pre-activation is y)}}
  %y, %p = llm.linear %x, %w, %b {keep_pre} : tensor<2x4xf32>, tensor<4x8xf32>, tensor<8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4xf32>, %w: tensor<4x8xf32>) {
  // expected-error @+1 {{needs a bias or a residual (without both it is a matmul)}}
  %y = llm.linear %x, %w : tensor<2x4xf32>, tensor<4x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4xf32>, %w: tensor<4x8xf32>, %b: tensor<8xf32>, %r: tensor<2x8xf32>) {
  // expected-error @+1 {{gelu needs a bias and takes no residual}}
  %y = llm.linear %x, %w, %b residual %r {gelu} : tensor<2x4xf32>, tensor<4x8xf32>, tensor<8xf32> residual tensor<2x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4xf32>, %w: tensor<4x8xf32>, %r: tensor<2x8xf32>) {
  // expected-error @+1 {{gelu needs a bias and takes no residual}}
  %y = llm.linear %x, %w residual %r {gelu} : tensor<2x4xf32>, tensor<4x8xf32> residual tensor<2x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4xf32>, %w: tensor<4x8xf32>, %r: tensor<8xf32>) {
  // expected-error @+1 {{residual must be y's type 'tensor<2x8xf32>', got 'tensor<8xf32>'}}
  %y = llm.linear %x, %w residual %r : tensor<2x4xf32>, tensor<4x8xf32> residual tensor<8xf32>
  return
}

// -----

func.func @f(%x: tensor<8xf32>, %dy: tensor<2x4xf32>) {
  // expected-error @+1 {{x and dy must be [..., K] and [..., N] (rank >= 2), got 8 and 2x4}}
  %dw, %db = llm.linear_weight_grad %x, %dy : tensor<8xf32>, tensor<2x4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %dy: tensor<2x4xbf16>) {
  // expected-error @+1 {{x and dy must have the same element type, got 'f32' and 'bf16'}}
  %dw, %db = llm.linear_weight_grad %x, %dy : tensor<2x8xf32>, tensor<2x4xbf16>
  return
}

// -----

func.func @f(%x: tensor<3x8xf32>, %dy: tensor<2x4xf32>) {
  // expected-error @+1 {{x 3x8 and dy 2x4 must have as many rows}}
  %dw, %db = llm.linear_weight_grad %x, %dy : tensor<3x8xf32>, tensor<2x4xf32>
  return
}

// -----

func.func @f(%x: tensor<8xf32>, %w: tensor<8x4xf32>, %pre: tensor<4xf32>) {
  // expected-error @+1 {{x must be [..., K] (rank >= 2) and w a matrix, got 8 and 8x4}}
  %y = llm.matmul_gelu_grad %x, %w, %pre : tensor<8xf32>, tensor<8x4xf32>, tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>, %pre: tensor<2x4xf32>) {
  // expected-error @+1 {{w 8x4 does not match x's width 8 (w is [N, K] with transpose_b)}}
  %y = llm.matmul_gelu_grad %x, %w, %pre {transpose_b} : tensor<2x8xf32>, tensor<8x4xf32>, tensor<2x4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>, %pre: tensor<2x4xbf16>) {
  // expected-error @+1 {{pre must be the product's type 'tensor<2x4xf32>', got 'tensor<2x4xbf16>'}}
  %y = llm.matmul_gelu_grad %x, %w, %pre : tensor<2x8xf32>, tensor<8x4xf32>, tensor<2x4xbf16>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>, %g: tensor<2x5xf32>) {
  // expected-error @+1 {{gate must be the product's type 'tensor<2x4xf32>', got 'tensor<2x5xf32>'}}
  %dg, %du = llm.matmul_swiglu_grad %x, %w, %g, %g : tensor<2x8xf32>, tensor<8x4xf32>, tensor<2x5xf32>
  return
}

// -----

func.func @f(%x: tensor<2x64xf32>, %c: tensor<8192xi8>, %s: tensor<1xf32>) {
  // expected-error @+1 {{bits must be 8 or 4, got 3}}
  %y = llm.matmul_int %x, %c, %s {bits = 3 : i64, weight_shape = array<i64: 64, 128>} : tensor<2x64xf32>, tensor<8192xi8>, tensor<1xf32> -> tensor<2x128xf32>
  return
}

// -----

func.func @f(%x: tensor<2x64xf32>, %c: tensor<4096xi8>, %s: tensor<1xf32>) {
  // expected-error @+1 {{fp8 codes are 8 bits each and take no zero_point}}
  %y = llm.matmul_int %x, %c, %s {bits = 4 : i64, fp8, weight_shape = array<i64: 64, 128>} : tensor<2x64xf32>, tensor<4096xi8>, tensor<1xf32> -> tensor<2x128xf32>
  return
}

// -----

func.func @f(%x: tensor<2x64xf32>, %c: tensor<8192xi8>, %s: tensor<1xf32>, %z: tensor<1xi32>) {
  // expected-error @+1 {{fp8 codes are 8 bits each and take no zero_point}}
  %y = llm.matmul_int %x, %c, %s, %z {bits = 8 : i64, fp8, weight_shape = array<i64: 64, 128>} : tensor<2x64xf32>, tensor<8192xi8>, tensor<1xf32>, tensor<1xi32> -> tensor<2x128xf32>
  return
}

// -----

func.func @f(%x: tensor<2x64xf32>, %c: tensor<8192xi8>, %s: tensor<128xf32>) {
  // expected-error @+1 {{give block or channel_axis, not both}}
  %y = llm.matmul_int %x, %c, %s {bits = 8 : i64, block = 64 : i64, channel_axis = 1 : i64, weight_shape = array<i64: 64, 128>} : tensor<2x64xf32>, tensor<8192xi8>, tensor<128xf32> -> tensor<2x128xf32>
  return
}

// -----

func.func @f(%x: tensor<2x64xf32>, %c: tensor<8192xi8>, %s: tensor<128xf32>) {
  // expected-error @+1 {{blocks of 48 must divide the weight's last dimension (64x128)}}
  %y = llm.matmul_int %x, %c, %s {bits = 8 : i64, block = 48 : i64, weight_shape = array<i64: 64, 128>} : tensor<2x64xf32>, tensor<8192xi8>, tensor<128xf32> -> tensor<2x128xf32>
  return
}

// -----

func.func @f(%x: tensor<2x64xf32>, %c: tensor<8192xi8>, %s: tensor<128xf32>) {
  // expected-error @+1 {{channel_axis must be 0 or 1, got 2}}
  %y = llm.matmul_int %x, %c, %s {bits = 8 : i64, channel_axis = 2 : i64, weight_shape = array<i64: 64, 128>} : tensor<2x64xf32>, tensor<8192xi8>, tensor<128xf32> -> tensor<2x128xf32>
  return
}

// -----

func.func @f(%x: tensor<2x64xf32>, %c: tensor<8192xi8>, %s: tensor<128xf32>) {
  // expected-error @+1 {{codes (two per byte) must hold 4096 elements for a weight 64x128, got 'tensor<8192xi8>'}}
  %y = llm.matmul_int %x, %c, %s {bits = 4 : i64, channel_axis = 1 : i64, weight_shape = array<i64: 64, 128>} : tensor<2x64xf32>, tensor<8192xi8>, tensor<128xf32> -> tensor<2x128xf32>
  return
}

// -----

func.func @f(%x: tensor<2x64xf32>, %c: tensor<8192xi8>, %s: tensor<128xf32>) {
  // expected-error @+1 {{scale (one per group) must hold 64 elements for a weight 64x128, got 'tensor<128xf32>'}}
  %y = llm.matmul_int %x, %c, %s {bits = 8 : i64, channel_axis = 0 : i64, weight_shape = array<i64: 64, 128>} : tensor<2x64xf32>, tensor<8192xi8>, tensor<128xf32> -> tensor<2x128xf32>
  return
}

// -----

func.func @f(%x: tensor<2x64xf32>, %c: tensor<8192xi8>, %s: tensor<128xf32>, %z: tensor<64xi32>) {
  // expected-error @+1 {{zero_point (one per group) must hold 128 elements}}
  %y = llm.matmul_int %x, %c, %s, %z {bits = 8 : i64, channel_axis = 1 : i64, weight_shape = array<i64: 64, 128>} : tensor<2x64xf32>, tensor<8192xi8>, tensor<128xf32>, tensor<64xi32> -> tensor<2x128xf32>
  return
}

// -----

func.func @f(%a: tensor<2x8xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{gamma must be [8] to match the last dimension of the input, got 4}}
  %s, %y = llm.add_layernorm %a, %a, %g, %g {epsilon = 1.0e-5 : f64} : tensor<2x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @f(%a: tensor<2x8xf32>, %g: tensor<8xbf16>) {
  // expected-error @+1 {{a and gamma must have the same element type, got 'f32' and 'bf16'}}
  %s, %y = llm.add_rmsnorm %a, %a, %g {epsilon = 1.0e-5 : f64} : tensor<2x8xf32>, tensor<8xbf16>
  return
}

// -----

func.func @f(%a: tensor<2x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{epsilon must be >= 0}}
  %s, %y = llm.add_rmsnorm %a, %a, %g {epsilon = -1.0 : f64} : tensor<2x8xf32>, tensor<8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{gamma must be [8] to match the last dimension of the input, got 4}}
  %dx, %dg, %db = llm.layernorm_grad_add %x, %g, %x, %x {epsilon = 1.0e-5 : f64} : tensor<2x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %g: tensor<8xf16>) {
  // expected-error @+1 {{x and gamma must have the same element type, got 'f32' and 'f16'}}
  %dx, %dg = llm.rmsnorm_grad_add %x, %g, %x, %x {epsilon = 1.0e-5 : f64} : tensor<2x8xf32>, tensor<8xf16>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{epsilon must be >= 0}}
  %dx, %dg = llm.rmsnorm_grad_add %x, %g, %x, %x {epsilon = -1.0 : f64} : tensor<2x8xf32>, tensor<8xf32>
  return
}

// -----

func.func @f(%h: tensor<2x8xf32>, %w: tensor<8x8xf32>, %t: tensor<2xi32>, %d: tensor<f32>) {
  // A frozen head has no dw result.
  // expected-error @+1 {{operation defines 3 results but was provided 4 to bind}}
  %l, %dh, %dw, %sc = llm.linear_cross_entropy_train %h, %w, %t, %d {chunk_rows = 2 : i64, frozen_weight} : tensor<2x8xf32>, tensor<8x8xf32>, tensor<2xi32>
  return
}

// -----

func.func @f(%a: tensor<2x8xf32>, %g: tensor<8xf32>, %b: tensor<8xbf16>) {
  // expected-error @+1 {{bias must have gamma's type 'tensor<8xf32>', got 'tensor<8xbf16>'}}
  %s, %y = llm.add_layernorm %a, %a, %g, %g bias %b {epsilon = 1.0e-5 : f64} : tensor<2x8xf32>, tensor<8xf32> bias tensor<8xbf16>
  return
}

// -----

func.func @f(%l: tensor<2x8xf32>, %t: tensor<2xi32>) {
  // expected-error @+1 {{'llm.cross_entropy' op num_classes = 9 must be in [0, 8] (the logits' columns; 0: all)}}
  %y = llm.cross_entropy %l, %t {num_classes = 9 : i64} : tensor<2x8xf32>, tensor<2xi32>
  return
}

// -----

func.func @f(%s: tensor<f32>) {
  // expected-error @+1 {{needs at least one tensor}}
  "llm.multi_tensor_adamw"(%s, %s) <{operandSegmentSizes = array<i32: 0, 0, 0, 0, 1, 1, 0, 0>, beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.1 : f64, max_grad_norm = 0.0 : f64, decay = array<i64>, cast_of = array<i64>}> : (tensor<f32>, tensor<f32>) -> ()
  return
}

// -----

func.func @f(%l: tensor<2x8xf32>, %t: tensor<2xi32>, %d: tensor<f32>) {
  // expected-error @+1 {{'llm.cross_entropy_grad' op num_classes = -1 must be in [0, 8] (the logits' columns; 0: all)}}
  %y = llm.cross_entropy_grad %l, %t, %d {num_classes = -1 : i64} : tensor<2x8xf32>, tensor<2xi32>
  return
}

// -----

func.func @f(%p: tensor<8xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{needs as many grads, m and v as params (2), got 1, 2 and 2}}
  %r:6 = llm.multi_tensor_adamw params(%p, %p : tensor<8xf32>, tensor<8xf32>) grads(%p : tensor<8xf32>) m(%p, %p : tensor<8xf32>, tensor<8xf32>) v(%p, %p : tensor<8xf32>, tensor<8xf32>) lr %s step %s {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.1 : f64, max_grad_norm = 0.0 : f64, decay = array<i64: 1, 1>, cast_of = array<i64>}
  return
}

// -----

func.func @f(%h: tensor<2x8xf32>, %w: tensor<6x8xf32>, %t: tensor<2xi32>) {
  // expected-error @+1 {{'llm.linear_cross_entropy' op num_classes = 7 must be in [0, 6] (w's classes; 0: all)}}
  %l, %sc = llm.linear_cross_entropy %h, %w, %t {chunk_rows = 2 : i64, num_classes = 7 : i64, transpose_b} : tensor<2x8xf32>, tensor<6x8xf32>, tensor<2xi32>
  return
}

// -----

func.func @f(%p: tensor<8xf32>, %s: tensor<f32>, %b: tensor<8xbf16>) {
  // expected-error @+1 {{tensor 0: m and v must have the parameter's type 'tensor<8xf32>'}}
  %r:3 = llm.multi_tensor_adamw params(%p : tensor<8xf32>) grads(%p : tensor<8xf32>) m(%b : tensor<8xbf16>) v(%p : tensor<8xf32>) lr %s step %s {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.1 : f64, max_grad_norm = 0.0 : f64, decay = array<i64: 1>, cast_of = array<i64>}
  return
}

// -----

func.func @f(%h: tensor<2x8xf32>, %w: tensor<8x6xf32>, %t: tensor<2xi32>, %d: tensor<f32>) {
  // expected-error @+1 {{'llm.linear_cross_entropy_train' op num_classes = 7 must be in [0, 6] (w's classes; 0: all)}}
  %l, %dh, %dw, %sc = llm.linear_cross_entropy_train %h, %w, %t, %d {chunk_rows = 2 : i64, num_classes = 7 : i64} : tensor<2x8xf32>, tensor<8x6xf32>, tensor<2xi32>
  return
}

// -----

func.func @f(%p: tensor<8xf32>, %s: tensor<f32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{tensor 0: the gradient must have the parameter's shape, got 'tensor<4xf32>' for 'tensor<8xf32>'}}
  %r:3 = llm.multi_tensor_adamw params(%p : tensor<8xf32>) grads(%g : tensor<4xf32>) m(%p : tensor<8xf32>) v(%p : tensor<8xf32>) lr %s step %s {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.1 : f64, max_grad_norm = 0.0 : f64, decay = array<i64: 1>, cast_of = array<i64>}
  return
}

// -----

func.func @f(%p: tensor<8xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{decay must hold one 0 or 1 per tensor (1)}}
  %r:3 = llm.multi_tensor_adamw params(%p : tensor<8xf32>) grads(%p : tensor<8xf32>) m(%p : tensor<8xf32>) v(%p : tensor<8xf32>) lr %s step %s {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.1 : f64, max_grad_norm = 0.0 : f64, decay = array<i64: 2>, cast_of = array<i64>}
  return
}

// -----

func.func @f(%p: tensor<8xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{cast_of must be increasing}}
  %r:8 = llm.multi_tensor_adamw params(%p, %p : tensor<8xf32>, tensor<8xf32>) grads(%p, %p : tensor<8xf32>, tensor<8xf32>) m(%p, %p : tensor<8xf32>, tensor<8xf32>) v(%p, %p : tensor<8xf32>, tensor<8xf32>) lr %s step %s {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.1 : f64, max_grad_norm = 0.0 : f64, decay = array<i64: 1, 1>, cast_of = array<i64: 1, 0>, cast_type = bf16}
  return
}

// -----

func.func @f(%b: tensor<8xbf16>, %s: tensor<f32>) {
  // expected-error @+1 {{tensor 0: only an f32 parameter is cast}}
  %r:4 = llm.multi_tensor_adamw params(%b : tensor<8xbf16>) grads(%b : tensor<8xbf16>) m(%b : tensor<8xbf16>) v(%b : tensor<8xbf16>) lr %s step %s {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.1 : f64, max_grad_norm = 0.0 : f64, decay = array<i64: 1>, cast_of = array<i64: 0>, cast_type = f16}
  return
}

// -----

func.func @f(%p: tensor<8xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{cast_type without cast_of}}
  %r:3 = llm.multi_tensor_adamw params(%p : tensor<8xf32>) grads(%p : tensor<8xf32>) m(%p : tensor<8xf32>) v(%p : tensor<8xf32>) lr %s step %s {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.1 : f64, max_grad_norm = 0.0 : f64, decay = array<i64: 1>, cast_of = array<i64>, cast_type = bf16}
  return
}

// -----

func.func @f(%p: tensor<8xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{llm.multi_tensor_adamw: cast_of needs a float cast_type}}
  %r:4 = llm.multi_tensor_adamw params(%p : tensor<8xf32>) grads(%p : tensor<8xf32>) m(%p : tensor<8xf32>) v(%p : tensor<8xf32>) lr %s step %s {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.1 : f64, max_grad_norm = 0.0 : f64, decay = array<i64: 1>, cast_of = array<i64: 0>, cast_type = i8}
  return
}

// -----

func.func @f(%p: tensor<8xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{llm.multi_tensor_adamw: cast_of index 3 is not a tensor of the op (1 tensors)}}
  %r:4 = llm.multi_tensor_adamw params(%p : tensor<8xf32>) grads(%p : tensor<8xf32>) m(%p : tensor<8xf32>) v(%p : tensor<8xf32>) lr %s step %s {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.1 : f64, max_grad_norm = 0.0 : f64, decay = array<i64: 1>, cast_of = array<i64: 3>, cast_type = bf16}
  return
}

// -----

func.func @f(%p: tensor<8xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{beta1 and beta2 must be in [0, 1), got 1.000000e+00 and 9.500000e-01}}
  %r:3 = llm.multi_tensor_adamw params(%p : tensor<8xf32>) grads(%p : tensor<8xf32>) m(%p : tensor<8xf32>) v(%p : tensor<8xf32>) lr %s step %s {beta1 = 1.0 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.1 : f64, max_grad_norm = 0.0 : f64, decay = array<i64: 1>, cast_of = array<i64>}
  return
}

// -----

func.func @f(%p: tensor<8xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{loss_scale needs grad_norm}}
  %r:3 = llm.multi_tensor_adamw params(%p : tensor<8xf32>) grads(%p : tensor<8xf32>) m(%p : tensor<8xf32>) v(%p : tensor<8xf32>) lr %s step %s loss_scale %s {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.1 : f64, max_grad_norm = 0.0 : f64, decay = array<i64: 1>, cast_of = array<i64>}
  return
}

// -----

func.func @f(%x: tensor<6x1xi32>) {
  // expected-error @+1 {{'llm.sigmoid' op operand #0 must be ranked tensor of floating-point values, but got 'tensor<6x1xi32>'}}
  %g = llm.sigmoid %x : tensor<6x1xi32>
  return
}

// -----

func.func @f(%x: tensor<6x1xf32>, %dy: tensor<6x2xf32>) {
  // expected-error @+1 {{'llm.sigmoid_grad' op failed to verify that all of {x, dy} have same type}}
  %dx = "llm.sigmoid_grad"(%x, %dy) : (tensor<6x1xf32>, tensor<6x2xf32>) -> tensor<6x1xf32>
  return
}

// -----

func.func @f(%x: tensor<6x2xf32>) -> tensor<6x2xf32> {
  // expected-error @+1 {{'llm.copy_to_host' op result lives in host memory; only llm.copy_to_device may read it, not llm.gelu}}
  %h = llm.copy_to_host %x : tensor<6x2xf32>
  %g = llm.gelu %h : tensor<6x2xf32>
  return %g : tensor<6x2xf32>
}

// -----

func.func @f(%x: tensor<6x2xf32>) -> tensor<6x2xf32> {
  // expected-error @+1 {{'llm.copy_to_device' op operand must be an llm.copy_to_host result (a value in host memory)}}
  %d = llm.copy_to_device %x : tensor<6x2xf32>
  return %d : tensor<6x2xf32>
}

// -----

func.func @f(%x: tensor<5x32xf32>, %o: tensor<4xi32>, %c: tensor<384xi8>, %s: tensor<24xf32>) {
  // expected-error @+1 {{weight_shape must be stacked [G, F, K] with G = 3 and K = 32}}
  %y = llm.grouped_matmul_int %x, %o, %c, %s {bits = 4 : i64, block = 32 : i64, weight_shape = array<i64: 2, 8, 32>, transpose_b} : tensor<5x32xf32>, tensor<4xi32>, tensor<384xi8>, tensor<24xf32> -> tensor<5x8xf32>
  return
}

// -----

func.func @f(%x: tensor<5x32xf32>, %o: tensor<4xi32>, %c: tensor<384xi8>, %s: tensor<8xf32>) {
  // expected-error @+1 {{scale (each expert's groups) must hold 24 elements for stacked weights [3, 8, 32], got 'tensor<8xf32>'}}
  %y = llm.grouped_matmul_int %x, %o, %c, %s {bits = 4 : i64, block = 32 : i64, weight_shape = array<i64: 3, 8, 32>, transpose_b} : tensor<5x32xf32>, tensor<4xi32>, tensor<384xi8>, tensor<8xf32> -> tensor<5x8xf32>
  return
}

// -----

func.func @f(%x: tensor<5x5xf32>, %o: tensor<4xi32>, %c: tensor<53xi8>, %s: tensor<15xf32>) {
  // expected-error @+1 {{each expert's 7x5 4-bit codes must fill whole bytes}}
  %y = llm.grouped_matmul_int %x, %o, %c, %s {bits = 4 : i64, channel_axis = 1 : i64, weight_shape = array<i64: 3, 7, 5>, transpose_b} : tensor<5x5xf32>, tensor<4xi32>, tensor<53xi8>, tensor<15xf32> -> tensor<5x7xf32>
  return
}

// -----

func.func @f(%x: tensor<5x32xf32>, %o: tensor<4xi32>, %c: tensor<768xi8>, %s: tensor<24xf32>) {
  // expected-error @+1 {{channel_axis (within an expert's slice) must be 0 or 1, got 2}}
  %y = llm.grouped_matmul_int %x, %o, %c, %s {bits = 8 : i64, channel_axis = 2 : i64, weight_shape = array<i64: 3, 8, 32>, transpose_b} : tensor<5x32xf32>, tensor<4xi32>, tensor<768xi8>, tensor<24xf32> -> tensor<5x8xf32>
  return
}

// -----

func.func @f(%x: tensor<5x32xf32>, %o: tensor<4xi32>, %c: tensor<384xi8>, %q: tensor<24xi8>, %s: tensor<1xf32>, %m: tensor<f32>) {
  // expected-error @+1 {{blocks of 24 must divide the weights' last dimension (32)}}
  %y = llm.grouped_matmul_nf4 %x, %o, %c, %q, %s, %m {block = 24 : i64, weight_shape = array<i64: 3, 8, 32>, transpose_b} : tensor<5x32xf32>, tensor<4xi32>, tensor<384xi8>, tensor<24xi8>, tensor<1xf32>, tensor<f32> -> tensor<5x8xf32>
  return
}

// -----

func.func @f(%x: tensor<5x32xf32>, %o: tensor<4xi32>, %c: tensor<384xi8>, %q: tensor<12xi8>, %s: tensor<1xf32>, %m: tensor<f32>) {
  // expected-error @+1 {{absmax_q (one per block) must hold 24 elements for stacked weights [3, 8, 32]}}
  %y = llm.grouped_matmul_nf4 %x, %o, %c, %q, %s, %m {block = 32 : i64, weight_shape = array<i64: 3, 8, 32>, transpose_b} : tensor<5x32xf32>, tensor<4xi32>, tensor<384xi8>, tensor<12xi8>, tensor<1xf32>, tensor<f32> -> tensor<5x8xf32>
  return
}

// -----

// A tensor-parallel piece of the stack: each chunk of its rows must hold
// whole experts' rows (here 4 rows of experts of 8).
func.func @f(%x: tensor<5x32xf32>, %o: tensor<4xi32>, %c: tensor<384xi8>, %q: tensor<24xi8>, %s: tensor<1xf32>, %m: tensor<f32>) {
  // expected-error @+1 {{each chunk of the piece's rows (4) must hold whole experts' rows (8)}}
  %y = llm.grouped_matmul_nf4 %x, %o, %c, %q, %s, %m {block = 32 : i64, weight_shape = array<i64: 3, 8, 32>, transpose_b, whole_shape = array<i64: 48, 32>, chunks = array<i64: 6, 1>, piece_offset = array<i64: 0, 0>} : tensor<5x32xf32>, tensor<4xi32>, tensor<384xi8>, tensor<24xi8>, tensor<1xf32>, tensor<f32> -> tensor<5x8xf32>
  return
}

// -----

// A piece's double-quantized scales are the whole stack's (768 blocks).
func.func @f(%x: tensor<5x32xf32>, %o: tensor<4xi32>, %c: tensor<384xi8>, %q: tensor<24xi8>, %s: tensor<1xf32>, %m: tensor<f32>) {
  // expected-error @+1 {{absmax_scale (one per 256 blocks) must hold 3 elements for stacked weights [3, 8, 32]}}
  %y = llm.grouped_matmul_nf4 %x, %o, %c, %q, %s, %m {block = 32 : i64, weight_shape = array<i64: 3, 8, 32>, transpose_b, whole_shape = array<i64: 768, 32>, chunks = array<i64: 3, 1>, piece_offset = array<i64: 8, 0>} : tensor<5x32xf32>, tensor<4xi32>, tensor<384xi8>, tensor<24xi8>, tensor<1xf32>, tensor<f32> -> tensor<5x8xf32>
  return
}
