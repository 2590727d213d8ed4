// RUN: llmc-opt %s --llmc-kv-cache="program=decode page=4 blocks=6 max-blocks=3" | FileCheck %s
// RUN: llmc-opt %s --llmc-kv-cache="program=decode page=4 blocks=6 max-blocks=3 cache-type=int8" | FileCheck %s --check-prefix=INT8
// RUN: llmc-opt %s --llmc-kv-cache="program=decode page=4 blocks=6 max-blocks=3 cache-type=fp8_e4m3" | FileCheck %s --check-prefix=FP8
// RUN: not llmc-opt %s --llmc-kv-cache="program=decode cache-type=f16" 2>&1 | FileCheck %s --check-prefix=F16

// Each layer's pools follow its own keys: an f32 layer and a bf16 layer get
// pools of their types, or both int8 (fp8) codes; f16 suits the f32 layer
// but not the bf16 one.
// CHECK-LABEL: func.func @decode(
// CHECK-SAME:    tensor<6x4x2x16xf32> {llmc.name = "kv/layer0.k", llmc.role = "kv_cache"}
// CHECK-SAME:    tensor<6x4x2x16xbf16> {llmc.name = "kv/layer1.k", llmc.role = "kv_cache"}
// INT8-LABEL: func.func @decode(
// INT8-SAME:    tensor<6x4x2x16xi8> {llmc.name = "kv/layer0.k", llmc.role = "kv_cache"}
// INT8-SAME:    tensor<6x4x2x16xi8> {llmc.name = "kv/layer1.k", llmc.role = "kv_cache"}
// INT8:         llm.kv_cache_write {{.*}} : tensor<6x4x2x16xi8>, tensor<2x1x2x16xf32>
// INT8:         llm.kv_cache_write {{.*}} : tensor<6x4x2x16xi8>, tensor<2x1x2x16xbf16>
// FP8-LABEL: func.func @decode(
// FP8-SAME:    tensor<6x4x2x16xf8E4M3FN> {llmc.name = "kv/layer0.k", llmc.role = "kv_cache"}
// FP8-SAME:    tensor<6x4x2x16xf8E4M3FN> {llmc.name = "kv/layer1.k", llmc.role = "kv_cache"}
// FP8:         llm.kv_cache_write {{.*}} : tensor<6x4x2x16xf8E4M3FN>, tensor<2x1x2x16xf32>
// FP8:         llm.kv_cache_write {{.*}} : tensor<6x4x2x16xf8E4M3FN>, tensor<2x1x2x16xbf16>
// F16: error: kv-cache: a 'f16' cache cannot hold 'bf16' keys
func.func @logits(%w: tensor<32x32xf32> {llm.param = #llm.param<name = "wte.weight", init = "normal", scale = 0.02>},
                  %tokens: tensor<2x1xi32> {llmc.name = "tokens", llmc.role = "input"},
                  %positions: tensor<2x1xi32> {llmc.name = "positions", llmc.role = "input"})
    -> (tensor<2x1x32xf32> {llmc.name = "logits", llmc.role = "output"}) {
  %x = llm.embedding %w, %tokens : tensor<32x32xf32>, tensor<2x1xi32>
  %q = llm.reshape %x : tensor<2x1x32xf32> to tensor<2x1x2x16xf32>
  %o, %lse = llm.attention %q, %q, %q {causal, scale = 0.25 : f64} : tensor<2x1x2x16xf32>, tensor<2x1x2x16xf32>
  %h = llm.cast %o : tensor<2x1x2x16xf32> to tensor<2x1x2x16xbf16>
  %o2, %lse2 = llm.attention %h, %h, %h {causal, scale = 0.25 : f64} : tensor<2x1x2x16xbf16>, tensor<2x1x2x16xbf16>
  %f = llm.cast %o2 : tensor<2x1x2x16xbf16> to tensor<2x1x2x16xf32>
  %r = llm.reshape %f : tensor<2x1x2x16xf32> to tensor<2x1x32xf32>
  %logits = llm.matmul %r, %w {transpose_b} : tensor<2x1x32xf32>, tensor<32x32xf32> -> tensor<2x1x32xf32>
  return %logits : tensor<2x1x32xf32>
}
