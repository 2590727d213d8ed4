// RUN: llmc-opt %s -split-input-file -verify-diagnostics
// Every dist verifier diagnostic.

// expected-error @+1 {{needs at least one axis}}
dist.mesh @m axes [] shape []

// -----

// expected-error @+1 {{has 2 axis names but 1 sizes}}
dist.mesh @m axes ["dp", "tp"] shape [2]

// -----

// expected-error @+1 {{axis names must not be empty}}
dist.mesh @m axes [""] shape [2]

// -----

// expected-error @+1 {{axis 'dp' is named twice}}
dist.mesh @m axes ["dp", "dp"] shape [2, 2]

// -----

// expected-error @+1 {{axis 'tp' must have size >= 1, got 0}}
dist.mesh @m axes ["tp"] shape [0]

// -----

dist.mesh @m axes ["dp", "tp"] shape [2, 4]
func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{axis 'dp' is used twice}}
  %s = dist.shard %x {sharding = #dist.sharding<mesh = @m, dims = [["dp"], ["dp"]]>} : tensor<8x16xf32>
  return
}

// -----

dist.mesh @m axes ["dp", "tp"] shape [2, 4]
func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{each entry of dims must be a list of mesh axes}}
  %s = dist.shard %x {sharding = #dist.sharding<mesh = @m, dims = ["dp", []]>} : tensor<8x16xf32>
  return
}

// -----

dist.mesh @m axes ["dp", "tp"] shape [2, 4]
func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{mesh axes must be strings}}
  %s = dist.shard %x {sharding = #dist.sharding<mesh = @m, dims = [[1], []]>} : tensor<8x16xf32>
  return
}

// -----

dist.mesh @m axes ["dp", "tp"] shape [2, 4]
func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{sharding has 1 dimension entries for a rank-2 tensor}}
  %s = dist.shard %x {sharding = #dist.sharding<mesh = @m, dims = [["dp"]]>} : tensor<8x16xf32>
  return
}

// -----

dist.mesh @m axes ["dp", "tp"] shape [2, 4]
func.func @f(%x: tensor<6x16xf32>) {
  // expected-error @+1 {{dimension 0 of size 6 is not divisible by the group size 4}}
  %s = dist.shard %x {sharding = #dist.sharding<mesh = @m, dims = [["tp"], []]>} : tensor<6x16xf32>
  return
}

// -----

func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{refers to @nowhere, which is not a dist.mesh}}
  %s = dist.shard %x {sharding = #dist.sharding<mesh = @nowhere, dims = [[], []]>} : tensor<8x16xf32>
  return
}

// -----

dist.mesh @m axes ["dp", "tp"] shape [2, 4]
func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{mesh @m has no axis 'pp'}}
  %r = dist.all_reduce %x on @m axes ["pp"] reduction "sum" : tensor<8x16xf32> -> tensor<8x16xf32>
  return
}

// -----

dist.mesh @m axes ["dp", "tp"] shape [2, 4]
func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{axis 'tp' appears twice}}
  %r = dist.all_reduce %x on @m axes ["tp", "tp"] reduction "sum" : tensor<8x16xf32> -> tensor<8x16xf32>
  return
}

// -----

dist.mesh @m axes ["dp", "tp"] shape [2, 4]
func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{needs at least one mesh axis}}
  %r = dist.all_reduce %x on @m axes [] reduction "sum" : tensor<8x16xf32> -> tensor<8x16xf32>
  return
}

// -----

dist.mesh @m axes ["dp", "tp"] shape [2, 4]
func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{unknown reduction 'prod' (expected sum, max, min or mean)}}
  %r = dist.all_reduce %x on @m axes ["tp"] reduction "prod" : tensor<8x16xf32> -> tensor<8x16xf32>
  return
}

// -----

dist.mesh @m axes ["dp", "tp"] shape [2, 4]
func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{cannot change the element type}}
  %r = dist.all_reduce %x on @m axes ["tp"] reduction "sum" : tensor<8x16xf32> -> tensor<8x16xbf16>
  return
}

// -----

dist.mesh @m axes ["dp", "tp"] shape [2, 4]
func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{result must be 'tensor<8x16xf32>', got 'tensor<8x8xf32>'}}
  %r = dist.all_reduce %x on @m axes ["tp"] reduction "sum" : tensor<8x16xf32> -> tensor<8x8xf32>
  return
}

// -----

dist.mesh @m axes ["dp", "tp"] shape [2, 4]
func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{dim 2 is out of range for rank 2}}
  %g = dist.all_gather %x on @m axes ["dp"] dim 2 : tensor<8x16xf32> -> tensor<16x16xf32>
  return
}

// -----

dist.mesh @m axes ["dp", "tp"] shape [2, 4]
func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{result must be 'tensor<32x16xf32>', got 'tensor<16x16xf32>'}}
  %g = dist.all_gather %x on @m axes ["tp"] dim 0 : tensor<8x16xf32> -> tensor<16x16xf32>
  return
}

// -----

dist.mesh @m axes ["dp", "tp"] shape [2, 4]
func.func @f(%x: tensor<6x16xf32>) {
  // expected-error @+1 {{dimension 0 of size 6 is not divisible by the group size 4}}
  %s = dist.reduce_scatter %x on @m axes ["tp"] dim 0 reduction "sum" : tensor<6x16xf32> -> tensor<1x16xf32>
  return
}

// -----

dist.mesh @m axes ["dp", "tp"] shape [2, 4]
func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{root 2 is outside the group of 2}}
  %b = dist.broadcast %x on @m axes ["dp"] root 2 : tensor<8x16xf32> -> tensor<8x16xf32>
  return
}

// -----

dist.mesh @m axes ["dp", "tp"] shape [2, 4]
func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{root -1 is outside the group of 2}}
  %b = dist.reduce %x on @m axes ["dp"] root -1 reduction "sum" : tensor<8x16xf32> -> tensor<8x16xf32>
  return
}

// -----

dist.mesh @m axes ["dp", "tp"] shape [2, 4]
func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{unknown reduction 'any'}}
  %b = dist.reduce %x on @m axes ["dp"] root 0 reduction "any" : tensor<8x16xf32> -> tensor<8x16xf32>
  return
}

// -----

dist.mesh @m axes ["dp", "tp"] shape [2, 4]
func.func @f(%x: tensor<8x6xf32>) {
  // expected-error @+1 {{dimension 1 of size 6 is not divisible by the group size 4}}
  %a = dist.all_to_all %x on @m axes ["tp"] split 1 concat 0 : tensor<8x6xf32> -> tensor<32x1xf32>
  return
}

// -----

dist.mesh @m axes ["dp", "tp"] shape [2, 4]
func.func @f(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{concat dim 3 is out of range for rank 2}}
  %a = dist.all_to_all %x on @m axes ["tp"] split 1 concat 3 : tensor<8x8xf32> -> tensor<8x8xf32>
  return
}

// -----

dist.mesh @m axes ["pp"] shape [4]
func.func @f(%x: tensor<8xf32>) {
  // expected-error @+1 {{shift 4 must be non-zero and smaller than the size of axis 'pp' (4)}}
  dist.send %x on @m axis "pp" shift 4 tag 0 : tensor<8xf32>
  return
}

// -----

dist.mesh @m axes ["pp"] shape [4]
func.func @f() {
  // expected-error @+1 {{mesh @m has no axis 'dp'}}
  %x = dist.recv on @m axis "dp" shift 1 tag 0 : tensor<8xf32>
  return
}

// -----

dist.mesh @m axes ["tp"] shape [2]
func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{unknown dist attribute 'dist.offsets'}}
  %y = llm.scale %x {factor = 1.0 : f64, dist.offsets = 1 : i64} : tensor<4xf32>
  return
}

// -----

dist.mesh @m axes ["tp"] shape [2]
func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{'dist.rank_offsets' must be an array of #dist.rank_offset}}
  %y = llm.scale %x {factor = 1.0 : f64, dist.rank_offsets = 1 : i64} : tensor<4xf32>
  return
}

// -----

dist.mesh @m axes ["tp"] shape [2]
func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{'dist.rank_offsets' must be an array of #dist.rank_offset, got 1 : i64}}
  %y = llm.scale %x {factor = 1.0 : f64, dist.rank_offsets = [1 : i64]} : tensor<4xf32>
  return
}

// -----

func.func @f(%w: tensor<4x2xf32>, %ids: tensor<3xi32>) {
  // expected-error @+1 {{rank offset refers to @m, which is not a dist.mesh}}
  %e = llm.embedding %w, %ids {row_offset = 0 : i64, vocab_size = 8 : i64, dist.rank_offsets = [#dist.rank_offset<mesh = @m, attr = "row_offset", index = 0, axes = ["tp"], stride = 4>]} : tensor<4x2xf32>, tensor<3xi32>
  return
}

// -----

dist.mesh @m axes ["tp"] shape [2]
func.func @f(%w: tensor<4x2xf32>, %ids: tensor<3xi32>) {
  // expected-error @+1 {{rank offset names axis "dp", which mesh @m does not have}}
  %e = llm.embedding %w, %ids {row_offset = 0 : i64, vocab_size = 8 : i64, dist.rank_offsets = [#dist.rank_offset<mesh = @m, attr = "row_offset", index = 0, axes = ["dp"], stride = 4>]} : tensor<4x2xf32>, tensor<3xi32>
  return
}

// -----

dist.mesh @m axes ["tp"] shape [2]
func.func @f(%w: tensor<4x2xf32>, %ids: tensor<3xi32>) {
  // expected-error @+1 {{rank offset stride must be >= 0, got -4}}
  %e = llm.embedding %w, %ids {row_offset = 0 : i64, vocab_size = 8 : i64, dist.rank_offsets = [#dist.rank_offset<mesh = @m, attr = "row_offset", index = 0, axes = ["tp"], stride = -4>]} : tensor<4x2xf32>, tensor<3xi32>
  return
}

// -----

dist.mesh @m axes ["tp"] shape [2]
func.func @f(%w: tensor<4x2xf32>, %ids: tensor<3xi32>) {
  // expected-error @+1 {{rank offset targets attribute 'offset', which is not an integer or integer array here}}
  %e = llm.embedding %w, %ids {row_offset = 0 : i64, vocab_size = 8 : i64, dist.rank_offsets = [#dist.rank_offset<mesh = @m, attr = "offset", index = 0, axes = ["tp"], stride = 4>]} : tensor<4x2xf32>, tensor<3xi32>
  return
}

// -----

dist.mesh @m axes ["tp"] shape [2]
func.func @f(%w: tensor<4x2xf32>, %ids: tensor<3xi32>) {
  // expected-error @+1 {{rank offset index 1 is out of range for attribute 'row_offset' of 1 element(s)}}
  %e = llm.embedding %w, %ids {row_offset = 0 : i64, vocab_size = 8 : i64, dist.rank_offsets = [#dist.rank_offset<mesh = @m, attr = "row_offset", index = 1, axes = ["tp"], stride = 4>]} : tensor<4x2xf32>, tensor<3xi32>
  return
}
