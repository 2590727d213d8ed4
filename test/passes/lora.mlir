// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-lora="spec={rank=2, alpha=4}" | FileCheck %s
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-lora="spec={rank=2, alpha=4, targets=head}" | FileCheck %s --check-prefix=HEAD
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="lora={rank=2} emit=train" | FileCheck %s --check-prefix=TRAIN
// RUN: llmc model gpt2 --preset tiny --set n_layer=1 -o %t.mlir
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="mesh=tp=2 lora={rank=4, alpha=8, targets=qkv,proj} emit=graph" | FileCheck %s --check-prefix=TP
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="mesh=tp=2 sp=true lora={rank=4, targets=proj} emit=graph" | FileCheck %s --check-prefix=SP
// RUN: llmc-opt %t.mlir --llmc-lora="spec={rank=4, targets=h.0.mlp}" | FileCheck %s --check-prefix=PREFIX
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-lora="spec={rank=2} qlora=true qlora-block=8" | FileCheck %s --check-prefix=QLORA
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="lora={rank=4} qlora=true emit=train" | FileCheck %s --check-prefix=QLORA-TRAIN
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-lora="spec={rank=2, targets=head} qlora=true qlora-block=8" | FileCheck %s --check-prefix=QLORA-TIED
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="lora={rank=2, targets=qkv,head} qlora=true emit=train" | FileCheck %s --check-prefix=QLORA-TIED-TRAIN
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="mesh=tp=2 lora={rank=2, targets=qkv,proj,mlp,head} qlora=true emit=graph" | FileCheck %s --check-prefix=QLORA-TP
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="mesh=dp=2,tp=2 sp=true lora={rank=2} qlora=true emit=graph" | FileCheck %s --check-prefix=QLORA-TP-SP
// RUN: not llmc-opt %t.mlir --llmc-shard="mesh=tp=2" --llmc-lora="spec={rank=2} qlora=true qlora-block=128" 2>&1 | FileCheck %s --check-prefix=QLORA-TP-BLOCKS
// RUN: llmc model gpt2 --preset tiny --set n_layer=1 --set n_embd=6 --set n_head=2 --set n_kv_head=2 -o %t-narrow.mlir
// RUN: not llmc-opt %t-narrow.mlir --llmc-shard="mesh=tp=2" --llmc-lora="spec={rank=2} qlora=true qlora-block=3" 2>&1 | FileCheck %s --check-prefix=QLORA-TP-BYTES
// RUN: llmc model llama --preset tiny --set n_layer=1 --set vocab_size=249 --set n_kv_head=4 -o %t-uneven.mlir
// RUN: llmc-opt %t-uneven.mlir --llmc-pad-vocab="multiple=2" --llmc-shard="mesh=tp=4" --llmc-lora="spec={rank=2, targets=head}" | FileCheck %s --check-prefix=UNEVEN
// RUN: not llmc-opt %t-uneven.mlir --llmc-pad-vocab="multiple=2" --llmc-shard="mesh=tp=4" --llmc-lora="spec={rank=2, targets=head} qlora=true qlora-block=16" 2>&1 | FileCheck %s --check-prefix=QLORA-UNEVEN
// RUN: not llmc-opt %S/Inputs/dv-head.mlir --llmc-pad-vocab="multiple=64" --llmc-lora="spec={rank=2, targets=head} qlora=true qlora-block=4" 2>&1 | FileCheck %s --check-prefix=QLORA-COLUMNS
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec=weights=int8" --llmc-lora="spec={rank=2} qlora=true qlora-block=8" 2>&1 | FileCheck %s --check-prefix=QLORA-QAT
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-lora="spec={rank=2} qlora=true qlora-block=5" 2>&1 | FileCheck %s --check-prefix=QLORA-BLOCK
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec=weights=int8" --llmc-lora="spec={rank=2}" | FileCheck %s --check-prefix=QAT
// RUN: llmc-opt %t.mlir --llmc-qat="spec={weights=int8, activations=int8}" --llmc-lora="spec={rank=2, targets=proj}" | FileCheck %s --check-prefix=QAT-ACT
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-lora="spec=rank=8" 2>&1 | FileCheck %s --check-prefix=RANK-TOO-BIG
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-lora="spec=rank=0" 2>&1 | FileCheck %s --check-prefix=BAD-RANK
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-lora="spec=alpha=-1" 2>&1 | FileCheck %s --check-prefix=BAD-ALPHA
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-lora="spec={targets=mlp,conv}" 2>&1 | FileCheck %s --check-prefix=BAD-TARGET
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-lora="spec=targets=qkv" 2>&1 | FileCheck %s --check-prefix=NOTHING
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-lora="spec=bits=4" 2>&1 | FileCheck %s --check-prefix=BAD-KEY
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-lora="spec={rank=2,qkv}" 2>&1 | FileCheck %s --check-prefix=NO-KEY
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-lora="spec={rank=2} qlora=true qlora-block=8 qlora-double-quant=fp8" | FileCheck %s --check-prefix=QLORA-FP8
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="lora={rank=4} qlora=true double-quant=fp8 emit=train" | FileCheck %s --check-prefix=QLORA-FP8-TRAIN
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="lora={rank=2} qlora=true qlora-block=8 double-quant=fp8 emit=exec" | FileCheck %s --check-prefix=QLORA-FP8-EXEC
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="lora={rank=2} qlora=true qlora-block=8 emit=exec" | FileCheck %s --check-prefix=QLORA-INT8-EXEC
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-lora="spec={rank=2} qlora-double-quant=fp8" 2>&1 | FileCheck %s --check-prefix=QLORA-FP8-NO-QLORA
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-lora="spec={rank=2} qlora=true qlora-double-quant=fp16" 2>&1 | FileCheck %s --check-prefix=QLORA-BAD-LEVELS
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="lora={rank=2} double-quant=fp8" 2>&1 | FileCheck %s --check-prefix=LORA-FP8-LEVELS

// Every base parameter frozen; the adapters (A uniform ±1/√K, B zeros) are
// the only trainable parameters, placed after the base ones. The default
// targets (qkv, proj, mlp) find the layer's matmul but not the head.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: name = "wte", init = "normal", scale = 2.000000e-02, trainable = false
// CHECK-SAME: name = "ln.weight", init = "ones", trainable = false
// CHECK-SAME: name = "h.0.mlp.weight", init = "normal", scale = 2.000000e-02, trainable = false
// CHECK-SAME: %[[A:.*]]: tensor<8x2xf32> {llm.param = #llm.param<name = "h.0.mlp.weight.lora_A", init = "uniform", scale = 0.35355339059327373>}
// CHECK-SAME: %[[B:.*]]: tensor<2x8xf32> {llm.param = #llm.param<name = "h.0.mlp.weight.lora_B", init = "zeros">}
// CHECK-SAME: %{{.*}}: tensor<2x4xi32> {llmc.name = "tokens"}
// y + (alpha/rank)·(x·A)·B, joined where y was used.
// CHECK: %[[N:.*]] = llm.layernorm
// CHECK-NEXT: %[[Y:.*]] = llm.matmul %[[N]], %arg3 :
// CHECK-NEXT: %[[Z:.*]] = llm.matmul %[[N]], %[[A]] : tensor<2x4x8xf32>, tensor<8x2xf32> -> tensor<2x4x2xf32>
// CHECK-NEXT: %[[D:.*]] = llm.matmul %[[Z]], %[[B]] : tensor<2x4x2xf32>, tensor<2x8xf32> -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[S:.*]] = llm.scale %[[D]] {factor = 2.000000e+00 : f64}
// CHECK-NEXT: %[[SUM:.*]] = llm.add %[[Y]], %[[S]]
// CHECK-NEXT: llm.gelu %[[SUM]]
// CHECK-NOT: lora_A
// CHECK: llm.matmul %{{.*}}, %arg0 {transpose_b}
// CHECK-NEXT: llm.cross_entropy

// A transposed weight [N, K] gets A [r, K] and B [N, r], both read
// transposed.
// HEAD: tensor<2x8xf32> {llm.param = #llm.param<name = "wte.lora_A", init = "uniform", scale = 0.35355339059327373>}
// HEAD-SAME: tensor<16x2xf32> {llm.param = #llm.param<name = "wte.lora_B", init = "zeros">}
// HEAD: %[[Y:.*]] = llm.matmul %[[H:.*]], %arg0 {transpose_b}
// HEAD-NEXT: %[[Z:.*]] = llm.matmul %[[H]], %arg4 {transpose_b} : tensor<2x4x8xf32>, tensor<2x8xf32> -> tensor<2x4x2xf32>
// HEAD-NEXT: %[[D:.*]] = llm.matmul %[[Z]], %arg5 {transpose_b} : tensor<2x4x2xf32>, tensor<16x2xf32> -> tensor<2x4x16xf32>
// HEAD: llm.add %[[Y]]
// HEAD-NEXT: llm.cross_entropy

// Autodiff and the optimizer see only the adapters: two AdamW updates
// (one multi_tensor_adamw), Adam state for A and B only.
// TRAIN-LABEL: func.func @train_step
// TRAIN-SAME: llmc.name = "h.0.mlp.weight.lora_A", llmc.role = "adam_m"
// TRAIN-SAME: llmc.name = "h.0.mlp.weight.lora_B", llmc.role = "adam_m"
// TRAIN-SAME: llmc.name = "h.0.mlp.weight.lora_A", llmc.role = "adam_v"
// TRAIN-SAME: llmc.name = "h.0.mlp.weight.lora_B", llmc.role = "adam_v"
// TRAIN-NOT: llmc.role = "adam_m"
// TRAIN: llm.multi_tensor_adamw params(%arg4, %arg5 : tensor<8x2xf32>, tensor<2x8xf32>)
// TRAIN-NOT: llm.adamw

// Tensor parallelism: a column-parallel weight's B is split like it (the
// fused QKV weight's three blocks included) and A is read through
// dist.replicate; a row-parallel weight's A is split like it and x·A is
// completed by its own all_reduce before the branch joins.
// TP: tensor<128x4xf32> {llm.param = #llm.param<name = "h.0.attn.c_attn.weight.lora_A"
// TP-NOT: llmc.shard
// TP-SAME: tensor<4x192xf32> {llm.param = #llm.param<name = "h.0.attn.c_attn.weight.lora_B", init = "zeros">, llmc.shard = {global_shape = array<i64: 4, 384>, levels = [{axes = ["tp"], blocks = 3 : i64, dim = 1 : i64}]}}
// TP-SAME: tensor<64x4xf32> {llm.param = #llm.param<name = "h.0.attn.c_proj.weight.lora_A", init = "uniform", scale = 0.0883883{{[0-9]*}}>, llmc.shard = {global_shape = array<i64: 128, 4>, levels = [{axes = ["tp"], blocks = 1 : i64, dim = 0 : i64}]}}
// TP-SAME: tensor<4x128xf32> {llm.param = #llm.param<name = "h.0.attn.c_proj.weight.lora_B", init = "zeros">}
// TP: %[[X:.*]] = dist.replicate
// TP-NEXT: llm.matmul %[[X]], %arg4 : tensor<8x128x128xf32>, tensor<128x192xf32>
// TP-NEXT: %[[A:.*]] = dist.replicate %arg16 on @mesh axes ["tp"] : tensor<128x4xf32>
// TP-NEXT: %[[Z:.*]] = llm.matmul %[[X]], %[[A]]
// TP-NEXT: llm.matmul %[[Z]], %arg17 : tensor<8x128x4xf32>, tensor<4x192xf32>
// TP: %[[Y:.*]] = llm.matmul %[[O:.*]], %arg6 : tensor<8x128x64xf32>, tensor<64x128xf32>
// TP-NEXT: %[[ZP:.*]] = llm.matmul %[[O]], %arg18 : tensor<8x128x64xf32>, tensor<64x4xf32> -> tensor<8x128x4xf32>
// TP-NEXT: %[[YR:.*]] = dist.all_reduce %[[Y]] on @mesh axes ["tp"] reduction "sum"
// TP-NEXT: %[[ZR:.*]] = dist.all_reduce %[[ZP]] on @mesh axes ["tp"] reduction "sum" : tensor<8x128x4xf32>
// TP-NEXT: %[[D:.*]] = llm.matmul %[[ZR]], %arg19
// TP-NEXT: %[[S:.*]] = llm.scale %[[D]]
// TP-NEXT: llm.add %[[YR]], %[[S]]

// Sequence parallelism: x·A is reduce-scattered along the sequence like
// x·W, and the whole B is read through dist.replicate (each rank now sees
// only its rows, so B's gradient is a partial sum).
// SP: %[[Y:.*]] = llm.matmul %[[O:.*]], %arg6 : tensor<8x128x64xf32>, tensor<64x128xf32>
// SP-NEXT: %[[ZP:.*]] = llm.matmul %[[O]], %arg16
// SP-NEXT: %[[YR:.*]] = dist.reduce_scatter %[[Y]] on @mesh axes ["tp"] dim 1
// SP-NEXT: %[[ZR:.*]] = dist.reduce_scatter %[[ZP]] on @mesh axes ["tp"] dim 1 {{.*}} -> tensor<8x64x4xf32>
// SP-NEXT: %[[B:.*]] = dist.replicate %arg17 on @mesh axes ["tp"] : tensor<4x128xf32>
// SP-NEXT: %[[D:.*]] = llm.matmul %[[ZR]], %[[B]] : tensor<8x64x4xf32>, tensor<4x128xf32> -> tensor<8x64x128xf32>
// SP-NEXT: %[[S:.*]] = llm.scale %[[D]]
// SP-NEXT: llm.add %[[YR]], %[[S]]

// A dotted prefix chooses the layer's MLP matmuls only.
// PREFIX: name = "h.0.mlp.c_fc.weight.lora_A"
// PREFIX-SAME: name = "h.0.mlp.c_fc.weight.lora_B"
// PREFIX-SAME: name = "h.0.mlp.c_proj.weight.lora_A"
// PREFIX-SAME: name = "h.0.mlp.c_proj.weight.lora_B"
// PREFIX-NOT: attn.c_attn.weight.lora

// RANK-TOO-BIG: error: 'llm.matmul' op lora: rank 8 is not below the smaller dimension of 'h.0.mlp.weight' (8x8)
// BAD-RANK: error: lora: rank must be a positive integer, got '0'
// BAD-ALPHA: error: lora: alpha must be a positive number, got '-1'
// BAD-TARGET: error: lora: target 'conv' matches no matmul weight of @forward (kinds: qkv, proj, mlp, router, head; or a layer or parameter name)
// NOTHING: error: lora: target 'qkv' matches no matmul weight of @forward
// BAD-KEY: error: lora: unknown key 'bits' (expected rank, alpha or targets)
// NO-KEY: error: lora: 'qkv' has no key (expected rank=, alpha= or targets=)

// QLoRA: the adapted weight is replaced by its NF4 storage (codes two per
// byte, int8 block absmax, fp32 scale per 256 blocks, mean), all frozen,
// expanded right before the matmul.
// QLORA: name = "h.0.mlp.weight.qweight", init = "zeros", trainable = false
// QLORA-SAME: tensor<8xi8> {llm.param = #llm.param<name = "h.0.mlp.weight.absmax_q", init = "zeros", trainable = false>}
// QLORA-SAME: tensor<1xf32> {llm.param = #llm.param<name = "h.0.mlp.weight.absmax_scale", init = "zeros", trainable = false>}
// QLORA-SAME: tensor<f32> {llm.param = #llm.param<name = "h.0.mlp.weight.absmax_mean", init = "zeros", trainable = false>}
// QLORA-NOT: name = "h.0.mlp.weight",
// QLORA: %[[W:.*]] = qat.dequantize_nf4 %{{.*}} {block = 8 : i64} : tensor<32xi8>, tensor<8xi8>, tensor<1xf32>, tensor<f32> -> tensor<8x8xf32>
// QLORA-NEXT: llm.matmul %{{.*}}, %[[W]]

// Backward expands each weight again right before the matmul that needs
// it, instead of keeping the fp32 copy alive from forward.
// QLORA-TRAIN-LABEL: func.func @train_step
// QLORA-TRAIN-COUNT-4: qat.dequantize_nf4 %{{.*}} {block = 64 : i64, llmc.block_name = "h.0", llmc.microbatch = 0 : i64}
// QLORA-TRAIN: %[[E:.*]] = qat.dequantize_nf4 {{.*}}llmc.backward{{.*}}llmc.recomputed
// QLORA-TRAIN-NEXT: llm.matmul %{{.*}}, %[[E]] {llmc.backward

// A tied head: the table is stored once in NF4, and the lookup and the head
// both read its expansion; the adapter joins the head's product only.
// QLORA-TIED: %[[T:.*]] = qat.dequantize_nf4 %arg5, %arg6, %arg7, %arg8 {block = 8 : i64} : tensor<64xi8>, tensor<16xi8>, tensor<1xf32>, tensor<f32> -> tensor<16x8xf32>
// QLORA-TIED-NEXT: llm.embedding %[[T]]
// QLORA-TIED: %[[H:.*]] = llm.matmul %{{.*}}, %[[T]] {transpose_b}
// QLORA-TIED: %[[B:.*]] = llm.matmul %{{.*}}, %arg4 {transpose_b}
// QLORA-TIED: %[[S:.*]] = llm.scale %[[B]]
// QLORA-TIED-NEXT: llm.add %[[H]], %[[S]]
// In the step each reader expands the table right before it reads it
// (the lookup, the head, the head's backward), so no expansion lives from
// one to the next.
// QLORA-TIED-TRAIN-LABEL: func.func @train_step
// QLORA-TIED-TRAIN: %[[E1:.*]] = qat.dequantize_nf4 %[[C:arg[0-9]+]],
// QLORA-TIED-TRAIN-NEXT: llm.embedding %[[E1]]
// QLORA-TIED-TRAIN: %[[E2:.*]] = qat.dequantize_nf4 %[[C]],
// QLORA-TIED-TRAIN-NEXT: llm.matmul %{{.*}}, %[[E2]] {llmc.microbatch = 0 : i64, transpose_b}
// QLORA-TIED-TRAIN: %[[E3:.*]] = qat.dequantize_nf4 %[[C]], {{.*}}llmc.backward{{.*}}llmc.recomputed
// QLORA-TIED-TRAIN-NEXT: llm.matmul %{{.*}}, %[[E3]] {llmc.backward

// Under tensor parallelism the storage is split with each weight: codes
// [rows, bytes per row] and absmax levels [rows, blocks per row] per piece
// (c_attn's columns in their three q/k/v chunks, the tied table's vocabulary
// rows), the double-quantized scales whole on every rank; the expansion
// says where its piece lies, its offset moving per tp rank.
// QLORA-TP: tensor<128x96xi8> {llm.param = #llm.param<name = "h.0.attn.c_attn.weight.qweight", init = "zeros", trainable = false>, llmc.shard = {global_shape = array<i64: 128, 192>, levels = [{axes = ["tp"], blocks = 3 : i64, dim = 1 : i64}]}}
// QLORA-TP-SAME: tensor<128x3xi8> {llm.param = #llm.param<name = "h.0.attn.c_attn.weight.absmax_q", init = "zeros", trainable = false>, llmc.shard = {global_shape = array<i64: 128, 6>, levels = [{axes = ["tp"], blocks = 3 : i64, dim = 1 : i64}]}}
// QLORA-TP-SAME: tensor<3xf32> {llm.param = #llm.param<name = "h.0.attn.c_attn.weight.absmax_scale", init = "zeros", trainable = false>}
// QLORA-TP-SAME: tensor<128x64xi8> {llm.param = #llm.param<name = "wte.weight.qweight", init = "zeros", trainable = false>, llmc.shard = {global_shape = array<i64: 256, 64>, levels = [{axes = ["tp"], blocks = 1 : i64, dim = 0 : i64}]}}
// QLORA-TP-SAME: tensor<2xf32> {llm.param = #llm.param<name = "wte.weight.absmax_scale", init = "zeros", trainable = false>}
// QLORA-TP: %[[T:.*]] = qat.dequantize_nf4 {{.*}} {block = 64 : i64, chunks = array<i64: 1, 1>, dist.rank_offsets = [#dist.rank_offset<mesh = @mesh, attr = "piece_offset", index = 0, axes = ["tp"], stride = 128>], piece_offset = array<i64: 0, 0>, whole_shape = array<i64: 256, 128>} : tensor<128x64xi8>, tensor<128x2xi8>, tensor<2xf32>, tensor<f32> -> tensor<128x128xf32>
// QLORA-TP-NEXT: llm.embedding %[[T]]
// QLORA-TP: qat.dequantize_nf4 {{.*}} {block = 64 : i64, chunks = array<i64: 1, 3>, dist.rank_offsets = [#dist.rank_offset<mesh = @mesh, attr = "piece_offset", index = 1, axes = ["tp"], stride = 64>], piece_offset = array<i64: 0, 0>, whole_shape = array<i64: 128, 384>} : tensor<128x96xi8>, tensor<128x3xi8>, tensor<3xf32>, tensor<f32> -> tensor<128x192xf32>
// QLORA-TP: qat.dequantize_nf4 {{.*}} {block = 64 : i64, chunks = array<i64: 1, 1>, dist.rank_offsets = [#dist.rank_offset<mesh = @mesh, attr = "piece_offset", index = 0, axes = ["tp"], stride = 64>], piece_offset = array<i64: 0, 0>, whole_shape = array<i64: 128, 128>} : tensor<64x64xi8>, tensor<64x2xi8>, tensor<1xf32>, tensor<f32> -> tensor<64x128xf32>
// QLORA-TP: llm.matmul %{{.*}}, %[[T]] {transpose_b}
// Sequence parallelism and data parallelism leave the storage as tp splits it.
// QLORA-TP-SP-COUNT-4: qat.dequantize_nf4 {{.*}}piece_offset
// A piece must be whole blocks of the file's storage, in whole bytes.
// QLORA-TP-BLOCKS: error: 'llm.matmul' op qlora: 'h.0.attn.c_attn.weight' 'tensor<128x192xf32>' of 128x384: NF4 blocks of 128 do not divide its pieces of 64 columns (each rank must hold whole blocks of the weight's NF4 storage, which is quantized whole)
// QLORA-TP-BYTES: error: 'llm.matmul' op qlora: 'h.0.attn.c_attn.weight' 'tensor<6x9xf32>' of 6x18: its pieces of 3 columns are not whole bytes of NF4 codes
// A vocabulary padded to 250 over tp=4: the head's pieces are 63 rows,
// the last padded further, and its B is split alike; QLoRA's storage is
// split evenly only.
// UNEVEN: tensor<63x2xf32> {llm.param = #llm.param<name = "lm_head.weight.lora_B", init = "zeros">, llmc.shard = {global_shape = array<i64: 249, 2>, levels = [{axes = [], blocks = 1 : i64, dim = 0 : i64, pad_to = 250 : i64}, {axes = ["tp"], blocks = 1 : i64, dim = 0 : i64}]}
// QLORA-UNEVEN: error: 'llm.matmul' op qlora: 'lm_head.weight' 'tensor<63x128xf32>' of 249x128: quantized storage is split evenly only, and 250 is not a multiple of the 4 pieces of dimension 0
// A [D, V] head's padded columns: flat NF4 storage pads rows only.
// QLORA-COLUMNS: error: 'llm.matmul' op qlora: 'lm_head.weight' is padded along its columns, which flat NF4 storage cannot hold; compile with --vocab-multiple 1
// QLORA-BLOCK: error: 'llm.matmul' op qlora: blocks of 5 do not divide the last dimension of 'h.0.mlp.weight' 'tensor<8x8xf32>'

// After --qat: the base matmul reads the fake-quantized weight, and the
// adapters (never quantized) join beside it.
// QAT: %[[N:.*]] = llm.layernorm
// QAT: %[[Q:.*]] = qat.fake_quant %arg3
// QAT-NEXT: %[[Y:.*]] = llm.matmul %[[N]], %[[Q]]
// QAT-NEXT: %[[Z:.*]] = llm.matmul %[[N]], %arg4 : tensor<2x4x8xf32>, tensor<8x2xf32>
// QAT-NEXT: llm.matmul %[[Z]], %arg5
// QLORA-QAT: error: 'llm.matmul' op qlora: 'h.0.mlp.weight' is fake-quantized by --qat weights=; QLoRA already stores it quantized (drop weights= from --qat, or --qlora)

// With activations fake-quantized too, the projection is still found behind
// the attention output's fake_quant, and its adapter reads the same input.
// QAT-ACT: llm.attention
// QAT-ACT: %[[W:.*]] = qat.fake_quant %arg6
// QAT-ACT: %[[X:.*]] = qat.fake_quant
// QAT-ACT-NEXT: llm.matmul %[[X]], %[[W]]
// QAT-ACT-NEXT: %[[XA:.*]] = llm.matmul %[[X]], %arg16
// QAT-ACT-NEXT: llm.matmul %[[XA]], %arg17

// QLoRA's storage with E4M3 absmax levels (qlora-double-quant=fp8, which
// the pipeline's double-quant sets): every expansion, the backward's
// recomputed ones included, reads them as such.
// QLORA-FP8: qat.dequantize_nf4 %{{.*}} {absmax_format = "fp8_e4m3", block = 8 : i64} : tensor<32xi8>, tensor<8xi8>, tensor<1xf32>, tensor<f32> -> tensor<8x8xf32>
// QLORA-FP8-TRAIN-LABEL: func.func @train_step
// QLORA-FP8-TRAIN-COUNT-4: qat.dequantize_nf4 %{{.*}} {absmax_format = "fp8_e4m3", block = 64 : i64, llmc.block_name = "h.0", llmc.microbatch = 0 : i64}
// QLORA-FP8-TRAIN: qat.dequantize_nf4 {{.*}}absmax_format = "fp8_e4m3"{{.*}}llmc.backward{{.*}}llmc.recomputed
// The exec lowering hands the kernels the integer of common/QuantScheme.h's
// AbsmaxFormat: 1 for E4M3, 0 for int8.
// QLORA-FP8-EXEC: exec.kernel "qat_dequantize_nf4"{{.*}}absmax_format = 1 : i64
// QLORA-INT8-EXEC: exec.kernel "qat_dequantize_nf4"{{.*}}absmax_format = 0 : i64
// QLORA-FP8-NO-QLORA: error: lora: qlora-double-quant sets the absmax levels of QLoRA's NF4 storage; it needs qlora
// QLORA-BAD-LEVELS: error: lora: bad qlora-double-quant 'fp16' (expected int8 or fp8: the format of NF4's absmax levels)
// LORA-FP8-LEVELS: --double-quant sets the absmax levels of NF4 storage: it needs --qlora or --weight-quant nf4[:block<N>]
