// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-shard="mesh=dp=2" --llmc-autodiff --llmc-optimizer --llmc-bucket-gradients | FileCheck %s
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-shard="mesh=dp=2" --llmc-autodiff --llmc-optimizer --llmc-bucket-gradients="bucket-bytes=300" | FileCheck %s --check-prefix=SMALL
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-shard="mesh=dp=2" --llmc-autodiff --llmc-optimizer --llmc-bucket-gradients="bucket-bytes=0" | FileCheck %s --check-prefix=NONE
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="mesh=dp=2 zero=1 emit=train" | FileCheck %s --check-prefix=ZERO
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-bucket-gradients="bucket-bytes=-1" 2>&1 | FileCheck %s --check-prefix=BAD

// The four gradients (in the order backward produces them: the MLP weight,
// the layernorm's bias and gain, the embedding) share one bucket: flattened,
// joined, reduced once, read back as views.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[W:.*]] = llm.reshape %{{.*}} : tensor<8x8xf32> to tensor<64xf32>
// CHECK: %[[E:.*]] = llm.reshape %{{.*}} : tensor<16x8xf32> to tensor<128xf32>
// CHECK-NEXT: %[[B:.*]] = llm.concat %[[W]], %{{.*}}, %{{.*}}, %[[E]] {dim = 0 : i64} : tensor<64xf32>, tensor<8xf32>, tensor<8xf32>, tensor<128xf32> -> tensor<208xf32>
// CHECK-NEXT: %[[R:.*]] = dist.all_reduce %[[B]] on @mesh axes ["dp"] reduction "mean" {llmc.gradient_sync} : tensor<208xf32> -> tensor<208xf32>
// CHECK-NEXT: llm.slice %[[R]] {offsets = array<i64: 0>} : tensor<208xf32> to tensor<64xf32>
// CHECK: llm.slice %[[R]] {offsets = array<i64: 80>} : tensor<208xf32> to tensor<128xf32>
// CHECK-NOT: dist.all_reduce {{.*}}gradient_sync
// The loss's average is not a gradient.
// CHECK: dist.all_reduce %{{.*}} reduction "mean" : tensor<f32>

// A 300-byte bucket closes once it holds the MLP weight and both
// layernorm vectors (320 bytes); the embedding's gradient is reduced alone.
// SMALL-LABEL: func.func @train_step
// SMALL: llm.concat {{.*}} -> tensor<80xf32>
// SMALL: dist.all_reduce {{.*}} : tensor<80xf32>
// SMALL: dist.all_reduce {{.*}}{llmc.gradient_sync} : tensor<16x8xf32>

// NONE-COUNT-4: dist.all_reduce {{.*}}{llmc.gradient_sync}
// NONE-NOT: llm.concat

// ZeRO reduce-scatters the gradients (not bucketed); nothing to fuse.
// ZERO-LABEL: func.func @train_step
// ZERO-NOT: llm.concat
// ZERO: dist.reduce_scatter

// BAD: error: bucket-gradients: bucket-bytes must be >= 0, got -1
