// RUN: llmc-opt %s -split-input-file --llmc-fuse | FileCheck %s
// RUN: llmc-opt %s -split-input-file --llmc-fuse="fusions=elementwise,bias-gelu,bias" | FileCheck %s
// RUN: llmc-opt %s -split-input-file --llmc-fuse="fusions=bias,bias-gelu" | FileCheck %s --check-prefix=OFF
// RUN: llmc-opt %s -split-input-file --llmc-fuse="fusions=none" | FileCheck %s --check-prefix=OFF
// RUN: llmc-opt %s -split-input-file --llmc-fuse | llmc-opt | FileCheck %s --check-prefix=ROUND

// llmc-fuse's `elementwise`: chains of elementwise llm ops of one part of
// the step become one llm.fused_elementwise. Instructions are
// {opcode, dtype, a, b, c}; opcodes 0 load, 1 const, 2 cast, 3 add, 5 mul,
// 12 gelu_grad, 16/17 swiglu_grad's halves, 18 dropout.

// A gradient sum of three terms and a bias: one loop, the bias [N]
// repeated over the rows.
// CHECK-LABEL: func.func @adds
// CHECK-NEXT: %[[Y:.*]] = llm.fused_elementwise(%arg0, %arg1, %arg2, %arg3) [r0 = load 0, r1 = load 1, r2 = add r0, r1, r3 = load 2, r4 = add r2, r3, r5 = load 3, r6 = add r4, r5] yields r6 {llmc.backward} : (tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
// CHECK-NEXT: return %[[Y]]
// OFF-LABEL: func.func @adds
// OFF-NOT: fused_elementwise
// OFF: return
// ROUND-LABEL: func.func @adds
// ROUND: llm.fused_elementwise
func.func @adds(%a: tensor<4x8x16xf32>, %b: tensor<4x8x16xf32>, %c: tensor<4x8x16xf32>,
                %bias: tensor<16xf32>) -> tensor<4x8x16xf32> {
  %0 = llm.add %a, %b {llmc.backward} : tensor<4x8x16xf32>, tensor<4x8x16xf32>
  %1 = llm.add %0, %c {llmc.backward} : tensor<4x8x16xf32>, tensor<4x8x16xf32>
  %2 = llm.add %1, %bias {llmc.backward} : tensor<4x8x16xf32>, tensor<16xf32>
  return %2 : tensor<4x8x16xf32>
}

// -----

// A chain value read after the chain is one more result; the fused op
// stands where the chain's last op stood.
// CHECK-LABEL: func.func @extra_result
// CHECK-NEXT: %[[F:.*]]:2 = llm.fused_elementwise(%arg0, %arg1, %arg2) {{.*}} yields r2, r4 :
// CHECK-NEXT: %[[M:.*]] = llm.matmul %[[F]]#0, %arg3
// CHECK-NEXT: return %[[F]]#1, %[[M]]
func.func @extra_result(%a: tensor<4x16xf32>, %b: tensor<4x16xf32>, %c: tensor<4x16xf32>,
                        %w: tensor<16x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %0 = llm.add %a, %b : tensor<4x16xf32>, tensor<4x16xf32>
  %1 = llm.mul %0, %c : tensor<4x16xf32>, tensor<4x16xf32>
  %m = llm.matmul %0, %w : tensor<4x16xf32>, tensor<16x16xf32> -> tensor<4x16xf32>
  return %1, %m : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// The residual stream's gradient: the first sum is read (by the matmul)
// before the second sum, which needs the matmul's result. Moving the first
// sum down would read it before it is made: nothing fuses. (The product
// has a second reader, so `residual` does not take it either.)
// CHECK-LABEL: func.func @read_between
// CHECK-NEXT: llm.add
// CHECK-NEXT: llm.matmul
// CHECK-NEXT: llm.add
func.func @read_between(%a: tensor<4x16xf32>, %b: tensor<4x16xf32>, %w: tensor<16x16xf32>)
    -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %0 = llm.add %a, %b {llmc.backward} : tensor<4x16xf32>, tensor<4x16xf32>
  %m = llm.matmul %0, %w {llmc.backward} : tensor<4x16xf32>, tensor<16x16xf32> -> tensor<4x16xf32>
  %1 = llm.add %0, %m {llmc.backward} : tensor<4x16xf32>, tensor<4x16xf32>
  return %1, %m : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Different parts of the step (forward and backward, two microbatches, a
// recomputed op and its original) never share a chain.
// CHECK-LABEL: func.func @parts
// CHECK-NOT: fused_elementwise
// CHECK: return
func.func @parts(%a: tensor<4x16xf32>, %b: tensor<4x16xf32>)
    -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) {
  %0 = llm.add %a, %b : tensor<4x16xf32>, tensor<4x16xf32>
  %1 = llm.add %0, %b {llmc.backward} : tensor<4x16xf32>, tensor<4x16xf32>
  %2 = llm.add %a, %b {llmc.microbatch = 0 : i64} : tensor<4x16xf32>, tensor<4x16xf32>
  %3 = llm.add %2, %b {llmc.microbatch = 1 : i64} : tensor<4x16xf32>, tensor<4x16xf32>
  %4 = llm.add %a, %b {llmc.recomputed} : tensor<4x16xf32>, tensor<4x16xf32>
  %5 = llm.add %4, %b : tensor<4x16xf32>, tensor<4x16xf32>
  return %1, %3, %5 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// A collective between two adds (a row-parallel layer's all-reduce)
// stays: each side is a chain of one op, which is left alone.
dist.mesh @mesh axes ["tp"] shape [2]
// CHECK-LABEL: func.func @collective
// CHECK-NEXT: llm.add
// CHECK-NEXT: dist.all_reduce
// CHECK-NEXT: llm.add
func.func @collective(%a: tensor<4x16xf32>, %b: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %0 = llm.add %a, %b : tensor<4x16xf32>, tensor<4x16xf32>
  %r = dist.all_reduce %0 on @mesh axes ["tp"] reduction "sum" : tensor<4x16xf32> -> tensor<4x16xf32>
  %1 = llm.add %r, %b : tensor<4x16xf32>, tensor<4x16xf32>
  return %1 : tensor<4x16xf32>
}

// -----

// bf16 training: the sum is rounded to bf16 (dtype 1) where add stored
// it, then cast to f32 (dtype 0) for the optimizer.
// CHECK-LABEL: func.func @bf16_cast
// CHECK-NEXT: llm.fused_elementwise(%arg0, %arg1) [r0 = load 0 : bf16, r1 = load 1 : bf16, r2 = add r0, r1 : bf16, r3 = cast r2] yields r3 : (tensor<4x16xbf16>, tensor<4x16xbf16>) -> tensor<4x16xf32>
func.func @bf16_cast(%a: tensor<4x16xbf16>, %b: tensor<4x16xbf16>) -> tensor<4x16xf32> {
  %0 = llm.add %a, %b : tensor<4x16xbf16>, tensor<4x16xbf16>
  %1 = llm.cast %0 : tensor<4x16xbf16> to tensor<4x16xf32>
  return %1 : tensor<4x16xf32>
}

// -----

// SwiGLU's backward with both gradients scaled (gradient accumulation's
// 1/n): one op, three results. The factor 0.5 is a const (opcode 1) whose
// word is its double's bits.
// CHECK-LABEL: func.func @swiglu_grad
// CHECK-NEXT: %{{.*}}:2 = llm.fused_elementwise(%arg0, %arg1, %arg2) [r0 = load 0, r1 = load 1, r2 = load 2, r3 = swiglu_grad_gate r0, r1, r2, r4 = swiglu_grad_up r0, r2, r5 = const 5.000000e-01, r6 = mul r3, r5, r7 = const 5.000000e-01, r8 = mul r4, r7] yields r6, r8
func.func @swiglu_grad(%g: tensor<4x16xf32>, %u: tensor<4x16xf32>, %dy: tensor<4x16xf32>)
    -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %dg, %du = llm.swiglu_grad %g, %u, %dy : tensor<4x16xf32>
  %0 = llm.scale %dg {factor = 0.5 : f64} : tensor<4x16xf32>
  %1 = llm.scale %du {factor = 0.5 : f64} : tensor<4x16xf32>
  return %0, %1 : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Dropout then the residual add: the mask's index is the element's flat
// index, as the dropout kernel's.
// CHECK-LABEL: func.func @dropout
// CHECK-NEXT: llm.fused_elementwise(%arg0, %arg1) [r0 = load 0, r1 = dropout r0 seed 7 rate 1.000000e-01, r2 = load 1, r3 = add r2, r1] yields r3 :
// CHECK-NEXT: return
func.func @dropout(%x: tensor<4x16xf32>, %res: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %0 = llm.dropout %x {rate = 0.1 : f64, seed = 7 : i64} : tensor<4x16xf32>
  %1 = llm.add %res, %0 : tensor<4x16xf32>, tensor<4x16xf32>
  return %1 : tensor<4x16xf32>
}

// -----

// A dropout on a rank's piece of a larger tensor (sequence parallel: the
// piece's offset is the rank's position on tp times 4 rows) draws its mask
// at the global index: the fused op takes over global_shape, offsets and
// their rank offset, so it draws the same mask.
// CHECK-LABEL: func.func @sharded_dropout
// CHECK-NEXT: llm.fused_elementwise(%arg0, %arg1) [r0 = load 0, r1 = dropout r0 seed 7 rate 1.000000e-01, r2 = load 1, r3 = add r2, r1] yields r3 {dist.rank_offsets = [#dist.rank_offset<mesh = @mesh, attr = "offsets", index = 0, axes = ["tp"], stride = 4>], global_shape = array<i64: 8, 16>, offsets = array<i64: 0, 0>}
// CHECK-NEXT: return
// ROUND-LABEL: func.func @sharded_dropout
// ROUND-NEXT: llm.fused_elementwise{{.*}} global_shape = array<i64: 8, 16>, offsets = array<i64: 0, 0>
dist.mesh @mesh axes ["tp"] shape [2]
func.func @sharded_dropout(%x: tensor<4x16xf32>, %res: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %0 = llm.dropout %x {rate = 0.1 : f64, seed = 7 : i64, global_shape = array<i64: 8, 16>,
                       offsets = array<i64: 0, 0>, dist.rank_offsets = [
                         #dist.rank_offset<mesh = @mesh, attr = "offsets", index = 0, axes = ["tp"], stride = 4>]}
      : tensor<4x16xf32>
  %1 = llm.add %res, %0 : tensor<4x16xf32>, tensor<4x16xf32>
  return %1 : tensor<4x16xf32>
}

// -----

// The fused op has one placement for all its dropouts: a dropout placed
// elsewhere (here: the whole tensor, no global_shape) does not join a
// chain with a sharded one; it starts its own.
// CHECK-LABEL: func.func @dropouts_placed_apart
// CHECK-NEXT: %[[A:.*]] = llm.fused_elementwise(%arg0, %arg1) [r0 = load 0, r1 = dropout r0 seed 7 rate 1.000000e-01, r2 = load 1, r3 = add r2, r1] yields r3 {global_shape = array<i64: 8, 16>, offsets = array<i64: 4, 0>}
// CHECK-NEXT: %[[B:.*]] = llm.dropout %[[A]] {rate = 2.000000e-01 : f64, seed = 8 : i64}
// CHECK-NEXT: return %[[B]]
func.func @dropouts_placed_apart(%x: tensor<4x16xf32>, %res: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %0 = llm.dropout %x {rate = 0.1 : f64, seed = 7 : i64, global_shape = array<i64: 8, 16>,
                       offsets = array<i64: 4, 0>} : tensor<4x16xf32>
  %1 = llm.add %res, %0 : tensor<4x16xf32>, tensor<4x16xf32>
  %2 = llm.dropout %1 {rate = 0.2 : f64, seed = 8 : i64} : tensor<4x16xf32>
  return %2 : tensor<4x16xf32>
}

// -----

// What the other fusions take is not left for this one: the GELU goes
// into the linear, and the gradient's gelu_grad with its scale fuses.
// CHECK-LABEL: func.func @after_linear
// CHECK-NEXT: %[[Y:.*]], %[[PRE:.*]] = llm.linear %arg0, %arg1, %arg2 {gelu, keep_pre}
// CHECK-NEXT: llm.fused_elementwise(%[[PRE]], %arg3) [r0 = load 0, r1 = load 1, r2 = gelu_grad r0, r1,
func.func @after_linear(%x: tensor<4x16xf32>, %w: tensor<16x32xf32>, %b: tensor<32xf32>,
                        %dy: tensor<4x32xf32>) -> (tensor<4x32xf32>, tensor<4x32xf32>) {
  %m = llm.matmul %x, %w : tensor<4x16xf32>, tensor<16x32xf32> -> tensor<4x32xf32>
  %a = llm.add %m, %b : tensor<4x32xf32>, tensor<32xf32>
  %h = llm.gelu %a : tensor<4x32xf32>
  %d = llm.gelu_grad %a, %dy : tensor<4x32xf32>
  %s = llm.scale %d {factor = 2.0 : f64} : tensor<4x32xf32>
  return %h, %s : tensor<4x32xf32>, tensor<4x32xf32>
}

// -----

// Gradient accumulation: each microbatch's gradient is added as soon as it
// is made. Fusing the sums would move them to the last one and keep every
// microbatch's gradient alive until there: an op joins a chain only when
// what stands between computes its operands. The last sum and the mean
// are adjacent, and fuse.
// CHECK-LABEL: func.func @accumulate
// CHECK-NEXT: %[[G0:.*]] = llm.matmul %arg0, %arg1
// CHECK-NEXT: %[[G1:.*]] = llm.matmul %arg0, %arg2
// CHECK-NEXT: %[[S:.*]] = llm.add %[[G0]], %[[G1]]
// CHECK-NEXT: %[[G2:.*]] = llm.matmul %arg0, %arg3
// CHECK-NEXT: llm.fused_elementwise(%[[S]], %[[G2]]) [r0 = load 0, r1 = load 1, r2 = add r0, r1, r3 = const 2.500000e-01, r4 = mul r2, r3] yields r4
func.func @accumulate(%x: tensor<16x16xf32>, %a: tensor<16x16xf32>, %b: tensor<16x16xf32>,
                      %c: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %g0 = llm.matmul %x, %a : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32>
  %g1 = llm.matmul %x, %b : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32>
  %s1 = llm.add %g0, %g1 : tensor<16x16xf32>, tensor<16x16xf32>
  %g2 = llm.matmul %x, %c : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32>
  %s2 = llm.add %s1, %g2 : tensor<16x16xf32>, tensor<16x16xf32>
  %m = llm.scale %s2 {factor = 0.25 : f64} : tensor<16x16xf32>
  return %m : tensor<16x16xf32>
}
