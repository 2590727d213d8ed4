// RUN: llmc-opt %s -split-input-file -verify-diagnostics
// Every diagnostic of the llmc.* annotation verifier.

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{unknown annotation 'llmc.block' on an op (llmc.* names are reserved for: llmc.block_name, llmc.microbatch, llmc.backward, llmc.loss_seed, llmc.recomputed, llmc.action, llmc.gradient_sync, llmc.role, llmc.name, llmc.tied_to, llmc.grad_of, llmc.shard, llmc.model, llmc.layout, llmc.pipeline, llmc.ranks)}}
  %y = llm.gelu %x {llmc.block = "h.0"} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{annotation 'llmc.block_name' on an op must be a string (the layer's name), got 3 : i64}}
  %y = llm.gelu %x {llmc.block_name = 3} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{annotation 'llmc.microbatch' on an op must be a non-negative i64, got -1 : i64}}
  %y = llm.gelu %x {llmc.microbatch = -1} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{annotation 'llmc.backward' on an op must be a unit attribute, got true}}
  %y = llm.gelu %x {llmc.backward = true} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// expected-error @+1 {{annotation 'llmc.role' on argument 0 must be one of "param", "master", "adam_m", "adam_v", "adam_m_absmax", "adam_v_absmax", "qat_state", "input", "output", got "parameter"}}
func.func @f(%x: tensor<4xf32> {llmc.role = "parameter"}) { return }

// -----

// expected-error @+1 {{annotation 'llmc.tied_to' cannot stand on argument 0}}
func.func @f(%x: tensor<4xf32> {llmc.tied_to = 0}) { return }

// -----

// expected-error @+1 {{annotation 'llmc.tied_to' on result 0 names argument 1 of 1}}
func.func @f(%x: tensor<4xf32>) -> (tensor<4xf32> {llmc.tied_to = 1}) { return %x : tensor<4xf32> }

// -----

// expected-error @+1 {{annotation 'llmc.layout' cannot stand on an op}}
func.func @f() attributes {llmc.layout = {zero = 1}} { return }

// -----

// expected-error @+1 {{annotation 'llmc.ranks' on a module must be an array<i64> of ranks, got [0, 1]}}
module attributes {llmc.ranks = [0, 1]} {}
