// RUN: llmc-opt %s --llmc-lower-to-exec="target=cuda" | FileCheck %s
// RUN: llmc-opt %s --llmc-lower-to-exec | FileCheck %s --check-prefix=CPU
// RUN: not llmc-opt %s --llmc-lower-to-exec="target=tpu" 2>&1 | FileCheck %s --check-prefix=TARGET

// Under target=cuda an attention op cuDNN may run gets one more output, a
// u8 workspace live only at its instruction, sized by the formula of
// common/AttentionWorkspace.h: the forward 1 MiB (the reserve);
// the backward (B = 2, H = 4, T = 100) 2·2·4·128·128 bytes of dP (T rounded
// up to 128) and 4·2·4·100 of softmax sums, 265344 aligned to 265472, plus
// the reserve: 1314048; attention_rope's forward its rotated q and k
// (102400 + 51200 bytes) before the reserve: 1202176. Ops with segment ids
// and f32 ops get none. The workspaces are the program's "workspace".
// CHECK: exec.memory_plan = {{.*}}category_peaks = {{{.*}}workspace = {{[0-9]+}}
// CHECK: %[[W0:.*]] = exec.buffer offset {{[0-9]+}} category "workspace" : memref<1048576xi8>
// CHECK-NEXT: exec.kernel "attention_packed"(%{{.*}} : memref<2x100x768xbf16>) -> (%{{.*}}, %{{.*}}, %[[W0]] : memref<2x100x4x64xbf16>, memref<2x4x100xf32>, memref<1048576xi8>)
// CHECK: %[[W1:.*]] = exec.buffer offset {{[0-9]+}} category "workspace" : memref<1314048xi8>
// CHECK-NEXT: exec.kernel "attention_packed_grad"({{.*}}) -> (%{{.*}}, %[[W1]] : memref<2x100x768xbf16>, memref<1314048xi8>)
// CHECK-NEXT: exec.buffer
// CHECK-NEXT: exec.buffer
// CHECK-NEXT: exec.kernel "attention_packed"({{.*}}, memref<2x100xi32>) -> ({{[^)]*}} : memref<2x100x4x64xbf16>, memref<2x4x100xf32>)
// CHECK-NEXT: exec.buffer
// CHECK-NEXT: exec.kernel "attention_packed_grad"({{.*}}, memref<2x100xi32>) -> (%{{[0-9]+}} : memref<2x100x768xbf16>)
// CHECK: exec.kernel "attention_rope"({{.*}}) -> ({{.*}} : memref<2x100x4x64xbf16>, memref<2x4x100xf32>, memref<1202176xi8>)
// CHECK: exec.kernel "attention"({{.*}}) -> ({{[^)]*}} : memref<2x100x4x64xf32>, memref<2x4x100xf32>)

// The CPU target plans none.
// CPU-NOT: xi8>
// CPU: exec.kernel "attention_packed"(%{{.*}} : memref<2x100x768xbf16>) -> (%{{.*}}, %{{.*}} : memref<2x100x4x64xbf16>, memref<2x4x100xf32>)
// CPU-NOT: xi8>

// TARGET: error: llmc-lower-to-exec: target must be cpu or cuda, got 'tpu'
func.func @forward(%qkv: tensor<2x100x768xbf16> {llmc.name = "qkv"},
                   %dout: tensor<2x100x4x64xbf16> {llmc.name = "dout"},
                   %seg: tensor<2x100xi32> {llmc.name = "segments"},
                   %q: tensor<2x100x4x64xbf16> {llmc.name = "q"},
                   %k: tensor<2x100x2x64xbf16> {llmc.name = "k"},
                   %q32: tensor<2x100x4x64xf32> {llmc.name = "q32"})
    -> (tensor<2x100x768xbf16>, tensor<2x100x768xbf16>, tensor<2x100x4x64xbf16>, tensor<2x100x4x64xf32>) {
  %o, %lse = llm.attention_packed %qkv {causal, heads = 4 : i64, kv_heads = 4 : i64, scale = 0.125 : f64} : tensor<2x100x768xbf16>
  %d = llm.attention_packed_grad %qkv, %o, %lse, %dout {causal, heads = 4 : i64, kv_heads = 4 : i64, scale = 0.125 : f64} : tensor<2x100x768xbf16>, tensor<2x100x4x64xbf16>, tensor<2x4x100xf32>
  %os, %lses = llm.attention_packed %qkv segments %seg : tensor<2x100xi32> {causal, heads = 4 : i64, kv_heads = 4 : i64, scale = 0.125 : f64} : tensor<2x100x768xbf16>
  %ds = llm.attention_packed_grad %qkv, %os, %lses, %dout segments %seg : tensor<2x100xi32> {causal, heads = 4 : i64, kv_heads = 4 : i64, scale = 0.125 : f64} : tensor<2x100x768xbf16>, tensor<2x100x4x64xbf16>, tensor<2x4x100xf32>
  %or, %lser = llm.attention_rope %q, %k, %k {causal, scale = 0.125 : f64, theta = 10000.0 : f64} : tensor<2x100x4x64xbf16>, tensor<2x100x2x64xbf16>
  %o32, %lse32 = llm.attention %q32, %q32, %q32 {causal, scale = 0.125 : f64} : tensor<2x100x4x64xf32>, tensor<2x100x4x64xf32>
  return %d, %ds, %or, %o32 : tensor<2x100x768xbf16>, tensor<2x100x768xbf16>, tensor<2x100x4x64xbf16>, tensor<2x100x4x64xf32>
}
