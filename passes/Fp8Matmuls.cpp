//===- Fp8Matmuls.cpp - fake-quantized fp8 matmuls become fp8 GEMMs -------===//
//
// After autodiff, fp8 training (--precision fp8, or --qat with per-tensor
// fp8 schemes) multiplies values that qat.fake_quant rounded to fp8 and
// stored back in the compute type: every operand costs its original and
// its rounded copy, both bf16, and the backward keeps the copies. This pass
// keeps the fp8 numbers instead: each such qat.fake_quant whose readers
// are all matmuls (directly or through reshapes) becomes a
// qat.quantize_fp8 (one byte per element and one scale), and each matmul
// of two of them a qat.matmul_fp8, which is what an fp8 tensor core
// computes (cuBLASLt on sm_89+). The rounding is the same, so the values
// multiplied are the same; only where the scale is applied moves (after
// the fp32 sum instead of into each operand).
//
// A mixture of experts' grouped products are products of the same kind:
// llm.grouped_matmul (forward and dX) becomes qat.grouped_matmul_fp8 and
// llm.grouped_matmul_weight_grad qat.grouped_matmul_weight_grad_fp8. The
// experts' stacked weight is quantized expert by expert (llmc-qat's
// per-slice scheme on the view [G, A·B]), which qat.quantize_fp8 keeps as
// one scale per expert; so are the routed rows and dY (a per-row
// fake_quant of qat.row_ranges), which qat.quantize_fp8 with the
// product's offsets keeps as one scale per group of rows.
//
// A fake_quant with any other reader, and a product with one operand not in
// fp8, are left as they are: the recipe's LM head (skip=head) and --qat
// specs quantizing one side only keep fake quantization.
//
// fast-accumulation=forward marks the forward's products, as Transformer
// Engine runs its fprop GEMMs with cuBLASLt's fast accumulation and its
// dgrad and wgrad GEMMs without: a forward product's sum is one K-long dot
// per output, while dW's sums run over every token of the batch. Recomputed
// forward products are marked like the originals, so the backward reads
// the activations the forward computed.
//
//===----------------------------------------------------------------------===//

#include "dialects/Annotations/Annotations.h"
#include "passes/Passes.h"
#include "passes/lib/RowGroupQuant.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

namespace llmc {
#define GEN_PASS_DEF_FP8MATMULS
#include "passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;
using namespace llmc;

namespace {

/// A fake_quant this pass can keep as fp8 codes with one scale: an fp8
/// format, one symmetric scale for the whole tensor, no outlier columns.
bool isFp8TensorQuant(qat::FakeQuantOp q) {
  return qat::isFp8ScaledScheme(q.getScheme()) && q.getScheme().getGranularity() == "tensor" &&
         !q.getColumns();
}

/// The fake_quant `v` is (through reshapes), or null.
qat::FakeQuantOp fakeQuantOf(Value v) {
  while (auto reshape = v.getDefiningOp<llm::ReshapeOp>()) v = reshape.getX();
  return v.getDefiningOp<qat::FakeQuantOp>();
}

/// The per-tensor fp8 fake_quant `v` is (through reshapes), or null.
qat::FakeQuantOp fp8Source(Value v) {
  qat::FakeQuantOp q = fakeQuantOf(v);
  return q && isFp8TensorQuant(q) ? q : qat::FakeQuantOp();
}

/// The fp8 fake_quant of a stack of `groups` experts' weights `v`: per
/// tensor, or per expert (per slice of dimension 0 of a view whose
/// dimension 0 is the experts); null for any other.
qat::FakeQuantOp fp8StackSource(Value v, int64_t groups) {
  qat::FakeQuantOp q = fakeQuantOf(v);
  if (!q || q.getColumns() || !qat::isFp8ScaledScheme(q.getScheme()))
    return {};
  if (q.getScheme().getGranularity() == "tensor")
    return q;
  return cast<RankedTensorType>(q.getX().getType()).getDimSize(0) == groups ? q
                                                                            : qat::FakeQuantOp();
}

/// The fp8 fake_quant of rows `v` quantized group by group of rows
/// (llmc-qat's per-row fake_quant whose ranges are qat.row_ranges of the
/// groups `offsets`), or null.
qat::FakeQuantOp fp8RowGroupSource(Value v, Value offsets) {
  auto q = v.getDefiningOp<qat::FakeQuantOp>();
  if (!q || q.getColumns() || !qat::isFp8ScaledScheme(q.getScheme()) ||
      q.getScheme().getGranularity() != "channel")
    return {};
  auto rows = q.getRange().getDefiningOp<qat::RowRangesOp>();
  return rows && rows.getOffsets() == offsets ? q : qat::FakeQuantOp();
}

/// The fp8 fake_quant of a grouped product's rows: per tensor or per group
/// of rows.
qat::FakeQuantOp fp8RowsSource(Value v, Value offsets) {
  qat::FakeQuantOp q = fp8Source(v);
  return q ? q : fp8RowGroupSource(v, offsets);
}

bool isE5M2(qat::FakeQuantOp q) { return q.getScheme().getFormat() == "fp8_e5m2"; }

/// The fp8 sources of a product's two multiplied operands (null where an
/// operand is not one this pass can keep): matmul's a and b, a grouped
/// product's rows and stacked weights, a grouped weight gradient's x and
/// dy; nothing for any other op.
std::pair<qat::FakeQuantOp, qat::FakeQuantOp> fp8Operands(Operation *op) {
  if (auto m = dyn_cast<llm::MatmulOp>(op))
    return {fp8Source(m.getA()), fp8Source(m.getB())};
  if (auto g = dyn_cast<llm::GroupedMatmulOp>(op)) {
    int64_t groups = cast<RankedTensorType>(g.getWeights().getType()).getDimSize(0);
    return {fp8RowsSource(g.getX(), g.getOffsets()), fp8StackSource(g.getWeights(), groups)};
  }
  if (auto g = dyn_cast<llm::GroupedMatmulWeightGradOp>(op))
    return {fp8RowsSource(g.getX(), g.getOffsets()), fp8RowsSource(g.getDy(), g.getOffsets())};
  return {};
}

/// Whether `m` computes the forward: not emitted by autodiff, or a
/// forward op llmc-recompute cloned into the backward.
bool isForwardProduct(llm::MatmulOp m) {
  return !m->hasAttr(kBackwardAttr) || m->hasAttr(kRecomputedAttr);
}

/// Copies the discardable (dialect-prefixed) attributes: microbatch,
/// backward and layer annotations the later passes read.
void copyAnnotations(Operation *from, Operation *to) {
  for (NamedAttribute attr : from->getDiscardableAttrs())
    to->setAttr(attr.getName(), attr.getValue());
}

struct Fp8MatmulsPass : llmc::impl::Fp8MatmulsBase<Fp8MatmulsPass> {
  using Fp8MatmulsBase::Fp8MatmulsBase;

  void runOnOperation() override {
    if (fastAccumulation != "forward" && fastAccumulation != "none") {
      getOperation().emitError() << "llmc-fp8-matmuls: fast-accumulation must be forward or "
                                    "none, got '"
                                 << fastAccumulation << "'";
      return signalPassFailure();
    }
    getOperation().walk([&](func::FuncOp func) { rewrite(func); });
  }

  void rewrite(func::FuncOp func) {
    // Per function: erased ops' addresses may be reused by the next one's.
    quantizes.clear(), reshapedCodes.clear(), dead.clear();
    // Products of two fp8 operands (never two E5M2 gradients), then only
    // those whose operands' every reader is such a product, until stable.
    llvm::SetVector<Operation *> products;
    func.walk([&](Operation *op) {
      auto [a, b] = fp8Operands(op);
      if (a && b && !(isE5M2(a) && isE5M2(b)))
        products.insert(op);
    });
    for (bool changed = true; changed;) {
      changed = false;
      for (Operation *op : llvm::to_vector(products)) {
        auto [a, b] = fp8Operands(op);
        if (!onlyFp8Products(a, products) || !onlyFp8Products(b, products)) {
          products.remove(op);
          changed = true;
        }
      }
    }
    for (Operation *op : products) replace(op);
    // The fake_quants and reshapes the products read are dead now.
    for (qat::FakeQuantOp q : dead) eraseWithReshapes(q);
  }

  /// Whether every reader of q (through reshapes) is in `products`.
  static bool onlyFp8Products(qat::FakeQuantOp q, const llvm::SetVector<Operation *> &products) {
    SmallVector<Value> values{q.getResult()};
    while (!values.empty()) {
      Value v = values.pop_back_val();
      for (Operation *user : v.getUsers()) {
        if (auto reshape = dyn_cast<llm::ReshapeOp>(user))
          values.push_back(reshape.getResult());
        else if (!products.contains(user))
          return false;
      }
    }
    return true;
  }

  /// The fp8 codes and scale of q, created once, where q was: rows
  /// quantized group by group keep a scale per group (the groups' ranges
  /// before qat.row_ranges gave them to the rows).
  qat::QuantizeFp8Op quantized(qat::FakeQuantOp q) {
    auto [it, inserted] = quantizes.try_emplace(q.getOperation());
    if (inserted) {
      OpBuilder b(q);
      auto rows = q.getRange().getDefiningOp<qat::RowRangesOp>();
      it->second =
          rows && q.getScheme().getGranularity() == "channel"
              ? qat::QuantizeFp8Op::create(b, q.getLoc(), q.getX(), rows.getGroups(),
                                           rows.getOffsets(), perTensorScheme(q.getScheme()))
              : qat::QuantizeFp8Op::create(b, q.getLoc(), q.getX(), q.getRange(), Value(),
                                           q.getScheme());
      copyAnnotations(q, it->second);
      dead.insert(q);
    }
    return it->second;
  }

  /// `v`'s codes: q's, reshaped as v's chain of reshapes reshapes q.
  Value codesOf(Value v) {
    if (auto reshape = v.getDefiningOp<llm::ReshapeOp>()) {
      if (Value done = reshapedCodes.lookup(v))
        return done;
      Value source = codesOf(reshape.getX());
      OpBuilder b(reshape);
      auto type = cast<RankedTensorType>(v.getType())
                      .clone(cast<RankedTensorType>(source.getType()).getElementType());
      auto codes = llm::ReshapeOp::create(b, reshape.getLoc(), type, source);
      copyAnnotations(reshape, codes);
      return reshapedCodes[v] = codes;
    }
    return quantized(v.getDefiningOp<qat::FakeQuantOp>()).getCodes();
  }

  /// The scale of `v`'s codes.
  Value scaleOf(Value v) { return quantized(fakeQuantOf(v)).getScale(); }

  void replace(Operation *op) {
    OpBuilder builder(op);
    Location loc = op->getLoc();
    Operation *product;
    if (auto m = dyn_cast<llm::MatmulOp>(op)) {
      product = qat::MatmulFp8Op::create(builder, loc, m.getType(), codesOf(m.getA()),
                                         scaleOf(m.getA()), codesOf(m.getB()), scaleOf(m.getB()),
                                         m.getTransposeA(), m.getTransposeB(),
                                         fastAccumulation == "forward" && isForwardProduct(m));
    } else if (auto g = dyn_cast<llm::GroupedMatmulOp>(op)) {
      product = qat::GroupedMatmulFp8Op::create(
          builder, loc, g.getType(), codesOf(g.getX()), scaleOf(g.getX()), g.getOffsets(),
          codesOf(g.getWeights()), scaleOf(g.getWeights()), g.getTransposeB());
    } else {
      auto w = cast<llm::GroupedMatmulWeightGradOp>(op);
      product = qat::GroupedMatmulWeightGradFp8Op::create(
          builder, loc, w.getType(), codesOf(w.getX()), scaleOf(w.getX()), codesOf(w.getDy()),
          scaleOf(w.getDy()), w.getOffsets(), w.getTransposeB());
    }
    copyAnnotations(op, product);
    op->replaceAllUsesWith(product->getResults());
    op->erase();
  }

  /// Erases q and the reshapes of its result, all unused by now, and
  /// the qat.row_ranges q alone read.
  static void eraseWithReshapes(qat::FakeQuantOp q) {
    auto rows = q.getRange().getDefiningOp<qat::RowRangesOp>();
    SmallVector<Operation *> order{q};
    for (size_t i = 0; i < order.size(); ++i)
      for (Operation *user : order[i]->getUsers()) order.push_back(user);
    for (Operation *op : llvm::reverse(order))
      if (op->use_empty())
        op->erase();
    if (rows && rows->use_empty())
      rows->erase();
  }

  llvm::DenseMap<Operation *, qat::QuantizeFp8Op> quantizes;
  llvm::DenseMap<Value, Value> reshapedCodes;
  llvm::SetVector<qat::FakeQuantOp> dead;
};

} // namespace
