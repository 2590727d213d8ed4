// RUN: llmc-opt %s -split-input-file --llmc-fuse="fusions=qkv-split,rope" | FileCheck %s
// RUN: llmc-opt %s -split-input-file --llmc-fuse | FileCheck %s
// RUN: llmc-opt %s -split-input-file --llmc-fuse="fusions=add-norm" | FileCheck %s --check-prefix=OFF

// GPT-2's attention as autodiff leaves it: q, k, v cut from one qkv, and
// their gradients padded back and summed. The forward reads qkv in place;
// the backward writes the sum, in either order of the adds. Each fused op
// stands where the op it replaces stood, with its attributes.
// CHECK-LABEL: func.func @gpt2
// CHECK-NOT:   llm.slice
// CHECK:       %[[O:.*]], %[[LSE:.*]] = llm.attention_packed %arg0 {causal, heads = 2 : i64, kv_heads = 2 : i64, llmc.block_name = "h.0", scale = 5.000000e-01 : f64} : tensor<2x4x24xf32>
// CHECK-NEXT:  %[[D:.*]] = llm.attention_packed_grad %arg0, %[[O]], %[[LSE]], %arg1 {causal, heads = 2 : i64, kv_heads = 2 : i64, llmc.backward, llmc.block_name = "h.0", scale = 5.000000e-01 : f64} : tensor<2x4x24xf32>, tensor<2x4x2x4xf32>, tensor<2x2x4xf32>
// CHECK-NEXT:  return %[[O]], %[[D]]
// OFF-LABEL:   func.func @gpt2
// OFF-COUNT-3: llm.slice
// OFF:         llm.attention %
// OFF:         llm.attention_grad %
// OFF-COUNT-3: llm.pad
func.func @gpt2(%qkv: tensor<2x4x24xf32>, %do: tensor<2x4x2x4xf32>)
    -> (tensor<2x4x2x4xf32>, tensor<2x4x24xf32>) {
  %0 = llm.slice %qkv {llmc.block_name = "h.0", offsets = array<i64: 0, 0, 16>} : tensor<2x4x24xf32> to tensor<2x4x8xf32>
  %v = llm.reshape %0 {llmc.block_name = "h.0"} : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
  %1 = llm.slice %qkv {llmc.block_name = "h.0", offsets = array<i64: 0, 0, 8>} : tensor<2x4x24xf32> to tensor<2x4x8xf32>
  %k = llm.reshape %1 {llmc.block_name = "h.0"} : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
  %2 = llm.slice %qkv {llmc.block_name = "h.0", offsets = array<i64: 0, 0, 0>} : tensor<2x4x24xf32> to tensor<2x4x8xf32>
  %q = llm.reshape %2 {llmc.block_name = "h.0"} : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
  %o, %lse = llm.attention %q, %k, %v {causal, llmc.block_name = "h.0", scale = 0.5 : f64} : tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>
  %dq, %dk, %dv = llm.attention_grad %q, %k, %v, %o, %lse, %do {causal, llmc.backward, llmc.block_name = "h.0", scale = 0.5 : f64} : tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>, tensor<2x2x4xf32>
  %3 = llm.reshape %dq {llmc.backward} : tensor<2x4x2x4xf32> to tensor<2x4x8xf32>
  %4 = llm.pad %3 {llmc.backward, offsets = array<i64: 0, 0, 0>} : tensor<2x4x8xf32> to tensor<2x4x24xf32>
  %5 = llm.reshape %dk {llmc.backward} : tensor<2x4x2x4xf32> to tensor<2x4x8xf32>
  %6 = llm.pad %5 {llmc.backward, offsets = array<i64: 0, 0, 8>} : tensor<2x4x8xf32> to tensor<2x4x24xf32>
  %7 = llm.reshape %dv {llmc.backward} : tensor<2x4x2x4xf32> to tensor<2x4x8xf32>
  %8 = llm.pad %7 {llmc.backward, offsets = array<i64: 0, 0, 16>} : tensor<2x4x8xf32> to tensor<2x4x24xf32>
  %9 = llm.add %6, %8 {llmc.backward} : tensor<2x4x24xf32>, tensor<2x4x24xf32>
  %10 = llm.add %4, %9 {llmc.backward} : tensor<2x4x24xf32>, tensor<2x4x24xf32>
  return %o, %10 : tensor<2x4x2x4xf32>, tensor<2x4x24xf32>
}

// -----

// Grouped-query (4 query heads, 2 kv heads of 2) over packed segments, the
// shapes a rank sees under tensor parallelism (its share of the heads).
// CHECK-LABEL: func.func @gqa_segments
// CHECK-NEXT:  %[[O:.*]], %[[LSE:.*]] = llm.attention_packed %arg0 segments %arg1 : tensor<2x4xi32> {heads = 4 : i64, kv_heads = 2 : i64, scale = 5.000000e-01 : f64} : tensor<2x4x16xf32>
// CHECK-NEXT:  %[[D:.*]] = llm.attention_packed_grad %arg0, %[[O]], %[[LSE]], %arg2 segments %arg1 : tensor<2x4xi32> {heads = 4 : i64, kv_heads = 2 : i64, scale = 5.000000e-01 : f64}
// CHECK-NEXT:  return %[[D]]
func.func @gqa_segments(%qkv: tensor<2x4x16xf32>, %seg: tensor<2x4xi32>, %do: tensor<2x4x4x2xf32>)
    -> tensor<2x4x16xf32> {
  %0 = llm.slice %qkv {offsets = array<i64: 0, 0, 0>} : tensor<2x4x16xf32> to tensor<2x4x8xf32>
  %q = llm.reshape %0 : tensor<2x4x8xf32> to tensor<2x4x4x2xf32>
  %1 = llm.slice %qkv {offsets = array<i64: 0, 0, 8>} : tensor<2x4x16xf32> to tensor<2x4x4xf32>
  %k = llm.reshape %1 : tensor<2x4x4xf32> to tensor<2x4x2x2xf32>
  %2 = llm.slice %qkv {offsets = array<i64: 0, 0, 12>} : tensor<2x4x16xf32> to tensor<2x4x4xf32>
  %v = llm.reshape %2 : tensor<2x4x4xf32> to tensor<2x4x2x2xf32>
  %o, %lse = llm.attention %q, %k, %v segments %seg : tensor<2x4xi32> {scale = 0.5 : f64} : tensor<2x4x4x2xf32>, tensor<2x4x2x2xf32>
  %dq, %dk, %dv = llm.attention_grad %q, %k, %v, %o, %lse, %do segments %seg : tensor<2x4xi32> {scale = 0.5 : f64} : tensor<2x4x4x2xf32>, tensor<2x4x2x2xf32>, tensor<2x4x4xf32>
  %3 = llm.reshape %dq : tensor<2x4x4x2xf32> to tensor<2x4x8xf32>
  %4 = llm.pad %3 {offsets = array<i64: 0, 0, 0>} : tensor<2x4x8xf32> to tensor<2x4x16xf32>
  %5 = llm.reshape %dk : tensor<2x4x2x2xf32> to tensor<2x4x4xf32>
  %6 = llm.pad %5 {offsets = array<i64: 0, 0, 8>} : tensor<2x4x4xf32> to tensor<2x4x16xf32>
  %7 = llm.add %4, %6 : tensor<2x4x16xf32>, tensor<2x4x16xf32>
  %8 = llm.reshape %dv : tensor<2x4x2x2xf32> to tensor<2x4x4xf32>
  %9 = llm.pad %8 {offsets = array<i64: 0, 0, 12>} : tensor<2x4x4xf32> to tensor<2x4x16xf32>
  %10 = llm.add %7, %9 : tensor<2x4x16xf32>, tensor<2x4x16xf32>
  return %10 : tensor<2x4x16xf32>
}

// -----

// Selective recomputation: the forward reads pieces of qkv, the backward
// pieces of a replayed qkv; each set fuses on its own.
// CHECK-LABEL: func.func @replayed_pieces
// CHECK-NEXT:  %[[O:.*]], %[[LSE:.*]] = llm.attention_packed %arg0 {causal, heads = 2 : i64, kv_heads = 2 : i64, scale = 5.000000e-01 : f64}
// CHECK-NEXT:  %[[D:.*]] = llm.attention_packed_grad %arg1, %[[O]], %[[LSE]], %arg2 {causal, heads = 2 : i64, kv_heads = 2 : i64, llmc.backward, llmc.recomputed, scale = 5.000000e-01 : f64}
// CHECK-NEXT:  return %[[O]], %[[D]]
func.func @replayed_pieces(%qkv: tensor<2x4x24xf32>, %replayed: tensor<2x4x24xf32>, %do: tensor<2x4x2x4xf32>)
    -> (tensor<2x4x2x4xf32>, tensor<2x4x24xf32>) {
  %0 = llm.slice %qkv {offsets = array<i64: 0, 0, 0>} : tensor<2x4x24xf32> to tensor<2x4x8xf32>
  %q = llm.reshape %0 : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
  %1 = llm.slice %qkv {offsets = array<i64: 0, 0, 8>} : tensor<2x4x24xf32> to tensor<2x4x8xf32>
  %k = llm.reshape %1 : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
  %2 = llm.slice %qkv {offsets = array<i64: 0, 0, 16>} : tensor<2x4x24xf32> to tensor<2x4x8xf32>
  %v = llm.reshape %2 : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
  %o, %lse = llm.attention %q, %k, %v {causal, scale = 0.5 : f64} : tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>
  %3 = llm.slice %replayed {llmc.backward, llmc.recomputed, offsets = array<i64: 0, 0, 0>} : tensor<2x4x24xf32> to tensor<2x4x8xf32>
  %rq = llm.reshape %3 {llmc.backward, llmc.recomputed} : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
  %4 = llm.slice %replayed {llmc.backward, llmc.recomputed, offsets = array<i64: 0, 0, 8>} : tensor<2x4x24xf32> to tensor<2x4x8xf32>
  %rk = llm.reshape %4 {llmc.backward, llmc.recomputed} : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
  %5 = llm.slice %replayed {llmc.backward, llmc.recomputed, offsets = array<i64: 0, 0, 16>} : tensor<2x4x24xf32> to tensor<2x4x8xf32>
  %rv = llm.reshape %5 {llmc.backward, llmc.recomputed} : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
  %dq, %dk, %dv = llm.attention_grad %rq, %rk, %rv, %o, %lse, %do {causal, llmc.backward, llmc.recomputed, scale = 0.5 : f64} : tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>, tensor<2x2x4xf32>
  %6 = llm.reshape %dq : tensor<2x4x2x4xf32> to tensor<2x4x8xf32>
  %7 = llm.pad %6 {offsets = array<i64: 0, 0, 0>} : tensor<2x4x8xf32> to tensor<2x4x24xf32>
  %8 = llm.reshape %dk : tensor<2x4x2x4xf32> to tensor<2x4x8xf32>
  %9 = llm.pad %8 {offsets = array<i64: 0, 0, 8>} : tensor<2x4x8xf32> to tensor<2x4x24xf32>
  %10 = llm.reshape %dv : tensor<2x4x2x4xf32> to tensor<2x4x8xf32>
  %11 = llm.pad %10 {offsets = array<i64: 0, 0, 16>} : tensor<2x4x8xf32> to tensor<2x4x24xf32>
  %12 = llm.add %7, %9 : tensor<2x4x24xf32>, tensor<2x4x24xf32>
  %13 = llm.add %12, %11 : tensor<2x4x24xf32>, tensor<2x4x24xf32>
  return %o, %13 : tensor<2x4x2x4xf32>, tensor<2x4x24xf32>
}

// -----

// Not fused: a piece read by another op (here the value cache a KV cache
// would write), the pieces in another order than q, k, v, and a gradient
// sum with a fourth addend.
// CHECK-LABEL: func.func @piece_read_elsewhere
// CHECK:       llm.attention %
// CHECK-NOT:   llm.attention_packed
func.func @piece_read_elsewhere(%qkv: tensor<2x4x24xf32>) -> (tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>) {
  %0 = llm.slice %qkv {offsets = array<i64: 0, 0, 0>} : tensor<2x4x24xf32> to tensor<2x4x8xf32>
  %q = llm.reshape %0 : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
  %1 = llm.slice %qkv {offsets = array<i64: 0, 0, 8>} : tensor<2x4x24xf32> to tensor<2x4x8xf32>
  %k = llm.reshape %1 : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
  %2 = llm.slice %qkv {offsets = array<i64: 0, 0, 16>} : tensor<2x4x24xf32> to tensor<2x4x8xf32>
  %v = llm.reshape %2 : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
  %o, %lse = llm.attention %q, %k, %v {causal, scale = 0.5 : f64} : tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>
  return %o, %v : tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>
}

// CHECK-LABEL: func.func @swapped_pieces
// CHECK:       llm.attention %
// CHECK-NOT:   llm.attention_packed
func.func @swapped_pieces(%qkv: tensor<2x4x24xf32>) -> tensor<2x4x2x4xf32> {
  %0 = llm.slice %qkv {offsets = array<i64: 0, 0, 0>} : tensor<2x4x24xf32> to tensor<2x4x8xf32>
  %q = llm.reshape %0 : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
  %1 = llm.slice %qkv {offsets = array<i64: 0, 0, 8>} : tensor<2x4x24xf32> to tensor<2x4x8xf32>
  %k = llm.reshape %1 : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
  %2 = llm.slice %qkv {offsets = array<i64: 0, 0, 16>} : tensor<2x4x24xf32> to tensor<2x4x8xf32>
  %v = llm.reshape %2 : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
  %o, %lse = llm.attention %q, %v, %k {causal, scale = 0.5 : f64} : tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>
  return %o : tensor<2x4x2x4xf32>
}

// CHECK-LABEL: func.func @fourth_addend
// CHECK:       llm.attention %
// CHECK:       llm.attention_grad %
// CHECK-NOT:   llm.attention_packed
func.func @fourth_addend(%qkv: tensor<2x4x24xf32>, %do: tensor<2x4x2x4xf32>, %e: tensor<2x4x24xf32>)
    -> tensor<2x4x24xf32> {
  %0 = llm.slice %qkv {offsets = array<i64: 0, 0, 0>} : tensor<2x4x24xf32> to tensor<2x4x8xf32>
  %q = llm.reshape %0 : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
  %1 = llm.slice %qkv {offsets = array<i64: 0, 0, 8>} : tensor<2x4x24xf32> to tensor<2x4x8xf32>
  %k = llm.reshape %1 : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
  %2 = llm.slice %qkv {offsets = array<i64: 0, 0, 16>} : tensor<2x4x24xf32> to tensor<2x4x8xf32>
  %v = llm.reshape %2 : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
  %o, %lse = llm.attention %q, %k, %v {causal, scale = 0.5 : f64} : tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>
  %dq, %dk, %dv = llm.attention_grad %q, %k, %v, %o, %lse, %do {causal, scale = 0.5 : f64} : tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>, tensor<2x2x4xf32>
  %3 = llm.reshape %dq : tensor<2x4x2x4xf32> to tensor<2x4x8xf32>
  %4 = llm.pad %3 {offsets = array<i64: 0, 0, 0>} : tensor<2x4x8xf32> to tensor<2x4x24xf32>
  %5 = llm.reshape %dk : tensor<2x4x2x4xf32> to tensor<2x4x8xf32>
  %6 = llm.pad %5 {offsets = array<i64: 0, 0, 8>} : tensor<2x4x8xf32> to tensor<2x4x24xf32>
  %7 = llm.add %4, %6 : tensor<2x4x24xf32>, tensor<2x4x24xf32>
  %8 = llm.add %7, %e : tensor<2x4x24xf32>, tensor<2x4x24xf32>
  %9 = llm.reshape %dv : tensor<2x4x2x4xf32> to tensor<2x4x8xf32>
  %10 = llm.pad %9 {offsets = array<i64: 0, 0, 16>} : tensor<2x4x8xf32> to tensor<2x4x24xf32>
  %11 = llm.add %8, %10 : tensor<2x4x24xf32>, tensor<2x4x24xf32>
  return %11 : tensor<2x4x24xf32>
}

// -----

// Llama's attention (grouped-query, at given positions, Llama 3.1's
// scaling): the ropes of q and k move into the attention kernels, their
// inverses into the backward's.
// CHECK-LABEL: func.func @llama
// CHECK-NEXT:  %[[O:.*]], %[[LSE:.*]] = llm.attention_rope %arg0, %arg1, %arg2 positions %arg3 : tensor<2x4xi32> segments %arg3 : tensor<2x4xi32> {causal, high_freq_factor = 4.000000e+00 : f64, llmc.block_name = "layers.0", low_freq_factor = 1.000000e+00 : f64, original_max_positions = 16 : i64, scale = 5.000000e-01 : f64, scaling_factor = 8.000000e+00 : f64, theta = 5.000000e+05 : f64} : tensor<2x4x4x4xf32>, tensor<2x4x2x4xf32>
// CHECK-NEXT:  %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = llm.attention_rope_grad %arg0, %arg1, %arg2, %[[O]], %[[LSE]], %arg4 positions %arg3 : tensor<2x4xi32> segments %arg3 : tensor<2x4xi32> {causal, {{.*}}llmc.backward{{.*}}theta = 5.000000e+05 : f64}
// CHECK-NEXT:  return %[[O]], %[[DQ]], %[[DK]], %[[DV]]
// OFF-LABEL:   func.func @llama
// OFF-COUNT-2: llm.rope %
// OFF:         llm.attention %
func.func @llama(%q: tensor<2x4x4x4xf32>, %k: tensor<2x4x2x4xf32>, %v: tensor<2x4x2x4xf32>,
                 %pos: tensor<2x4xi32>, %do: tensor<2x4x4x4xf32>)
    -> (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>, tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>) {
  %qr = llm.rope %q positions %pos : tensor<2x4xi32> {theta = 500000.0 : f64, scaling_factor = 8.0 : f64, low_freq_factor = 1.0 : f64, high_freq_factor = 4.0 : f64, original_max_positions = 16 : i64} : tensor<2x4x4x4xf32>
  %kr = llm.rope %k positions %pos : tensor<2x4xi32> {theta = 500000.0 : f64, scaling_factor = 8.0 : f64, low_freq_factor = 1.0 : f64, high_freq_factor = 4.0 : f64, original_max_positions = 16 : i64} : tensor<2x4x2x4xf32>
  %o, %lse = llm.attention %qr, %kr, %v segments %pos : tensor<2x4xi32> {causal, llmc.block_name = "layers.0", scale = 0.5 : f64} : tensor<2x4x4x4xf32>, tensor<2x4x2x4xf32>
  %dqr, %dkr, %dv = llm.attention_grad %qr, %kr, %v, %o, %lse, %do segments %pos : tensor<2x4xi32> {causal, llmc.backward, scale = 0.5 : f64} : tensor<2x4x4x4xf32>, tensor<2x4x2x4xf32>, tensor<2x4x4xf32>
  %dq = llm.rope %dqr positions %pos : tensor<2x4xi32> {inverse, theta = 500000.0 : f64, scaling_factor = 8.0 : f64, low_freq_factor = 1.0 : f64, high_freq_factor = 4.0 : f64, original_max_positions = 16 : i64} : tensor<2x4x4x4xf32>
  %dk = llm.rope %dkr positions %pos : tensor<2x4xi32> {inverse, theta = 500000.0 : f64, scaling_factor = 8.0 : f64, low_freq_factor = 1.0 : f64, high_freq_factor = 4.0 : f64, original_max_positions = 16 : i64} : tensor<2x4x2x4xf32>
  return %o, %dq, %dk, %dv : tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>, tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>
}

// -----

// Not fused: a rotated q read by another op, q and k rotated by different
// rates, only q rotated.
// CHECK-LABEL: func.func @rotated_read_elsewhere
// CHECK-COUNT-2: llm.rope %
// CHECK:       llm.attention %
// CHECK-NOT:   llm.attention_rope
func.func @rotated_read_elsewhere(%q: tensor<2x4x2x4xf32>, %k: tensor<2x4x2x4xf32>)
    -> (tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>) {
  %qr = llm.rope %q {theta = 10000.0 : f64} : tensor<2x4x2x4xf32>
  %kr = llm.rope %k {theta = 10000.0 : f64} : tensor<2x4x2x4xf32>
  %o, %lse = llm.attention %qr, %kr, %k {causal, scale = 0.5 : f64} : tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>
  return %o, %qr : tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>
}

// CHECK-LABEL: func.func @other_rates
// CHECK-NOT:   llm.attention_rope
func.func @other_rates(%q: tensor<2x4x2x4xf32>, %k: tensor<2x4x2x4xf32>) -> tensor<2x4x2x4xf32> {
  %qr = llm.rope %q {theta = 10000.0 : f64} : tensor<2x4x2x4xf32>
  %kr = llm.rope %k {theta = 500000.0 : f64} : tensor<2x4x2x4xf32>
  %o, %lse = llm.attention %qr, %kr, %k {causal, scale = 0.5 : f64} : tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>
  return %o : tensor<2x4x2x4xf32>
}

// CHECK-LABEL: func.func @only_q
// CHECK-NOT:   llm.attention_rope
func.func @only_q(%q: tensor<2x4x2x4xf32>, %k: tensor<2x4x2x4xf32>) -> tensor<2x4x2x4xf32> {
  %qr = llm.rope %q {theta = 10000.0 : f64} : tensor<2x4x2x4xf32>
  %o, %lse = llm.attention %qr, %k, %k {causal, scale = 0.5 : f64} : tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>
  return %o : tensor<2x4x2x4xf32>
}
