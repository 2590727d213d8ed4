// RUN: llmc-opt %s --llmc-kv-cache="program=decode page=4 blocks=6 max-blocks=3 cache-type=int8" | FileCheck %s
// RUN: llmc-opt %s --llmc-kv-cache="program=decode page=4 blocks=6 max-blocks=3 cache-type=bf16" | FileCheck %s --check-prefix=BF16
// RUN: llmc-opt %s --llmc-kv-cache="program=decode page=4 blocks=6 max-blocks=3 cache-type=f32" | FileCheck %s --check-prefix=F32
// RUN: not llmc-opt %s --llmc-kv-cache="program=decode cache-type=int4" 2>&1 | FileCheck %s --check-prefix=BAD

// An int8 cache: each pool [blocks, page, KV, D] of codes has a scale pool
// [blocks, page, KV] f32 beside it, both state updated in place through
// tied results; the writes quantize, attention reads codes and scales.
// CHECK-LABEL: func.func @decode(
// CHECK-SAME:    %arg3: tensor<2x3xi32> {llmc.name = "block_table", llmc.role = "input"}
// CHECK-SAME:    %arg4: tensor<2x1xi32> {llmc.name = "cache_positions", llmc.role = "input"}
// CHECK-SAME:    %arg5: tensor<6x4x2x16xi8> {llmc.name = "kv/h.0.k", llmc.role = "kv_cache"}
// CHECK-SAME:    %arg6: tensor<6x4x2xf32> {llmc.name = "kv/h.0.k_scale", llmc.role = "kv_cache"}
// CHECK-SAME:    %arg7: tensor<6x4x2x16xi8> {llmc.name = "kv/h.0.v", llmc.role = "kv_cache"}
// CHECK-SAME:    %arg8: tensor<6x4x2xf32> {llmc.name = "kv/h.0.v_scale", llmc.role = "kv_cache"}
// CHECK-SAME:    -> (tensor<2x32xf32> {llmc.name = "logits", llmc.role = "output"}, tensor<6x4x2x16xi8> {llmc.tied_to = 5 : i64}, tensor<6x4x2xf32> {llmc.tied_to = 6 : i64}, tensor<6x4x2x16xi8> {llmc.tied_to = 7 : i64}, tensor<6x4x2xf32> {llmc.tied_to = 8 : i64})
// CHECK:       %[[K:[a-z_0-9]+]], %[[KS:[a-z_0-9]+]] = llm.kv_cache_write %arg5, %{{.*}}, %arg3, %arg4 scales %arg6 : tensor<6x4x2xf32> {llmc.block_name = "h.0"} : tensor<6x4x2x16xi8>, tensor<2x1x2x16xf32>, tensor<2x3xi32>, tensor<2x1xi32>
// CHECK-NEXT:  %[[V:[a-z_0-9]+]], %[[VS:[a-z_0-9]+]] = llm.kv_cache_write %arg7, %{{.*}}, %arg3, %arg4 scales %arg8 : tensor<6x4x2xf32>
// CHECK-NEXT:  llm.paged_attention %{{.*}}, %[[K]], %[[V]], %arg3, %arg4 scales %[[KS]], %[[VS]] : tensor<6x4x2xf32>, tensor<6x4x2xf32> {llmc.block_name = "h.0", scale = 2.500000e-01 : f64} : tensor<2x1x2x16xf32>, tensor<6x4x2x16xi8>
// CHECK:       return %{{.*}}, %[[K]], %[[KS]], %[[V]], %[[VS]]

// A bf16 cache under f32 keys: the pools are bf16, the writes round, no
// scales.
// BF16-LABEL: func.func @decode(
// BF16-SAME:    %arg5: tensor<6x4x2x16xbf16> {llmc.name = "kv/h.0.k", llmc.role = "kv_cache"}
// BF16-SAME:    %arg6: tensor<6x4x2x16xbf16> {llmc.name = "kv/h.0.v", llmc.role = "kv_cache"}
// BF16-NOT:     _scale
// BF16:         llm.kv_cache_write %arg5, %{{.*}}, %arg3, %arg4 {llmc.block_name = "h.0"} : tensor<6x4x2x16xbf16>, tensor<2x1x2x16xf32>
// BF16:         llm.paged_attention {{.*}} : tensor<2x1x2x16xf32>, tensor<6x4x2x16xbf16>

// f32 is the keys' own type: the cache as without the option.
// F32:         %arg5: tensor<6x4x2x16xf32> {llmc.name = "kv/h.0.k", llmc.role = "kv_cache"}

// BAD: error: kv-cache: cache-type must be f32, bf16, f16, int8 or fp8_e4m3, got 'int4'
func.func @logits(%w: tensor<32x32xf32> {llm.param = #llm.param<name = "wte.weight", init = "normal", scale = 0.02>},
                  %tokens: tensor<2x1xi32> {llmc.name = "tokens", llmc.role = "input"},
                  %positions: tensor<2x1xi32> {llmc.name = "positions", llmc.role = "input"})
    -> (tensor<2x1x32xf32> {llmc.name = "logits", llmc.role = "output"}) {
  %x = llm.embedding %w, %tokens : tensor<32x32xf32>, tensor<2x1xi32>
  %h = llm.block "h.0" -> tensor<2x1x32xf32> {
    %q = llm.reshape %x : tensor<2x1x32xf32> to tensor<2x1x2x16xf32>
    %o, %lse = llm.attention %q, %q, %q {causal, scale = 0.25 : f64} : tensor<2x1x2x16xf32>, tensor<2x1x2x16xf32>
    %r = llm.reshape %o : tensor<2x1x2x16xf32> to tensor<2x1x32xf32>
    llm.yield %r : tensor<2x1x32xf32>
  }
  %logits = llm.matmul %h, %w {transpose_b} : tensor<2x1x32xf32>, tensor<32x32xf32> -> tensor<2x1x32xf32>
  return %logits : tensor<2x1x32xf32>
}
