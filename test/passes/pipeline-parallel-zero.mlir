// ZeRO-2 and ZeRO-3 under pipeline stages (llmc-pipeline-parallel after
// llmc-optimizer and llmc-fsdp). A stage sums each parameter's whole
// gradient over its microbatches and reduce-scatters it once, as soon as
// its last microbatch's backward has made it (an op of no action, with no
// microbatch: `{{[^{]*}}` leaves out any attribute); ZeRO-3's gathers join the action
// that uses them (the backward's in B, never in zero-bubble's W), or, with
// fsdp-keep-gathered, stand once before the actions for every microbatch.
// Without pp, ZeRO-2 scatters each microbatch's gradient where backward
// makes it (inside the action of the microbatch, here the single program's).
// RUN: llmc model gpt2 --preset tiny --set n_layer=4 --set batch_size=2 --set seq_len=8 --set n_embd=32 -o %t.mlir
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="mesh=pp=2,dp=2 zero=2 microbatches=2 emit=train" | FileCheck %s --check-prefix=ZERO2
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="mesh=pp=2,dp=2 zero=3 microbatches=2 emit=train" | FileCheck %s --check-prefix=ZERO3
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="mesh=pp=2,dp=2 zero=3 microbatches=2 pipeline-schedule=zero-bubble emit=train" | FileCheck %s --check-prefix=ZB
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="mesh=pp=2,dp=2 zero=3 fsdp-keep-gathered microbatches=2 emit=train" | FileCheck %s --check-prefix=KEEP
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="mesh=dp=2 zero=2 microbatches=2 emit=train" | FileCheck %s --check-prefix=NOPP
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="mesh=pp=2,dp=2 zero=3 microbatches=2" | FileCheck %s --check-prefix=EXEC

// ZERO2-LABEL: module @stage0
// ZERO2-LABEL: func.func @train_step
// ZERO2-NOT: dist.reduce_scatter
// ZERO2: llmc.action = "B1"
// ZERO2: dist.reduce_scatter {{[^{]*}} : tensor<128x32xf32> -> tensor<64x32xf32>
// ZERO2-NOT: dist.reduce_scatter {{.*}} : tensor<128x32xf32>
// ZERO2: dist.all_gather {{[^{]*}} : tensor<16x96xf32> -> tensor<32x96xf32>
// ZERO2: return
// ZERO2-LABEL: module @stage1
// ZERO2-LABEL: func.func @train_step
// ZERO2-NOT: dist.reduce_scatter
// ZERO2: llmc.action = "B1"
// ZERO2: dist.reduce_scatter {{[^{]*}} : tensor<32x96xf32> -> tensor<16x96xf32>
// ZERO2: return

// ZERO3-LABEL: module @stage0
// ZERO3-LABEL: func.func @train_step
// ZERO3: dist.all_gather {{.*}} {llmc.action = "F0"} : tensor<16x96xf32> -> tensor<32x96xf32>
// ZERO3: dist.send {{.*}} {llmc.action = "F0"}
// ZERO3: dist.all_gather {{.*}} {llmc.action = "F1"} : tensor<16x96xf32> -> tensor<32x96xf32>
// ZERO3: dist.all_gather {{.*}} {llmc.action = "B0"} : tensor<16x96xf32> -> tensor<32x96xf32>
// ZERO3: dist.all_gather {{.*}} {llmc.action = "B1"} : tensor<16x96xf32> -> tensor<32x96xf32>
// ZERO3: dist.reduce_scatter {{[^{]*}} : tensor<128x32xf32> -> tensor<64x32xf32>
// ZERO3-NOT: dist.reduce_scatter {{.*}} : tensor<128x32xf32>
// ZERO3: return
// ZERO3-LABEL: module @stage1
// ZERO3-LABEL: func.func @train_step
// ZERO3: dist.all_gather {{.*}} {llmc.action = "F0"} : tensor<16x96xf32> -> tensor<32x96xf32>
// ZERO3: dist.all_gather {{.*}} {llmc.action = "B1"} : tensor<16x96xf32> -> tensor<32x96xf32>
// ZERO3: dist.reduce_scatter {{[^{]*}} : tensor<32x96xf32> -> tensor<16x96xf32>
// ZERO3: return

// ZB-LABEL: module @stage0
// ZB-LABEL: func.func @train_step
// ZB-NOT: dist.all_gather {{.*}}llmc.action = "W
// ZB: dist.all_gather {{.*}} {llmc.action = "B0"} : tensor<16x96xf32> -> tensor<32x96xf32>
// ZB-NOT: dist.all_gather {{.*}}llmc.action = "W
// ZB: return

// KEEP-LABEL: module @stage0
// KEEP-LABEL: func.func @train_step
// KEEP-NOT: llmc.action
// KEEP: dist.all_gather {{.*}} : tensor<16x96xf32> -> tensor<32x96xf32>
// KEEP-NOT: dist.all_gather {{.*}}llmc.action
// KEEP: return

// NOPP-LABEL: func.func @train_step
// NOPP: dist.reduce_scatter {{.*}} : tensor<128x32xf32> -> tensor<64x32xf32>
// NOPP: dist.reduce_scatter {{.*}} : tensor<128x32xf32> -> tensor<64x32xf32>
// NOPP: return

// The stages lower with their gathers and scatters.
// EXEC: module @stage0
// EXEC: exec.all_gather
// EXEC: exec.reduce_scatter
// EXEC: module @stage1
// EXEC: exec.all_gather
// EXEC: exec.reduce_scatter
