// RUN: llmc-opt %s | llmc-opt | FileCheck %s
// Every qat scheme form survives print → parse → print.

// CHECK-LABEL: func.func @schemes
func.func @schemes(%w: tensor<64x128xf32>, %x: tensor<4x16x128xf32>, %s: tensor<1x2xf32>, %c: tensor<64x2xf32>) {
  // CHECK: qat.fake_quant %{{.*}} {scheme = #qat.scheme<format = "int8">} : (tensor<64x128xf32>) -> tensor<64x128xf32>
  %a = qat.fake_quant %w {scheme = #qat.scheme<format = "int8">} : (tensor<64x128xf32>) -> tensor<64x128xf32>
  // CHECK: #qat.scheme<format = "int8", granularity = "channel", symmetric = false>
  %b = qat.fake_quant %w {scheme = #qat.scheme<format = "int8", granularity = "channel", axis = 0, symmetric = false>} : (tensor<64x128xf32>) -> tensor<64x128xf32>
  // CHECK: #qat.scheme<format = "int4", granularity = "block", block = 64>
  %c4 = qat.fake_quant %w {scheme = #qat.scheme<format = "int4", granularity = "block", block = 64>} : (tensor<64x128xf32>) -> tensor<64x128xf32>
  // CHECK: #qat.scheme<format = "nf4", granularity = "block", block = 64>
  %n = qat.fake_quant %w {scheme = #qat.scheme<format = "nf4", granularity = "block", block = 64>} : (tensor<64x128xf32>) -> tensor<64x128xf32>
  // CHECK: #qat.scheme<format = "fp8_e4m3", granularity = "channel", axis = 1>
  %f = qat.fake_quant %w {scheme = #qat.scheme<format = "fp8_e4m3", granularity = "channel", axis = 1>} : (tensor<64x128xf32>) -> tensor<64x128xf32>
  // CHECK: #qat.scheme<format = "fp8_e5m2">
  %f2 = qat.fake_quant %w {scheme = #qat.scheme<format = "fp8_e5m2">} : (tensor<64x128xf32>) -> tensor<64x128xf32>
  // CHECK: qat.fake_quant %{{.*}} state %{{.*}} {scheme = #qat.scheme<format = "int8", observer = "ema", momentum = 9.000000e-01>} : (tensor<4x16x128xf32>, tensor<1x2xf32>) -> (tensor<4x16x128xf32>, tensor<1x2xf32>)
  %e, %s1 = qat.fake_quant %x state %s {scheme = #qat.scheme<format = "int8", observer = "ema", momentum = 0.9>} : (tensor<4x16x128xf32>, tensor<1x2xf32>) -> (tensor<4x16x128xf32>, tensor<1x2xf32>)
  // CHECK: qat.fake_quant %{{.*}} state %{{.*}} {scheme = #qat.scheme<format = "int8", granularity = "channel", symmetric = false, observer = "ema">}
  %e2, %c1 = qat.fake_quant %w state %c {scheme = #qat.scheme<format = "int8", granularity = "channel", symmetric = false, observer = "ema">} : (tensor<64x128xf32>, tensor<64x2xf32>) -> (tensor<64x128xf32>, tensor<64x2xf32>)
  return
}
