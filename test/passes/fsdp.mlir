// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="mesh=dp=2 zero=3 emit=train" | FileCheck %s
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-shard="mesh=dp=2 zero=3" --llmc-autodiff --llmc-optimizer --llmc-inference-entry-points --cse --llmc-fsdp="reshard-after-forward=false prefetch=0" | FileCheck %s --check-prefix=KEEP
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-shard="mesh=dp=2 zero=3" --llmc-autodiff --llmc-optimizer --llmc-fsdp="prefetch=-1" 2>&1 | FileCheck %s --check-prefix=BAD

// Evaluation gathers from the same shards.
// CHECK-LABEL: func.func @forward
// CHECK: dist.all_gather %arg0

// Parameters are stored as shards and updated in place; each block's
// parameters are gathered for its forward (prefetched one block ahead) and
// gathered again for its backward.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %arg0: tensor<8x8xf32> {
// CHECK-SAME: llmc.shard = {global_shape = array<i64: 16, 8>, levels = [{axes = ["dp"], blocks = 1 : i64, dim = 0 : i64}]}
// CHECK-SAME: %arg3: tensor<4x8xf32>
// The first forward unit's gathers (embedding, then block h.0 prefetched):
// CHECK: dist.all_gather %arg0 on @mesh axes ["dp"] dim 0 : tensor<8x8xf32> -> tensor<16x8xf32>
// CHECK: %[[W:.*]] = dist.all_gather %arg3 on @mesh axes ["dp"] dim 0 : tensor<4x8xf32> -> tensor<8x8xf32>
// CHECK: llm.embedding
// CHECK: llm.matmul %{{.*}}, %[[W]] {llmc.block_name = "h.0"
// Backward: a second gather of the block's weight, used by its backward.
// CHECK: %[[WB:.*]] = dist.all_gather %arg3 on @mesh axes ["dp"] dim 0 : tensor<4x8xf32> -> tensor<8x8xf32>
// CHECK: llm.matmul %{{.*}}, %[[WB]] {llmc.backward, llmc.block_name = "h.0"
// The update works on the shard (in place: every update is one
// multi_tensor_adamw); no gather after it.
// CHECK: %[[NEW:.*]]:12 = llm.multi_tensor_adamw params(%arg0, %arg1, %arg2, %arg3 :
// CHECK-NOT: dist.all_gather %[[NEW]]
// CHECK: return

// Without resharding the forward's gather feeds the backward too.
// KEEP-LABEL: func.func @train_step
// KEEP: %[[W:.*]] = dist.all_gather %arg3 on @mesh axes ["dp"] dim 0 : tensor<4x8xf32> -> tensor<8x8xf32>
// KEEP-NOT: dist.all_gather %arg3
// KEEP: llm.matmul %{{.*}}, %[[W]] {llmc.backward, llmc.block_name = "h.0"

// BAD: error: fsdp: prefetch must be >= 0, got -1
