// RUN: llmc model mixtral --preset tiny --set n_layer=1 --set ffn_hidden=192 -o %t.mlir
// RUN: llmc-opt %t.mlir --llmc-weight-quant="scheme=int4:block32" | FileCheck %s
// RUN: llmc-opt %t.mlir --llmc-weight-quant="scheme=int8:channel" | FileCheck %s --check-prefix=INT8
// RUN: llmc-opt %t.mlir --llmc-weight-quant="scheme=nf4:block64 double-quant=fp8" | FileCheck %s --check-prefix=NF4
// RUN: llmc-opt %t.mlir --llmc-weight-quant="scheme=fp8" | FileCheck %s --check-prefix=FP8
// RUN: llmc-opt %t.mlir --llmc-weight-quant="scheme=int4:tensor:asym" | FileCheck %s --check-prefix=ASYM
// RUN: llmc-opt %t.mlir --llmc-precision --llmc-weight-quant="scheme=int8:channel" | FileCheck %s --check-prefix=BF16
// RUN: llmc model qwen2_moe --preset tiny --set n_layer=2 -o %t-qwen.mlir
// RUN: llmc-opt %t-qwen.mlir --llmc-weight-quant="scheme=int4:block32" | FileCheck %s --check-prefix=QWEN
// RUN: llmc model mixtral --preset tiny --set n_layer=1 -o %t-176.mlir
// RUN: not llmc-opt %t-176.mlir --llmc-weight-quant="scheme=int4:block32" 2>&1 | FileCheck %s --check-prefix=BLOCK
// RUN: llmc-opt %t.mlir --llmc-shard="mesh=tp=2" --llmc-weight-quant="scheme=int4:block32" | FileCheck %s --check-prefix=TP
// RUN: llmc-opt %t.mlir --llmc-shard="mesh=tp=2" --llmc-weight-quant="scheme=int8:channel" | FileCheck %s --check-prefix=TP-CHANNEL
// RUN: llmc-opt %t.mlir --llmc-shard="mesh=tp=2" --llmc-weight-quant="scheme=int8:channel1" | FileCheck %s --check-prefix=TP-COLUMNS
// RUN: llmc-opt %t.mlir --llmc-shard="mesh=tp=2" --llmc-weight-quant="scheme=fp8" | FileCheck %s --check-prefix=TP-TENSOR
// RUN: llmc-opt %t.mlir --llmc-shard="mesh=tp=2" --llmc-weight-quant="scheme=nf4:block32" | FileCheck %s --check-prefix=TP-NF4
// RUN: not llmc-opt %t.mlir --llmc-shard="mesh=tp=2" --llmc-weight-quant="scheme=int4:block64" 2>&1 | FileCheck %s --check-prefix=TP-BLOCK
// RUN: not llmc-opt %t.mlir --llmc-shard="mesh=tp=2" --llmc-weight-quant="scheme=nf4:block64" 2>&1 | FileCheck %s --check-prefix=TP-NF4-BLOCK
// RUN: llmc-opt %t.mlir --llmc-shard="mesh=ep=2 shared-tokens=1" --llmc-weight-quant="scheme=int8:channel1" | FileCheck %s --check-prefix=EP
// RUN: llmc-opt %t.mlir --llmc-shard="mesh=ep=2 shared-tokens=1" --llmc-weight-quant="scheme=fp8" | FileCheck %s --check-prefix=EP-TENSOR
// RUN: llmc-opt %t.mlir --llmc-shard="mesh=ep=2 shared-tokens=1" --llmc-weight-quant="scheme=nf4:block32" | FileCheck %s --check-prefix=EP-NF4
// RUN: llmc-opt %t.mlir --llmc-shard="mesh=ep=2,tp=2 shared-tokens=1" --llmc-weight-quant="scheme=int8:channel" | FileCheck %s --check-prefix=EP-TP
// RUN: llmc-opt %t.mlir --llmc-shard="mesh=ep=2,tp=2 shared-tokens=1" --llmc-weight-quant="scheme=int8:channel1" | FileCheck %s --check-prefix=EP-TP-COLUMNS
// RUN: llmc-opt %t.mlir --llmc-shard="mesh=ep=2,tp=2 shared-tokens=1" --llmc-weight-quant="scheme=fp8" | FileCheck %s --check-prefix=EP-TP-TENSOR
// RUN: llmc-opt %t.mlir --llmc-shard="mesh=ep=2,tp=2 shared-tokens=1" --llmc-weight-quant="scheme=nf4:block32" | FileCheck %s --check-prefix=EP-TP-NF4
// RUN: not llmc-opt %S/Inputs/experts-split-unevenly.mlir --split-input-file --llmc-weight-quant="scheme=int8:channel" 2>&1 | FileCheck %s --check-prefix=UNEVEN
// RUN: not llmc-opt %S/Inputs/odd-experts.mlir --llmc-weight-quant="scheme=int4:channel" 2>&1 | FileCheck %s --check-prefix=ODD
// RUN: llmc-opt %S/Inputs/odd-experts.mlir --llmc-weight-quant="scheme=int8:channel" | FileCheck %s --check-prefix=ODD-INT8

// Each expert's slice of a stacked weight is quantized as a dense weight
// of its shape (blocks of 32 along its rows; the names and layout of `llmc
// quantize`), stored expert after expert; the router's gate, whose logits
// pick the experts, stays fp32 while attention's projections and the head
// are quantized.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[GATE:arg[0-9]+]]: tensor<4x128xf32> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.gate.weight"
// CHECK-NOT: name = "layers.0.block_sparse_moe.experts.w1.weight",
// CHECK-SAME: %[[C1:arg[0-9]+]]: tensor<49152xi8> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w1.weight.qweight", init = "zeros", trainable = false>}
// CHECK-SAME: %[[S1:arg[0-9]+]]: tensor<3072xf32> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w1.weight.scale", init = "zeros", trainable = false>}
// CHECK: llm.matmul_int {{.*}} {bits = 4 : i64, block = 32 : i64, transpose_b, weight_shape = array<i64: 128, 128>}
// CHECK: %[[LOGITS:.*]] = llm.matmul %{{.*}}, %[[GATE]] {transpose_b} : tensor<1024x128xf32>, tensor<4x128xf32>
// CHECK-NEXT: llm.moe_route %[[LOGITS]]
// CHECK: llm.grouped_matmul_int %{{.*}}, %offsets, %{{.*}}, %{{.*}} {bits = 4 : i64, block = 32 : i64, transpose_b, weight_shape = array<i64: 4, 192, 128>} : tensor<2048x128xf32>, tensor<5xi32>, tensor<49152xi8>, tensor<3072xf32> -> tensor<2048x192xf32>
// CHECK: llm.grouped_matmul_int %{{.*}}, %offsets, %[[C1]], %[[S1]]
// CHECK: llm.grouped_matmul_int {{.*}} weight_shape = array<i64: 4, 128, 192>} : tensor<2048x192xf32>, tensor<5xi32>, tensor<49152xi8>, tensor<3072xf32> -> tensor<2048x128xf32>
// CHECK-NOT: llm.grouped_matmul %
// CHECK: llm.matmul_int {{.*}} weight_shape = array<i64: 256, 128>}

// int8 per channel: each expert's output channels (its rows, [G, F, K]).
// INT8: llm.grouped_matmul_int {{.*}} {bits = 8 : i64, channel_axis = 0 : i64, transpose_b, weight_shape = array<i64: 4, 192, 128>} : tensor<2048x128xf32>, tensor<5xi32>, tensor<98304xi8>, tensor<768xf32>
// INT8: llm.grouped_matmul_int {{.*}} {bits = 8 : i64, channel_axis = 0 : i64, transpose_b, weight_shape = array<i64: 4, 128, 192>} : tensor<2048x192xf32>, tensor<5xi32>, tensor<98304xi8>, tensor<512xf32>

// In NF4 the stack's storage is flat (1536 blocks of 64, 6 scales of 256
// blocks), the absmax levels' format carried.
// NF4: llm.grouped_matmul_nf4 {{.*}} {absmax_format = "fp8_e4m3", block = 64 : i64, transpose_b, weight_shape = array<i64: 4, 192, 128>} : tensor<2048x128xf32>, tensor<5xi32>, tensor<49152xi8>, tensor<1536xi8>, tensor<6xf32>, tensor<f32> -> tensor<2048x192xf32>

// fp8 per tensor: one scale per expert.
// FP8: llm.grouped_matmul_int {{.*}} {bits = 8 : i64, fp8, transpose_b, weight_shape = array<i64: 4, 192, 128>} : tensor<2048x128xf32>, tensor<5xi32>, tensor<98304xi8>, tensor<4xf32>

// Asymmetric int4 per tensor: a scale and a zero point per expert.
// ASYM: llm.grouped_matmul_int {{.*}} {bits = 4 : i64, transpose_b, weight_shape = array<i64: 4, 192, 128>} : tensor<2048x128xf32>, tensor<5xi32>, tensor<49152xi8>, tensor<4xf32>, tensor<4xi32>

// bf16 reads the experts through a cast, which goes with the weight.
// BF16-NOT: name = "layers.0.block_sparse_moe.experts.w1.weight",
// BF16: llm.grouped_matmul_int {{.*}} : tensor<2048x128xbf16>, tensor<5xi32>, tensor<98304xi8>, tensor<768xf32> -> tensor<2048x192xbf16>

// Qwen-MoE: the routed experts per expert, the shared expert and its
// sigmoid gate as dense matmuls; the router stays fp32.
// QWEN: llm.matmul %{{.*}}, %{{.*}} {transpose_b} : tensor<1024x128xf32>, tensor<8x128xf32> -> tensor<1024x8xf32>
// QWEN-NEXT: llm.moe_route
// QWEN: llm.grouped_matmul_int {{.*}} weight_shape = array<i64: 8, 64, 128>}
// QWEN: llm.matmul_int {{.*}} weight_shape = array<i64: 128, 128>}
// QWEN: llm.matmul_int {{.*}} weight_shape = array<i64: 1, 128>}
// QWEN-NEXT: llm.sigmoid

// BLOCK: error: 'llm.grouped_matmul' op weight-quant: blocks of 32 do not divide the last dimension of 'layers.0.block_sparse_moe.experts.w2.weight' 'tensor<4x128x176xf32>'

// Under tensor parallelism the stack's storage is its 2-D view [G·A, B]'s,
// split with the stack: gate/up (column-parallel, [4, 96, 128] of
// [4, 192, 128] per rank) split each expert's rows, a chunk of the view's
// rows per expert; down (row-parallel, [4, 128, 96] of [4, 128, 192])
// splits the view's columns, in whole bytes and blocks. The products read
// this rank's piece; down's partial sums are all-reduced as before.
// TP-LABEL: func.func @forward
// TP-SAME: tensor<384x64xi8> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w1.weight.qweight", init = "zeros", trainable = false>, llmc.shard = {global_shape = array<i64: 768, 64>, levels = [{axes = ["tp"], blocks = 4 : i64, dim = 0 : i64}]}}
// TP-SAME: tensor<384x4xf32> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w1.weight.scale", init = "zeros", trainable = false>, llmc.shard = {global_shape = array<i64: 768, 4>, levels = [{axes = ["tp"], blocks = 4 : i64, dim = 0 : i64}]}}
// TP-SAME: tensor<512x48xi8> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w2.weight.qweight", init = "zeros", trainable = false>, llmc.shard = {global_shape = array<i64: 512, 96>, levels = [{axes = ["tp"], blocks = 1 : i64, dim = 1 : i64}]}}
// TP-SAME: tensor<512x3xf32> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w2.weight.scale", init = "zeros", trainable = false>, llmc.shard = {global_shape = array<i64: 512, 6>, levels = [{axes = ["tp"], blocks = 1 : i64, dim = 1 : i64}]}}
// TP: llm.grouped_matmul_int {{.*}} {bits = 4 : i64, block = 32 : i64, transpose_b, weight_shape = array<i64: 4, 96, 128>} : tensor<2048x128xf32>, tensor<5xi32>, tensor<384x64xi8>, tensor<384x4xf32> -> tensor<2048x96xf32>
// TP: %[[DOWN:.*]] = llm.grouped_matmul_int {{.*}} weight_shape = array<i64: 4, 128, 96>} : tensor<2048x96xf32>, tensor<5xi32>, tensor<512x48xi8>, tensor<512x3xf32> -> tensor<2048x128xf32>
// TP-NEXT: dist.all_reduce %[[DOWN]] on @mesh axes ["tp"] reduction "sum"

// Per output channel (each expert's rows): gate/up's scales split with
// their rows, down's whole on both ranks.
// TP-CHANNEL: tensor<384xf32> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w1.weight.scale", init = "zeros", trainable = false>, llmc.shard = {global_shape = array<i64: 768>, levels = [{axes = ["tp"], blocks = 4 : i64, dim = 0 : i64}]}}
// TP-CHANNEL: tensor<512xf32> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w2.weight.scale", init = "zeros", trainable = false>}

// Per input channel (each expert's columns): [G, columns], split with
// down's columns, whole for gate/up.
// TP-COLUMNS: tensor<4x128xf32> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w1.weight.scale", init = "zeros", trainable = false>}
// TP-COLUMNS: tensor<4x96xf32> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w2.weight.scale", init = "zeros", trainable = false>, llmc.shard = {global_shape = array<i64: 4, 192>, levels = [{axes = ["tp"], blocks = 1 : i64, dim = 1 : i64}]}}
// TP-COLUMNS: llm.grouped_matmul_int {{.*}} {bits = 8 : i64, channel_axis = 1 : i64, transpose_b, weight_shape = array<i64: 4, 128, 96>} : tensor<2048x96xf32>, tensor<5xi32>, tensor<512x96xi8>, tensor<4x96xf32>

// One scale per expert, whole on both ranks.
// TP-TENSOR: tensor<4xf32> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w2.weight.scale", init = "zeros", trainable = false>}
// TP-TENSOR: llm.grouped_matmul_int {{.*}} {bits = 8 : i64, fp8, transpose_b, weight_shape = array<i64: 4, 128, 96>} : tensor<2048x96xf32>, tensor<5xi32>, tensor<512x96xi8>, tensor<4xf32>

// In NF4 the codes and absmax levels split as int4's; the stack's 12
// double-quantized scales whole on both ranks, each product placing its
// piece in the whole stack's view (a chunk per expert for gate/up, the
// rank's offset moving it).
// TP-NF4: tensor<384x4xi8> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w1.weight.absmax_q", init = "zeros", trainable = false>, llmc.shard = {global_shape = array<i64: 768, 4>, levels = [{axes = ["tp"], blocks = 4 : i64, dim = 0 : i64}]}}
// TP-NF4-SAME: tensor<12xf32> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w1.weight.absmax_scale", init = "zeros", trainable = false>}
// TP-NF4: llm.grouped_matmul_nf4 {{.*}} {block = 32 : i64, chunks = array<i64: 4, 1>, dist.rank_offsets = [#dist.rank_offset<mesh = @mesh, attr = "piece_offset", index = 0, axes = ["tp"], stride = 96>], piece_offset = array<i64: 0, 0>, transpose_b, weight_shape = array<i64: 4, 96, 128>, whole_shape = array<i64: 768, 128>} : tensor<2048x128xf32>, tensor<5xi32>, tensor<384x64xi8>, tensor<384x4xi8>, tensor<12xf32>, tensor<f32> -> tensor<2048x96xf32>
// TP-NF4: llm.grouped_matmul_nf4 {{.*}} {block = 32 : i64, chunks = array<i64: 1, 1>, dist.rank_offsets = [#dist.rank_offset<mesh = @mesh, attr = "piece_offset", index = 1, axes = ["tp"], stride = 96>], piece_offset = array<i64: 0, 0>, transpose_b, weight_shape = array<i64: 4, 128, 96>, whole_shape = array<i64: 512, 192>} : tensor<2048x96xf32>, tensor<5xi32>, tensor<512x48xi8>, tensor<512x3xi8>, tensor<12xf32>, tensor<f32> -> tensor<2048x128xf32>

// A rank holds whole blocks of the file's storage, quantized expert by
// expert whole: down's pieces of 96 columns do not take blocks of 64.
// TP-BLOCK: error: 'llm.grouped_matmul' op weight-quant: the experts' weights 'layers.0.block_sparse_moe.experts.w2.weight' 'tensor<4x128x96xf32>' of 4x128x192: blocks of 64 do not divide its pieces of 96 columns
// TP-NF4-BLOCK: error: 'llm.grouped_matmul' op weight-quant: the experts' weights 'layers.0.block_sparse_moe.experts.w2.weight' 'tensor<4x128x96xf32>' of 4x128x192: NF4 blocks of 64 do not divide its pieces of 96 columns

// Under expert parallelism (a generation step's, ranks sharing the
// tokens) each rank keeps two whole experts: runs of the view's rows, with
// the scales of each expert's columns, or the one scale per expert, split
// along the experts with them; NF4's whole-stack scales stay on both ranks
// and the product's piece offset moves by two experts' rows per rank.
// EP: tensor<384x128xi8> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w1.weight.qweight", init = "zeros", trainable = false>, llmc.shard = {global_shape = array<i64: 768, 128>, levels = [{axes = ["ep"], blocks = 1 : i64, dim = 0 : i64}]}}
// EP-SAME: tensor<2x128xf32> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w1.weight.scale", init = "zeros", trainable = false>, llmc.shard = {global_shape = array<i64: 4, 128>, levels = [{axes = ["ep"], blocks = 1 : i64, dim = 0 : i64}]}}
// EP: llm.grouped_matmul_int {{.*}} {bits = 8 : i64, channel_axis = 1 : i64, transpose_b, weight_shape = array<i64: 2, 192, 128>} : tensor<2048x128xf32>, tensor<3xi32>, tensor<384x128xi8>, tensor<2x128xf32> -> tensor<2048x192xf32>
// EP-TENSOR: tensor<2xf32> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w1.weight.scale", init = "zeros", trainable = false>, llmc.shard = {global_shape = array<i64: 4>, levels = [{axes = ["ep"], blocks = 1 : i64, dim = 0 : i64}]}}
// EP-NF4: tensor<12xf32> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w1.weight.absmax_scale", init = "zeros", trainable = false>}
// EP-NF4: llm.grouped_matmul_nf4 {{.*}} {block = 32 : i64, chunks = array<i64: 1, 1>, dist.rank_offsets = [#dist.rank_offset<mesh = @mesh, attr = "piece_offset", index = 0, axes = ["ep"], stride = 384>], piece_offset = array<i64: 0, 0>, transpose_b, weight_shape = array<i64: 2, 192, 128>, whole_shape = array<i64: 768, 128>}

// Under ep and tp together each rank keeps its tp piece of two whole
// experts: the view's rows split first into each expert's tp pieces
// (blocks of one expert), then along the experts; the scales of each
// expert's rows follow the codes, those of each expert's columns and the
// one scale per expert split with the experts only (and with down's
// columns). NF4's products hold two of the whole stack's chunks, the
// piece offset moving by a tp piece's rows and by two experts' rows.
// EP-TP: tensor<192x128xi8> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w1.weight.qweight", init = "zeros", trainable = false>, llmc.shard = {global_shape = array<i64: 768, 128>, levels = [{axes = ["tp"], blocks = 4 : i64, dim = 0 : i64}, {axes = ["ep"], blocks = 1 : i64, dim = 0 : i64}]}}
// EP-TP-SAME: tensor<192xf32> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w1.weight.scale", init = "zeros", trainable = false>, llmc.shard = {global_shape = array<i64: 768>, levels = [{axes = ["tp"], blocks = 4 : i64, dim = 0 : i64}, {axes = ["ep"], blocks = 1 : i64, dim = 0 : i64}]}}
// EP-TP: tensor<256x96xi8> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w2.weight.qweight", init = "zeros", trainable = false>, llmc.shard = {global_shape = array<i64: 512, 192>, levels = [{axes = ["ep"], blocks = 1 : i64, dim = 0 : i64}, {axes = ["tp"], blocks = 1 : i64, dim = 1 : i64}]}}
// EP-TP-SAME: tensor<256xf32> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w2.weight.scale", init = "zeros", trainable = false>, llmc.shard = {global_shape = array<i64: 512>, levels = [{axes = ["ep"], blocks = 1 : i64, dim = 0 : i64}]}}
// EP-TP: llm.grouped_matmul_int {{.*}} {bits = 8 : i64, channel_axis = 0 : i64, transpose_b, weight_shape = array<i64: 2, 96, 128>} : tensor<2048x128xf32>, tensor<3xi32>, tensor<192x128xi8>, tensor<192xf32> -> tensor<2048x96xf32>
// EP-TP: llm.grouped_matmul_int {{.*}} {bits = 8 : i64, channel_axis = 0 : i64, transpose_b, weight_shape = array<i64: 2, 128, 96>} : tensor<2048x96xf32>, tensor<3xi32>, tensor<256x96xi8>, tensor<256xf32> -> tensor<2048x128xf32>
// EP-TP-COLUMNS: tensor<2x128xf32> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w1.weight.scale", init = "zeros", trainable = false>, llmc.shard = {global_shape = array<i64: 4, 128>, levels = [{axes = ["ep"], blocks = 1 : i64, dim = 0 : i64}]}}
// EP-TP-COLUMNS: tensor<2x96xf32> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w2.weight.scale", init = "zeros", trainable = false>, llmc.shard = {global_shape = array<i64: 4, 192>, levels = [{axes = ["ep"], blocks = 1 : i64, dim = 0 : i64}, {axes = ["tp"], blocks = 1 : i64, dim = 1 : i64}]}}
// EP-TP-COLUMNS: llm.grouped_matmul_int {{.*}} {bits = 8 : i64, channel_axis = 1 : i64, transpose_b, weight_shape = array<i64: 2, 128, 96>} : tensor<2048x96xf32>, tensor<3xi32>, tensor<256x96xi8>, tensor<2x96xf32> -> tensor<2048x128xf32>
// EP-TP-TENSOR: tensor<2xf32> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w1.weight.scale", init = "zeros", trainable = false>, llmc.shard = {global_shape = array<i64: 4>, levels = [{axes = ["ep"], blocks = 1 : i64, dim = 0 : i64}]}}
// EP-TP-TENSOR: llm.grouped_matmul_int {{.*}} {bits = 8 : i64, fp8, transpose_b, weight_shape = array<i64: 2, 96, 128>} : tensor<2048x128xf32>, tensor<3xi32>, tensor<192x128xi8>, tensor<2xf32> -> tensor<2048x96xf32>
// EP-TP-NF4: tensor<192x4xi8> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w1.weight.absmax_q", init = "zeros", trainable = false>, llmc.shard = {global_shape = array<i64: 768, 4>, levels = [{axes = ["tp"], blocks = 4 : i64, dim = 0 : i64}, {axes = ["ep"], blocks = 1 : i64, dim = 0 : i64}]}}
// EP-TP-NF4-SAME: tensor<12xf32> {llm.param = #llm.param<name = "layers.0.block_sparse_moe.experts.w1.weight.absmax_scale", init = "zeros", trainable = false>}
// EP-TP-NF4: llm.grouped_matmul_nf4 {{.*}} {block = 32 : i64, chunks = array<i64: 4, 1>, dist.rank_offsets = [#dist.rank_offset<mesh = @mesh, attr = "piece_offset", index = 0, axes = ["tp"], stride = 96>, #dist.rank_offset<mesh = @mesh, attr = "piece_offset", index = 0, axes = ["ep"], stride = 384>], held_chunks = array<i64: 2, 1>, piece_offset = array<i64: 0, 0>, transpose_b, weight_shape = array<i64: 2, 96, 128>, whole_shape = array<i64: 768, 128>} : tensor<2048x128xf32>, tensor<3xi32>, tensor<192x64xi8>, tensor<192x4xi8>, tensor<12xf32>, tensor<f32> -> tensor<2048x96xf32>
// EP-TP-NF4: llm.grouped_matmul_nf4 {{.*}} {block = 32 : i64, chunks = array<i64: 1, 1>, dist.rank_offsets = [#dist.rank_offset<mesh = @mesh, attr = "piece_offset", index = 1, axes = ["tp"], stride = 96>, #dist.rank_offset<mesh = @mesh, attr = "piece_offset", index = 0, axes = ["ep"], stride = 256>], piece_offset = array<i64: 0, 0>, transpose_b, weight_shape = array<i64: 2, 128, 96>, whole_shape = array<i64: 512, 192>} : tensor<2048x96xf32>, tensor<3xi32>, tensor<256x48xi8>, tensor<256x3xi8>, tensor<12xf32>, tensor<f32> -> tensor<2048x128xf32>

// A stack's dimension split twice, or experts split in blocks (each rank's
// experts no one run of the stack), are refused.
// UNEVEN: error: 'llm.grouped_matmul' op weight-quant: the experts' weights 'experts.w' 'tensor<4x2x4xf32>' of 4x8x4: quantized storage takes one split per dimension
// UNEVEN: error: 'llm.grouped_matmul' op weight-quant: the experts' weights 'experts.w' 'tensor<2x8x4xf32>' of 4x8x4: quantized experts split into one run of whole experts per rank, not 2 blocks

// An expert's 4-bit codes must start on a byte; int8 codes take any shape.
// ODD: error: 'llm.grouped_matmul' op weight-quant: each expert of 'experts.w' 'tensor<3x7x5xf32>' has an odd number of 4-bit codes (whole bytes only)
// ODD-INT8: llm.grouped_matmul_int {{.*}} {bits = 8 : i64, channel_axis = 0 : i64, transpose_b, weight_shape = array<i64: 3, 7, 5>} : tensor<4x5xf32>, tensor<4xi32>, tensor<105xi8>, tensor<21xf32> -> tensor<4x7xf32>
