// RUN: llmc-opt %s --llmc-kv-cache="program=decode page=4 blocks=6 max-blocks=3 cache-type=int8" | FileCheck %s
// RUN: not llmc-opt %s --llmc-kv-cache="program=decode cache-type=f32" 2>&1 | FileCheck %s --check-prefix=WIDE
// RUN: not llmc-opt %s --llmc-kv-cache="program=decode cache-type=f16" 2>&1 | FileCheck %s --check-prefix=F16

// bf16 keys quantize into int8 pools just as f32 keys do; attention returns
// bf16.
// CHECK:       llm.kv_cache_write %arg5, %{{.*}} scales %arg6 : tensor<6x4x2xf32> {llmc.block_name = "h.0"} : tensor<6x4x2x16xi8>, tensor<2x1x2x16xbf16>
// CHECK:       llm.paged_attention {{.*}} : tensor<2x1x2x16xbf16>, tensor<6x4x2x16xi8>

// A float cache other than the keys' own holds nothing more under bf16.
// WIDE: error: kv-cache: a 'f32' cache cannot hold 'bf16' keys: use the keys' type, a 16-bit float under f32, int8 or fp8_e4m3
// F16: error: kv-cache: a 'f16' cache cannot hold 'bf16' keys
func.func @logits(%w: tensor<32x32xbf16> {llm.param = #llm.param<name = "wte.weight", init = "normal", scale = 0.02>},
                  %tokens: tensor<2x1xi32> {llmc.name = "tokens", llmc.role = "input"},
                  %positions: tensor<2x1xi32> {llmc.name = "positions", llmc.role = "input"})
    -> (tensor<2x1x32xbf16> {llmc.name = "logits", llmc.role = "output"}) {
  %x = llm.embedding %w, %tokens : tensor<32x32xbf16>, tensor<2x1xi32>
  %h = llm.block "h.0" -> tensor<2x1x32xbf16> {
    %q = llm.reshape %x : tensor<2x1x32xbf16> to tensor<2x1x2x16xbf16>
    %o, %lse = llm.attention %q, %q, %q {causal, scale = 0.25 : f64} : tensor<2x1x2x16xbf16>, tensor<2x1x2x16xbf16>
    %r = llm.reshape %o : tensor<2x1x2x16xbf16> to tensor<2x1x32xbf16>
    llm.yield %r : tensor<2x1x32xbf16>
  }
  %logits = llm.matmul %h, %w {transpose_b} : tensor<2x1x32xbf16>, tensor<32x32xbf16> -> tensor<2x1x32xbf16>
  return %logits : tensor<2x1x32xbf16>
}
