// RUN: llmc-opt %s --llmc-kv-cache="program=decode page=4 blocks=6 max-blocks=3 cache-type=fp8_e4m3" | FileCheck %s
// RUN: llmc-opt %s --llmc-kv-cache="program=decode page=4 blocks=6 max-blocks=3 cache-type=fp8_e4m3" --llmc-lower-to-exec | FileCheck %s --check-prefix=EXEC
// RUN: not llmc-opt %s --llmc-kv-cache="program=decode cache-type=fp8_e5m2" 2>&1 | FileCheck %s --check-prefix=BAD

// An fp8 E4M3 cache: each pool [blocks, page, KV, D] of f8E4M3FN codes has
// a scale pool [blocks, page, KV] f32 beside it, both state updated in
// place through tied results, as an int8 cache's; the writes quantize,
// attention reads codes and scales.
// CHECK-LABEL: func.func @decode(
// CHECK-SAME:    %arg5: tensor<6x4x2x16xf8E4M3FN> {llmc.name = "kv/h.0.k", llmc.role = "kv_cache"}
// CHECK-SAME:    %arg6: tensor<6x4x2xf32> {llmc.name = "kv/h.0.k_scale", llmc.role = "kv_cache"}
// CHECK-SAME:    %arg7: tensor<6x4x2x16xf8E4M3FN> {llmc.name = "kv/h.0.v", llmc.role = "kv_cache"}
// CHECK-SAME:    %arg8: tensor<6x4x2xf32> {llmc.name = "kv/h.0.v_scale", llmc.role = "kv_cache"}
// CHECK-SAME:    -> (tensor<2x32xf32> {llmc.name = "logits", llmc.role = "output"}, tensor<6x4x2x16xf8E4M3FN> {llmc.tied_to = 5 : i64}, tensor<6x4x2xf32> {llmc.tied_to = 6 : i64}, tensor<6x4x2x16xf8E4M3FN> {llmc.tied_to = 7 : i64}, tensor<6x4x2xf32> {llmc.tied_to = 8 : i64})
// CHECK:       %[[K:[a-z_0-9]+]], %[[KS:[a-z_0-9]+]] = llm.kv_cache_write %arg5, %{{.*}}, %arg3, %arg4 scales %arg6 : tensor<6x4x2xf32> {llmc.block_name = "h.0"} : tensor<6x4x2x16xf8E4M3FN>, tensor<2x1x2x16xf32>, tensor<2x3xi32>, tensor<2x1xi32>
// CHECK-NEXT:  %[[V:[a-z_0-9]+]], %[[VS:[a-z_0-9]+]] = llm.kv_cache_write %arg7, %{{.*}}, %arg3, %arg4 scales %arg8 : tensor<6x4x2xf32>
// CHECK-NEXT:  llm.paged_attention %{{.*}}, %[[K]], %[[V]], %arg3, %arg4 scales %[[KS]], %[[VS]] : tensor<6x4x2xf32>, tensor<6x4x2xf32> {llmc.block_name = "h.0", scale = 2.500000e-01 : f64} : tensor<2x1x2x16xf32>, tensor<6x4x2x16xf8E4M3FN>
// CHECK:       return %{{.*}}, %[[K]], %[[KS]], %[[V]], %[[VS]]

// Lowered, the pools are byte buffers of 6·4·2·16 = 768 bytes; the kernels
// learn that the bytes are E4M3 codes from `format` = 2 (int8's is 0).
// EXEC:      exec.buffer {{.*}} : memref<6x4x2x16xf8E4M3FN>
// EXEC:      exec.kernel "kv_cache_write"{{.*}}format = 2
// EXEC:      exec.kernel "kv_cache_write"{{.*}}format = 2
// EXEC:      exec.kernel "paged_attention"{{.*}}format = 2

// BAD: error: kv-cache: cache-type must be f32, bf16, f16, int8 or fp8_e4m3, got 'fp8_e5m2'
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
