// RUN: llmc-opt %s --llmc-kv-cache="program=prefill page=4 blocks=6 max-blocks=3" | FileCheck %s
// RUN: llmc-opt %s --llmc-kv-cache="program=decode page=4 blocks=6 max-blocks=3" | FileCheck %s --check-prefix=DECODE
// RUN: not llmc-opt %s --llmc-kv-cache="program=train" 2>&1 | FileCheck %s --check-prefix=PROGRAM
// RUN: not llmc-opt %s --llmc-kv-cache="page=0" 2>&1 | FileCheck %s --check-prefix=SIZES

// One causal attention over 8 new tokens per row: the keys and values go
// into block pools [blocks, page, KV, D] (state, updated in place through
// tied results), attention reads them through the block table, and the
// head's matmul runs on each row's last column only.
// CHECK-LABEL: func.func @prefill(
// CHECK-SAME:    %arg3: tensor<2x3xi32> {llmc.name = "block_table", llmc.role = "input"}
// CHECK-SAME:    %arg4: tensor<2x8xi32> {llmc.name = "cache_positions", llmc.role = "input"}
// CHECK-SAME:    %arg5: tensor<6x4x2x16xf32> {llmc.name = "kv/h.0.k", llmc.role = "kv_cache"}
// CHECK-SAME:    %arg6: tensor<6x4x2x16xf32> {llmc.name = "kv/h.0.v", llmc.role = "kv_cache"}
// CHECK-SAME:    -> (tensor<2x32xf32> {llmc.name = "logits", llmc.role = "output"}, tensor<6x4x2x16xf32> {llmc.tied_to = 5 : i64}, tensor<6x4x2x16xf32> {llmc.tied_to = 6 : i64})
// CHECK:       llm.rope %{{.*}} positions %arg2 : tensor<2x8xi32> {llmc.block_name = "h.0", position_limit = 12 : i64, theta = 1.000000e+04 : f64}
// CHECK:       %[[K:.*]] = llm.kv_cache_write %arg5, %{{.*}}, %arg3, %arg4 {llmc.block_name = "h.0"} : tensor<6x4x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x3xi32>, tensor<2x8xi32>
// CHECK-NEXT:  %[[V:.*]] = llm.kv_cache_write %arg6, %{{.*}}, %arg3, %arg4
// CHECK-NEXT:  %[[O:.*]] = llm.paged_attention %{{.*}}, %[[K]], %[[V]], %arg3, %arg4 {llmc.block_name = "h.0", scale = 2.500000e-01 : f64}
// CHECK-NOT:   llm.attention
// CHECK:       %[[LAST:.*]] = llm.slice %{{.*}} {offsets = array<i64: 0, 7, 0>} : tensor<2x8x32xf32> to tensor<2x1x32xf32>
// CHECK-NEXT:  %[[HEAD:.*]] = llm.matmul %[[LAST]], %arg0 {transpose_b} : tensor<2x1x32xf32>, tensor<32x32xf32> -> tensor<2x1x32xf32>
// CHECK-NEXT:  %[[LOGITS:.*]] = llm.reshape %[[HEAD]] : tensor<2x1x32xf32> to tensor<2x32xf32>
// CHECK-NEXT:  return %[[LOGITS]], %[[K]], %[[V]]
// CHECK-NOT:   func.func @forward
// DECODE-LABEL: func.func @decode(
// DECODE-NOT:   llm.attention
// DECODE:       llm.paged_attention
// PROGRAM: error: kv-cache: program must be prefill or decode, got 'train'
// SIZES: error: kv-cache: page, blocks and max-blocks must be > 0
func.func @logits(%w: tensor<32x32xf32> {llm.param = #llm.param<name = "wte.weight", init = "normal", scale = 0.02>},
                  %tokens: tensor<2x8xi32> {llmc.name = "tokens", llmc.role = "input"},
                  %positions: tensor<2x8xi32> {llmc.name = "positions", llmc.role = "input"})
    -> (tensor<2x8x32xf32> {llmc.name = "logits", llmc.role = "output"}) {
  %x = llm.embedding %w, %tokens : tensor<32x32xf32>, tensor<2x8xi32>
  %h = llm.block "h.0" -> tensor<2x8x32xf32> {
    %q = llm.reshape %x : tensor<2x8x32xf32> to tensor<2x8x2x16xf32>
    %k = llm.rope %q positions %positions : tensor<2x8xi32> {theta = 10000.0 : f64} : tensor<2x8x2x16xf32>
    %o, %lse = llm.attention %q, %k, %q {causal, scale = 0.25 : f64} : tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>
    %r = llm.reshape %o : tensor<2x8x2x16xf32> to tensor<2x8x32xf32>
    llm.yield %r : tensor<2x8x32xf32>
  }
  %logits = llm.matmul %h, %w {transpose_b} : tensor<2x8x32xf32>, tensor<32x32xf32> -> tensor<2x8x32xf32>
  return %logits : tensor<2x8x32xf32>
}
