// RUN: llmc-opt %s -split-input-file -verify-diagnostics
// The paged KV cache ops' verifier diagnostics (pools, cache types, scales).

func.func @f(%c: tensor<6x4x16xf32>, %k: tensor<2x1x2x16xf32>, %t: tensor<2x3xi32>, %p: tensor<2x1xi32>) {
  // expected-error @+1 {{the cache must be a block pool [NB, P, KV, D], got 6x4x16}}
  %0 = llm.kv_cache_write %c, %k, %t, %p : tensor<6x4x16xf32>, tensor<2x1x2x16xf32>, tensor<2x3xi32>, tensor<2x1xi32>
  return
}

// -----

func.func @f(%c: tensor<6x4x2x16xf32>, %k: tensor<2x1x1x16xf32>, %t: tensor<2x3xi32>, %p: tensor<2x1xi32>) {
  // expected-error @+1 {{rows must be [B, T, KV, D] with KV, D of}}
  %0 = llm.kv_cache_write %c, %k, %t, %p : tensor<6x4x2x16xf32>, tensor<2x1x1x16xf32>, tensor<2x3xi32>, tensor<2x1xi32>
  return
}

// -----

func.func @f(%c: tensor<6x4x2x16xf32>, %k: tensor<2x1x2x16xbf16>, %t: tensor<2x3xi32>, %p: tensor<2x1xi32>) {
  // expected-error @+1 {{a cache of 'f32' cannot hold 'bf16' rows (expected the rows' type, bf16 or f16 under f32, or i8 or f8E4M3FN with scales)}}
  %0 = llm.kv_cache_write %c, %k, %t, %p : tensor<6x4x2x16xf32>, tensor<2x1x2x16xbf16>, tensor<2x3xi32>, tensor<2x1xi32>
  return
}

// -----

func.func @f(%c: tensor<6x4x2x16xi8>, %k: tensor<2x1x2x16xf32>, %t: tensor<2x3xi32>, %p: tensor<2x1xi32>) {
  // expected-error @+1 {{a cache of 'i8' codes needs a scale pool [NB, P, KV] f32}}
  %0 = llm.kv_cache_write %c, %k, %t, %p : tensor<6x4x2x16xi8>, tensor<2x1x2x16xf32>, tensor<2x3xi32>, tensor<2x1xi32>
  return
}

// -----

func.func @f(%c: tensor<6x4x2x16xf8E4M3FN>, %k: tensor<2x1x2x16xf32>, %t: tensor<2x3xi32>, %p: tensor<2x1xi32>) {
  // expected-error @+1 {{a cache of 'f8E4M3FN' codes needs a scale pool [NB, P, KV] f32}}
  %0 = llm.kv_cache_write %c, %k, %t, %p : tensor<6x4x2x16xf8E4M3FN>, tensor<2x1x2x16xf32>, tensor<2x3xi32>, tensor<2x1xi32>
  return
}

// -----

// E5M2 is no cache format: it is a float narrower than the rows, and no
// code type.
func.func @f(%c: tensor<6x4x2x16xf8E5M2>, %s: tensor<6x4x2xf32>, %k: tensor<2x1x2x16xf32>, %t: tensor<2x3xi32>, %p: tensor<2x1xi32>) {
  // expected-error @+1 {{a cache of 'f8E5M2' cannot hold 'f32' rows (expected the rows' type, bf16 or f16 under f32, or i8 or f8E4M3FN with scales)}}
  %0:2 = llm.kv_cache_write %c, %k, %t, %p scales %s : tensor<6x4x2xf32> : tensor<6x4x2x16xf8E5M2>, tensor<2x1x2x16xf32>, tensor<2x3xi32>, tensor<2x1xi32>
  return
}

// -----

func.func @f(%c: tensor<6x4x2x16xi8>, %s: tensor<6x4xf32>, %k: tensor<2x1x2x16xf32>, %t: tensor<2x3xi32>, %p: tensor<2x1xi32>) {
  // expected-error @+1 {{scales must be 'tensor<6x4x2xf32>' for a cache 'tensor<6x4x2x16xi8>', got 'tensor<6x4xf32>'}}
  %0:2 = llm.kv_cache_write %c, %k, %t, %p scales %s : tensor<6x4xf32> : tensor<6x4x2x16xi8>, tensor<2x1x2x16xf32>, tensor<2x3xi32>, tensor<2x1xi32>
  return
}

// -----

func.func @f(%c: tensor<6x4x2x16xbf16>, %s: tensor<6x4x2xf32>, %k: tensor<2x1x2x16xf32>, %t: tensor<2x3xi32>, %p: tensor<2x1xi32>) {
  // expected-error @+1 {{a 'bf16' cache takes no scales}}
  %0:2 = llm.kv_cache_write %c, %k, %t, %p scales %s : tensor<6x4x2xf32> : tensor<6x4x2x16xbf16>, tensor<2x1x2x16xf32>, tensor<2x3xi32>, tensor<2x1xi32>
  return
}

// -----

func.func @f(%q: tensor<2x1x4x16xbf16>, %c: tensor<6x4x2x16xf32>, %t: tensor<2x3xi32>, %p: tensor<2x1xi32>) {
  // expected-error @+1 {{a cache of 'f32' cannot serve a 'bf16' q (expected q's type, bf16 or f16 under f32, or i8 or f8E4M3FN with scales)}}
  %0 = llm.paged_attention %q, %c, %c, %t, %p {scale = 0.25 : f64} : tensor<2x1x4x16xbf16>, tensor<6x4x2x16xf32>, tensor<2x3xi32>, tensor<2x1xi32>
  return
}

// -----

func.func @f(%q: tensor<2x1x4x16xf32>, %c: tensor<6x4x2x16xi8>, %s: tensor<6x4x2xf32>, %t: tensor<2x3xi32>, %p: tensor<2x1xi32>) {
  // expected-error @+1 {{a cache of 'i8' codes needs two scale pools (keys', values') [NB, P, KV] f32}}
  %0 = llm.paged_attention %q, %c, %c, %t, %p scales %s : tensor<6x4x2xf32> {scale = 0.25 : f64} : tensor<2x1x4x16xf32>, tensor<6x4x2x16xi8>, tensor<2x3xi32>, tensor<2x1xi32>
  return
}

// -----

func.func @f(%q: tensor<2x1x4x16xf32>, %c: tensor<6x4x2x16xf8E4M3FN>, %s: tensor<6x4x2xf32>, %s1: tensor<6x4x1xf32>, %t: tensor<2x3xi32>, %p: tensor<2x1xi32>) {
  // expected-error @+1 {{scales must be 'tensor<6x4x2xf32>' for a cache 'tensor<6x4x2x16xf8E4M3FN>', got 'tensor<6x4x1xf32>'}}
  %0 = llm.paged_attention %q, %c, %c, %t, %p scales %s, %s1 : tensor<6x4x2xf32>, tensor<6x4x1xf32> {scale = 0.25 : f64} : tensor<2x1x4x16xf32>, tensor<6x4x2x16xf8E4M3FN>, tensor<2x3xi32>, tensor<2x1xi32>
  return
}

// -----

func.func @f(%q: tensor<2x1x4x8xf32>, %c: tensor<6x4x2x16xf32>, %t: tensor<2x3xi32>, %p: tensor<2x1xi32>) {
  // expected-error @+1 {{q must be [B, T, H, D] of the cache's head size}}
  %0 = llm.paged_attention %q, %c, %c, %t, %p {scale = 0.25 : f64} : tensor<2x1x4x8xf32>, tensor<6x4x2x16xf32>, tensor<2x3xi32>, tensor<2x1xi32>
  return
}

// -----

func.func @f(%q: tensor<2x1x3x16xf32>, %c: tensor<6x4x2x16xf32>, %t: tensor<2x3xi32>, %p: tensor<2x1xi32>) {
  // expected-error @+1 {{query heads 3 must be a multiple of kv heads 2}}
  %0 = llm.paged_attention %q, %c, %c, %t, %p {scale = 0.25 : f64} : tensor<2x1x3x16xf32>, tensor<6x4x2x16xf32>, tensor<2x3xi32>, tensor<2x1xi32>
  return
}

// -----

func.func @f(%q: tensor<2x1x4x16xf32>, %c: tensor<6x4x2x16xf32>, %t: tensor<2x3xi32>, %p: tensor<2x1xi32>) {
  // expected-error @+1 {{scale must be > 0}}
  %0 = llm.paged_attention %q, %c, %c, %t, %p {scale = 0.0 : f64} : tensor<2x1x4x16xf32>, tensor<6x4x2x16xf32>, tensor<2x3xi32>, tensor<2x1xi32>
  return
}

// -----

func.func @f(%q: tensor<2x1x4x16xf32>, %c: tensor<6x4x2x16xf32>, %t: tensor<3x3xi32>, %p: tensor<2x1xi32>) {
  // expected-error @+1 {{block_table must be [B, M] with B = 2, got 3x3}}
  %0 = llm.paged_attention %q, %c, %c, %t, %p {scale = 0.25 : f64} : tensor<2x1x4x16xf32>, tensor<6x4x2x16xf32>, tensor<3x3xi32>, tensor<2x1xi32>
  return
}

// -----

func.func @f(%q: tensor<2x1x4x16xf32>, %c: tensor<6x4x2x16xf32>, %t: tensor<2x3xi32>, %p: tensor<2x2xi32>) {
  // expected-error @+1 {{positions must be 2x1, got 2x2}}
  %0 = llm.paged_attention %q, %c, %c, %t, %p {scale = 0.25 : f64} : tensor<2x1x4x16xf32>, tensor<6x4x2x16xf32>, tensor<2x3xi32>, tensor<2x2xi32>
  return
}
