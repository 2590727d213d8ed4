//===- TileGemm.h - small in-cache GEMM for fused kernels (private) -------===//
//
// The fused attention kernels multiply tiles that are already in L1/L2 and
// are too small for BLAS call overhead (and BLAS must not be called from
// inside our OpenMP regions). This is a register-blocked 4×16 AVX2/FMA
// micro-kernel (8 accumulators, two B vectors, one broadcast A) with a
// vectorised edge path; the build targets x86-64-v3, so AVX2 and FMA are
// always present, and a portable loop covers other targets.
//
// A may be read transposed (C += Aᵀ·B with A stored [k × m]): attention
// keeps score tiles in whichever orientation makes its softmax vectorise
// and then multiplies them either way without an explicit transpose.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CPU_TILEGEMM_H
#define LLMC_KERNELS_CPU_TILEGEMM_H

#include <cstdint>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

namespace llmc::cpu {

/// Element (i, p) of op(A).
template <bool TransA> inline const float *aAt(const float *a, int64_t lda, int64_t i, int64_t p) {
  return TransA ? a + p * lda + i : a + i * lda + p;
}

/// C[rows×cols] (+)= op(A)[rows×k]·B[k×cols] on one edge block, vectorised
/// over the columns.
template <bool TransA>
inline void tileGemmEdge(int64_t rows, int64_t cols, int64_t k, const float *a, int64_t lda,
                         const float *b, int64_t ldb, float *c, int64_t ldc, bool accumulate) {
  for (int64_t i = 0; i < rows; ++i) {
    float *ci = c + i * ldc;
    if (!accumulate)
      for (int64_t j = 0; j < cols; ++j) ci[j] = 0.0f;
    for (int64_t p = 0; p < k; ++p) {
      float aip = *aAt<TransA>(a, lda, i, p);
      const float *bp = b + p * ldb;
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) ci[j] += aip * bp[j];
    }
  }
}

#if defined(__AVX2__) && defined(__FMA__)
/// The 4×16 block at (a, b, c): 8 ymm accumulators live across the k loop.
template <bool TransA>
inline void tileGemm4x16(int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                         float *c, int64_t ldc, bool accumulate) {
  __m256 c00, c01, c10, c11, c20, c21, c30, c31;
  if (accumulate) {
    c00 = _mm256_loadu_ps(c), c01 = _mm256_loadu_ps(c + 8);
    c10 = _mm256_loadu_ps(c + ldc), c11 = _mm256_loadu_ps(c + ldc + 8);
    c20 = _mm256_loadu_ps(c + 2 * ldc), c21 = _mm256_loadu_ps(c + 2 * ldc + 8);
    c30 = _mm256_loadu_ps(c + 3 * ldc), c31 = _mm256_loadu_ps(c + 3 * ldc + 8);
  } else {
    c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = _mm256_setzero_ps();
  }
  for (int64_t p = 0; p < k; ++p) {
    __m256 b0 = _mm256_loadu_ps(b + p * ldb), b1 = _mm256_loadu_ps(b + p * ldb + 8);
    // Keep b0/b1 in registers: GCC otherwise re-reads them as memory operands
    // of every FMA, which makes the loop load-bound.
    __asm__("" : "+x"(b0), "+x"(b1));
    __m256 a0 = _mm256_broadcast_ss(aAt<TransA>(a, lda, 0, p));
    c00 = _mm256_fmadd_ps(a0, b0, c00);
    c01 = _mm256_fmadd_ps(a0, b1, c01);
    __m256 a1 = _mm256_broadcast_ss(aAt<TransA>(a, lda, 1, p));
    c10 = _mm256_fmadd_ps(a1, b0, c10);
    c11 = _mm256_fmadd_ps(a1, b1, c11);
    __m256 a2 = _mm256_broadcast_ss(aAt<TransA>(a, lda, 2, p));
    c20 = _mm256_fmadd_ps(a2, b0, c20);
    c21 = _mm256_fmadd_ps(a2, b1, c21);
    __m256 a3 = _mm256_broadcast_ss(aAt<TransA>(a, lda, 3, p));
    c30 = _mm256_fmadd_ps(a3, b0, c30);
    c31 = _mm256_fmadd_ps(a3, b1, c31);
  }
  _mm256_storeu_ps(c, c00), _mm256_storeu_ps(c + 8, c01);
  _mm256_storeu_ps(c + ldc, c10), _mm256_storeu_ps(c + ldc + 8, c11);
  _mm256_storeu_ps(c + 2 * ldc, c20), _mm256_storeu_ps(c + 2 * ldc + 8, c21);
  _mm256_storeu_ps(c + 3 * ldc, c30), _mm256_storeu_ps(c + 3 * ldc + 8, c31);
}
#endif

/// C[m×n] (+)= op(A)·B, all row-major fp32 with leading dims lda/ldb/ldc:
/// op(A) = A [m×k], or Aᵀ with A stored [k×m] when TransA. `accumulate`
/// adds to C instead of overwriting it.
template <bool TransA = false>
inline void tileGemm(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                     int64_t ldb, float *c, int64_t ldc, bool accumulate) {
#if defined(__AVX2__) && defined(__FMA__)
  int64_t m4 = m / 4 * 4, n16 = n / 16 * 16;
  for (int64_t i = 0; i < m4; i += 4) {
    for (int64_t j = 0; j < n16; j += 16)
      tileGemm4x16<TransA>(k, aAt<TransA>(a, lda, i, 0), lda, b + j, ldb, c + i * ldc + j, ldc,
                           accumulate);
    if (n16 < n)
      tileGemmEdge<TransA>(4, n - n16, k, aAt<TransA>(a, lda, i, 0), lda, b + n16, ldb,
                           c + i * ldc + n16, ldc, accumulate);
  }
  if (m4 < m)
    tileGemmEdge<TransA>(m - m4, n, k, aAt<TransA>(a, lda, m4, 0), lda, b, ldb, c + m4 * ldc, ldc,
                         accumulate);
#else
  tileGemmEdge<TransA>(m, n, k, a, lda, b, ldb, c, ldc, accumulate);
#endif
}

} // namespace llmc::cpu

#endif
