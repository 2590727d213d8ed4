//===- Matmul.h - binding contract of matmul --------------------*- C++ -*-===//
//
// The checks and derived dimensions of matmul (c = op(a) · op(b), batched
// over a's leading dims, b either one shared matrix or batched like a),
// shared by the CPU factory (kernels/cpu/matmul.cpp, OpenBLAS) and the CUDA
// one (kernels/cuda/matmul.cu, cuBLASLt).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_MATMUL_H
#define LLMC_KERNELS_CONTRACTS_MATMUL_H

#include "kernels/Kernel.h"
#include "kernels/Validator.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <vector>

namespace llmc::contracts {

/// matmul(a, b) -> c, attributes transpose_a, transpose_b, accumulate.
struct MatmulBinding {
  DType dtype = DType::F32; ///< of a, b and c
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool transposeA = false, transposeB = false;
  bool sharedB = false;    ///< b is 2-D: one matrix for every batch entry
  bool accumulate = false; ///< c += a · b
};
inline bool bindMatmul(const KernelArgs &args, std::string &error, MatmulBinding *out);

//===----------------------------------------------------------------------===//
// Definitions
//===----------------------------------------------------------------------===//

/// The dimensions of c = op(a)·op(b) from the shapes of a and b and the
/// transposes already in `d`; false (through `v`) for shapes that do not
/// multiply. c's expected shape goes to `cShape`.
inline bool matmulDims(Validator &v, const TensorView &a, const TensorView &b, MatmulBinding *d,
                       std::vector<int64_t> *cShape) {
  if (a.rank() < 2)
    return v.fail("a must have rank >= 2, got " + a.describe());
  if (b.rank() != 2 && b.rank() != a.rank())
    return v.fail("b must be 2-D or have a's rank, got " + b.describe());
  d->sharedB = b.rank() == 2;
  if (!d->sharedB && !std::equal(a.shape.begin(), a.shape.end() - 2, b.shape.begin()))
    return v.fail("batched b must have a's leading dims: a is " + a.describe() + ", b is " +
                  b.describe());
  d->m = d->transposeA ? a.dim(-1) : a.dim(-2);
  d->k = d->transposeA ? a.dim(-2) : a.dim(-1);
  int64_t kb = d->transposeB ? b.dim(-1) : b.dim(-2);
  d->n = d->transposeB ? b.dim(-2) : b.dim(-1);
  if (kb != d->k)
    return v.fail("contraction dims differ: a " + a.describe() + " has K = " +
                  std::to_string(d->k) + ", b " + b.describe() + " has K = " + std::to_string(kb));
  cShape->assign(a.shape.begin(), a.shape.end() - 2);
  d->batch = product(*cShape);
  cShape->push_back(d->m);
  cShape->push_back(d->n);
  if (!v.fitsInt(a, "a") || !v.fitsInt(b, "b"))
    return false;
  if (d->sharedB && !d->transposeA && d->batch * d->m > INT_MAX)
    return v.fail("a is too large for BLAS: " + a.describe());
  return true;
}

inline bool bindMatmul(const KernelArgs &args, std::string &error, MatmulBinding *out) {
  Validator v("matmul", args, error);
  MatmulBinding d;
  if (!v.arity(2, 1) || !v.flagAttr("transpose_a", &d.transposeA) ||
      !v.flagAttr("transpose_b", &d.transposeB) || !v.flagAttr("accumulate", &d.accumulate))
    return false;
  const TensorView &a = v.in(0), &b = v.in(1), &c = v.out(0);
  if (!v.isFloat(a, "a") || !v.hasDType(b, "b", a.dtype) || !v.hasDType(c, "c", a.dtype))
    return false;
  std::vector<int64_t> shape;
  if (!matmulDims(v, a, b, &d, &shape) || !v.hasType(c, "c", a.dtype, shape))
    return false;
  d.dtype = a.dtype;
  *out = d;
  return true;
}

} // namespace llmc::contracts

#endif
