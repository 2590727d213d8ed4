// RUN: llmc-opt %s | llmc-opt | FileCheck %s
// The paged KV cache ops with every cache type: the compute type, a 16-bit
// float under f32, int8 or fp8 E4M3 codes with scale pools.

// CHECK-LABEL: func.func @float_cache
// CHECK: llm.kv_cache_write %arg1, %arg3, %arg4, %arg5 : tensor<6x4x2x16xf32>, tensor<2x1x2x16xf32>, tensor<2x3xi32>, tensor<2x1xi32>
// CHECK: llm.paged_attention %arg0, %{{.*}}, %arg1, %arg4, %arg5 {scale = 2.500000e-01 : f64} : tensor<2x1x4x16xf32>, tensor<6x4x2x16xf32>, tensor<2x3xi32>, tensor<2x1xi32>
func.func @float_cache(%q: tensor<2x1x4x16xf32>, %c: tensor<6x4x2x16xf32>, %h: tensor<6x4x2x16xbf16>,
                       %k: tensor<2x1x2x16xf32>, %t: tensor<2x3xi32>, %p: tensor<2x1xi32>)
    -> (tensor<2x1x4x16xf32>, tensor<2x1x4x16xf32>) {
  %c1 = llm.kv_cache_write %c, %k, %t, %p : tensor<6x4x2x16xf32>, tensor<2x1x2x16xf32>, tensor<2x3xi32>, tensor<2x1xi32>
  %o = llm.paged_attention %q, %c1, %c, %t, %p {scale = 0.25 : f64} : tensor<2x1x4x16xf32>, tensor<6x4x2x16xf32>, tensor<2x3xi32>, tensor<2x1xi32>
  // CHECK: llm.kv_cache_write %arg2, %arg3, %arg4, %arg5 : tensor<6x4x2x16xbf16>, tensor<2x1x2x16xf32>
  // CHECK: llm.paged_attention %arg0, %{{.*}}, %arg2, %arg4, %arg5 {scale = 2.500000e-01 : f64} : tensor<2x1x4x16xf32>, tensor<6x4x2x16xbf16>
  %h1 = llm.kv_cache_write %h, %k, %t, %p : tensor<6x4x2x16xbf16>, tensor<2x1x2x16xf32>, tensor<2x3xi32>, tensor<2x1xi32>
  %o2 = llm.paged_attention %q, %h1, %h, %t, %p {scale = 0.25 : f64} : tensor<2x1x4x16xf32>, tensor<6x4x2x16xbf16>, tensor<2x3xi32>, tensor<2x1xi32>
  return %o, %o2 : tensor<2x1x4x16xf32>, tensor<2x1x4x16xf32>
}

// CHECK-LABEL: func.func @int8_cache
// CHECK: %[[K:[a-z_0-9]+]], %[[KS:[a-z_0-9]+]] = llm.kv_cache_write %arg1, %arg5, %arg6, %arg7 scales %arg2 : tensor<6x4x2xf32> : tensor<6x4x2x16xi8>, tensor<2x1x2x16xbf16>, tensor<2x3xi32>, tensor<2x1xi32>
// CHECK: llm.paged_attention %arg0, %[[K]], %arg3, %arg6, %arg7 scales %[[KS]], %arg4 : tensor<6x4x2xf32>, tensor<6x4x2xf32> {scale = 2.500000e-01 : f64} : tensor<2x1x4x16xbf16>, tensor<6x4x2x16xi8>, tensor<2x3xi32>, tensor<2x1xi32>
func.func @int8_cache(%q: tensor<2x1x4x16xbf16>, %kc: tensor<6x4x2x16xi8>, %ks: tensor<6x4x2xf32>,
                      %vc: tensor<6x4x2x16xi8>, %vs: tensor<6x4x2xf32>, %k: tensor<2x1x2x16xbf16>,
                      %t: tensor<2x3xi32>, %p: tensor<2x1xi32>) -> tensor<2x1x4x16xbf16> {
  %kc1, %ks1 = llm.kv_cache_write %kc, %k, %t, %p scales %ks : tensor<6x4x2xf32> : tensor<6x4x2x16xi8>, tensor<2x1x2x16xbf16>, tensor<2x3xi32>, tensor<2x1xi32>
  %o = llm.paged_attention %q, %kc1, %vc, %t, %p scales %ks1, %vs : tensor<6x4x2xf32>, tensor<6x4x2xf32> {scale = 0.25 : f64} : tensor<2x1x4x16xbf16>, tensor<6x4x2x16xi8>, tensor<2x3xi32>, tensor<2x1xi32>
  return %o : tensor<2x1x4x16xbf16>
}

// CHECK-LABEL: func.func @fp8_cache
// CHECK: %[[K:[a-z_0-9]+]], %[[KS:[a-z_0-9]+]] = llm.kv_cache_write %arg1, %arg5, %arg6, %arg7 scales %arg2 : tensor<6x4x2xf32> : tensor<6x4x2x16xf8E4M3FN>, tensor<2x1x2x16xf32>, tensor<2x3xi32>, tensor<2x1xi32>
// CHECK: llm.paged_attention %arg0, %[[K]], %arg3, %arg6, %arg7 scales %[[KS]], %arg4 : tensor<6x4x2xf32>, tensor<6x4x2xf32> {scale = 2.500000e-01 : f64} : tensor<2x1x4x16xf32>, tensor<6x4x2x16xf8E4M3FN>, tensor<2x3xi32>, tensor<2x1xi32>
func.func @fp8_cache(%q: tensor<2x1x4x16xf32>, %kc: tensor<6x4x2x16xf8E4M3FN>, %ks: tensor<6x4x2xf32>,
                     %vc: tensor<6x4x2x16xf8E4M3FN>, %vs: tensor<6x4x2xf32>, %k: tensor<2x1x2x16xf32>,
                     %t: tensor<2x3xi32>, %p: tensor<2x1xi32>) -> tensor<2x1x4x16xf32> {
  %kc1, %ks1 = llm.kv_cache_write %kc, %k, %t, %p scales %ks : tensor<6x4x2xf32> : tensor<6x4x2x16xf8E4M3FN>, tensor<2x1x2x16xf32>, tensor<2x3xi32>, tensor<2x1xi32>
  %o = llm.paged_attention %q, %kc1, %vc, %t, %p scales %ks1, %vs : tensor<6x4x2xf32>, tensor<6x4x2xf32> {scale = 0.25 : f64} : tensor<2x1x4x16xf32>, tensor<6x4x2x16xf8E4M3FN>, tensor<2x3xi32>, tensor<2x1xi32>
  return %o : tensor<2x1x4x16xf32>
}
