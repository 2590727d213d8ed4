//===- KernelCost.cpp - one kernel's work and its price -------------------===//

#include "compiler/plan/KernelCost.h"
#include "common/ElementwiseProgram.h"

#include "dialects/Exec/ExecDialect.h"

#include "mlir/IR/BuiltinTypes.h"

#include <algorithm>
#include <set>

using namespace mlir;

namespace llmc::plan {

double bytesOf(Type type) {
  auto memref = dyn_cast<MemRefType>(type);
  if (!memref)
    return 0;
  unsigned bits = memref.getElementType().getIntOrFloatBitWidth();
  return static_cast<double>(memref.getNumElements()) * std::max(8u, bits) / 8;
}

namespace {

ArrayRef<int64_t> shapeOf(Value v) { return cast<MemRefType>(v.getType()).getShape(); }

int64_t attrInt(Operation *op, StringRef name) {
  auto attr = op->getAttrOfType<IntegerAttr>(name);
  return attr ? attr.getInt() : 0;
}

/// The product of `shape`'s dims before its last `keep`.
int64_t leading(ArrayRef<int64_t> shape, size_t keep) {
  int64_t n = 1;
  for (size_t i = 0; i + keep < shape.size(); ++i)
    n *= shape[i];
  return n;
}

bool isAttention(StringRef name) {
  return name == "attention" || name == "attention_grad" || name == "attention_rope" ||
         name == "attention_rope_grad" || name == "attention_packed" ||
         name == "attention_packed_grad";
}

bool isHead(StringRef name) { return name.starts_with("linear_cross_entropy"); }

/// The grouped products: each group of rows times its expert's weight
/// (full precision or kept quantized, expanded inside the kernel).
bool isGroupedProduct(StringRef name) {
  return name == "grouped_matmul" || name == "grouped_matmul_int" || name == "grouped_matmul_nf4" ||
         name == "qat_grouped_matmul_fp8";
}

bool isGroupedWeightGrad(StringRef name) {
  return name == "grouped_matmul_weight_grad" || name == "qat_grouped_matmul_weight_grad_fp8";
}

bool isGrouped(StringRef name) { return isGroupedProduct(name) || isGroupedWeightGrad(name); }

/// The rows of a grouped kernel's row buffers (x's dimension 0) it
/// computes: all of them, or under expert parallelism the 1/ep share of
/// the worst-case receive buffer a rank gets on average (KernelCost.h).
int64_t computedRows(exec::KernelOp kernel, int64_t expertRanks) {
  const int64_t rows = shapeOf(kernel.getInputs()[0])[0];
  return expertRanks > 1 ? (rows + expertRanks - 1) / expertRanks : rows;
}

/// q's [B, T, H, D] of an attention kernel (the packed forward's output,
/// its backward's second input, have q's shape); empty when not 4-D.
ArrayRef<int64_t> attentionQuery(exec::KernelOp kernel) {
  StringRef name = kernel.getCallee();
  Value q;
  if (name == "attention_packed")
    q = kernel.getOutputs().empty() ? Value() : kernel.getOutputs()[0];
  else if (name == "attention_packed_grad")
    q = kernel.getInputs().size() > 1 ? kernel.getInputs()[1] : Value();
  else
    q = kernel.getInputs().empty() ? Value() : kernel.getInputs()[0];
  if (!q || shapeOf(q).size() != 4)
    return {};
  return shapeOf(q);
}

/// The key length of an attention kernel with query `q` (packed rows
/// attend within the row: keys are as long as queries).
int64_t attentionKeys(exec::KernelOp kernel, ArrayRef<int64_t> q) {
  auto inputs = kernel.getInputs();
  if (!kernel.getCallee().starts_with("attention_packed") && inputs.size() >= 2 &&
      shapeOf(inputs[1]).size() == 4)
    return shapeOf(inputs[1])[1];
  return q[1];
}

/// The fused head's GEMMs, chunk by chunk: the logits [n, V] over D, and
/// for its backward forms the data gradient [n, D] over V and, unless the
/// head is frozen, the weight gradient [V, D] over the chunk's rows.
std::vector<GemmShape> headGemms(exec::KernelOp kernel) {
  auto inputs = kernel.getInputs();
  if (inputs.size() < 3)
    return {};
  Operation *op = kernel.getOperation();
  ArrayRef<int64_t> h = shapeOf(inputs[0]), w = shapeOf(inputs[1]);
  if (h.empty() || w.size() != 2)
    return {};
  int64_t rows = leading(h, 1), width = h.back();
  int64_t vocab = attrInt(op, "transpose_b") ? w[0] : w[1];
  int64_t chunk = attrInt(op, "chunk_rows");
  if (chunk <= 0 || chunk > rows)
    chunk = rows;
  StringRef name = kernel.getCallee();
  bool backward = name.ends_with("_train") || name.ends_with("_grad");
  bool weightGrad = backward && !attrInt(op, "frozen_weight");
  std::vector<GemmShape> gemms;
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    int64_t n = std::min(chunk, rows - r0);
    gemms.push_back({1, n, vocab, width});
    if (backward)
      gemms.push_back({1, n, width, vocab});
    if (weightGrad)
      gemms.push_back({1, vocab, width, n});
  }
  return gemms;
}

/// Bytes the fused head's row passes move through its logits chunks (held
/// in h's type): the loss reads each row once; the backward forms also
/// rewrite the row as its gradient in place (a second read and a write).
double headRowPassBytes(exec::KernelOp kernel) {
  StringRef name = kernel.getCallee();
  bool backward = name.ends_with("_train") || name.ends_with("_grad");
  auto h = cast<MemRefType>(kernel.getInputs()[0].getType());
  ArrayRef<int64_t> w = shapeOf(kernel.getInputs()[1]);
  int64_t vocab = attrInt(kernel, "transpose_b") ? w[0] : w[1];
  double elementBytes = std::max(8u, h.getElementType().getIntOrFloatBitWidth()) / 8.0;
  double logits = static_cast<double>(leading(h.getShape(), 1)) * vocab;
  return logits * elementBytes * (backward ? 3 : 1);
}

/// Seconds of attention without a flash kernel, for q [B, T, H, D]
/// against keys [B, S, ·, D] of `elementBytes` each: every T×S matrix (the
/// scores, the probabilities, their gradients) is written to and read from
/// memory, each product priced as a GEMM at least as long as its pass over
/// that matrix. The causal mask is applied in the softmax: nothing is
/// skipped.
double unfusedAttentionSeconds(const Cluster &c, ArrayRef<int64_t> q, int64_t keys,
                               double elementBytes, bool backward) {
  int64_t heads = q[0] * q[2], T = q[1], S = keys, D = q[3];
  double pass = static_cast<double>(heads) * T * S * elementBytes / c.memoryBandwidth;
  auto product = [&](int64_t m, int64_t n, int64_t k) {
    return std::max(gemmSeconds(c.efficiency, c.peakFlops, {heads, m, n, k}), pass);
  };
  // Dropout on the probabilities reads them and writes them and a one-byte
  // mask; its backward reads the gradient and the mask and writes it.
  double dropout = c.efficiency.attentionDropout ? (2 + 1 / elementBytes) * pass : 0;
  if (!backward) // S = QKᵀ; P = softmax(S): a read and a write; O = PV
    return product(T, S, D) + 2 * pass + dropout + product(T, D, S);
  // dV = PᵀdO, dP = dO·Vᵀ, dS = softmax'(P, dP): two reads and a write,
  // dQ = dS·K, dK = dSᵀQ.
  return product(S, D, T) + product(T, S, D) + dropout + 3 * pass + product(T, D, S) +
         product(S, D, T);
}

} // namespace

double kernelFlops(Operation *op, int64_t expertRanks) {
  auto kernel = cast<exec::KernelOp>(op);
  StringRef name = kernel.getCallee();
  auto inputs = kernel.getInputs();
  auto outputs = kernel.getOutputs();
  if (outputs.empty())
    return 0;
  double outElements = cast<MemRefType>(outputs[0].getType()).getNumElements();
  // qat_matmul_fp8(a, a_scale, b, b_scale) has matmul's shapes.
  if ((name == "matmul" || name == "qat_matmul_fp8") && inputs.size() >= 2) {
    ArrayRef<int64_t> a = shapeOf(inputs[0]);
    int64_t k = attrInt(op, "transpose_a") ? a[a.size() - 2] : a.back();
    return 2.0 * outElements * k;
  }
  // x [..., K] times a weight kept quantized (expanded inside the kernel).
  if ((name == "matmul_nf4" || name == "matmul_int") && !inputs.empty())
    return 2.0 * outElements * shapeOf(inputs[0]).back();
  // A matmul with its bias (and GELU) epilogue or GELU's backward: the
  // product's FLOPs; the weight gradient's product sums over every row.
  if ((name == "linear" || name == "matmul_gelu_grad" || name == "matmul_swiglu_grad") &&
      inputs.size() >= 2)
    return 2.0 * outElements * static_cast<double>(shapeOf(inputs[0]).back());
  if (name == "linear_weight_grad" && inputs.size() >= 2)
    return 2.0 * outElements * static_cast<double>(leading(shapeOf(inputs[0]), 1));
  // A mixture of experts: each routed copy's row times its expert's weight;
  // the experts' weight gradients together sum over every copy once (the
  // output stacks one dw [a, b] per expert: outElements / G each).
  if (isGroupedProduct(name) && inputs.size() >= 2)
    return 2.0 * static_cast<double>(computedRows(kernel, expertRanks)) *
           shapeOf(outputs[0]).back() * static_cast<double>(shapeOf(inputs[0]).back());
  if (isGroupedWeightGrad(name) && !inputs.empty()) {
    const double groups = static_cast<double>(shapeOf(outputs[0])[0]);
    return 2.0 * outElements / groups * static_cast<double>(computedRows(kernel, expertRanks));
  }
  // The fused head + loss: the logits' product, and in its backward forms
  // also dh's product and, unless the head is frozen, dw's.
  if (isHead(name) && inputs.size() >= 3) {
    double flops = 0;
    for (const GemmShape &g : headGemms(kernel))
      flops += 2.0 * g.batch * g.m * g.n * g.k;
    return flops;
  }
  if (isAttention(name)) {
    ArrayRef<int64_t> q = attentionQuery(kernel);
    if (!q.empty()) {
      double forward = 4.0 * q[0] * q[2] * q[1] * attentionKeys(kernel, q) * q[3];
      const double window = static_cast<double>(attrInt(op, "window")), rows = q[1];
      if (window > 0 && window < rows) // query i sees min(i + 1, W) keys
        forward *= (window * rows - window * (window - 1) / 2) / (rows * rows);
      else if (attrInt(op, "causal"))
        forward /= 2;
      return name.ends_with("_grad") ? 2.5 * forward : forward;
    }
  }
  // Over a paged cache: every key a row can address (M·P), at most; a
  // cache of codes (int8, fp8) adds one multiply per key and value element
  // read, and its bytes are its byte-wide buffers'.
  if (name == "paged_attention" && inputs.size() >= 4) {
    ArrayRef<int64_t> q = shapeOf(inputs[0]), pool = shapeOf(inputs[1]),
                      table = shapeOf(inputs[3]);
    if (q.size() == 4 && pool.size() == 4 && table.size() == 2) {
      double keys = static_cast<double>(table[1]) * pool[1];
      double flops = 4.0 * q[0] * q[1] * q[2] * q[3] * keys;
      if (inputs.size() == 7)
        flops += 2.0 * q[0] * q[1] * pool[2] * q[3] * keys;
      return flops;
    }
  }
  // A generated elementwise loop: one FLOP per element and arithmetic
  // instruction, as each unfused op it replaces counted (loads, constants
  // and casts only move).
  if (name == "fused_elementwise")
    if (auto program = op->getAttrOfType<DenseI64ArrayAttr>("program")) {
      int64_t arithmetic = 0;
      for (int64_t i = 0; i + ew::kFields <= program.size(); i += ew::kFields) {
        auto opcode = static_cast<ew::Opcode>(program[i]);
        arithmetic += opcode != ew::Opcode::Load && opcode != ew::Opcode::Const &&
                      opcode != ew::Opcode::Cast;
      }
      return outElements * static_cast<double>(arithmetic);
    }
  static const std::set<std::string> movesOnly = {"slice", "pad", "concat", "transpose", "fill",
                                                  "embedding", "copy", "cast"};
  // Expert parallelism's row copies around the all-to-all: memory-bound,
  // priced by the bytes kernelBytes counts.
  static const std::set<std::string> moeExchange = {"moe_pack", "moe_unpack", "moe_regroup",
                                                    "moe_ungroup"};
  if (moeExchange.count(name.str()))
    return 0;
  return movesOnly.count(name.str()) ? 0 : outElements;
}

double kernelBytes(Operation *op, int64_t expertRanks) {
  auto kernel = cast<exec::KernelOp>(op);
  // A grouped kernel's row buffers (x's dimension 0 rows) count the rows
  // it computes; its weights and offsets count whole.
  const bool grouped = isGrouped(kernel.getCallee()) && !kernel.getInputs().empty();
  const int64_t rows = grouped ? shapeOf(kernel.getInputs()[0])[0] : 0;
  const double share =
      grouped ? static_cast<double>(computedRows(kernel, expertRanks)) / std::max<int64_t>(1, rows)
              : 1;
  double bytes = 0;
  for (Value v : op->getOperands()) {
    auto type = dyn_cast<MemRefType>(v.getType());
    bool rowBuffer = grouped && type && type.getRank() >= 1 && type.getDimSize(0) == rows;
    bytes += bytesOf(v.getType()) * (rowBuffer ? share : 1);
  }
  return bytes;
}

double kernelModelFlops(Operation *op, int64_t expertRanks) {
  StringRef name = cast<exec::KernelOp>(op).getCallee();
  if (isAttention(name))
    return name.ends_with("_grad") ? kernelFlops(op) / 2.5 * 2 : kernelFlops(op);
  if (name == "paged_attention" || !kernelGemms(op, expertRanks).empty())
    return kernelFlops(op, expertRanks);
  return 0;
}

std::vector<GemmShape> kernelGemms(Operation *op, int64_t expertRanks) {
  auto kernel = cast<exec::KernelOp>(op);
  StringRef name = kernel.getCallee();
  auto inputs = kernel.getInputs();
  auto outputs = kernel.getOutputs();
  if (isHead(name))
    return headGemms(kernel);
  if (outputs.empty() || inputs.size() < 2)
    return {};
  ArrayRef<int64_t> out = shapeOf(outputs[0]), x = shapeOf(inputs[0]);
  if (out.size() < 2 || x.empty())
    return {};
  if (name == "matmul" || name == "qat_matmul_fp8") {
    // As the CUDA matmul calls cuBLASLt: a shared 2-D b under an
    // untransposed a folds a's leading dims into M; otherwise one strided
    // batch over the leading dims.
    bool transposeA = attrInt(op, "transpose_a");
    int64_t k = transposeA ? x[x.size() - 2] : x.back();
    Value b = inputs[name == "matmul" ? 1 : 2];
    if (shapeOf(b).size() == 2 && !transposeA)
      return {{1, leading(out, 1), out.back(), k}};
    return {{leading(out, 2), out[out.size() - 2], out.back(), k}};
  }
  if (name == "linear" || name == "matmul_gelu_grad" || name == "matmul_swiglu_grad" ||
      name == "matmul_nf4" || name == "matmul_int")
    return {{1, leading(out, 1), out.back(), x.back()}};
  if (name == "linear_weight_grad") // dw [K, N] summed over every row
    return {{1, out[0], out[1], leading(x, 1)}};
  // A mixture of experts: one GEMM per expert over its share of the M
  // routed rows, priced as if routing were balanced (the load-balancing
  // loss's aim; which expert gets how many is known only at run time).
  if (isGroupedProduct(name)) {
    // offsets [G + 1]: after x, or after x and its scale in the fp8 form.
    const Value offsets = inputs[name == "qat_grouped_matmul_fp8" ? 2 : 1];
    const int64_t groups = shapeOf(offsets)[0] - 1, rows = computedRows(kernel, expertRanks);
    return std::vector<GemmShape>(groups, {1, (rows + groups - 1) / groups, out[1], x[1]});
  }
  if (isGroupedWeightGrad(name)) { // each dw [a, b] over its rows
    const int64_t groups = out[0], rows = computedRows(kernel, expertRanks);
    return std::vector<GemmShape>(groups, {1, out[1], out[2], (rows + groups - 1) / groups});
  }
  return {};
}

namespace {

/// Seconds of an attention kernel's arithmetic with query `q`: at the
/// measured flash-attention rate, or as the unfused kernels would run it.
double attentionSeconds(exec::KernelOp kernel, const Cluster &c, ArrayRef<int64_t> q) {
  Operation *op = kernel.getOperation();
  if (!c.efficiency.unfusedAttention)
    return kernelFlops(op) / attentionRate(c.efficiency, c.peakFlops, q[3], q[1]);
  auto type = cast<MemRefType>(kernel.getInputs()[0].getType());
  double elementBytes = std::max(8u, type.getElementType().getIntOrFloatBitWidth()) / 8.0;
  return unfusedAttentionSeconds(c, q, attentionKeys(kernel, q), elementBytes,
                                 kernel.getCallee().ends_with("_grad"));
}

} // namespace

double kernelSeconds(Operation *op, const Cluster &c, double fp32MatmulScale, int64_t expertRanks) {
  auto kernel = cast<exec::KernelOp>(op);
  StringRef name = kernel.getCallee();
  double compute = kernelFlops(op, expertRanks) / c.peakFlops;
  if (std::vector<GemmShape> gemms = kernelGemms(op, expertRanks); !gemms.empty()) {
    // fp32 products run on the TF32 path; bf16 and f16 at the full rate.
    bool fp32 = cast<MemRefType>(kernel.getInputs()[0].getType()).getElementType().isF32();
    compute = 0;
    for (const GemmShape &g : gemms)
      compute += gemmSeconds(c.efficiency, c.peakFlops, g, fp32 ? fp32MatmulScale : 1);
    if (isHead(name))
      compute += headRowPassBytes(kernel) / c.memoryBandwidth;
  } else if (isAttention(name)) {
    if (ArrayRef<int64_t> q = attentionQuery(kernel); !q.empty())
      compute = attentionSeconds(kernel, c, q);
  }
  return std::max(compute, kernelBytes(op, expertRanks) / c.memoryBandwidth) + c.kernelOverhead;
}

} // namespace llmc::plan
