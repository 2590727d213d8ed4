// RUN: llmc-opt %s | llmc-opt | FileCheck %s
// Every llmc.* annotation in a place it may stand.

// CHECK: module attributes {llmc.layout = {zero = 1 : i64}, llmc.model = {family = "gpt2"}, llmc.pipeline = {schedule = "1f1b"}, llmc.ranks = array<i64: 0, 1>}
module attributes {llmc.layout = {zero = 1}, llmc.model = {family = "gpt2"}, llmc.pipeline = {schedule = "1f1b"}, llmc.ranks = array<i64: 0, 1>} {
  // CHECK: func.func @step(%{{.*}}: tensor<4xf32> {llmc.name = "w", llmc.role = "param", llmc.shard = {global_shape = [8]}}) -> (tensor<4xf32> {llmc.grad_of = "w", llmc.role = "output", llmc.tied_to = 0 : i64})
  func.func @step(%w: tensor<4xf32> {llmc.name = "w", llmc.role = "param", llmc.shard = {global_shape = [8]}}) -> (tensor<4xf32> {llmc.grad_of = "w", llmc.role = "output", llmc.tied_to = 0}) {
    // CHECK: llm.gelu %{{.*}} {llmc.action = "F0", llmc.backward, llmc.block_name = "h.0", llmc.gradient_sync, llmc.microbatch = 0 : i64, llmc.recomputed}
    %y = llm.gelu %w {llmc.action = "F0", llmc.backward, llmc.block_name = "h.0", llmc.gradient_sync, llmc.microbatch = 0, llmc.recomputed} : tensor<4xf32>
    return %y : tensor<4xf32>
  }
}
