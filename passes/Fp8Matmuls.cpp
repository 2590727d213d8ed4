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
// A fake_quant with any other reader, and a matmul with one operand not in
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

/// A fake_quant this pass can keep as fp8 codes: an fp8 format, one
/// symmetric scale for the whole tensor, no outlier columns.
bool isFp8TensorQuant(qat::FakeQuantOp q) {
  qat::SchemeAttr scheme = q.getScheme();
  return qat::fp8ElementType(q.getContext(), scheme.getFormat()) &&
         scheme.getGranularity() == "tensor" && scheme.getSymmetric() && !q.getColumns();
}

/// The eligible fake_quant `v` is (through reshapes), or null.
qat::FakeQuantOp fp8Source(Value v) {
  while (auto reshape = v.getDefiningOp<llm::ReshapeOp>()) v = reshape.getX();
  auto q = v.getDefiningOp<qat::FakeQuantOp>();
  return q && isFp8TensorQuant(q) ? q : qat::FakeQuantOp();
}

bool isE5M2(qat::FakeQuantOp q) { return q.getScheme().getFormat() == "fp8_e5m2"; }

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
    // Matmuls of two fp8 operands (never two E5M2 gradients), then only
    // those whose operands' every reader is such a matmul, until stable.
    llvm::SetVector<llm::MatmulOp> matmuls;
    func.walk([&](llm::MatmulOp m) {
      qat::FakeQuantOp a = fp8Source(m.getA()), b = fp8Source(m.getB());
      if (a && b && !(isE5M2(a) && isE5M2(b)))
        matmuls.insert(m);
    });
    for (bool changed = true; changed;) {
      changed = false;
      for (llm::MatmulOp m : llvm::to_vector(matmuls))
        if (!onlyFp8Matmuls(fp8Source(m.getA()), matmuls) ||
            !onlyFp8Matmuls(fp8Source(m.getB()), matmuls)) {
          matmuls.remove(m);
          changed = true;
        }
    }
    for (llm::MatmulOp m : matmuls) replace(m);
    // The fake_quants and reshapes the matmuls read are dead now.
    for (qat::FakeQuantOp q : dead) eraseWithReshapes(q);
  }

  /// Whether every reader of q (through reshapes) is in `matmuls`.
  static bool onlyFp8Matmuls(qat::FakeQuantOp q, const llvm::SetVector<llm::MatmulOp> &matmuls) {
    SmallVector<Value> values{q.getResult()};
    while (!values.empty()) {
      Value v = values.pop_back_val();
      for (Operation *user : v.getUsers()) {
        if (auto reshape = dyn_cast<llm::ReshapeOp>(user))
          values.push_back(reshape.getResult());
        else if (auto m = dyn_cast<llm::MatmulOp>(user); !m || !matmuls.contains(m))
          return false;
      }
    }
    return true;
  }

  /// The fp8 codes and scale of q, created once, where q was.
  qat::QuantizeFp8Op quantized(qat::FakeQuantOp q) {
    auto [it, inserted] = quantizes.try_emplace(q.getOperation());
    if (inserted) {
      OpBuilder b(q);
      it->second = qat::QuantizeFp8Op::create(b, q.getLoc(), q.getX(), q.getRange(), q.getScheme());
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

  void replace(llm::MatmulOp m) {
    Value a = codesOf(m.getA()), b = codesOf(m.getB());
    Value aScale = quantized(fp8Source(m.getA())).getScale();
    Value bScale = quantized(fp8Source(m.getB())).getScale();
    OpBuilder builder(m);
    auto product = qat::MatmulFp8Op::create(builder, m.getLoc(), m.getType(), a, aScale, b, bScale,
                                            m.getTransposeA(), m.getTransposeB(),
                                            fastAccumulation == "forward" && isForwardProduct(m));
    copyAnnotations(m, product);
    m.replaceAllUsesWith(product.getResult());
    m.erase();
  }

  /// Erases q and the reshapes of its result, all unused by now.
  static void eraseWithReshapes(qat::FakeQuantOp q) {
    SmallVector<Operation *> order{q};
    for (size_t i = 0; i < order.size(); ++i)
      for (Operation *user : order[i]->getUsers()) order.push_back(user);
    for (Operation *op : llvm::reverse(order))
      if (op->use_empty())
        op->erase();
  }

  llvm::DenseMap<Operation *, qat::QuantizeFp8Op> quantizes;
  llvm::DenseMap<Value, Value> reshapedCodes;
  llvm::SetVector<qat::FakeQuantOp> dead;
};

} // namespace
