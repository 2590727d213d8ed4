// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --pass-pipeline="builtin.module(func.func(llmc-flatten-blocks))" | FileCheck %s

// Blocks disappear; their ops keep the layer name.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: llm.block
// CHECK: llm.layernorm {{.*}}llm.block_name = "h.0"
// CHECK: llm.add {{.*}}{llm.block_name = "h.0"}
// CHECK: %[[LOGITS:.*]] = llm.matmul
// CHECK-NOT: llm.block_name
// CHECK: return
