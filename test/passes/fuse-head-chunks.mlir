// RUN: llmc-opt %s --llmc-fuse="chunk-mb=0.25" --mlir-print-op-generic | FileCheck %s --check-prefix=CPU
// RUN: llmc-opt %s --llmc-fuse="chunk-mb=0.25 target=cuda" --mlir-print-op-generic | FileCheck %s --check-prefix=CUDA
// RUN: llmc-opt %s --llmc-fuse="chunk-mb=64" --mlir-print-op-generic | FileCheck %s --check-prefix=ONE

// The fused head's chunks: as few as fit chunk-mb of logits, as the kernel
// holds them (the CPU in fp32: 1280 bytes a row of 320, so 204 rows; CUDA
// in bf16: 640 bytes, 409 rows), of equal rows rounded up to a multiple of
// 128 within the budget: the CPU's 1024 rows in 8 chunks of 128, CUDA's in
// 3 of 384 (the last 256). Over several chunks a bf16 weight's gradient is
// summed in fp32 in 16 (D) more scratch rows; in one chunk it is not. A
// padded vocabulary's num_classes carries over to the fused op.
// CPU: "llm.linear_cross_entropy_train"{{.*}}chunk_rows = 128 : i64{{.*}}num_classes = 257 : i64
// CPU-SAME: -> (tensor<f32>, tensor<4x256x16xbf16>, tensor<320x16xbf16>, tensor<144x320xf32>)
// CUDA: "llm.linear_cross_entropy_train"{{.*}}chunk_rows = 384 : i64{{.*}}num_classes = 257 : i64
// CUDA-SAME: tensor<400x320xf32>)
// ONE: "llm.linear_cross_entropy_train"{{.*}}chunk_rows = 1024 : i64{{.*}}num_classes = 257 : i64
// ONE-SAME: tensor<1024x320xf32>)
func.func @train(%h: tensor<4x256x16xbf16>, %w: tensor<320x16xbf16>, %t: tensor<4x256xi32>)
    -> (tensor<f32>, tensor<4x256x16xbf16>, tensor<320x16xbf16>) {
  %logits = llm.matmul %h, %w {transpose_b} : tensor<4x256x16xbf16>, tensor<320x16xbf16> -> tensor<4x256x320xbf16>
  %loss = llm.cross_entropy %logits, %t {num_classes = 257 : i64} : tensor<4x256x320xbf16>, tensor<4x256xi32>
  %seed = llm.fill 1.0 : tensor<f32>
  %g = llm.cross_entropy_grad %logits, %t, %seed {num_classes = 257 : i64} : tensor<4x256x320xbf16>, tensor<4x256xi32>
  %dh = llm.matmul %g, %w : tensor<4x256x320xbf16>, tensor<320x16xbf16> -> tensor<4x256x16xbf16>
  %hr = llm.reshape %h : tensor<4x256x16xbf16> to tensor<1024x16xbf16>
  %gr = llm.reshape %g : tensor<4x256x320xbf16> to tensor<1024x320xbf16>
  %dw = llm.matmul %gr, %hr {transpose_a} : tensor<1024x320xbf16>, tensor<1024x16xbf16> -> tensor<320x16xbf16>
  return %loss, %dh, %dw : tensor<f32>, tensor<4x256x16xbf16>, tensor<320x16xbf16>
}
