//===- Blas.h - OpenBLAS, opened on first use (private) -------------------===//
//
// The kernels reach BLAS through this one function pointer instead of
// linking it, so that the library is loaded only after its core type has
// been chosen (see blas.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CPU_BLAS_H
#define LLMC_KERNELS_CPU_BLAS_H

#include <cblas.h>

#include <string>

namespace llmc::cpu {

using SgemmFn = void (*)(CBLAS_ORDER, CBLAS_TRANSPOSE, CBLAS_TRANSPOSE, blasint, blasint, blasint,
                         float, const float *, blasint, const float *, blasint, float, float *,
                         blasint);

using SgemvFn = void (*)(CBLAS_ORDER, CBLAS_TRANSPOSE, blasint, blasint, float, const float *,
                         blasint, const float *, blasint, float, float *, blasint);

/// cblas_sgemm of the process's OpenBLAS, loading it on the first call; null
/// (with `error` set) when it cannot be loaded.
SgemmFn blasSgemm(std::string &error);
/// Its cblas_sgemv, loaded with it.
SgemvFn blasSgemv(std::string &error);

/// The kernel set OpenBLAS selected ("SkylakeX", "Haswell", ...), or "" if
/// it is not loaded.
std::string blasCoreName();

} // namespace llmc::cpu

#endif
