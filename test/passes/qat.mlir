// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec={weights=int4:block4, activations=int8:asym}" | FileCheck %s
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec={weights=int8:channel, skip=head}" | FileCheck %s --check-prefix=SKIP-HEAD
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec={weights=nf4:block8, ops=matmul,embedding, skip=h.0}" | FileCheck %s --check-prefix=EMBEDDING
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="mesh=dp=2 qat={weights=int8:channel, activations=int8} emit=graph" | FileCheck %s --check-prefix=DP
// RUN: llmc model gpt2 --preset tiny --set n_layer=1 -o %t.mlir
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="mesh=dp=2,tp=2 qat={weights=int8, activations=int8:channel} emit=graph" | FileCheck %s --check-prefix=TP
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="mesh=tp=2 qat={weights=int8:channel} emit=graph" | FileCheck %s --check-prefix=TP-CHANNEL
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="mesh=tp=2 qat={weights=int4:block64} emit=graph" | FileCheck %s --check-prefix=TP-BLOCK
// RUN: not llmc-opt %t.mlir --llmc-train-pipeline="mesh=tp=2 qat={weights=int4:block48} emit=graph" 2>&1 | FileCheck %s --check-prefix=TP-BLOCK-SPLIT
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="qat={activations=int8:ema0.9} microbatches=2 emit=train" | FileCheck %s --check-prefix=EMA
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="mesh=tp=2 qat={activations=int8:channel:ema} emit=graph" | FileCheck %s --check-prefix=EMA-TP
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec=activations=int8:block4:ema" 2>&1 | FileCheck %s --check-prefix=EMA-BLOCK
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec=activations=int8:channel0:ema" 2>&1 | FileCheck %s --check-prefix=EMA-ROWS
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec=weights=int2" 2>&1 | FileCheck %s --check-prefix=BAD-FORMAT
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec=weights=int8:int4" 2>&1 | FileCheck %s --check-prefix=TWO-FORMATS
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec=weights=nf4:asym" 2>&1 | FileCheck %s --check-prefix=ASYM
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec=weights=int8:blocky" 2>&1 | FileCheck %s --check-prefix=BAD-BLOCK
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec=weights=int8:ema2" 2>&1 | FileCheck %s --check-prefix=BAD-EMA
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec=bits=8" 2>&1 | FileCheck %s --check-prefix=BAD-KEY
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec=ops=matmul" 2>&1 | FileCheck %s --check-prefix=NOTHING
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec={weights=int8, ops=conv}" 2>&1 | FileCheck %s --check-prefix=BAD-OP
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec={weights=int8, skip=h.9}" 2>&1 | FileCheck %s --check-prefix=BAD-SKIP
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec=weights=int8:block3" 2>&1 | FileCheck %s --check-prefix=BLOCK-DIVIDES
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec=activations=int8:outlier" | FileCheck %s --check-prefix=OUTLIER
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec=activations=int4:channel:asym:outlier2.5" | FileCheck %s --check-prefix=OUTLIER-CHANNEL
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="mesh=dp=2,tp=2 qat={activations=int8:outlier} emit=graph" | FileCheck %s --check-prefix=OUTLIER-DP-TP
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="qat={activations=int8:outlier5} emit=exec" | FileCheck %s --check-prefix=OUTLIER-EXEC
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec=weights=int8:outlier" 2>&1 | FileCheck %s --check-prefix=OUTLIER-WEIGHTS
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec=activations=fp8_e4m3:outlier" 2>&1 | FileCheck %s --check-prefix=OUTLIER-FP8
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec=activations=nf4:outlier6" 2>&1 | FileCheck %s --check-prefix=OUTLIER-NF4
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec=activations=int8:outlier0" 2>&1 | FileCheck %s --check-prefix=OUTLIER-ZERO
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec=activations=int8:outlier-1" 2>&1 | FileCheck %s --check-prefix=OUTLIER-NEGATIVE
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec=activations=int8:outlierx" 2>&1 | FileCheck %s --check-prefix=OUTLIER-WORD
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec=activations=int8:block4:outlier" 2>&1 | FileCheck %s --check-prefix=OUTLIER-BLOCK
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec=activations=int8:ema:outlier" 2>&1 | FileCheck %s --check-prefix=OUTLIER-EMA

// Each site: the current tensor's ranges, then quantize-dequantize; the
// matmul reads the result. Weights by block along the last dimension,
// activations asymmetric per tensor.
// CHECK-LABEL: func.func @forward
// CHECK: %[[N:.*]] = llm.layernorm
// CHECK-NEXT: %[[WR:.*]] = qat.observe %arg3 {scheme = #qat.scheme<format = "int4", granularity = "block", block = 4>} : tensor<8x8xf32> -> tensor<16x2xf32>
// CHECK-NEXT: %[[WQ:.*]] = qat.fake_quant %arg3 range %[[WR]]
// CHECK-NEXT: %[[AR:.*]] = qat.observe %[[N]] {scheme = #qat.scheme<format = "int8", symmetric = false>} : tensor<2x4x8xf32> -> tensor<1x2xf32>
// CHECK-NEXT: %[[AQ:.*]] = qat.fake_quant %[[N]] range %[[AR]]
// CHECK-NEXT: llm.matmul %[[AQ]], %[[WQ]]
// The head too (a transposed weight: blocks along its last dimension).
// CHECK: qat.observe %arg0 {{.*}} : tensor<16x8xf32> -> tensor<32x2xf32>
// CHECK: llm.matmul {{.*}} {transpose_b}

// Per output channel: dimension 1 of x·W. skip=head leaves the logits alone.
// SKIP-HEAD: qat.observe %arg3 {scheme = #qat.scheme<format = "int8", granularity = "channel", axis = 1>} : tensor<8x8xf32> -> tensor<8x2xf32>
// SKIP-HEAD-NOT: qat.observe %arg0
// SKIP-HEAD: llm.matmul %{{.*}}, %arg0 {transpose_b}

// ops=embedding quantizes the table per row (vocabulary entry); skip=h.0
// leaves the layer's matmul alone; the head (a matmul reading the table)
// gets its own copy.
// EMBEDDING: %[[ER:.*]] = qat.observe %arg0 {scheme = #qat.scheme<format = "nf4", granularity = "block", block = 8>}
// EMBEDDING-NEXT: %[[EQ:.*]] = qat.fake_quant %arg0 range %[[ER]]
// EMBEDDING-NEXT: llm.embedding %[[EQ]], %arg4
// EMBEDDING-NOT: qat.observe %arg3
// EMBEDDING: llm.matmul %{{.*}}, %{{.*}} {transpose_b}

// Data parallel: an activation's rows are split over dp, so its per-tensor
// range is the max over the dp ranks; weights are whole on every rank.
// DP: qat.observe %arg3 {{.*}} -> tensor<8x2xf32>
// DP-NEXT: qat.fake_quant %arg3
// DP-NEXT: %[[R:.*]] = qat.observe %{{.*}} : tensor<1x4x8xf32> -> tensor<1x2xf32>
// DP-NEXT: %[[G:.*]] = dist.all_reduce %[[R]] on @mesh axes ["dp"] reduction "max" : tensor<1x2xf32> -> tensor<1x2xf32>
// DP-NEXT: qat.fake_quant %{{.*}} range %[[G]]

// Tensor parallel: a weight's per-tensor range spans its tp pieces; a
// per-channel activation range spans the dp rows only — the row-parallel
// input (its last dimension split over tp) keeps its channels local.
// TP: %[[QKV:.*]] = qat.observe %arg4 {scheme = #qat.scheme<format = "int8">} : tensor<128x192xf32> -> tensor<1x2xf32>
// TP-NEXT: dist.all_reduce %[[QKV]] on @mesh axes ["tp"] reduction "max"
// TP: %[[ACT:.*]] = qat.observe %{{.*}} {scheme = #qat.scheme<format = "int8", granularity = "channel", axis = 2>} : tensor<4x128x64xf32> -> tensor<64x2xf32>
// TP-NEXT: dist.all_reduce %[[ACT]] on @mesh axes ["dp"] reduction "max"

// Per output channel, a column-parallel weight's channels are local: no
// reduction; a row-parallel weight's channels span the tp ranks.
// TP-CHANNEL: qat.observe %arg4 {{.*}} : tensor<128x192xf32> -> tensor<192x2xf32>
// TP-CHANNEL-NEXT: qat.fake_quant %arg4
// TP-CHANNEL: %[[ROW:.*]] = qat.observe %arg6 {{.*}} : tensor<64x128xf32> -> tensor<128x2xf32>
// TP-CHANNEL-NEXT: dist.all_reduce %[[ROW]] on @mesh axes ["tp"] reduction "max"

// Blocks along a column-parallel weight's split dimension stay whole
// (64-column pieces of each of q, k, v); no reduction either way.
// TP-BLOCK: qat.observe %arg4 {{.*}} : tensor<128x192xf32> -> tensor<384x2xf32>
// TP-BLOCK-NOT: dist.all_reduce {{.*}} : tensor<{{[0-9]+}}x2xf32>
// TP-BLOCK-SPLIT: error: 'llm.matmul' op qat: blocks of 48 do not fit the 64-element pieces this layout splits the last dimension into

// An EMA observer: a persistent state argument per site (named for the
// weight whose input it observes), blended with the current range by
// qat.ema. @grad returns each state updated, tied to its argument; the
// training step threads it from microbatch to microbatch and returns the
// last; @forward (evaluation) and @logits read it frozen (momentum 1).
// EMA-LABEL: func.func @forward
// EMA-SAME: %arg6: tensor<1x2xf32> {llmc.name = "h.0.mlp.weight.input", llmc.role = "qat_state"}
// EMA-SAME: %arg7: tensor<1x2xf32> {llmc.name = "wte.input", llmc.role = "qat_state"}
// EMA: qat.ema %arg6, %{{.*}} {momentum = 1.000000e+00 : f64}
// EMA-LABEL: func.func @logits
// EMA: qat.ema {{.*}}momentum = 1.000000e+00 : f64
// EMA-LABEL: func.func @grad
// EMA-SAME: tensor<1x2xf32> {llmc.tied_to = 6 : i64}, tensor<1x2xf32> {llmc.tied_to = 7 : i64})
// EMA: qat.ema %arg6, %{{.*}}momentum = 9.000000e-01 : f64
// EMA-LABEL: func.func @train_step
// EMA-SAME: %arg12: tensor<1x2xf32> {llmc.name = "h.0.mlp.weight.input", llmc.role = "qat_state"}
// EMA-SAME: tensor<1x2xf32> {llmc.tied_to = 12 : i64}, tensor<1x2xf32> {llmc.tied_to = 13 : i64}
// EMA: %[[S0:.*]] = qat.ema %arg12, %{{.*}} {llmc.block_name = "h.0", llmc.microbatch = 0 : i64, momentum = 9.000000e-01 : f64}
// EMA: %[[S1:.*]] = qat.ema %[[S0]], %{{.*}} {llmc.block_name = "h.0", llmc.microbatch = 1 : i64, momentum = 9.000000e-01 : f64}
// EMA: return {{.*}}, %[[S1]], %{{.*}}, %{{.*}} :

// Per channel under tp: a row-parallel input's channels are split over tp,
// so is its state (recorded like a parameter's split, for checkpoints).
// EMA-TP: %{{.*}}: tensor<64x2xf32> {llmc.name = "h.0.attn.c_proj.weight.input", llmc.role = "qat_state", llmc.shard = {global_shape = array<i64: 128, 2>, levels = [{axes = ["tp"], blocks = 1 : i64, dim = 0 : i64}]}}

// EMA-BLOCK: error: 'llm.matmul' op qat: an ema observer needs tensor or channel granularity (block ranges are per position; use minmax)
// EMA-ROWS: error: 'llm.matmul' op qat: an ema observer of an activation's dimension 0 (its rows) is not supported; use the default (last) channel axis

// BAD-FORMAT: error: qat: bad scheme 'int2': unknown field 'int2' (formats int8 int4 int3 fp8_e4m3 fp8_e5m2 nf4; tensor, channel[<axis>], block<size>; sym, asym; minmax, ema[<momentum>], delayed[<history>] with margin<M>, max or most_recent; outlier[<threshold>])
// TWO-FORMATS: error: qat: bad scheme 'int8:int4': two formats ('int8' and 'int4')
// ASYM: error: qat: bad scheme 'nf4:asym': format 'nf4' is symmetric only
// BAD-BLOCK: error: qat: bad scheme 'int8:blocky': block size 'y' (write e.g. block64)
// BAD-EMA: error: qat: bad scheme 'int8:ema2': ema momentum '2' must be in (0, 1) (write e.g. ema0.99)
// BAD-KEY: error: qat: unknown --qat key 'bits' (expected weights, activations, gradients, ops or skip)
// NOTHING: error: qat: --qat names none of weights=<scheme>, activations=<scheme>, gradients=<scheme>
// BAD-OP: error: qat: unknown --qat op 'conv' (expected matmul or embedding)
// BAD-SKIP: error: qat: skip 'h.9' matches no layer, parameter, head or embedding of @forward
// BLOCK-DIVIDES: tiny-gpt.mlir:12:10: error: 'llm.matmul' op qat: blocks of 3 do not divide the last dimension of 'h.0.mlp.weight' 'tensor<8x8xf32>'

// Outlier columns (LLM.int8()): the per-column ranges of the input decide
// which columns stay in high precision (`outlier` alone: |x| > 6); the
// range is observed over the other columns, and fake_quant passes the
// outlier columns through.
// OUTLIER: %[[N:.*]] = llm.layernorm
// OUTLIER-NEXT: %[[C:.*]] = qat.observe %[[N]] {scheme = #qat.scheme<format = "int8", granularity = "channel", axis = 2>} : tensor<2x4x8xf32> -> tensor<8x2xf32>
// OUTLIER-NEXT: %[[R:.*]] = qat.observe %[[N]] columns %[[C]] {scheme = #qat.scheme<format = "int8", outlier = 6.000000e+00>} : tensor<2x4x8xf32>, tensor<8x2xf32> -> tensor<1x2xf32>
// OUTLIER-NEXT: %[[Q:.*]] = qat.fake_quant %[[N]] range %[[R]] columns %[[C]] {scheme = #qat.scheme<format = "int8", outlier = 6.000000e+00>} : tensor<2x4x8xf32>, tensor<1x2xf32>, tensor<8x2xf32>
// OUTLIER-NEXT: llm.matmul %[[Q]], %arg3

// Per channel of the last axis the per-column ranges are the ranges: no
// second observer.
// OUTLIER-CHANNEL: %[[C:.*]] = qat.observe %{{.*}} {scheme = #qat.scheme<format = "int4", granularity = "channel", axis = 2, symmetric = false>} : tensor<2x4x8xf32> -> tensor<8x2xf32>
// OUTLIER-CHANNEL-NEXT: qat.fake_quant %{{.*}} range %[[C]] columns %[[C]] {scheme = #qat.scheme<format = "int4", granularity = "channel", axis = 2, symmetric = false, outlier = 2.500000e+00>}

// Under dp×tp: the row-parallel projection's input has its rows split over
// dp and its columns over tp. Which columns are outliers is decided over
// all rows (dp), each rank for its own columns; the range of the kept
// columns spans both axes.
// OUTLIER-DP-TP: %[[PC:.*]] = qat.observe %{{.*}} {scheme = #qat.scheme<format = "int8", granularity = "channel", axis = 2>} : tensor<4x128x64xf32> -> tensor<64x2xf32>
// OUTLIER-DP-TP-NEXT: %[[GC:.*]] = dist.all_reduce %[[PC]] on @mesh axes ["dp"] reduction "max" : tensor<64x2xf32> -> tensor<64x2xf32>
// OUTLIER-DP-TP-NEXT: %[[PR:.*]] = qat.observe %{{.*}} columns %[[GC]] {{.*}} -> tensor<1x2xf32>
// OUTLIER-DP-TP-NEXT: %[[GR:.*]] = dist.all_reduce %[[PR]] on @mesh axes ["tp", "dp"] reduction "max" : tensor<1x2xf32> -> tensor<1x2xf32>
// OUTLIER-DP-TP-NEXT: qat.fake_quant %{{.*}} range %[[GR]] columns %[[GC]]

// Lowered: the threshold is a float kernel attribute, written only where
// there is one; the columns are the kernels' last input.
// OUTLIER-EXEC: exec.kernel "qat_observe"(%[[X:.*]] : memref<2x4x8xf32>) -> (%[[C:.*]] : memref<8x2xf32>) {axis = 2 : i64, block = 0 : i64, exec.action = "F0", format = 0 : i64, granularity = 1 : i64, symmetric = 1 : i64}
// OUTLIER-EXEC: exec.kernel "qat_observe"(%[[X]], %[[C]] : memref<2x4x8xf32>, memref<8x2xf32>) -> (%[[R:.*]] : memref<1x2xf32>) {{.*}}granularity = 0 : i64, outlier = 5.000000e+00 : f64, symmetric = 1 : i64}
// OUTLIER-EXEC: exec.kernel "qat_fake_quant"(%[[X]], %[[R]], %[[C]] : {{.*}}outlier = 5.000000e+00 : f64
// OUTLIER-EXEC: exec.kernel "qat_fake_quant_grad"({{.*}}, %[[C]] : {{.*}}outlier = 5.000000e+00 : f64

// OUTLIER-WEIGHTS: error: qat: bad scheme 'int8:outlier': outlier columns are for activations= only (they are an activation's features)
// OUTLIER-FP8: error: qat: bad scheme 'fp8_e4m3:outlier': outlier columns need an integer format (int8 or int4), got 'fp8_e4m3'
// OUTLIER-NF4: error: qat: bad scheme 'nf4:outlier6': outlier columns need an integer format (int8 or int4), got 'nf4'
// OUTLIER-ZERO: error: qat: bad scheme 'int8:outlier0': outlier threshold '0' must be a positive number (write e.g. outlier6)
// OUTLIER-NEGATIVE: error: qat: bad scheme 'int8:outlier-1': outlier threshold '-1' must be a positive number (write e.g. outlier6)
// OUTLIER-WORD: error: qat: bad scheme 'int8:outlierx': outlier threshold 'x' must be a positive number (write e.g. outlier6)
// OUTLIER-BLOCK: error: qat: bad scheme 'int8:block4:outlier': outlier columns need tensor or channel granularity
// OUTLIER-EMA: error: qat: bad scheme 'int8:ema:outlier': outlier columns need the minmax observer (which columns are kept is decided on every step)
