// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-weight-quant="scheme=nf4:block8" | FileCheck %s
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-precision --llmc-weight-quant="scheme=nf4:block4" | FileCheck %s --check-prefix=BF16
// RUN: llmc model llama --preset tiny --set n_layer=1 -o %t.mlir
// RUN: llmc-opt %t.mlir --llmc-weight-quant="scheme=nf4:block32" | FileCheck %s --check-prefix=LLAMA
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-weight-quant="scheme=int8:block5" 2>&1 | FileCheck %s --check-prefix=BLOCK
// RUN: llmc model gpt2 --preset tiny --set n_layer=1 -o %t-gpt2.mlir
// RUN: llmc-opt %t-gpt2.mlir --llmc-shard="mesh=tp=2" --llmc-weight-quant | FileCheck %s --check-prefix=TP-NF4
// RUN: not llmc-opt %t-gpt2.mlir --llmc-shard="mesh=tp=2" --llmc-weight-quant="scheme=nf4:block128" 2>&1 | FileCheck %s --check-prefix=TP-NF4-BLOCKS
// RUN: llmc model gpt2 --preset tiny --set n_layer=1 --set n_embd=6 --set n_head=2 --set n_kv_head=2 -o %t-narrow.mlir
// RUN: not llmc-opt %t-narrow.mlir --llmc-shard="mesh=tp=2" --llmc-weight-quant="scheme=nf4:block3" 2>&1 | FileCheck %s --check-prefix=TP-NF4-BYTES
// RUN: not llmc-opt %S/Inputs/dv-head.mlir --llmc-pad-vocab="multiple=64" --llmc-weight-quant="scheme=nf4:block4" 2>&1 | FileCheck %s --check-prefix=NF4-COLUMNS
// RUN: llmc model llama --preset tiny --set n_layer=1 --set vocab_size=249 --set n_kv_head=4 -o %t-uneven.mlir
// RUN: not llmc-opt %t-uneven.mlir --llmc-pad-vocab="multiple=2" --llmc-shard="mesh=tp=4" --llmc-weight-quant="scheme=nf4:block8" 2>&1 | FileCheck %s --check-prefix=TP-UNEVEN
// RUN: llmc-opt %t-gpt2.mlir --llmc-shard="mesh=tp=2" --llmc-weight-quant="scheme=int8:channel" | FileCheck %s --check-prefix=TP-INT8
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="weight-quant=nf4" 2>&1 | FileCheck %s --check-prefix=NO-INFERENCE
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-weight-quant="scheme=int8:channel" | FileCheck %s --check-prefix=INT8
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-weight-quant="scheme=int4:block4:asym" | FileCheck %s --check-prefix=INT4
// RUN: llmc-opt %t.mlir --llmc-weight-quant="scheme=int8:channel" | FileCheck %s --check-prefix=LLAMA-INT8
// RUN: llmc-opt %t.mlir --llmc-weight-quant="scheme=int4" | FileCheck %s --check-prefix=LLAMA-INT4
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-weight-quant="scheme=fp8:channel" | FileCheck %s --check-prefix=FP8
// RUN: llmc-opt %t.mlir --llmc-weight-quant="scheme=fp8_e4m3" | FileCheck %s --check-prefix=LLAMA-FP8
// RUN: llmc-opt %t-gpt2.mlir --llmc-shard="mesh=tp=2" --llmc-weight-quant="scheme=fp8:block32" | FileCheck %s --check-prefix=TP-FP8
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-weight-quant="scheme=fp8_e5m2" 2>&1 | FileCheck %s --check-prefix=E5M2
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-weight-quant="scheme=fp8:asym" 2>&1 | FileCheck %s --check-prefix=FP8-ASYM
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-weight-quant="scheme=nf4:channel" 2>&1 | FileCheck %s --check-prefix=NF4-CHANNEL
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-weight-quant="scheme=int8:ema" 2>&1 | FileCheck %s --check-prefix=OBSERVER
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-weight-quant="scheme=int8:channel2" 2>&1 | FileCheck %s --check-prefix=AXIS
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="inference=max-batch=1,max-context=8 weight-quant=int4:block0" 2>&1 | FileCheck %s --check-prefix=BAD-BLOCK
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="inference=max-batch=1,max-context=8 weight-quant=fp16" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-weight-quant="scheme=nf4:block8 double-quant=fp8" | FileCheck %s --check-prefix=FP8-LEVELS
// RUN: llmc-opt %t-gpt2.mlir --llmc-shard="mesh=tp=2" --llmc-weight-quant="double-quant=fp8" | FileCheck %s --check-prefix=TP-FP8-LEVELS
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-weight-quant="scheme=int8:channel double-quant=fp8" 2>&1 | FileCheck %s --check-prefix=FP8-LEVELS-INT8
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-weight-quant="double-quant=e5m2" 2>&1 | FileCheck %s --check-prefix=BAD-LEVELS
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="inference=max-batch=1,max-context=8 weight-quant=int4:block4 double-quant=fp8" 2>&1 | FileCheck %s --check-prefix=PIPELINE-LEVELS

// The MLP weight, read by its matmul alone, becomes NF4 storage (the names
// and layout of `llmc quantize --scheme nf4:block8`), frozen, after the
// other parameters; the tied wte, also read by llm.embedding, stays fp32.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: name = "wte", init = "normal"
// CHECK-NOT: name = "h.0.mlp.weight",
// CHECK-SAME: %[[C:arg[0-9]+]]: tensor<32xi8> {llm.param = #llm.param<name = "h.0.mlp.weight.qweight", init = "zeros", trainable = false>}
// CHECK-SAME: %[[Q:arg[0-9]+]]: tensor<8xi8> {llm.param = #llm.param<name = "h.0.mlp.weight.absmax_q", init = "zeros", trainable = false>}
// CHECK-SAME: %[[S:arg[0-9]+]]: tensor<1xf32> {llm.param = #llm.param<name = "h.0.mlp.weight.absmax_scale", init = "zeros", trainable = false>}
// CHECK-SAME: %[[M:arg[0-9]+]]: tensor<f32> {llm.param = #llm.param<name = "h.0.mlp.weight.absmax_mean", init = "zeros", trainable = false>}
// CHECK-SAME: {llmc.name = "tokens"}
// CHECK: %[[N:.*]] = llm.layernorm
// CHECK-NEXT: llm.matmul_nf4 %[[N]], %[[C]], %[[Q]], %[[S]], %[[M]] {block = 8 : i64, weight_shape = array<i64: 8, 8>} : tensor<2x4x8xf32>, tensor<32xi8>, tensor<8xi8>, tensor<1xf32>, tensor<f32>
// CHECK: llm.matmul %{{.*}}, %arg0 {transpose_b}

// Under --precision bf16 the weight was read through a cast: the cast goes
// too, and the product is in x's bf16.
// BF16-NOT: name = "h.0.mlp.weight",
// BF16: llm.matmul_nf4 {{.*}} {block = 4 : i64, weight_shape = array<i64: 8, 8>} : tensor<2x4x8xbf16>, tensor<32xi8>, tensor<16xi8>, tensor<1xf32>, tensor<f32>
// BF16-NOT: llm.cast %arg3

// Llama's weights are [N, K] (transpose_b); every matmul weight, the
// untied head's included, is stored in NF4; the embedding table is not.
// LLAMA-NOT: name = "layers.0.self_attn.q_proj.weight",
// LLAMA: name = "embed_tokens.weight"
// LLAMA-COUNT-8: llm.matmul_nf4
// LLAMA-NOT: llm.matmul %{{.*}}, %arg

// int8 per output channel: one byte per weight and a scale per column of
// GPT-2's [K, N] weight (channel axis 1), read by llm.matmul_int.
// INT8-NOT: name = "h.0.mlp.weight",
// INT8: %[[C:arg[0-9]+]]: tensor<64xi8> {llm.param = #llm.param<name = "h.0.mlp.weight.qweight", init = "zeros", trainable = false>}
// INT8-SAME: %[[S:arg[0-9]+]]: tensor<8xf32> {llm.param = #llm.param<name = "h.0.mlp.weight.scale", init = "zeros", trainable = false>}
// INT8-NOT: zero_point
// INT8: llm.matmul_int %{{.*}}, %[[C]], %[[S]] {bits = 8 : i64, channel_axis = 1 : i64, weight_shape = array<i64: 8, 8>} : tensor<2x4x8xf32>, tensor<64xi8>, tensor<8xf32> -> tensor<2x4x8xf32>

// int4 asymmetric in blocks of 4: two codes per byte, a scale and an i32
// zero point per block.
// INT4: tensor<32xi8> {llm.param = #llm.param<name = "h.0.mlp.weight.qweight", init = "zeros", trainable = false>}
// INT4-SAME: tensor<16xf32> {llm.param = #llm.param<name = "h.0.mlp.weight.scale", init = "zeros", trainable = false>}
// INT4-SAME: %[[Z:arg[0-9]+]]: tensor<16xi32> {llm.param = #llm.param<name = "h.0.mlp.weight.zero_point", init = "zeros", trainable = false>}
// INT4: llm.matmul_int {{.*}}, %[[Z]] {bits = 4 : i64, block = 4 : i64, weight_shape = array<i64: 8, 8>}

// Llama's [N, K] weights: the output channel is axis 0 (a scale per row);
// `int4` alone is one scale per weight.
// LLAMA-INT8-COUNT-8: llm.matmul_int {{.*}} {bits = 8 : i64, channel_axis = 0 : i64, transpose_b
// LLAMA-INT4-COUNT-8: llm.matmul_int {{.*}} {bits = 4 : i64, transpose_b

// fp8 (E4M3) per output channel: one E4M3 byte per weight and a scale per
// column, read by llm.matmul_int {fp8}; no zero point (symmetric only).
// FP8-NOT: name = "h.0.mlp.weight",
// FP8: %[[C:arg[0-9]+]]: tensor<64xi8> {llm.param = #llm.param<name = "h.0.mlp.weight.qweight", init = "zeros", trainable = false>}
// FP8-SAME: %[[S:arg[0-9]+]]: tensor<8xf32> {llm.param = #llm.param<name = "h.0.mlp.weight.scale", init = "zeros", trainable = false>}
// FP8-NOT: zero_point
// FP8: llm.matmul_int %{{.*}}, %[[C]], %[[S]] {bits = 8 : i64, channel_axis = 1 : i64, fp8, weight_shape = array<i64: 8, 8>} : tensor<2x4x8xf32>, tensor<64xi8>, tensor<8xf32> -> tensor<2x4x8xf32>
// `fp8_e4m3` alone: one scale per weight, every Llama matmul.
// LLAMA-FP8-COUNT-8: llm.matmul_int {{.*}} {bits = 8 : i64, fp8, transpose_b, weight_shape
// LLAMA-FP8-NOT: llm.matmul_int

// Under tp=2 fp8 storage in blocks splits as int8's does: c_attn's codes
// and block scales with its columns (three q/k/v chunks).
// TP-FP8: tensor<128x192xi8> {llm.param = #llm.param<name = "h.0.attn.c_attn.weight.qweight", init = "zeros", trainable = false>, llmc.shard = {global_shape = array<i64: 128, 384>, levels = [{axes = ["tp"], blocks = 3 : i64, dim = 1 : i64}]}}
// TP-FP8-SAME: tensor<128x6xf32> {llm.param = #llm.param<name = "h.0.attn.c_attn.weight.scale", init = "zeros", trainable = false>, llmc.shard = {global_shape = array<i64: 128, 12>, levels = [{axes = ["tp"], blocks = 3 : i64, dim = 1 : i64}]}}
// TP-FP8: llm.matmul_int {{.*}} {bits = 8 : i64, block = 32 : i64, fp8, weight_shape = array<i64: 128, 192>}

// BLOCK: error: 'llm.matmul' op weight-quant: blocks of 5 do not divide the last dimension of 'h.0.mlp.weight' 'tensor<8x8xf32>'

// Under tp=2 NF4 storage takes the weights' splits too: c_attn's codes
// [rows, bytes per row] and absmax levels [rows, blocks per row] split with
// its columns in their three q/k/v chunks, c_proj's with its rows; the
// double-quantized scales (one per 256 blocks of the whole weight, across
// rows) are whole on every rank, and matmul_nf4 says where its piece lies:
// its offset moves by a chunk's piece (64 columns, 64 rows) per tp rank.
// TP-NF4: tensor<128x96xi8> {llm.param = #llm.param<name = "h.0.attn.c_attn.weight.qweight", init = "zeros", trainable = false>, llmc.shard = {global_shape = array<i64: 128, 192>, levels = [{axes = ["tp"], blocks = 3 : i64, dim = 1 : i64}]}}
// TP-NF4-SAME: tensor<128x3xi8> {llm.param = #llm.param<name = "h.0.attn.c_attn.weight.absmax_q", init = "zeros", trainable = false>, llmc.shard = {global_shape = array<i64: 128, 6>, levels = [{axes = ["tp"], blocks = 3 : i64, dim = 1 : i64}]}}
// TP-NF4-SAME: tensor<3xf32> {llm.param = #llm.param<name = "h.0.attn.c_attn.weight.absmax_scale", init = "zeros", trainable = false>},
// TP-NF4-SAME: tensor<64x64xi8> {llm.param = #llm.param<name = "h.0.attn.c_proj.weight.qweight", init = "zeros", trainable = false>, llmc.shard = {global_shape = array<i64: 128, 64>, levels = [{axes = ["tp"], blocks = 1 : i64, dim = 0 : i64}]}}
// TP-NF4-SAME: tensor<64x2xi8> {llm.param = #llm.param<name = "h.0.attn.c_proj.weight.absmax_q", init = "zeros", trainable = false>, llmc.shard = {global_shape = array<i64: 128, 2>, levels = [{axes = ["tp"], blocks = 1 : i64, dim = 0 : i64}]}}
// TP-NF4-SAME: tensor<1xf32> {llm.param = #llm.param<name = "h.0.attn.c_proj.weight.absmax_scale", init = "zeros", trainable = false>},
// TP-NF4: llm.matmul_nf4 {{.*}} {block = 64 : i64, chunks = array<i64: 1, 3>, dist.rank_offsets = [#dist.rank_offset<mesh = @mesh, attr = "piece_offset", index = 1, axes = ["tp"], stride = 64>], piece_offset = array<i64: 0, 0>, weight_shape = array<i64: 128, 192>, whole_shape = array<i64: 128, 384>} : tensor<8x128x128xf32>, tensor<128x96xi8>, tensor<128x3xi8>, tensor<3xf32>, tensor<f32> -> tensor<8x128x192xf32>
// TP-NF4: llm.matmul_nf4 {{.*}} {block = 64 : i64, chunks = array<i64: 1, 1>, dist.rank_offsets = [#dist.rank_offset<mesh = @mesh, attr = "piece_offset", index = 0, axes = ["tp"], stride = 64>], piece_offset = array<i64: 0, 0>, weight_shape = array<i64: 64, 128>, whole_shape = array<i64: 128, 128>}

// A piece must be whole blocks of the file's storage, in whole bytes.
// TP-NF4-BLOCKS: error: 'llm.matmul' op weight-quant: 'h.0.attn.c_attn.weight' 'tensor<128x192xf32>' of 128x384: NF4 blocks of 128 do not divide its pieces of 64 columns (each rank must hold whole blocks of the weight's NF4 storage, which is quantized whole)
// TP-NF4-BYTES: error: 'llm.matmul' op weight-quant: 'h.0.attn.c_attn.weight' 'tensor<6x9xf32>' of 6x18: its pieces of 3 columns are not whole bytes of NF4 codes
// A [D, V] head's padded columns: flat NF4 storage pads rows only.
// NF4-COLUMNS: error: 'llm.matmul' op weight-quant: 'lm_head.weight' is padded along its columns, which flat NF4 storage cannot hold; compile with --vocab-multiple 1
// A vocabulary padded to 250 over tp=4 (pieces of 63 rows): storage is
// split evenly only (in blocks of 8, which divide down_proj's 88-column
// pieces, the head is reached).
// TP-UNEVEN: error: 'llm.matmul' op weight-quant: 'lm_head.weight' 'tensor<63x128xf32>' of 249x128: quantized storage is split evenly only, and 250 is not a multiple of the 4 pieces of dimension 0

// Under tp=2 int8 storage takes the weights' splits: c_attn's codes
// [rows, bytes per row] and per-column scales split with its columns (in
// its three q/k/v blocks); the row-parallel c_proj's codes split with its
// rows, its per-column scales whole on each rank.
// TP-INT8: tensor<128x192xi8> {llm.param = #llm.param<name = "h.0.attn.c_attn.weight.qweight", init = "zeros", trainable = false>, llmc.shard = {global_shape = array<i64: 128, 384>, levels = [{axes = ["tp"], blocks = 3 : i64, dim = 1 : i64}]}}
// TP-INT8-SAME: tensor<192xf32> {llm.param = #llm.param<name = "h.0.attn.c_attn.weight.scale", init = "zeros", trainable = false>, llmc.shard = {global_shape = array<i64: 384>, levels = [{axes = ["tp"], blocks = 3 : i64, dim = 0 : i64}]}}
// TP-INT8-SAME: tensor<64x128xi8> {llm.param = #llm.param<name = "h.0.attn.c_proj.weight.qweight", init = "zeros", trainable = false>, llmc.shard = {global_shape = array<i64: 128, 128>, levels = [{axes = ["tp"], blocks = 1 : i64, dim = 0 : i64}]}}
// TP-INT8-SAME: tensor<128xf32> {llm.param = #llm.param<name = "h.0.attn.c_proj.weight.scale", init = "zeros", trainable = false>},
// TP-INT8: llm.matmul_int {{.*}} {bits = 8 : i64, channel_axis = 1 : i64, weight_shape = array<i64: 128, 192>}
// NO-INFERENCE: --weight-quant needs --inference (training keeps its weights in full precision; see --qlora)
// BAD-BLOCK: --weight-quant: bad scheme 'int4:block0': block size '0' (write e.g. block64)
// UNKNOWN: --weight-quant: bad scheme 'fp16': unknown field 'fp16'
// E5M2: error: weight-quant: scheme 'fp8_e5m2': fp8 weights are stored as fp8_e4m3 (fp8); E5M2 keeps two mantissa bits, for gradients
// FP8-ASYM: error: weight-quant: bad scheme 'fp8_e4m3:asym': format 'fp8_e4m3' is symmetric only
// NF4-CHANNEL: error: weight-quant: scheme 'nf4:channel': NF4 weights are stored in blocks (nf4:block<N>)
// OBSERVER: error: weight-quant: scheme 'int8:ema': an observer or outlier columns have no meaning for stored weights
// AXIS: error: weight-quant: scheme 'int8:channel2': channel axis 2 of a 2-D weight (0 or 1)

// double-quant=fp8: the absmax levels are E4M3 (`llmc quantize
// --double-quant fp8`), which the product reads as its absmax_format says;
// int8 levels, the default, print nothing. Split by tp=2, each piece keeps
// the format.
// FP8-LEVELS: llm.matmul_nf4 %{{.*}} {absmax_format = "fp8_e4m3", block = 8 : i64, weight_shape = array<i64: 8, 8>} : tensor<2x4x8xf32>, tensor<32xi8>, tensor<8xi8>, tensor<1xf32>, tensor<f32>
// TP-FP8-LEVELS-COUNT-2: llm.matmul_nf4 {{.*}} {absmax_format = "fp8_e4m3", block = 64 : i64, chunks =
// FP8-LEVELS-INT8: error: weight-quant: double-quant=fp8 is for nf4 storage (its absmax levels), not int8:channel
// BAD-LEVELS: error: weight-quant: bad double-quant 'e5m2' (expected int8 or fp8: the format of NF4's absmax levels)
// PIPELINE-LEVELS: --double-quant sets the absmax levels of NF4 storage: it needs --qlora or --weight-quant nf4[:block<N>]
