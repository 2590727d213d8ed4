// RUN: llmc-opt %S/Inputs/shared-weight.mlir --llmc-train-pipeline="offload=activations emit=train fuse=none" | FileCheck %s
// RUN: llmc-opt %S/Inputs/shared-weight.mlir --llmc-train-pipeline="emit=train fuse=none" --llmc-offload-activations="layers=h.1" | FileCheck %s --check-prefix=LAYER
// RUN: llmc-opt %S/Inputs/shared-weight.mlir --llmc-train-pipeline="emit=train fuse=none" --llmc-offload-activations="prefetch=false" | FileCheck %s --check-prefix=NO-PREFETCH
// RUN: llmc-opt %S/Inputs/shared-weight.mlir --llmc-train-pipeline="offload=activations fuse=none" | FileCheck %s --check-prefix=LOWERED
// RUN: llmc-opt %S/Inputs/shared-weight.mlir --llmc-train-pipeline="fuse=none" | FileCheck %s --check-prefix=BASE
// RUN: llmc-opt %S/Inputs/shared-weight.mlir --llmc-train-pipeline="offload=optimizer,activations fuse=none" | FileCheck %s --check-prefix=BOTH
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="emit=train" --llmc-offload-activations="layers=h.7" 2>&1 | FileCheck %s --check-prefix=NO-LAYER
// RUN: llmc-opt %S/Inputs/shared-weight.mlir --llmc-train-pipeline="mesh=pp=2 microbatches=2 emit=train" --llmc-offload-activations | FileCheck %s --check-prefix=STAGES
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-offload-activations 2>&1 | FileCheck %s --check-prefix=NO-STEP
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="offload=disk" 2>&1 | FileCheck %s --check-prefix=CHOICE

// Two one-matmul layers. What a layer's backward reads first is its own: h.0
// owns the embedding (its input), h.1 owns h.0's output; h.1's output is the
// head's and stays. Each goes down right after its last forward use.
// CHECK-LABEL: func.func @train_step
// CHECK:      %[[X:.*]] = llm.embedding
// CHECK-NEXT: %[[H0:.*]] = llm.matmul %[[X]], %{{.*}} {llmc.block_name = "h.0"
// CHECK-NEXT: %[[XHOST:.*]] = llm.copy_to_host %[[X]] {llmc.microbatch = 0 : i64} : tensor<2x4x8xf32>
// CHECK-NEXT: %[[H1:.*]] = llm.matmul %[[H0]], %{{.*}} {llmc.block_name = "h.1"
// CHECK-NEXT: %[[H0HOST:.*]] = llm.copy_to_host %[[H0]] {llmc.block_name = "h.0", llmc.microbatch = 0 : i64}
// CHECK-NOT:  llm.copy_to_host
// h.0's input comes back at the start of h.1's backward, one layer ahead;
// h.1's right before its reader (no layer's backward runs before it).
// CHECK:      %[[XBACK:.*]] = llm.copy_to_device %[[XHOST]] {llmc.backward, llmc.block_name = "h.0", llmc.microbatch = 0 : i64}
// CHECK-NEXT: llm.matmul %{{.*}}, %{{.*}} {llmc.backward, llmc.block_name = "h.1"
// CHECK-NEXT: %[[H0BACK:.*]] = llm.copy_to_device %[[H0HOST]] {llmc.backward, llmc.block_name = "h.1"
// The backward reads the copies, a reshape of one redone on the copy.
// CHECK-NEXT: %[[H0FLAT:.*]] = llm.reshape %[[H0BACK]] {llmc.backward, llmc.block_name = "h.1"
// CHECK:      llm.matmul %[[H0FLAT]], %{{.*}} {llmc.backward, llmc.block_name = "h.1"
// CHECK:      llm.reshape %[[XBACK]] {llmc.backward, llmc.block_name = "h.0"
// CHECK:      return

// LAYER-LABEL: func.func @train_step
// LAYER:       llm.copy_to_host %{{.*}} {llmc.block_name = "h.0"
// LAYER-NOT:   llm.copy_to_host
// LAYER:       llm.copy_to_device %{{.*}} {llmc.backward, llmc.block_name = "h.1"
// LAYER-NOT:   llm.copy_to_device

// Without prefetching each copy comes back right before its first reader.
// NO-PREFETCH-LABEL: func.func @train_step
// NO-PREFETCH:       llm.matmul %{{.*}}, %{{.*}} {llmc.backward, llmc.block_name = "h.1", llmc.microbatch = 0 : i64, transpose_b}
// NO-PREFETCH-NEXT:  llm.copy_to_device %{{.*}} {llmc.backward, llmc.block_name = "h.1"
// NO-PREFETCH:       llm.matmul %{{.*}}, %{{.*}} {llmc.backward, llmc.block_name = "h.0", llmc.microbatch = 0 : i64, transpose_b}
// NO-PREFETCH-NEXT:  llm.copy_to_device %{{.*}} {llmc.backward, llmc.block_name = "h.0"

// Lowered: the copies' host results live in host memory after the arena
// (by liveness, like the arena), and the arena shrinks.
// BASE: module attributes {exec.arena_bytes = 4608 : i64
// LOWERED: module attributes {exec.arena_bytes = 4352 : i64, exec.host_bytes = 512 : i64, exec.memory_plan = {arena = 4352 : i64, host = 512 : i64, host_activations = 512 : i64
// LOWERED-LABEL: exec.program @train_step
// LOWERED:      %[[HOST:.*]] = exec.buffer offset 4352 {exec.host_space} : memref<2x4x8xf32>
// LOWERED-NEXT: exec.kernel "copy_to_host"(%[[DEV:.*]] : memref<2x4x8xf32>) -> (%[[HOST]] : memref<2x4x8xf32>) {exec.action = "F0"}
// LOWERED:      exec.kernel "copy_to_device"(%[[HOST]] : memref<2x4x8xf32>) -> (%{{.*}} : memref<2x4x8xf32>) {exec.action = "B0"}

// With the optimizer offloaded too, its state and staging follow the
// activations in host memory.
// BOTH: module attributes {exec.arena_bytes = 2816 : i64, exec.host_bytes = 3776 : i64, exec.memory_plan = {arena = 2816 : i64, host = 3776 : i64, host_activations = 512 : i64, host_optimizer_state = 1536 : i64
// BOTH-LABEL: exec.program @train_step
// BOTH-DAG: exec.buffer offset 2816 {exec.host_space} : memref<2x4x8xf32>
// BOTH-DAG: exec.buffer offset 3072 {exec.host_space} : memref<2x4x8xf32>
// BOTH-DAG: exec.buffer offset 3328 name "adam_m/wte" category "optim" {exec.host_space}

// NO-LAYER: error: offload activations: no layer named 'h.7' (layers: h.0)
// NO-STEP: error: offload activations: no training step with layers (llm.block) to offload (--offload activations needs a model with layers)
// CHOICE: error: llmc-train-pipeline: unknown --offload 'disk' (expected none, optimizer, activations or optimizer,activations)

// Pipeline stages: each stage's step offloads what its own layers save,
// per microbatch, and brings it back in its own schedule (1F1B over two
// microbatches here: stage 0's h.0 values of both come back only at their
// backwards, after stage 1's).
// STAGES-LABEL: module @stage0
// STAGES:      llm.copy_to_host {{.*}}llmc.microbatch = 0
// STAGES:      llm.copy_to_host {{.*}}llmc.microbatch = 1
// STAGES:      llm.copy_to_device {{.*}}{llmc.backward, llmc.block_name = "h.0", llmc.microbatch = 0
// STAGES:      llm.copy_to_device {{.*}}{llmc.backward, llmc.block_name = "h.0", llmc.microbatch = 1
// STAGES-LABEL: module @stage1
// STAGES:      llm.copy_to_device {{.*}}{llmc.backward, llmc.block_name = "h.1", llmc.microbatch = 0
// STAGES:      llm.copy_to_device {{.*}}{llmc.backward, llmc.block_name = "h.1", llmc.microbatch = 1
