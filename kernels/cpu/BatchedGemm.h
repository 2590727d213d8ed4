//===- BatchedGemm.h - one matmul's BLAS calls (private) --------*- C++ -*-===//
//
// c[...] = op(a[...]) · op(b[...]) + beta·c, all fp32, as OpenBLAS calls:
// one sgemm when b is a shared 2-D matrix and a is not transposed (a's
// leading dims fold into M), a GEMV for a single row, else one sgemm per
// leading index. Shared by the float matmul and the fp8 one, which first
// expands its codes to fp32.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CPU_BATCHEDGEMM_H
#define LLMC_KERNELS_CPU_BATCHEDGEMM_H

#include "kernels/cpu/Blas.h"

#include <cstdint>

namespace llmc::cpu {

struct MatmulDims {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool transposeA = false, transposeB = false, sharedB = false, accumulate = false;
  bool decodeRows = false, avx512 = false; // few rows of x times a shared W [N, K]
  SgemmFn sgemm = nullptr;
  SgemvFn sgemv = nullptr;
};

/// C = op(A)·op(B) + beta·C over every leading index, all fp32.
inline void batchedGemm(const MatmulDims &d, const float *a, const float *b, float *c, float beta) {
  CBLAS_TRANSPOSE ta = d.transposeA ? CblasTrans : CblasNoTrans;
  CBLAS_TRANSPOSE tb = d.transposeB ? CblasTrans : CblasNoTrans;
  int lda = static_cast<int>(d.transposeA ? d.m : d.k);
  int ldb = static_cast<int>(d.transposeB ? d.k : d.n);
  int n = static_cast<int>(d.n), k = static_cast<int>(d.k);
  if (d.sharedB && d.batch * d.m == 1) {
    // c[1, n] = a[1, k] · op(b): b [k, n] gives bᵀ·a, a transposed b [n, k] b·a.
    int incA = d.transposeA ? lda : 1;
    if (d.transposeB)
      d.sgemv(CblasRowMajor, CblasNoTrans, n, k, 1.0f, b, ldb, a, incA, beta, c, 1);
    else
      d.sgemv(CblasRowMajor, CblasTrans, k, n, 1.0f, b, ldb, a, incA, beta, c, 1);
    return;
  }
  if (d.sharedB && !d.transposeA) {
    d.sgemm(CblasRowMajor, ta, tb, static_cast<int>(d.batch * d.m), n, k, 1.0f, a, lda, b, ldb,
            beta, c, n);
    return;
  }
  for (int64_t t = 0; t < d.batch; ++t)
    d.sgemm(CblasRowMajor, ta, tb, static_cast<int>(d.m), n, k, 1.0f, a + t * d.m * d.k, lda,
            b + (d.sharedB ? 0 : t * d.k * d.n), ldb, beta, c + t * d.m * d.n, n);
}

} // namespace llmc::cpu

#endif
