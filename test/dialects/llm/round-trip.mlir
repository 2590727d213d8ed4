// RUN: llmc-opt %s | llmc-opt | FileCheck %s
// Every llm op and attribute survives print → parse → print.

// CHECK-LABEL: func.func @forward
// CHECK-SAME: llm.param = #llm.param<name = "wte", init = "normal", scale = 2.000000e-02>
// CHECK-SAME: llm.param = #llm.param<name = "ln.weight", init = "ones">
// CHECK-SAME: llm.param = #llm.param<name = "frozen", init = "uniform", scale = 1.000000e-01, trainable = false>
func.func @forward(%wte: tensor<256x64xf32> {llm.param = #llm.param<name = "wte", init = "normal", scale = 0.02>},
                   %g: tensor<64xf32> {llm.param = #llm.param<name = "ln.weight", init = "ones">},
                   %frozen: tensor<64xf32> {llm.param = #llm.param<name = "frozen", init = "uniform", scale = 0.1, trainable = false>},
                   %tokens: tensor<2x8xi32>, %targets: tensor<2x8xi32>,
                   %codes: tensor<64xi8>, %absmax: tensor<1xf32>) -> tensor<f32> {
  // CHECK: llm.embedding %{{.*}}, %{{.*}} : tensor<256x64xf32>, tensor<2x8xi32>
  %e = llm.embedding %wte, %tokens : tensor<256x64xf32>, tensor<2x8xi32>
  // CHECK: llm.block "h.0" -> tensor<2x8x64xf32> {
  %h = llm.block "h.0" -> tensor<2x8x64xf32> {
    // CHECK: llm.layernorm %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 1.000000e-05 : f64} : tensor<2x8x64xf32>, tensor<64xf32>
    %n = llm.layernorm %e, %g, %frozen {epsilon = 1.0e-5 : f64} : tensor<2x8x64xf32>, tensor<64xf32>
    // CHECK: llm.rmsnorm
    %r = llm.rmsnorm %n, %g {epsilon = 1.0e-5 : f64} : tensor<2x8x64xf32>, tensor<64xf32>
    // CHECK: llm.add_layernorm %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 1.000000e-05 : f64} : tensor<2x8x64xf32>, tensor<64xf32>
    %as, %ay = llm.add_layernorm %e, %n, %g, %frozen {epsilon = 1.0e-5 : f64} : tensor<2x8x64xf32>, tensor<64xf32>
    // CHECK: llm.add_layernorm %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} bias %{{.*}} {epsilon = 1.000000e-05 : f64} : tensor<2x8x64xf32>, tensor<64xf32> bias tensor<64xf32>
    %bs, %by = llm.add_layernorm %e, %n, %g, %frozen bias %g {epsilon = 1.0e-5 : f64} : tensor<2x8x64xf32>, tensor<64xf32> bias tensor<64xf32>
    // CHECK: llm.add_rmsnorm %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 1.000000e-05 : f64} : tensor<2x8x64xf32>, tensor<64xf32>
    %rs2, %ry = llm.add_rmsnorm %as, %ay, %g {epsilon = 1.0e-5 : f64} : tensor<2x8x64xf32>, tensor<64xf32>
    // CHECK: llm.reshape %{{.*}} : tensor<2x8x64xf32> to tensor<2x8x4x16xf32>
    %q = llm.reshape %r : tensor<2x8x64xf32> to tensor<2x8x4x16xf32>
    // CHECK: llm.rope %{{.*}} {theta = 1.000000e+04 : f64} : tensor<2x8x4x16xf32>
    %qr = llm.rope %q {theta = 10000.0 : f64} : tensor<2x8x4x16xf32>
    // CHECK: llm.rope %{{.*}} {inverse, theta = 1.000000e+04 : f64}
    %qi = llm.rope %qr {theta = 10000.0 : f64, inverse} : tensor<2x8x4x16xf32>
    // CHECK: llm.rope %{{.*}} positions %{{.*}} : tensor<2x8xi32> {theta = 1.000000e+04 : f64} : tensor<2x8x4x16xf32>
    %qp = llm.rope %q positions %tokens : tensor<2x8xi32> {theta = 10000.0 : f64} : tensor<2x8x4x16xf32>
    // CHECK: llm.rope %{{.*}} {high_freq_factor = 4.000000e+00 : f64, low_freq_factor = 1.000000e+00 : f64, original_max_positions = 8192 : i64, scaling_factor = 8.000000e+00 : f64, theta = 5.000000e+05 : f64} : tensor<2x8x4x16xf32>
    %qs = llm.rope %q {theta = 500000.0 : f64, scaling_factor = 8.0 : f64, low_freq_factor = 1.0 : f64, high_freq_factor = 4.0 : f64, original_max_positions = 8192 : i64} : tensor<2x8x4x16xf32>
    // CHECK: llm.slice %{{.*}} {offsets = array<i64: 0, 0, 0, 0>} : tensor<2x8x4x16xf32> to tensor<2x8x2x16xf32>
    %k = llm.slice %qi {offsets = array<i64: 0, 0, 0, 0>} : tensor<2x8x4x16xf32> to tensor<2x8x2x16xf32>
    // CHECK: llm.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 2.500000e-01 : f64} : tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>
    %o, %lse = llm.attention %qi, %k, %k {causal, scale = 0.25 : f64} : tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>
    // CHECK: llm.attention %{{.*}}, %{{.*}}, %{{.*}} segments %{{.*}} : tensor<2x8xi32> {scale = 2.500000e-01 : f64}
    %o2, %lse2 = llm.attention %qi, %k, %k segments %tokens : tensor<2x8xi32> {scale = 0.25 : f64} : tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>
    // CHECK: llm.attention_grad {{.*}} : tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x4x8xf32>
    %dq, %dk, %dv = llm.attention_grad %qi, %k, %k, %o, %lse, %o {causal, scale = 0.25 : f64} : tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x4x8xf32>
    // CHECK: llm.attention_packed %{{.*}} {causal, heads = 2 : i64, kv_heads = 1 : i64, scale = 2.500000e-01 : f64} : tensor<2x8x64xf32>
    %po, %plse = llm.attention_packed %rs2 {causal, heads = 2 : i64, kv_heads = 1 : i64, scale = 0.25 : f64} : tensor<2x8x64xf32>
    // CHECK: llm.attention_packed %{{.*}} segments %{{.*}} : tensor<2x8xi32> {heads = 2 : i64, kv_heads = 1 : i64, scale = 2.500000e-01 : f64} : tensor<2x8x64xf32>
    %so, %slse = llm.attention_packed %rs2 segments %tokens : tensor<2x8xi32> {heads = 2 : i64, kv_heads = 1 : i64, scale = 0.25 : f64} : tensor<2x8x64xf32>
    // CHECK: llm.attention_packed_grad {{.*}} : tensor<2x8x64xf32>, tensor<2x8x2x16xf32>, tensor<2x2x8xf32>
    %dqkv = llm.attention_packed_grad %rs2, %po, %plse, %po {causal, heads = 2 : i64, kv_heads = 1 : i64, scale = 0.25 : f64} : tensor<2x8x64xf32>, tensor<2x8x2x16xf32>, tensor<2x2x8xf32>
    // CHECK: llm.attention_packed_grad {{.*}} segments {{.*}} : tensor<2x8x64xf32>, tensor<2x8x2x16xf32>, tensor<2x2x8xf32>
    %sdqkv = llm.attention_packed_grad %rs2, %so, %slse, %so segments %tokens : tensor<2x8xi32> {heads = 2 : i64, kv_heads = 1 : i64, scale = 0.25 : f64} : tensor<2x8x64xf32>, tensor<2x8x2x16xf32>, tensor<2x2x8xf32>
    // CHECK: llm.attention_rope %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 2.500000e-01 : f64, theta = 1.000000e+04 : f64} : tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>
    %ro, %rlse = llm.attention_rope %q, %k, %k {causal, scale = 0.25 : f64, theta = 10000.0 : f64} : tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>
    // CHECK: llm.attention_rope %{{.*}}, %{{.*}}, %{{.*}} positions %{{.*}} : tensor<2x8xi32> segments %{{.*}} : tensor<2x8xi32> {high_freq_factor = 4.000000e+00 : f64, low_freq_factor = 1.000000e+00 : f64, original_max_positions = 8192 : i64, scale = 2.500000e-01 : f64, scaling_factor = 8.000000e+00 : f64, theta = 5.000000e+05 : f64}
    %so2, %slse2 = llm.attention_rope %q, %k, %k positions %tokens : tensor<2x8xi32> segments %tokens : tensor<2x8xi32> {scale = 0.25 : f64, theta = 500000.0 : f64, scaling_factor = 8.0 : f64, low_freq_factor = 1.0 : f64, high_freq_factor = 4.0 : f64, original_max_positions = 8192 : i64} : tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>
    // CHECK: llm.attention_rope %{{.*}}, %{{.*}}, %{{.*}} segments %{{.*}} : tensor<2x8xi32> {scale
    %go, %glse = llm.attention_rope %q, %k, %k segments %tokens : tensor<2x8xi32> {scale = 0.25 : f64, theta = 10000.0 : f64} : tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>
    // CHECK: llm.attention_rope_grad {{.*}} positions %{{.*}} : tensor<2x8xi32> {causal, scale = 2.500000e-01 : f64, theta = 1.000000e+04 : f64} : tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x4x8xf32>
    %rdq, %rdk, %rdv = llm.attention_rope_grad %q, %k, %k, %ro, %rlse, %ro positions %tokens : tensor<2x8xi32> {causal, scale = 0.25 : f64, theta = 10000.0 : f64} : tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x4x8xf32>
    // CHECK: llm.transpose %{{.*}} {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x8x4x16xf32> to tensor<2x4x8x16xf32>
    %t = llm.transpose %dq {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x8x4x16xf32> to tensor<2x4x8x16xf32>
    // CHECK: llm.pad %{{.*}} {offsets = array<i64: 0, 0, 2, 0>} : tensor<2x8x2x16xf32> to tensor<2x8x4x16xf32>
    %p = llm.pad %dk {offsets = array<i64: 0, 0, 2, 0>} : tensor<2x8x2x16xf32> to tensor<2x8x4x16xf32>
    // CHECK: llm.concat %{{.*}}, %{{.*}} {dim = 2 : i64} : tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32> -> tensor<2x8x4x16xf32>
    %c = llm.concat %dk, %dv {dim = 2 : i64} : tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32> -> tensor<2x8x4x16xf32>
    %sum = llm.add %c, %p : tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>
    %o3 = llm.reshape %sum : tensor<2x8x4x16xf32> to tensor<2x8x64xf32>
    llm.yield %o3 : tensor<2x8x64xf32>
  }
  // CHECK: llm.matmul %{{.*}}, %{{.*}} : tensor<2x8x64xf32>, tensor<64x64xf32> -> tensor<2x8x64xf32>
  %w = llm.reshape %wte : tensor<256x64xf32> to tensor<4x64x64xf32>
  %w0 = llm.slice %w {offsets = array<i64: 0, 0, 0>} : tensor<4x64x64xf32> to tensor<1x64x64xf32>
  %w1 = llm.reshape %w0 : tensor<1x64x64xf32> to tensor<64x64xf32>
  %m = llm.matmul %h, %w1 : tensor<2x8x64xf32>, tensor<64x64xf32> -> tensor<2x8x64xf32>
  // CHECK: llm.matmul %{{.*}}, %{{.*}} {transpose_a, transpose_b} : tensor<2x8x64xf32>, tensor<2x64x8xf32> -> tensor<2x64x64xf32>
  %bt = llm.transpose %m {permutation = array<i64: 0, 2, 1>} : tensor<2x8x64xf32> to tensor<2x64x8xf32>
  %mm = llm.matmul %m, %bt {transpose_a, transpose_b} : tensor<2x8x64xf32>, tensor<2x64x8xf32> -> tensor<2x64x64xf32>
  // CHECK: llm.add %{{.*}}, %{{.*}} : tensor<2x8x64xf32>, tensor<64xf32>
  %a = llm.add %m, %g : tensor<2x8x64xf32>, tensor<64xf32>
  // CHECK: llm.linear %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x8x64xf32>, tensor<64x64xf32>, tensor<64xf32>
  %lin = llm.linear %h, %w1, %g : tensor<2x8x64xf32>, tensor<64x64xf32>, tensor<64xf32>
  // CHECK: llm.linear %{{.*}}, %{{.*}}, %{{.*}} {gelu, keep_pre, transpose_b} : tensor<2x8x64xf32>, tensor<64x64xf32>, tensor<64xf32>
  %act, %pre = llm.linear %lin, %w1, %g {gelu, keep_pre, transpose_b} : tensor<2x8x64xf32>, tensor<64x64xf32>, tensor<64xf32>
  // CHECK: llm.linear %{{.*}}, %{{.*}}, %{{.*}} residual %{{.*}} : tensor<2x8x64xf32>, tensor<64x64xf32>, tensor<64xf32> residual tensor<2x8x64xf32>
  %res = llm.linear %h, %w1, %g residual %lin : tensor<2x8x64xf32>, tensor<64x64xf32>, tensor<64xf32> residual tensor<2x8x64xf32>
  // CHECK: llm.linear %{{.*}}, %{{.*}} residual %{{.*}} {transpose_b} : tensor<2x8x64xf32>, tensor<64x64xf32> residual tensor<2x8x64xf32>
  %nobias = llm.linear %h, %w1 residual %res {transpose_b} : tensor<2x8x64xf32>, tensor<64x64xf32> residual tensor<2x8x64xf32>
  // CHECK: llm.fused_elementwise(%{{.*}}, %{{.*}}) [r0 = load 0, r1 = load 1, r2 = add r0, r1 : bf16] yields r2 : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xbf16>
  %fe = llm.fused_elementwise(%m, %g) [r0 = load 0, r1 = load 1, r2 = add r0, r1 : bf16] yields r2 : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xbf16>
  // Every opcode's operand form; constants and rates keep every bit of
  // their double, and two results yield.
  // CHECK: llm.fused_elementwise(%{{.*}}, %{{.*}}) [r0 = load 0, r1 = load 1, r2 = const 0.17677669529663687, r3 = mul r0, r2, r4 = dropout r3 seed 7 rate 1.000000e-01, r5 = select r1, r4, r0, r6 = swiglu_grad_gate r0, r1, r5, r7 = gelu r6 : bf16, r8 = cast r7 : f16, r9 = sqrt r0] yields r8, r9 {llmc.backward} : (tensor<2x8x64xf32>, tensor<2x8x64xf32>) -> (tensor<2x8x64xf16>, tensor<2x8x64xf32>)
  %fe2:2 = llm.fused_elementwise(%h, %act) [r0 = load 0, r1 = load 1, r2 = const 0.17677669529663687, r3 = mul r0, r2, r4 = dropout r3 seed 7 rate 0.1, r5 = select r1, r4, r0, r6 = swiglu_grad_gate r0, r1, r5, r7 = gelu r6 : bf16, r8 = cast r7 : f16, r9 = sqrt r0] yields r8, r9 {llmc.backward} : (tensor<2x8x64xf32>, tensor<2x8x64xf32>) -> (tensor<2x8x64xf16>, tensor<2x8x64xf32>)
  // CHECK: llm.linear_weight_grad %{{.*}}, %{{.*}} : tensor<2x8x64xf32>, tensor<2x8x64xf32>
  %lwdw, %lwdb = llm.linear_weight_grad %h, %act : tensor<2x8x64xf32>, tensor<2x8x64xf32>
  // CHECK: llm.matmul_gelu_grad %{{.*}}, %{{.*}}, %{{.*}} {transpose_b} : tensor<2x8x64xf32>, tensor<64x64xf32>, tensor<2x8x64xf32>
  %dgelu = llm.matmul_gelu_grad %h, %w1, %pre {transpose_b} : tensor<2x8x64xf32>, tensor<64x64xf32>, tensor<2x8x64xf32>
  // CHECK: %{{.*}}, %{{.*}} = llm.matmul_gelu_grad %{{.*}}, %{{.*}}, %{{.*}} {bias_grad} : tensor<2x8x64xf32>, tensor<64x64xf32>, tensor<2x8x64xf32>
  %dgelu2, %dgelub = llm.matmul_gelu_grad %h, %w1, %pre {bias_grad} : tensor<2x8x64xf32>, tensor<64x64xf32>, tensor<2x8x64xf32>
  // CHECK: llm.matmul_swiglu_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {transpose_b} : tensor<2x8x64xf32>, tensor<64x64xf32>, tensor<2x8x64xf32>
  %dsg, %dsu = llm.matmul_swiglu_grad %h, %w1, %pre, %act {transpose_b} : tensor<2x8x64xf32>, tensor<64x64xf32>, tensor<2x8x64xf32>
  // CHECK: llm.mul %{{.*}}, %{{.*}} : tensor<2x8x64xf32>, tensor<64xf32>
  %mu = llm.mul %a, %g : tensor<2x8x64xf32>, tensor<64xf32>
  // CHECK: llm.scale %{{.*}} {factor = 5.000000e-01 : f64} : tensor<2x8x64xf32>
  %s = llm.scale %mu {factor = 0.5 : f64} : tensor<2x8x64xf32>
  // CHECK: llm.gelu
  %ge = llm.gelu %s : tensor<2x8x64xf32>
  // CHECK: llm.silu
  %si = llm.silu %ge : tensor<2x8x64xf32>
  // CHECK: llm.swiglu %{{.*}}, %{{.*}} : tensor<2x8x64xf32>
  %sw = llm.swiglu %si, %ge : tensor<2x8x64xf32>
  // CHECK: llm.dropout %{{.*}} {rate = 1.000000e-01 : f64, seed = 7 : i64}
  %d = llm.dropout %sw {rate = 0.1 : f64, seed = 7 : i64} : tensor<2x8x64xf32>
  // CHECK: llm.cast %{{.*}} : tensor<2x8x64xf32> to tensor<2x8x64xbf16>
  %bf = llm.cast %d : tensor<2x8x64xf32> to tensor<2x8x64xbf16>
  %back = llm.cast %bf : tensor<2x8x64xbf16> to tensor<2x8x64xf32>
  // CHECK: llm.gelu_grad %{{.*}}, %{{.*}} : tensor<2x8x64xf32>
  %gg = llm.gelu_grad %s, %back : tensor<2x8x64xf32>
  // CHECK: llm.silu_grad
  %sg = llm.silu_grad %ge, %gg : tensor<2x8x64xf32>
  // CHECK: llm.swiglu_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x8x64xf32>
  %dg, %du = llm.swiglu_grad %si, %ge, %sg : tensor<2x8x64xf32>
  // CHECK: llm.layernorm_grad
  %dx, %dgam, %dbet = llm.layernorm_grad %dg, %g, %du {epsilon = 1.0e-5 : f64} : tensor<2x8x64xf32>, tensor<64xf32>
  // CHECK: llm.rmsnorm_grad
  %dx2, %dgam2 = llm.rmsnorm_grad %dx, %g, %du {epsilon = 1.0e-5 : f64} : tensor<2x8x64xf32>, tensor<64xf32>
  // CHECK: llm.layernorm_grad_add %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 1.000000e-05 : f64} : tensor<2x8x64xf32>, tensor<64xf32>
  %dx3, %dgam3, %dbet3 = llm.layernorm_grad_add %dg, %g, %du, %dx {epsilon = 1.0e-5 : f64} : tensor<2x8x64xf32>, tensor<64xf32>
  // CHECK: llm.rmsnorm_grad_add %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 1.000000e-05 : f64} : tensor<2x8x64xf32>, tensor<64xf32>
  %dx4, %dgam4 = llm.rmsnorm_grad_add %dx, %g, %du, %dx3 {epsilon = 1.0e-5 : f64} : tensor<2x8x64xf32>, tensor<64xf32>
  // CHECK: llm.reduce_sum %{{.*}} : tensor<2x8x64xf32> to tensor<64xf32>
  %rs = llm.reduce_sum %dx2 : tensor<2x8x64xf32> to tensor<64xf32>
  // CHECK: llm.embedding_grad %{{.*}}, %{{.*}} : tensor<2x8xi32>, tensor<2x8x64xf32> to tensor<256x64xf32>
  %de = llm.embedding_grad %tokens, %dx2 : tensor<2x8xi32>, tensor<2x8x64xf32> to tensor<256x64xf32>
  %logits = llm.matmul %dx2, %wte {transpose_b} : tensor<2x8x64xf32>, tensor<256x64xf32> -> tensor<2x8x256xf32>
  // CHECK: llm.cross_entropy %{{.*}}, %{{.*}} : tensor<2x8x256xf32>, tensor<2x8xi32>
  %loss = llm.cross_entropy %logits, %targets : tensor<2x8x256xf32>, tensor<2x8xi32>
  // CHECK: llm.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} {ignore_index = 0 : i64} : tensor<2x8x256xf32>, tensor<2x8xi32>
  %dl = llm.cross_entropy_grad %logits, %targets, %loss {ignore_index = 0 : i64} : tensor<2x8x256xf32>, tensor<2x8xi32>
  // The fused head: its result types follow transpose_b and chunk_rows.
  // CHECK: llm.linear_cross_entropy %{{.*}}, %{{.*}}, %{{.*}} {chunk_rows = 4 : i64, transpose_b} : tensor<2x8x64xf32>, tensor<256x64xf32>, tensor<2x8xi32>
  %fl, %fs = llm.linear_cross_entropy %dx2, %wte, %targets {chunk_rows = 4 : i64, transpose_b} : tensor<2x8x64xf32>, tensor<256x64xf32>, tensor<2x8xi32>
  // CHECK: llm.linear_cross_entropy_train %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {chunk_rows = 16 : i64} : tensor<2x8x256xf32>, tensor<256x64xf32>, tensor<2x8xi32>
  %hl, %hdh, %hdw, %hs = llm.linear_cross_entropy_train %dl, %wte, %targets, %loss {chunk_rows = 16 : i64} : tensor<2x8x256xf32>, tensor<256x64xf32>, tensor<2x8xi32>
  // A frozen head: no dw.
  // CHECK: %{{.*}}, %{{.*}}, %{{.*}} = llm.linear_cross_entropy_train %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {chunk_rows = 16 : i64, frozen_weight} : tensor<2x8x256xf32>, tensor<256x64xf32>, tensor<2x8xi32>
  %fzl, %fzdh, %fzs = llm.linear_cross_entropy_train %dl, %wte, %targets, %loss {chunk_rows = 16 : i64, frozen_weight} : tensor<2x8x256xf32>, tensor<256x64xf32>, tensor<2x8xi32>
  // A padded vocabulary: 250 of the 256 columns are classes.
  // CHECK: llm.cross_entropy %{{.*}}, %{{.*}} {num_classes = 250 : i64} : tensor<2x8x256xf32>, tensor<2x8xi32>
  %ploss = llm.cross_entropy %logits, %targets {num_classes = 250 : i64} : tensor<2x8x256xf32>, tensor<2x8xi32>
  // CHECK: llm.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} {num_classes = 250 : i64} : tensor<2x8x256xf32>, tensor<2x8xi32>
  %padl = llm.cross_entropy_grad %logits, %targets, %loss {num_classes = 250 : i64} : tensor<2x8x256xf32>, tensor<2x8xi32>
  // CHECK: llm.linear_cross_entropy %{{.*}}, %{{.*}}, %{{.*}} {chunk_rows = 4 : i64, num_classes = 250 : i64, transpose_b} : tensor<2x8x64xf32>, tensor<256x64xf32>, tensor<2x8xi32>
  %pfl, %pfs = llm.linear_cross_entropy %dx2, %wte, %targets {chunk_rows = 4 : i64, num_classes = 250 : i64, transpose_b} : tensor<2x8x64xf32>, tensor<256x64xf32>, tensor<2x8xi32>
  // A 16-bit weight's gradient over several chunks: 64 (D) more scratch
  // rows hold its fp32 sum.
  // CHECK: llm.linear_cross_entropy_train {{.*}} {chunk_rows = 4 : i64, num_classes = 250 : i64, transpose_b} : tensor<2x8x64xbf16>, tensor<256x64xbf16>, tensor<2x8xi32>
  %hb = llm.cast %dx2 : tensor<2x8x64xf32> to tensor<2x8x64xbf16>
  %wb = llm.cast %wte : tensor<256x64xf32> to tensor<256x64xbf16>
  %bl, %bdh, %bdw, %bs = llm.linear_cross_entropy_train %hb, %wb, %targets, %loss {chunk_rows = 4 : i64, num_classes = 250 : i64, transpose_b} : tensor<2x8x64xbf16>, tensor<256x64xbf16>, tensor<2x8xi32>
  %bsUse = llm.reshape %bs : tensor<68x256xf32> to tensor<17408xf32>
  // Vocabulary-parallel pieces.
  // CHECK: llm.embedding %{{.*}}, %{{.*}} {row_offset = 128 : i64, vocab_size = 256 : i64} : tensor<128x64xf32>, tensor<2x8xi32>
  %half = llm.slice %wte {offsets = array<i64: 128, 0>} : tensor<256x64xf32> to tensor<128x64xf32>
  %pe = llm.embedding %half, %tokens {row_offset = 128 : i64, vocab_size = 256 : i64} : tensor<128x64xf32>, tensor<2x8xi32>
  // CHECK: llm.embedding_grad %{{.*}}, %{{.*}} {row_offset = 128 : i64, vocab_size = 256 : i64} : tensor<2x8xi32>, tensor<2x8x64xf32> to tensor<128x64xf32>
  %pde = llm.embedding_grad %tokens, %pe {row_offset = 128 : i64, vocab_size = 256 : i64} : tensor<2x8xi32>, tensor<2x8x64xf32> to tensor<128x64xf32>
  // CHECK: llm.reduce_max %{{.*}} : tensor<2x8x256xf32> -> tensor<2x8xf32>
  %mx = llm.reduce_max %logits : tensor<2x8x256xf32> -> tensor<2x8xf32>
  // CHECK: llm.stop_gradient %{{.*}} : tensor<2x8xf32>
  %sh = llm.stop_gradient %mx : tensor<2x8xf32>
  // CHECK: llm.copy_to_host %{{.*}} : tensor<2x8xf32>
  // CHECK: llm.copy_to_device %{{.*}} : tensor<2x8xf32>
  %mxHost = llm.copy_to_host %mx : tensor<2x8xf32>
  %mxBack = llm.copy_to_device %mxHost : tensor<2x8xf32>
  // CHECK: llm.cross_entropy_partial %{{.*}}, %{{.*}}, %{{.*}} {num_classes = 256 : i64} : tensor<2x8x256xf32>, tensor<2x8xi32>, tensor<2x8xf32>
  %se, %tl = llm.cross_entropy_partial %logits, %targets, %sh {class_offset = 0 : i64, num_classes = 256 : i64} : tensor<2x8x256xf32>, tensor<2x8xi32>, tensor<2x8xf32>
  // CHECK: llm.cross_entropy_finish %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x8xf32>, tensor<2x8xi32>
  %pl = llm.cross_entropy_finish %se, %sh, %tl, %targets : tensor<2x8xf32>, tensor<2x8xi32>
  // CHECK: llm.cross_entropy_finish_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x8xf32>, tensor<2x8xi32>
  %dse, %dsh, %dtl = llm.cross_entropy_finish_grad %se, %targets, %pl : tensor<2x8xf32>, tensor<2x8xi32>
  // CHECK: llm.cross_entropy_partial_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {num_classes = 256 : i64} : tensor<2x8x256xf32>, tensor<2x8xi32>, tensor<2x8xf32>
  %pdl = llm.cross_entropy_partial_grad %logits, %targets, %sh, %dse, %dtl {num_classes = 256 : i64} : tensor<2x8x256xf32>, tensor<2x8xi32>, tensor<2x8xf32>
  // The fused vocabulary-parallel head: a shard of 128 classes.
  // CHECK: llm.linear_cross_entropy_partial %{{.*}}, %{{.*}}, %{{.*}} {chunk_rows = 4 : i64, class_offset = 128 : i64, num_classes = 256 : i64, transpose_b} : tensor<2x8x64xf32>, tensor<128x64xf32>, tensor<2x8xi32>
  %smx, %sse, %stl, %ss = llm.linear_cross_entropy_partial %dx2, %half, %targets {chunk_rows = 4 : i64, class_offset = 128 : i64, num_classes = 256 : i64, transpose_b} : tensor<2x8x64xf32>, tensor<128x64xf32>, tensor<2x8xi32>
  // CHECK: llm.linear_cross_entropy_partial_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {chunk_rows = 4 : i64, num_classes = 256 : i64, transpose_b} : tensor<2x8x64xf32>, tensor<128x64xf32>, tensor<2x8xi32>, tensor<2x8xf32>
  %sdh, %sdw, %sgs = llm.linear_cross_entropy_partial_grad %dx2, %half, %targets, %sh, %dse, %dtl {chunk_rows = 4 : i64, num_classes = 256 : i64, transpose_b} : tensor<2x8x64xf32>, tensor<128x64xf32>, tensor<2x8xi32>, tensor<2x8xf32>
  // CHECK: %{{.*}}, %{{.*}} = llm.linear_cross_entropy_partial_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {chunk_rows = 4 : i64, frozen_weight, num_classes = 256 : i64, transpose_b} : tensor<2x8x64xf32>, tensor<128x64xf32>, tensor<2x8xi32>, tensor<2x8xf32>
  %fzsdh, %fzsgs = llm.linear_cross_entropy_partial_grad %dx2, %half, %targets, %sh, %dse, %dtl {chunk_rows = 4 : i64, frozen_weight, num_classes = 256 : i64, transpose_b} : tensor<2x8x64xf32>, tensor<128x64xf32>, tensor<2x8xi32>, tensor<2x8xf32>
  // CHECK: llm.dropout %{{.*}} {global_shape = array<i64: 4, 8, 64>, offsets = array<i64: 2, 0, 0>, rate = 1.000000e-01 : f64, seed = 7 : i64} : tensor<2x8x64xf32>
  %gd = llm.dropout %pe {rate = 0.1 : f64, seed = 7 : i64, global_shape = array<i64: 4, 8, 64>, offsets = array<i64: 2, 0, 0>} : tensor<2x8x64xf32>
  // CHECK: llm.fused_elementwise(%{{.*}}) [r0 = load 0, r1 = dropout r0 seed 7 rate 1.000000e-01] yields r1 {global_shape = array<i64: 4, 8, 64>, offsets = array<i64: 2, 0, 0>} : (tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  %gfd = llm.fused_elementwise(%pe) [r0 = load 0, r1 = dropout r0 seed 7 rate 0.1] yields r1 {global_shape = array<i64: 4, 8, 64>, offsets = array<i64: 2, 0, 0>} : (tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  // CHECK: llm.fill 1.000000e+00 : tensor<f32>
  %one = llm.fill 1.0 : tensor<f32>
  // CHECK: llm.global_norm %{{.*}}, %{{.*}} : tensor<64xf32>, tensor<256x64xf32>
  %norm = llm.global_norm %rs, %de : tensor<64xf32>, tensor<256x64xf32>
  // CHECK: llm.adamw {{.*}} norm %{{.*}} {beta1 = 9.000000e-01 : f64
  %p1, %m1, %v1 = llm.adamw %g, %rs, %rs, %rs, %one, %one norm %norm {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64, max_grad_norm = 1.0 : f64} : tensor<64xf32>
  // CHECK: llm.adamw %{{[a-z_0-9]+}}, %{{[0-9]+}}, %{{[a-z_0-9]+}}, %{{[a-z_0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}} {beta1
  %p2, %m2, %v2 = llm.adamw %p1, %rs, %m1, %v1, %one, %one {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.1 : f64, max_grad_norm = 0.0 : f64} : tensor<64xf32>
  // CHECK: llm.adamw8bit {{.*}} norm %{{.*}} {beta1 = 9.000000e-01 : f64{{.*}}} : tensor<64xf32>, tensor<64xi8>, tensor<1xf32>
  %p3, %mc, %ma, %vc, %va = llm.adamw8bit %p2, %rs, %codes, %absmax, %codes, %absmax, %one, %one norm %norm {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.1 : f64, max_grad_norm = 1.0 : f64} : tensor<64xf32>, tensor<64xi8>, tensor<1xf32>
  // CHECK: %{{.*}}:7 = llm.multi_tensor_adamw params(%{{.*}}, %{{.*}} : tensor<64xf32>, tensor<256x64xf32>) grads(%{{.*}}, %{{.*}} : tensor<64xf32>, tensor<256x64xbf16>) m(%{{.*}}, %{{.*}} : tensor<64xf32>, tensor<256x64xf32>) v(%{{.*}}, %{{.*}} : tensor<64xf32>, tensor<256x64xf32>) lr %{{.*}} step %{{.*}} norm %{{.*}} {beta1 = 9.000000e-01 : f64, beta2 = 0.94999999999999996 : f64, cast_of = array<i64: 1>, cast_type = bf16, decay = array<i64: 0, 1>, epsilon = 1.000000e-08 : f64, max_grad_norm = 1.000000e+00 : f64, weight_decay = 1.000000e-01 : f64}
  %de16 = llm.cast %de : tensor<256x64xf32> to tensor<256x64xbf16>
  %mt:7 = llm.multi_tensor_adamw params(%p3, %de : tensor<64xf32>, tensor<256x64xf32>) grads(%rs, %de16 : tensor<64xf32>, tensor<256x64xbf16>) m(%m1, %de : tensor<64xf32>, tensor<256x64xf32>) v(%v1, %de : tensor<64xf32>, tensor<256x64xf32>) lr %one step %one norm %norm {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.1 : f64, max_grad_norm = 1.0 : f64, decay = array<i64: 0, 1>, cast_of = array<i64: 1>, cast_type = bf16}
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @matmul_int
// CHECK: llm.matmul_int %{{.*}}, %{{.*}}, %{{.*}} {bits = 8 : i64, channel_axis = 0 : i64, transpose_b, weight_shape = array<i64: 128, 64>} : tensor<2x1x64xf32>, tensor<8192xi8>, tensor<128xf32> -> tensor<2x1x128xf32>
// CHECK: llm.matmul_int %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {bits = 4 : i64, block = 32 : i64, weight_shape = array<i64: 64, 128>} : tensor<2x1x64xbf16>, tensor<4096xi8>, tensor<256xf32>, tensor<256xi32> -> tensor<2x1x128xbf16>
// CHECK: llm.matmul_int %{{.*}}, %{{.*}}, %{{.*}} {bits = 8 : i64, fp8, transpose_b, weight_shape = array<i64: 128, 64>} : tensor<2x1x64xf32>, tensor<8192xi8>, tensor<1xf32> -> tensor<2x1x128xf32>
func.func @matmul_int(%x: tensor<2x1x64xf32>, %c: tensor<8192xi8>, %s: tensor<128xf32>,
                      %xb: tensor<2x1x64xbf16>, %c4: tensor<4096xi8>, %s4: tensor<256xf32>,
                      %z4: tensor<256xi32>, %s1: tensor<1xf32>)
    -> (tensor<2x1x128xf32>, tensor<2x1x128xbf16>, tensor<2x1x128xf32>) {
  %y = llm.matmul_int %x, %c, %s {bits = 8 : i64, channel_axis = 0 : i64, weight_shape = array<i64: 128, 64>, transpose_b}
      : tensor<2x1x64xf32>, tensor<8192xi8>, tensor<128xf32> -> tensor<2x1x128xf32>
  %y4 = llm.matmul_int %xb, %c4, %s4, %z4 {bits = 4 : i64, block = 32 : i64, weight_shape = array<i64: 64, 128>}
      : tensor<2x1x64xbf16>, tensor<4096xi8>, tensor<256xf32>, tensor<256xi32> -> tensor<2x1x128xbf16>
  %y8 = llm.matmul_int %x, %c, %s1 {bits = 8 : i64, fp8, weight_shape = array<i64: 128, 64>, transpose_b}
      : tensor<2x1x64xf32>, tensor<8192xi8>, tensor<1xf32> -> tensor<2x1x128xf32>
  return %y, %y4, %y8 : tensor<2x1x128xf32>, tensor<2x1x128xbf16>, tensor<2x1x128xf32>
}

// CHECK-LABEL: func.func @sigmoid
// CHECK: llm.sigmoid %{{.*}} : tensor<6x1xf32>
// CHECK: llm.sigmoid_grad %{{.*}}, %{{.*}} : tensor<6x1xf32>
func.func @sigmoid(%x: tensor<6x1xf32>) -> tensor<6x1xf32> {
  %g = llm.sigmoid %x : tensor<6x1xf32>
  %dx = llm.sigmoid_grad %x, %g : tensor<6x1xf32>
  return %dx : tensor<6x1xf32>
}

// CHECK-LABEL: func.func @matmul_nf4_fp8_levels
// CHECK: llm.matmul_nf4 {{.*}} {absmax_format = "fp8_e4m3", block = 64 : i64, weight_shape = array<i64: 64, 128>}
func.func @matmul_nf4_fp8_levels(%x: tensor<2x64xf32>, %c: tensor<4096xi8>, %q: tensor<128xi8>,
                                 %s: tensor<1xf32>, %m: tensor<f32>) -> tensor<2x128xf32> {
  %y = llm.matmul_nf4 %x, %c, %q, %s, %m {block = 64 : i64, weight_shape = array<i64: 64, 128>, absmax_format = "fp8_e4m3"}
      : tensor<2x64xf32>, tensor<4096xi8>, tensor<128xi8>, tensor<1xf32>, tensor<f32> -> tensor<2x128xf32>
  return %y : tensor<2x128xf32>
}

// CHECK-LABEL: func.func @matmul_nf4
// CHECK: llm.matmul_nf4 %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {block = 64 : i64, transpose_b, weight_shape = array<i64: 128, 64>} : tensor<2x1x64xbf16>, tensor<4096xi8>, tensor<128xi8>, tensor<1xf32>, tensor<f32> -> tensor<2x1x128xbf16>
func.func @matmul_nf4(%x: tensor<2x1x64xbf16>, %c: tensor<4096xi8>, %q: tensor<128xi8>,
                      %s: tensor<1xf32>, %m: tensor<f32>) -> tensor<2x1x128xbf16> {
  %y = llm.matmul_nf4 %x, %c, %q, %s, %m {block = 64 : i64, weight_shape = array<i64: 128, 64>, transpose_b}
      : tensor<2x1x64xbf16>, tensor<4096xi8>, tensor<128xi8>, tensor<1xf32>, tensor<f32> -> tensor<2x1x128xbf16>
  return %y : tensor<2x1x128xbf16>
}

// CHECK-LABEL: func.func @grouped_matmul_quantized
// CHECK: llm.grouped_matmul_int %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {bits = 4 : i64, block = 32 : i64, transpose_b, weight_shape = array<i64: 3, 8, 32>} : tensor<5x32xf32>, tensor<4xi32>, tensor<384xi8>, tensor<24xf32> -> tensor<5x8xf32>
// CHECK: llm.grouped_matmul_int %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {bits = 8 : i64, channel_axis = 1 : i64, weight_shape = array<i64: 3, 32, 8>} : tensor<5x32xf32>, tensor<4xi32>, tensor<768xi8>, tensor<24xf32>, tensor<24xi32> -> tensor<5x8xf32>
// CHECK: llm.grouped_matmul_nf4 %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {block = 32 : i64, transpose_b, weight_shape = array<i64: 3, 8, 32>} : tensor<5x32xf32>, tensor<4xi32>, tensor<384xi8>, tensor<24xi8>, tensor<1xf32>, tensor<f32> -> tensor<5x8xf32>
// CHECK: llm.grouped_matmul_nf4 %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {block = 32 : i64, chunks = array<i64: 3, 1>, piece_offset = array<i64: 8, 0>, transpose_b, weight_shape = array<i64: 3, 8, 32>, whole_shape = array<i64: 48, 32>} : tensor<5x32xf32>, tensor<4xi32>, tensor<384xi8>, tensor<24xi8>, tensor<1xf32>, tensor<f32> -> tensor<5x8xf32>
func.func @grouped_matmul_quantized(%x: tensor<5x32xf32>, %o: tensor<4xi32>, %c4: tensor<384xi8>,
                                    %s4: tensor<24xf32>, %c8: tensor<768xi8>, %z8: tensor<24xi32>,
                                    %q: tensor<24xi8>, %as: tensor<1xf32>, %am: tensor<f32>)
    -> (tensor<5x8xf32>, tensor<5x8xf32>, tensor<5x8xf32>) {
  %a = llm.grouped_matmul_int %x, %o, %c4, %s4 {bits = 4 : i64, block = 32 : i64, weight_shape = array<i64: 3, 8, 32>, transpose_b}
      : tensor<5x32xf32>, tensor<4xi32>, tensor<384xi8>, tensor<24xf32> -> tensor<5x8xf32>
  %b = llm.grouped_matmul_int %x, %o, %c8, %s4, %z8 {bits = 8 : i64, channel_axis = 1 : i64, weight_shape = array<i64: 3, 32, 8>}
      : tensor<5x32xf32>, tensor<4xi32>, tensor<768xi8>, tensor<24xf32>, tensor<24xi32> -> tensor<5x8xf32>
  %c = llm.grouped_matmul_nf4 %x, %o, %c4, %q, %as, %am {block = 32 : i64, weight_shape = array<i64: 3, 8, 32>, transpose_b}
      : tensor<5x32xf32>, tensor<4xi32>, tensor<384xi8>, tensor<24xi8>, tensor<1xf32>, tensor<f32> -> tensor<5x8xf32>
  // One rank's piece of [3, 16, 32] (each expert's rows 8..15).
  %d = llm.grouped_matmul_nf4 %x, %o, %c4, %q, %as, %am {block = 32 : i64, weight_shape = array<i64: 3, 8, 32>, transpose_b,
      whole_shape = array<i64: 48, 32>, chunks = array<i64: 3, 1>, piece_offset = array<i64: 8, 0>}
      : tensor<5x32xf32>, tensor<4xi32>, tensor<384xi8>, tensor<24xi8>, tensor<1xf32>, tensor<f32> -> tensor<5x8xf32>
  return %a, %b, %d : tensor<5x8xf32>, tensor<5x8xf32>, tensor<5x8xf32>
}
