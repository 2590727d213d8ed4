// RUN: llmc model mixtral --set n_layer=1 --set n_embd=32 --set n_head=2 --set n_kv_head=2 --set batch_size=2 --set seq_len=8 --set vocab_size=64 -o %t.mlir
// RUN: llmc-opt %t.mlir --llmc-lora="spec={rank=2, alpha=4, targets=mlp}" | FileCheck %s
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="lora={rank=2, targets=mlp} emit=train" | FileCheck %s --check-prefix=TRAIN
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="mesh=tp=2 lora={rank=2, targets=mlp} emit=graph" | FileCheck %s --check-prefix=TP
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="mesh=ep=2 lora={rank=2, targets=mlp} emit=graph" | FileCheck %s --check-prefix=EP
// RUN: llmc-opt %t.mlir --llmc-shard="mesh=ep=2,tp=2" --llmc-lora="spec={rank=2, targets=layers.0.block_sparse_moe.experts.w2}" | FileCheck %s --check-prefix=EP-TP
// RUN: llmc-opt %t.mlir --llmc-lora="spec={rank=2, targets=layers.0.block_sparse_moe.experts.w2}" | FileCheck %s --check-prefix=NAMED
// RUN: not llmc-opt %t.mlir --llmc-lora="spec={rank=32, targets=mlp}" 2>&1 | FileCheck %s --check-prefix=RANK-TOO-BIG
// RUN: llmc-opt %t.mlir --llmc-lora="spec={rank=2, targets=mlp} qlora=true qlora-block=8" | FileCheck %s --check-prefix=QLORA
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="lora={rank=2, targets=mlp} qlora=true qlora-block=8 emit=train" | FileCheck %s --check-prefix=QLORA-TRAIN
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="mesh=tp=2 lora={rank=2, targets=mlp} qlora=true qlora-block=8 emit=graph" | FileCheck %s --check-prefix=QLORA-TP
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="mesh=ep=2 lora={rank=2, targets=mlp} qlora=true qlora-block=8 emit=graph" | FileCheck %s --check-prefix=QLORA-EP
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="mesh=ep=2,tp=2 lora={rank=2, targets=mlp} qlora=true qlora-block=8 emit=graph" | FileCheck %s --check-prefix=QLORA-EPTP
// RUN: llmc model qwen2_moe --set n_layer=2 --set n_embd=32 --set n_head=2 --set n_kv_head=2 --set batch_size=2 --set seq_len=8 --set vocab_size=64 -o %t-qwen.mlir
// RUN: llmc-opt %t-qwen.mlir --llmc-lora="spec={rank=2, targets=mlp}" | FileCheck %s --check-prefix=QWEN

// The routed experts' stacked weights [G, F, C] (Hugging Face's layout,
// read transposed) get stacked adapters A [G, r, C] and B [G, F, r] — one
// PEFT lora_A / lora_B per expert — A uniform ±1/√K, B zeros; the base
// experts are frozen.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[W1:arg[0-9]+]]: tensor<4x176x32xf32> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w1.weight", init = "normal", scale = 2.000000e-02, trainable = false>}
// CHECK-SAME: %[[W2:arg[0-9]+]]: tensor<4x32x176xf32> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w2.weight", init = "normal", scale = 2.000000e-02, trainable = false>}
// CHECK-SAME: %[[W3A:arg[0-9]+]]: tensor<4x2x32xf32> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w3.weight.lora_A", init = "uniform", scale = 0.17677669529663687>}
// CHECK-SAME: %[[W3B:arg[0-9]+]]: tensor<4x176x2xf32> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w3.weight.lora_B", init = "zeros">}
// CHECK-SAME: tensor<4x2x32xf32> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w1.weight.lora_A", init = "uniform", scale = 0.17677669529663687>}
// CHECK-SAME: tensor<4x176x2xf32> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w1.weight.lora_B", init = "zeros">}
// CHECK-SAME: %[[W2A:arg[0-9]+]]: tensor<4x2x176xf32> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w2.weight.lora_A", init = "uniform", scale = 0.075377836144440907>}
// CHECK-SAME: %[[W2B:arg[0-9]+]]: tensor<4x32x2xf32> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w2.weight.lora_B", init = "zeros">}
// y + (alpha/rank)·grouped(grouped(x, A), B) over the same rows and
// offsets as the expert's product.
// CHECK: %[[Y3:.*]] = llm.grouped_matmul %[[X:.*]], %[[OFF:.*]], %arg10 {transpose_b} : tensor<32x32xf32>, tensor<5xi32>, tensor<4x176x32xf32>
// CHECK-NEXT: %[[Z3:.*]] = llm.grouped_matmul %[[X]], %[[OFF]], %[[W3A]] {transpose_b} : tensor<32x32xf32>, tensor<5xi32>, tensor<4x2x32xf32>
// CHECK-NEXT: %[[D3:.*]] = llm.grouped_matmul %[[Z3]], %[[OFF]], %[[W3B]] {transpose_b} : tensor<32x2xf32>, tensor<5xi32>, tensor<4x176x2xf32>
// CHECK-NEXT: %[[S3:.*]] = llm.scale %[[D3]] {factor = 2.000000e+00 : f64}
// CHECK-NEXT: %[[UP:.*]] = llm.add %[[Y3]], %[[S3]]
// CHECK: %[[G:.*]] = llm.add
// CHECK-NEXT: %[[ACT:.*]] = llm.swiglu %[[G]], %[[UP]]
// CHECK-NEXT: %[[Y2:.*]] = llm.grouped_matmul %[[ACT]], %[[OFF]], %[[W2]] {transpose_b}
// CHECK-NEXT: %[[Z2:.*]] = llm.grouped_matmul %[[ACT]], %[[OFF]], %[[W2A]] {transpose_b} : tensor<32x176xf32>, tensor<5xi32>, tensor<4x2x176xf32>
// CHECK-NEXT: %[[D2:.*]] = llm.grouped_matmul %[[Z2]], %[[OFF]], %[[W2B]] {transpose_b} : tensor<32x2xf32>, tensor<5xi32>, tensor<4x32x2xf32>
// CHECK-NEXT: %[[S2:.*]] = llm.scale %[[D2]] {factor = 2.000000e+00 : f64}
// CHECK-NEXT: llm.add %[[Y2]], %[[S2]]

// Autodiff derives each adapter's gradient per expert; the optimizer
// updates the six adapters only (no state for the base experts).
// TRAIN-LABEL: func.func @train_step
// TRAIN-NOT: llmc.name = "layers.0.block_sparse_moe.experts.w1.weight", llmc.role = "adam_m"
// TRAIN: llm.grouped_matmul_weight_grad {{.*}} -> tensor<4x32x2xf32>
// TRAIN: llm.grouped_matmul_weight_grad {{.*}} -> tensor<4x2x176xf32>
// TRAIN: llm.multi_tensor_adamw params(%arg13, %arg14, %arg15, %arg16, %arg17, %arg18 : tensor<4x2x32xf32>, tensor<4x176x2xf32>, tensor<4x2x32xf32>, tensor<4x176x2xf32>, tensor<4x2x176xf32>, tensor<4x32x2xf32>)
// TRAIN-NOT: llm.adamw

// Tensor parallelism: a column-parallel expert weight (w1, w3: each
// expert's rows split) splits its B the same way and reads the whole A
// through dist.replicate; the row-parallel w2 splits A along the
// contraction and completes grouped(x, A) with its own all_reduce.
// TP: %arg14: tensor<4x88x2xf32> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w3.weight.lora_B", init = "zeros">, llmc.shard = {global_shape = array<i64: 4, 176, 2>, levels = [{axes = ["tp"], blocks = 1 : i64, dim = 1 : i64}]}}
// TP: %arg17: tensor<4x2x88xf32> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w2.weight.lora_A", init = "uniform", scale = 0.075377836144440907>, llmc.shard = {global_shape = array<i64: 4, 2, 176>, levels = [{axes = ["tp"], blocks = 1 : i64, dim = 2 : i64}]}}
// TP-SAME: %arg18: tensor<4x32x2xf32> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w2.weight.lora_B", init = "zeros">}
// TP: %[[X:.*]] = dist.replicate %{{.*}} : tensor<32x32xf32>
// TP-NEXT: llm.grouped_matmul %[[X]], %[[OFF:.*]], %arg10 {transpose_b} : tensor<32x32xf32>, tensor<5xi32>, tensor<4x88x32xf32>
// TP-NEXT: %[[A:.*]] = dist.replicate %arg13 on @mesh axes ["tp"] : tensor<4x2x32xf32>
// TP-NEXT: %[[Z:.*]] = llm.grouped_matmul %[[X]], %[[OFF]], %[[A]] {transpose_b}
// TP-NEXT: llm.grouped_matmul %[[Z]], %[[OFF]], %arg14 {transpose_b} : tensor<32x2xf32>, tensor<5xi32>, tensor<4x88x2xf32>
// TP: %[[Y:.*]] = llm.grouped_matmul %[[H:.*]], %[[OFF]], %arg9 {transpose_b} : tensor<32x88xf32>, tensor<5xi32>, tensor<4x32x88xf32>
// TP-NEXT: %[[ZP:.*]] = llm.grouped_matmul %[[H]], %[[OFF]], %arg17 {transpose_b} : tensor<32x88xf32>, tensor<5xi32>, tensor<4x2x88xf32>
// TP-NEXT: %[[YR:.*]] = dist.all_reduce %[[Y]] on @mesh axes ["tp"] reduction "sum"
// TP-NEXT: %[[ZR:.*]] = dist.all_reduce %[[ZP]] on @mesh axes ["tp"] reduction "sum" : tensor<32x2xf32>
// TP-NEXT: %[[D:.*]] = llm.grouped_matmul %[[ZR]], %[[OFF]], %arg18 {transpose_b}
// TP-NEXT: %[[S:.*]] = llm.scale %[[D]]
// TP-NEXT: llm.add %[[YR]], %[[S]]

// Under ep × tp tensor parallelism sums w2's partial rows after their way
// home (test/passes/tensor-parallel-experts.mlir); B reads x·A whole, so
// the adapted layer's sum moves back right after w2, and the branch joins
// it there as under tp alone.
// EP-TP: %[[Y:.*]] = llm.grouped_matmul %{{.*}}, %[[OFF:.*]], %{{.*}} {transpose_b} : tensor<{{[0-9]+}}x88xf32>, tensor<3xi32>, tensor<2x32x88xf32>
// EP-TP-NEXT: %[[ZP:.*]] = llm.grouped_matmul %{{.*}}, %[[OFF]], %{{.*}} {transpose_b} : tensor<{{[0-9]+}}x88xf32>, tensor<3xi32>, tensor<2x2x88xf32>
// EP-TP-NEXT: %[[YR:.*]] = dist.all_reduce %[[Y]] on @mesh axes ["tp"] reduction "sum"
// EP-TP-NEXT: %[[ZR:.*]] = dist.all_reduce %[[ZP]] on @mesh axes ["tp"] reduction "sum"
// EP-TP-NEXT: %[[D:.*]] = llm.grouped_matmul %[[ZR]], %[[OFF]]
// EP-TP-NEXT: %[[S:.*]] = llm.scale %[[D]]
// EP-TP-NEXT: %[[ROWS:.*]] = llm.add %[[YR]], %[[S]]
// EP-TP-NOT: dist.all_reduce
// EP-TP: llm.moe_ungroup %[[ROWS]]
// EP-TP-NOT: dist.all_reduce
// EP-TP: llm.moe_combine

// Expert parallelism: each rank holds its experts' adapters (dimension 0
// split with the experts) and reads them by the received rows and the
// local offsets.
// EP: %arg13: tensor<2x2x32xf32> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w3.weight.lora_A", init = "uniform", scale = 0.17677669529663687>, llmc.shard = {global_shape = array<i64: 4, 2, 32>, levels = [{axes = ["ep"], blocks = 1 : i64, dim = 0 : i64}]}}
// EP-SAME: %arg14: tensor<2x176x2xf32> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w3.weight.lora_B", init = "zeros">, llmc.shard = {global_shape = array<i64: 4, 176, 2>, levels = [{axes = ["ep"], blocks = 1 : i64, dim = 0 : i64}]}}
// EP: llm.grouped_matmul %[[X:.*]], %[[OFF:.*]], %arg10 {transpose_b} : tensor<32x32xf32>, tensor<3xi32>, tensor<2x176x32xf32>
// EP-NEXT: %[[Z:.*]] = llm.grouped_matmul %[[X]], %[[OFF]], %arg13 {transpose_b} : tensor<32x32xf32>, tensor<3xi32>, tensor<2x2x32xf32>
// EP-NEXT: llm.grouped_matmul %[[Z]], %[[OFF]], %arg14 {transpose_b} : tensor<32x2xf32>, tensor<3xi32>, tensor<2x176x2xf32>

// A parameter name chooses one of the stacks.
// NAMED-NOT: w1.weight.lora_A
// NAMED: name = "layers.0.block_sparse_moe.experts.w2.weight.lora_A"
// NAMED-NOT: w3.weight.lora_A

// RANK-TOO-BIG: error: 'llm.grouped_matmul' op lora: rank 32 is not below the smaller dimension of 'layers.0.block_sparse_moe.experts.w3.weight' (32x176)

// QLoRA: each stack [G, A, B] is stored whole in NF4, expert after expert
// (4 · 176 · 32 weights: 11264 bytes of codes, 2816 blocks of 8, 11
// double-quantized scales), frozen, and expanded right before the grouped
// matmul that reads it; its adapters are the plain LoRA's.
// QLORA-DAG: %[[CODES:[a-z0-9]+]]: tensor<11264xi8> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w3.weight.qweight", init = "zeros", trainable = false>}
// QLORA-DAG: %[[LEVELS:[a-z0-9]+]]: tensor<2816xi8> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w3.weight.absmax_q", init = "zeros", trainable = false>}
// QLORA-DAG: %[[SCALES:[a-z0-9]+]]: tensor<11xf32> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w3.weight.absmax_scale", init = "zeros", trainable = false>}
// QLORA-DAG: %[[MEAN:[a-z0-9]+]]: tensor<f32> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w3.weight.absmax_mean", init = "zeros", trainable = false>}
// QLORA-NOT: name = "layers.0.block_sparse_moe.experts.w3.weight",
// QLORA: %[[W:.*]] = qat.dequantize_nf4 %[[CODES]], %[[LEVELS]], %[[SCALES]], %[[MEAN]] {block = 8 : i64} : tensor<11264xi8>, tensor<2816xi8>, tensor<11xf32>, tensor<f32> -> tensor<4x176x32xf32>
// QLORA-NEXT: llm.grouped_matmul %{{.*}}, %[[OFF:.*]], %[[W]] {transpose_b} : tensor<32x32xf32>, tensor<5xi32>, tensor<4x176x32xf32>
// QLORA-NEXT: llm.grouped_matmul %{{.*}}, %[[OFF]], %{{.*}} {transpose_b} : tensor<32x32xf32>, tensor<5xi32>, tensor<4x2x32xf32>

// The backward expands the down projection's stack again, right before
// the product that needs it, rather than keeping it from the forward.
// QLORA-TRAIN-LABEL: func.func @train_step
// QLORA-TRAIN: %[[WB:.*]] = qat.dequantize_nf4 {{.*}}llmc.backward{{.*}}llmc.recomputed{{.*}} -> tensor<4x32x176xf32>
// QLORA-TRAIN-NEXT: llm.grouped_matmul %{{.*}}, %{{.*}}, %[[WB]] {{{.*}}llmc.backward

// Under tp the storage of the stack's view [G·A, B] = [704, 32] splits as
// the stack does: w3's rows within each expert (4 chunks of the view's
// rows, one per expert: each rank's 88 of each expert's 176), w2's columns
// (each rank 88 of 176). The expansion yields this rank's piece of the
// stack, placed in the whole view by whole_shape, chunks and piece_offset.
// QLORA-TP-DAG: tensor<352x16xi8> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w3.weight.qweight", init = "zeros", trainable = false>, llmc.shard = {global_shape = array<i64: 704, 16>, levels = [{axes = ["tp"], blocks = 4 : i64, dim = 0 : i64}]}}
// QLORA-TP-DAG: tensor<128x44xi8> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w2.weight.qweight", init = "zeros", trainable = false>, llmc.shard = {global_shape = array<i64: 128, 88>, levels = [{axes = ["tp"], blocks = 1 : i64, dim = 1 : i64}]}}
// QLORA-TP: qat.dequantize_nf4 {{.*}} {block = 8 : i64, chunks = array<i64: 4, 1>, dist.rank_offsets = [#dist.rank_offset<mesh = @mesh, attr = "piece_offset", index = 0, axes = ["tp"], stride = 88>], piece_offset = array<i64: 0, 0>, whole_shape = array<i64: 704, 32>} : tensor<352x16xi8>, tensor<352x4xi8>, tensor<11xf32>, tensor<f32> -> tensor<4x88x32xf32>

// Under ep each rank holds whole experts: a contiguous run of the view's
// rows.
// QLORA-EP-DAG: tensor<352x16xi8> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w3.weight.qweight", init = "zeros", trainable = false>, llmc.shard = {global_shape = array<i64: 704, 16>, levels = [{axes = ["ep"], blocks = 1 : i64, dim = 0 : i64}]}}
// QLORA-EP: qat.dequantize_nf4 {{.*}} {block = 8 : i64, chunks = array<i64: 1, 1>, dist.rank_offsets = [#dist.rank_offset<mesh = @mesh, attr = "piece_offset", index = 0, axes = ["ep"], stride = 352>], piece_offset = array<i64: 0, 0>, whole_shape = array<i64: 704, 32>} : tensor<352x16xi8>, tensor<352x4xi8>, tensor<11xf32>, tensor<f32> -> tensor<2x176x32xf32>

// Under ep and tp together each rank holds its tp piece (88 rows) of two
// whole experts: the view's rows split into each expert's pieces, then
// into runs of two experts; the expansion holds two of the whole view's
// four chunks, its offset moving by 88 rows per tp rank and two experts'
// 352 rows per ep rank. w2 splits its experts' rows (ep) and columns (tp).
// QLORA-EPTP-DAG: tensor<176x16xi8> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w3.weight.qweight", init = "zeros", trainable = false>, llmc.shard = {global_shape = array<i64: 704, 16>, levels = [{axes = ["tp"], blocks = 4 : i64, dim = 0 : i64}, {axes = ["ep"], blocks = 1 : i64, dim = 0 : i64}]}}
// QLORA-EPTP-DAG: tensor<64x44xi8> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w2.weight.qweight", init = "zeros", trainable = false>, llmc.shard = {global_shape = array<i64: 128, 88>, levels = [{axes = ["ep"], blocks = 1 : i64, dim = 0 : i64}, {axes = ["tp"], blocks = 1 : i64, dim = 1 : i64}]}}
// QLORA-EPTP: qat.dequantize_nf4 {{.*}} {block = 8 : i64, chunks = array<i64: 4, 1>, dist.rank_offsets = [#dist.rank_offset<mesh = @mesh, attr = "piece_offset", index = 0, axes = ["tp"], stride = 88>, #dist.rank_offset<mesh = @mesh, attr = "piece_offset", index = 0, axes = ["ep"], stride = 352>], held_chunks = array<i64: 2, 1>, piece_offset = array<i64: 0, 0>, whole_shape = array<i64: 704, 32>} : tensor<176x16xi8>, tensor<176x4xi8>, tensor<11xf32>, tensor<f32> -> tensor<2x88x32xf32>
// QLORA-EPTP: qat.dequantize_nf4 {{.*}} {block = 8 : i64, chunks = array<i64: 1, 1>, dist.rank_offsets = [#dist.rank_offset<mesh = @mesh, attr = "piece_offset", index = 1, axes = ["tp"], stride = 88>, #dist.rank_offset<mesh = @mesh, attr = "piece_offset", index = 0, axes = ["ep"], stride = 64>], piece_offset = array<i64: 0, 0>, whole_shape = array<i64: 128, 176>} : tensor<64x44xi8>, tensor<64x11xi8>, tensor<11xf32>, tensor<f32> -> tensor<2x32x88xf32>

// Qwen-MoE (layer 0 dense, layer 1 sparse): the routed experts and the shared expert's projections take
// adapters; the shared expert's one-column gate is no MLP projection.
// QWEN-DAG: name = "layers.1.mlp.experts.gate_proj.weight.lora_A"
// QWEN-DAG: name = "layers.1.mlp.experts.up_proj.weight.lora_A"
// QWEN-DAG: name = "layers.1.mlp.experts.down_proj.weight.lora_A"
// QWEN-DAG: name = "layers.1.mlp.shared_expert.gate_proj.weight.lora_A"
// QWEN-DAG: name = "layers.1.mlp.shared_expert.down_proj.weight.lora_A"
// QWEN-NOT: shared_expert_gate.weight.lora_A
