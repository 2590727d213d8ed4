// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-weight-quant="block=8" | FileCheck %s
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-precision --llmc-weight-quant="block=4" | FileCheck %s --check-prefix=BF16
// RUN: llmc model llama --preset tiny --set n_layer=1 -o %t.mlir
// RUN: llmc-opt %t.mlir --llmc-weight-quant="block=32" | FileCheck %s --check-prefix=LLAMA
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-weight-quant="block=5" 2>&1 | FileCheck %s --check-prefix=BLOCK
// RUN: llmc model gpt2 --preset tiny --set n_layer=1 -o %t-gpt2.mlir
// RUN: not llmc-opt %t-gpt2.mlir --llmc-shard="mesh=tp=2" --llmc-weight-quant 2>&1 | FileCheck %s --check-prefix=TP
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="weight-quant=nf4" 2>&1 | FileCheck %s --check-prefix=NO-INFERENCE
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="inference=max-batch=1,max-context=8 weight-quant=int4:block64" 2>&1 | FileCheck %s --check-prefix=INT4
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="inference=max-batch=1,max-context=8 weight-quant=nf4:block0" 2>&1 | FileCheck %s --check-prefix=BAD-BLOCK
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="inference=max-batch=1,max-context=8 weight-quant=fp8" 2>&1 | FileCheck %s --check-prefix=UNKNOWN

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

// BLOCK: error: 'llm.matmul' op weight-quant: blocks of 5 do not divide the last dimension of 'h.0.mlp.weight' 'tensor<8x8xf32>'
// TP: error: 'llm.matmul' op weight-quant: 'h.0.attn.c_attn.weight' is split by tensor parallelism; NF4 weights are stored whole (drop --mesh tp=, or --weight-quant)
// NO-INFERENCE: --weight-quant needs --inference (training keeps its weights in full precision; see --qlora)
// INT4: --weight-quant int4:block64: int8/int4 weight-only inference is not supported yet (use nf4)
// BAD-BLOCK: --weight-quant: bad block 'block0' in 'nf4:block0' (expected nf4:block<N>, N a positive integer)
// UNKNOWN: --weight-quant: unknown scheme 'fp8' (expected nf4[:block<N>])
