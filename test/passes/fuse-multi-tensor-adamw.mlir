// RUN: llmc-opt %s -split-input-file --llmc-fuse="fusions=multi-tensor-adamw" | FileCheck %s
// RUN: llmc-opt %s -split-input-file --llmc-fuse | FileCheck %s
// RUN: llmc-opt %s -split-input-file --llmc-fuse="fusions=elementwise" | FileCheck %s --check-prefix=OFF
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="emit=train precision=bf16" | FileCheck %s --check-prefix=PIPELINE

// Mixed precision: each update reads a master and writes the bf16 working
// copy through a cast. One op takes both updates, their casts and their
// weight decays (the second tensor has none), where the first update was.
// CHECK-LABEL: func.func @masters
// CHECK-NEXT: %[[R:.*]]:8 = llm.multi_tensor_adamw params(%arg0, %arg4 : tensor<8xf32>, tensor<4xf32>) grads(%arg1, %arg5 : tensor<8xf32>, tensor<4xf32>) m(%arg2, %arg6 : tensor<8xf32>, tensor<4xf32>) v(%arg3, %arg7 : tensor<8xf32>, tensor<4xf32>) lr %arg8 step %arg9 norm %arg10 {beta1 = 9.000000e-01 : f64, beta2 = 0.94999999999999996 : f64, cast_of = array<i64: 0, 1>, cast_type = bf16, decay = array<i64: 1, 0>, epsilon = 1.000000e-08 : f64, max_grad_norm = 1.000000e+00 : f64, weight_decay = 1.000000e-01 : f64}
// CHECK-NEXT: return %[[R]]#6, %[[R]]#7, %[[R]]#0, %[[R]]#2, %[[R]]#4, %[[R]]#1, %[[R]]#3, %[[R]]#5
// OFF-LABEL: func.func @masters
// OFF-COUNT-2: llm.adamw
// OFF-NOT: multi_tensor_adamw
func.func @masters(%p0: tensor<8xf32>, %g0: tensor<8xf32>, %m0: tensor<8xf32>, %v0: tensor<8xf32>,
                   %p1: tensor<4xf32>, %g1: tensor<4xf32>, %m1: tensor<4xf32>, %v1: tensor<4xf32>,
                   %lr: tensor<f32>, %step: tensor<f32>, %n: tensor<f32>)
    -> (tensor<8xbf16>, tensor<4xbf16>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>,
        tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %a0, %b0, %c0 = llm.adamw %p0, %g0, %m0, %v0, %lr, %step norm %n {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.1 : f64, max_grad_norm = 1.0 : f64} : tensor<8xf32>
  %w0 = llm.cast %a0 : tensor<8xf32> to tensor<8xbf16>
  %a1, %b1, %c1 = llm.adamw %p1, %g1, %m1, %v1, %lr, %step norm %n {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64, max_grad_norm = 1.0 : f64} : tensor<4xf32>
  %w1 = llm.cast %a1 : tensor<4xf32> to tensor<4xbf16>
  return %w0, %w1, %a0, %b0, %c0, %a1, %b1, %c1 : tensor<8xbf16>, tensor<4xbf16>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// bf16 gradients (--grad-dtype bf16): the cast widening each one for its
// update joins the op, which reads the bf16 gradient (the widening is
// exact). Without masters (fp32 parameters) there is nothing to narrow.
// CHECK-LABEL: func.func @widened
// CHECK-NEXT: %[[R:.*]]:6 = llm.multi_tensor_adamw params(%arg0, %arg4 : tensor<8xf32>, tensor<8xf32>) grads(%arg1, %arg5 : tensor<8xbf16>, tensor<8xf32>)
// CHECK-SAME: cast_of = array<i64>, decay = array<i64: 0, 0>
// CHECK-NOT: cast_type
// CHECK-NOT: llm.cast
func.func @widened(%p0: tensor<8xf32>, %g0: tensor<8xbf16>, %m0: tensor<8xf32>, %v0: tensor<8xf32>,
                   %p1: tensor<8xf32>, %g1: tensor<8xf32>, %m1: tensor<8xf32>, %v1: tensor<8xf32>,
                   %lr: tensor<f32>, %step: tensor<f32>)
    -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %g32 = llm.cast %g0 : tensor<8xbf16> to tensor<8xf32>
  %a0, %b0, %c0 = llm.adamw %p0, %g32, %m0, %v0, %lr, %step {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64, max_grad_norm = 0.0 : f64} : tensor<8xf32>
  %a1, %b1, %c1 = llm.adamw %p1, %g1, %m1, %v1, %lr, %step {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64, max_grad_norm = 0.0 : f64} : tensor<8xf32>
  return %a0, %b0, %c0, %a1, %b1, %c1 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

dist.mesh @mesh axes ["dp"] shape [2]

// ZeRO-1 without masters: each update reads this rank's slice of its fp32
// parameter and its gathered shard replaces the parameter. The second
// slice (a local copy) moves up to the op, the updates move up past the
// first gather (which they do not read) and both gathers follow, reading
// the op's results; the padding slice stays with its gather.
// CHECK-LABEL: func.func @zero1
// CHECK-NEXT: %[[S0:.*]] = dist.all_slice %arg0
// CHECK-NEXT: %[[P1:.*]] = llm.pad %arg4
// CHECK-NEXT: %[[S1:.*]] = dist.all_slice %[[P1]]
// CHECK-NEXT: %[[R:.*]]:6 = llm.multi_tensor_adamw params(%[[S0]], %[[S1]] : tensor<4xf32>, tensor<3xf32>)
// CHECK-NEXT: %[[G0:.*]] = dist.all_gather %[[R]]#0
// CHECK-NEXT: %[[G1:.*]] = dist.all_gather %[[R]]#1
// CHECK-NEXT: %[[C1:.*]] = llm.slice %[[G1]]
// CHECK-NEXT: return %[[G0]], %[[C1]]
func.func @zero1(%p0: tensor<8xf32>, %g0: tensor<4xf32>, %m0: tensor<4xf32>, %v0: tensor<4xf32>,
                 %p1: tensor<5xf32>, %g1: tensor<3xf32>, %m1: tensor<3xf32>, %v1: tensor<3xf32>,
                 %lr: tensor<f32>, %step: tensor<f32>, %n: tensor<f32>)
    -> (tensor<8xf32>, tensor<5xf32>, tensor<4xf32>, tensor<4xf32>, tensor<3xf32>, tensor<3xf32>) {
  %s0 = dist.all_slice %p0 on @mesh axes ["dp"] dim 0 : tensor<8xf32> -> tensor<4xf32>
  %a0, %b0, %c0 = llm.adamw %s0, %g0, %m0, %v0, %lr, %step norm %n {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.1 : f64, max_grad_norm = 1.0 : f64} : tensor<4xf32>
  %q0 = dist.all_gather %a0 on @mesh axes ["dp"] dim 0 : tensor<4xf32> -> tensor<8xf32>
  %pad1 = llm.pad %p1 {offsets = array<i64: 0>} : tensor<5xf32> to tensor<6xf32>
  %s1 = dist.all_slice %pad1 on @mesh axes ["dp"] dim 0 : tensor<6xf32> -> tensor<3xf32>
  %a1, %b1, %c1 = llm.adamw %s1, %g1, %m1, %v1, %lr, %step norm %n {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.1 : f64, max_grad_norm = 1.0 : f64} : tensor<3xf32>
  %q1 = dist.all_gather %a1 on @mesh axes ["dp"] dim 0 : tensor<3xf32> -> tensor<6xf32>
  %r1 = llm.slice %q1 {offsets = array<i64: 0>} : tensor<6xf32> to tensor<5xf32>
  return %q0, %r1, %b0, %c0, %b1, %c1 : tensor<8xf32>, tensor<5xf32>, tensor<4xf32>, tensor<4xf32>, tensor<3xf32>, tensor<3xf32>
}

// -----

dist.mesh @mesh axes ["dp"] shape [2]

// An update whose operand a communicating collective computes after the
// run's first update cannot move above it: the run ends there, and the
// next starts with that update. (Each run of one update still takes its
// cast.)
// CHECK-LABEL: func.func @collective_between
// CHECK-NEXT: %[[R0:.*]]:4 = llm.multi_tensor_adamw params(%arg0 : tensor<8xf32>)
// CHECK-NEXT: %[[A:.*]] = dist.all_reduce %arg5
// CHECK-NEXT: %[[R1:.*]]:4 = llm.multi_tensor_adamw params(%arg4 : tensor<8xf32>) grads(%[[A]] : tensor<8xf32>)
func.func @collective_between(%p0: tensor<8xf32>, %g0: tensor<8xf32>, %m0: tensor<8xf32>, %v0: tensor<8xf32>,
                              %p1: tensor<8xf32>, %g1: tensor<8xf32>, %m1: tensor<8xf32>, %v1: tensor<8xf32>,
                              %lr: tensor<f32>, %step: tensor<f32>)
    -> (tensor<8xbf16>, tensor<8xbf16>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %a0, %b0, %c0 = llm.adamw %p0, %g0, %m0, %v0, %lr, %step {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64, max_grad_norm = 0.0 : f64} : tensor<8xf32>
  %w0 = llm.cast %a0 : tensor<8xf32> to tensor<8xbf16>
  %r = dist.all_reduce %g1 on @mesh axes ["dp"] reduction "mean" : tensor<8xf32> -> tensor<8xf32>
  %a1, %b1, %c1 = llm.adamw %p1, %r, %m1, %v1, %lr, %step {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64, max_grad_norm = 0.0 : f64} : tensor<8xf32>
  %w1 = llm.cast %a1 : tensor<8xf32> to tensor<8xbf16>
  return %w0, %w1, %b0, %c0, %b1, %c1 : tensor<8xbf16>, tensor<8xbf16>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// Updates of different steps or hyperparameters do not join: another
// beta1, two different nonzero weight decays, another norm. Alone and
// without a cast, an update stays an adamw; 8-bit updates stay per tensor.
// CHECK-LABEL: func.func @apart
// CHECK-COUNT-4: llm.adamw %
// CHECK-NOT: multi_tensor_adamw
// CHECK: llm.adamw8bit
func.func @apart(%p: tensor<8xf32>, %lr: tensor<f32>, %step: tensor<f32>, %n: tensor<f32>,
                 %codes: tensor<8xi8>, %absmax: tensor<1xf32>)
    -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %a0, %b0, %c0 = llm.adamw %p, %p, %p, %p, %lr, %step {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.1 : f64, max_grad_norm = 0.0 : f64} : tensor<8xf32>
  %a1, %b1, %c1 = llm.adamw %p, %p, %p, %p, %lr, %step {beta1 = 0.8 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.1 : f64, max_grad_norm = 0.0 : f64} : tensor<8xf32>
  %a2, %b2, %c2 = llm.adamw %p, %p, %p, %p, %lr, %step {beta1 = 0.8 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.2 : f64, max_grad_norm = 0.0 : f64} : tensor<8xf32>
  %a3, %b3, %c3 = llm.adamw %p, %p, %p, %p, %lr, %step norm %n {beta1 = 0.8 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.2 : f64, max_grad_norm = 0.0 : f64} : tensor<8xf32>
  %q:5 = llm.adamw8bit %p, %p, %codes, %absmax, %codes, %absmax, %lr, %step {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64, max_grad_norm = 0.0 : f64} : tensor<8xf32>, tensor<8xi8>, tensor<1xf32>
  return %a0, %a1, %a2, %a3, %q#0 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// The second update overwrites %m1 in place (its result is tied to it), and
// %m1 is read after the first update: moving that write up would change
// what the reader sees, so the second update starts a run of its own.
// CHECK-LABEL: func.func @state_read_after
// CHECK-NEXT: llm.multi_tensor_adamw params(%arg0 : tensor<8xf32>)
// CHECK-NEXT: llm.scale %arg6
// CHECK-NEXT: llm.multi_tensor_adamw params(%arg4 : tensor<8xf32>)
func.func @state_read_after(%p0: tensor<8xf32>, %g0: tensor<8xf32>, %m0: tensor<8xf32>, %v0: tensor<8xf32>,
                            %p1: tensor<8xf32>, %g1: tensor<8xf32>, %m1: tensor<8xf32>, %v1: tensor<8xf32>,
                            %lr: tensor<f32>, %step: tensor<f32>)
    -> (tensor<8xbf16>, tensor<8xbf16>, tensor<8xf32> {llmc.tied_to = 6 : i64}, tensor<8xf32>) {
  %a0, %b0, %c0 = llm.adamw %p0, %g0, %m0, %v0, %lr, %step {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64, max_grad_norm = 0.0 : f64} : tensor<8xf32>
  %w0 = llm.cast %a0 : tensor<8xf32> to tensor<8xbf16>
  %s = llm.scale %m1 {factor = 2.0 : f64} : tensor<8xf32>
  %a1, %b1, %c1 = llm.adamw %p1, %g1, %m1, %v1, %lr, %step {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64, max_grad_norm = 0.0 : f64} : tensor<8xf32>
  %w1 = llm.cast %a1 : tensor<8xf32> to tensor<8xbf16>
  return %w0, %w1, %b1, %s : tensor<8xbf16>, tensor<8xbf16>, tensor<8xf32>, tensor<8xf32>
}

// The whole bf16 training step: every update of the tiny GPT in one op,
// with every master's cast.
// PIPELINE-LABEL: func.func @train_step
// PIPELINE-NOT: llm.adamw
// PIPELINE: llm.multi_tensor_adamw
// PIPELINE-SAME: cast_type = bf16
// PIPELINE-NOT: llm.adamw
// PIPELINE-NOT: llm.multi_tensor_adamw
