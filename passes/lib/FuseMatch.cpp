//===- FuseMatch.cpp - what several fusions match alike -------------------===//
//
// Part of llmc: see FuseMatch.h.
//
//===----------------------------------------------------------------------===//

#include "passes/lib/FuseMatch.h"
#include "passes/lib/FusePlace.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace llmc;
using namespace llmc::llm;

void llmc::eraseIfDead(Operation *op) {
  if (op && op->use_empty())
    op->erase();
}

bool llmc::fuseBiasAdd(AddOp add, bool withGelu) {
  auto matmul = add.getLhs().getDefiningOp<MatmulOp>();
  if (!matmul || matmul.getTransposeA() || !matmul.getResult().hasOneUse() ||
      !samePlace(matmul, add))
    return false;
  Value x = matmul.getA(), w = matmul.getB(), bias = add.getRhs();
  auto product = cast<RankedTensorType>(matmul.getType());
  auto wType = cast<RankedTensorType>(w.getType()),
       biasType = cast<RankedTensorType>(bias.getType());
  if (wType.getRank() != 2 || biasType.getShape() != product.getShape().take_back() ||
      biasType.getElementType() != product.getElementType() || add.getType() != matmul.getType())
    return false;
  GeluOp gelu;
  if (withGelu)
    for (Operation *user : add.getResult().getUsers())
      if (auto g = dyn_cast<GeluOp>(user); g && samePlace(g, add)) {
        gelu = g;
        break;
      }
  if (withGelu && !gelu)
    return false;
  // Whoever else reads the biased value (gelu_grad) reads the fused op's.
  bool keepPre = gelu && !add.getResult().hasOneUse();

  SmallVector<Location> locs = {matmul.getLoc(), add.getLoc()};
  if (gelu)
    locs.push_back(gelu.getLoc());
  OpBuilder builder(add);
  auto fused = LinearOp::create(builder, builder.getFusedLoc(locs), x, w, bias,
                                /*residual=*/Value(), matmul.getTransposeB(),
                                static_cast<bool>(gelu), keepPre);
  copyPlace(add, fused);
  if (gelu) {
    gelu.getResult().replaceAllUsesWith(fused.getY());
    gelu->erase();
    if (keepPre)
      add.getResult().replaceAllUsesWith(fused.getPre());
  } else {
    add.getResult().replaceAllUsesWith(fused.getY());
  }
  add->erase();
  matmul->erase();
  return true;
}

MatmulOp llmc::fusableGradProduct(Operation *grad, Value dy) {
  auto product = dy.getDefiningOp<MatmulOp>();
  if (!product || product.getTransposeA() || !product.getResult().hasOneUse() ||
      !samePlace(product, grad))
    return nullptr;
  if (cast<RankedTensorType>(product.getB().getType()).getRank() != 2 ||
      cast<RankedTensorType>(product.getA().getType()).getRank() < 2)
    return nullptr;
  return product;
}

void llmc::replaceGradAndProduct(Operation *grad, MatmulOp product, Operation *fused) {
  copyPlace(grad, fused);
  for (auto [old, now] : llvm::zip(grad->getResults(), fused->getResults()))
    old.replaceAllUsesWith(now);
  grad->erase();
  product->erase();
}

FailureOr<AttentionReaders> llmc::attentionReadersOf(ValueRange inputs, Value q, Value k, Value v) {
  AttentionReaders readers;
  SmallPtrSet<Operation *, 4> seen;
  for (Value input : inputs)
    for (Operation *user : input.getUsers()) {
      if (!seen.insert(user).second)
        continue;
      if (!isa<AttentionOp, AttentionGradOp>(user) || user->getOperand(0) != q ||
          user->getOperand(1) != k || user->getOperand(2) != v)
        return failure();
      if (auto forward = dyn_cast<AttentionOp>(user))
        readers.forwards.push_back(forward);
      else
        readers.grads.push_back(cast<AttentionGradOp>(user));
    }
  return readers;
}
