// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-autodiff --llmc-optimizer --llmc-recompute="mode=full" | FileCheck %s --check-prefix=FULL
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-autodiff --llmc-optimizer --llmc-recompute="mode=selective" | FileCheck %s --check-prefix=SELECTIVE
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-autodiff --llmc-optimizer --llmc-recompute="mode=none" | FileCheck %s --check-prefix=NONE
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-autodiff --llmc-optimizer --llmc-recompute="mode=full" --llmc-lower-to-exec | FileCheck %s --check-prefix=PLAN
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-recompute="mode=some" 2>&1 | FileCheck %s --check-prefix=BAD
// A per-layer mode overrides the default one, both ways.
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-autodiff --llmc-optimizer --llmc-recompute="layers=h.0=full" | FileCheck %s --check-prefix=FULL
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-autodiff --llmc-optimizer --llmc-recompute="mode=full layers=h.0=none" | FileCheck %s --check-prefix=NONE
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-autodiff --llmc-recompute="layers=h.0=most" 2>&1 | FileCheck %s --check-prefix=BAD-LAYER-MODE
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-autodiff --llmc-recompute="layers=h.7=full" 2>&1 | FileCheck %s --check-prefix=NO-LAYER

// Full: the layer's forward is redone from its input (%[[X]], kept) just
// before its backward; the backward reads the clones, so the forward's
// layernorm and matmul outputs die after the forward.
// FULL-LABEL: func.func @train_step
// FULL: %[[X:.*]] = llm.embedding
// FULL: %[[N:.*]] = llm.layernorm %[[X]], {{.*}}llmc.block_name = "h.0"
// FULL: %[[M:.*]] = llm.matmul %[[N]], %arg3 {llmc.block_name = "h.0"
// FULL: %[[N2:.*]] = llm.layernorm %[[X]], %arg1, %arg2 {{{.*}}llmc.backward, llmc.block_name = "h.0", llmc.microbatch = 0 : i64, llmc.recomputed}
// FULL-NEXT: %[[M2:.*]] = llm.matmul %[[N2]], %arg3 {llmc.backward, llmc.block_name = "h.0", llmc.microbatch = 0 : i64, llmc.recomputed}
// FULL-NEXT: llm.gelu_grad %[[M2]],
// FULL: llm.reshape %[[N2]]
// FULL-NOT: llm.reshape %[[N]] {

// Selective: only the cheap layernorm is redone; the matmul output is kept.
// SELECTIVE-LABEL: func.func @train_step
// SELECTIVE: %[[M:.*]] = llm.matmul %{{.*}}, %arg3 {llmc.block_name = "h.0"
// SELECTIVE: %[[N2:.*]] = llm.layernorm {{.*}}llmc.recomputed}
// SELECTIVE-NOT: llm.matmul {{.*}}llmc.recomputed
// SELECTIVE: llm.gelu_grad %[[M]],
// SELECTIVE: llm.reshape %[[N2]]

// NONE-NOT: llmc.recomputed

// PLAN: exec.program @train_step
// PLAN: exec.kernel "layernorm"
// PLAN: exec.kernel "layernorm"

// BAD: error: recompute: unknown mode 'some' (expected none, full or selective)

// BAD-LAYER-MODE: error: recompute: bad layer mode 'h.0=most' (expected <layer>=none|full|selective, each optionally +offload, or offload)
// NO-LAYER: error: recompute: no layer named 'h.7' (layers: h.0)
