// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --pass-pipeline="builtin.module(func.func(llmc-flatten-blocks))" | FileCheck %s

// Blocks disappear; their ops keep the layer name.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: llm.block
// CHECK: llm.layernorm {{.*}}llmc.block_name = "h.0"
// CHECK: llm.add {{.*}}{llmc.block_name = "h.0"}
// CHECK: %[[LOGITS:.*]] = llm.matmul
// CHECK-NOT: llmc.block_name
// CHECK: return
