// RUN: llmc model gpt2 --preset tiny --set n_layer=4 --set batch_size=2 --set seq_len=8 --set n_embd=32 -o %t.mlir
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="mesh=pp=2,dp=2 microbatches=4 emit=train" | FileCheck %s
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="mesh=pp=2 microbatches=4 pipeline-schedule=gpipe emit=train" | FileCheck %s --check-prefix=GPIPE
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="mesh=pp=4 microbatches=8 emit=train" | FileCheck %s --check-prefix=P4
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="mesh=pp=2 microbatches=4 pipeline-schedule=interleaved virtual-stages=2 emit=train" | FileCheck %s --check-prefix=INTERLEAVED
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="mesh=pp=2 microbatches=4 pipeline-schedule=zero-bubble emit=train" | FileCheck %s --check-prefix=ZB
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="mesh=pp=2 microbatches=1 pipeline-schedule=naive stage-layout=3,1 emit=train" | FileCheck %s --check-prefix=LAYOUT
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="mesh=pp=2 microbatches=2" | FileCheck %s --check-prefix=EXEC
// RUN: not llmc-opt %t.mlir --llmc-train-pipeline="mesh=pp=2 pipeline-schedule=fast" 2>&1 | FileCheck %s --check-prefix=KIND-OPTION
// RUN: not llmc-opt %t.mlir --llmc-shard="mesh=pp=2" --llmc-autodiff --llmc-optimizer --llmc-pipeline-parallel="schedule=fast" 2>&1 | FileCheck %s --check-prefix=KIND
// RUN: not llmc-opt %t.mlir --llmc-train-pipeline="mesh=pp=8" 2>&1 | FileCheck %s --check-prefix=LAYERS
// RUN: not llmc-opt %t.mlir --llmc-train-pipeline="mesh=pp=2 stage-layout=2,1" 2>&1 | FileCheck %s --check-prefix=BADLAYOUT
// RUN: not llmc-opt %t.mlir --llmc-train-pipeline="mesh=pp=2 microbatches=3 pipeline-schedule=interleaved virtual-stages=2" 2>&1 | FileCheck %s --check-prefix=MULTIPLE

// 1F1B over 2 stages and 4 microbatches: the expected bubble is
// (p−1)/(m+p−1) = 0.2, the first stage holds 2 microbatches in flight.
// CHECK: llmc.pipeline = {actions = ["F0 F1 B0 F2 B1 F3 B2 B3", "F0 B0 F1 B1 F2 B2 F3 B3"], analytic_bubble = 2.000000e-01 : f64, bubble = 0.1999{{[0-9]*}} : f64, in_flight = [2, 1], layout = "h.0-h.1|h.2-h.3", microbatches = 4 : i64, schedule = "1f1b", stages = 2 : i64, virtual_stages = 1 : i64}
// Stage 0 (ranks 0 and 1, its two data-parallel replicas) runs layers
// h.0-h.1 and the embedding; it sends each microbatch's activations up
// (shift 1) and receives their gradients back.
// CHECK: module @stage0 attributes {llmc.ranks = array<i64: 0, 1>}
// CHECK: func.func @train_step
// CHECK: llm.embedding
// CHECK: llmc.block_name = "h.1", llmc.microbatch = 0
// CHECK: dist.send %{{.*}} on @mesh axis "pp" shift 1 tag [[T0:[0-9]+]] {llmc.action = "F0"} : tensor<1x8x32xf32>
// CHECK: dist.recv on @mesh axis "pp" shift 1 tag {{[0-9]+}} {llmc.action = "B0", llmc.backward{{.*}}llmc.microbatch = 0 : i64} : tensor<1x8x32xf32>
// The gradient norm: this stage's squares, summed over the stages.
// CHECK: %[[SQ:.*]] = llm.global_norm {{.*}} {squared}
// CHECK-NEXT: %[[ALL:.*]] = dist.all_reduce %[[SQ]] on @mesh axes ["pp"] reduction "sum"
// CHECK-NEXT: llm.sqrt %[[ALL]]
// The loss comes from the last stage.
// CHECK: dist.broadcast %{{.*}} on @mesh axes ["pp"] root 1 : tensor<f32>
// Stage 1 (ranks 2 and 3) receives them (shift −1), runs h.2-h.3, the head
// and the loss, and is the broadcast's root.
// CHECK: module @stage1 attributes {llmc.ranks = array<i64: 2, 3>}
// CHECK: dist.recv on @mesh axis "pp" shift -1 tag [[T0]] {llmc.action = "F0", llmc.block_name = "h.1", llmc.microbatch = 0 : i64} : tensor<1x8x32xf32>
// CHECK: llmc.block_name = "h.2"
// CHECK: llm.linear_cross_entropy_train
// CHECK: dist.broadcast %{{.*}} on @mesh axes ["pp"] root 1 : tensor<f32>

// GPIPE: actions = ["F0 F1 F2 F3 B0 B1 B2 B3", "F0 F1 F2 F3 B0 B1 B2 B3"], analytic_bubble = 2.000000e-01 : f64, bubble = 0.1999{{[0-9]*}} : f64, in_flight = [4, 4]

// Four stages, eight microbatches: 3/11 idle; stage s keeps p−s in flight.
// P4: analytic_bubble = 0.27272727272727271 : f64, bubble = 0.2727{{[0-9]*}} : f64, in_flight = [4, 3, 2, 1], layout = "h.0|h.1|h.2|h.3"

// Interleaved, two chunks per stage: chunk c on stage c mod 2, bubble
// divided by v (textbook 0.1; simulated 0.11).
// INTERLEAVED: actions = ["F0.0 F1.0 F0.2 F1.2 F2.0 B0.2 F3.0 B1.2 F2.2 B0.0 F3.2 B1.0 B2.2 B3.2 B2.0 B3.0", "F0.1 F1.1 F0.3 B0.3 F1.3 B1.3 F2.1 B0.1 F3.1 B1.1 F2.3 B2.3 F3.3 B3.3 B2.1 B3.1"], analytic_bubble = 1.000000e-01 : f64, bubble = 0.1111{{[0-9]*}} : f64, in_flight = [5, 3], layout = "h.0|h.1|h.2|h.3"
// INTERLEAVED: module @stage0
// INTERLEAVED: llmc.block_name = "h.2"

// Zero bubble: weight gradients (W) fill the cooldown; (p−1)/(3m+p−1).
// ZB: actions = ["F0 F1 B0 F2 B1 F3 B2 W0 W1 B3 W2 W3", "F0 B0 F1 B1 F2 B2 W0 F3 B3 W1 W2 W3"], analytic_bubble = 0.076923076923076927 : f64, bubble = 0.0769{{[0-9]*}} : f64

// An explicit layout: three layers on the first stage, one on the second.
// LAYOUT: actions = ["F0 B0", "F0 B0"], analytic_bubble = 5.000000e-01 : f64{{.*}}layout = "h.0-h.2|h.3", microbatches = 1 : i64, schedule = "naive"

// Each stage lowers into its own arena and programs for its ranks.
// EXEC: module @stage0 attributes {exec.arena_bytes = {{[0-9]+}} : i64
// EXEC: exec.program @train_step kind "train_step" attributes {exec.ranks = array<i64: 0>}
// EXEC: exec.send
// EXEC: module @stage1 attributes {exec.arena_bytes = {{[0-9]+}} : i64
// EXEC: exec.program @train_step kind "train_step" attributes {exec.ranks = array<i64: 1>}
// EXEC: exec.recv

// KIND-OPTION: error: llmc-train-pipeline: unknown --pipeline-schedule 'fast' (expected naive, gpipe, 1f1b, interleaved or zero-bubble)
// KIND: error: pipeline: unknown schedule 'fast' (expected naive, gpipe, 1f1b, interleaved or zero-bubble)
// LAYERS: error: pipeline: 4 layers cannot fill 8 model chunks (8 stages x 1 virtual stages)
// BADLAYOUT: error: pipeline: stage-layout '2,1' gives 2 chunks of 3 layers; the model needs 2 chunks of 4 layers
// MULTIPLE: error: pipeline: the interleaved schedule needs the microbatch count (3) to be a multiple of the pipeline stages (2)
