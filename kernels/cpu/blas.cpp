//===- blas.cpp - loading OpenBLAS with a core type that fits the CPU -----===//
//
// OpenBLAS 0.3.21 (Debian 12) picks its kernels from the CPU model number
// and does not know Sapphire Rapids: on those Xeons (and on VMs that hide
// the model) it falls back to "Prescott", SSE3 kernels about 5x slower than
// its AVX-512 ones. It reads OPENBLAS_CORETYPE once, in its own library
// constructor, so a process that links OpenBLAS can no longer change it.
//
// So llmc_kernels does not link OpenBLAS. When this library is loaded (a
// single-threaded moment, before main), it sets OPENBLAS_CORETYPE=SkylakeX
// if the variable is unset and the CPU has the AVX-512 subsets those kernels
// use; the first matmul bind then dlopen()s OpenBLAS. A user-set
// OPENBLAS_CORETYPE always wins, and a process that already loaded OpenBLAS
// shares that instance.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/Blas.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#ifndef LLMC_OPENBLAS_LIBRARY
#define LLMC_OPENBLAS_LIBRARY "libopenblas.so.0"
#endif

namespace llmc::cpu {
namespace {

__attribute__((constructor)) void chooseOpenBlasCoreType() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (!std::getenv("OPENBLAS_CORETYPE") && __builtin_cpu_supports("avx512f") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl"))
    setenv("OPENBLAS_CORETYPE", "SkylakeX", 0);
#endif
}

struct OpenBlas {
  void *handle = nullptr;
  SgemmFn sgemm = nullptr;
  SgemvFn sgemv = nullptr;
  char *(*corename)() = nullptr;
  std::string error;
};

OpenBlas &openBlas() {
  static OpenBlas blas;
  static std::once_flag once;
  std::call_once(once, [] {
    for (const char *path : {LLMC_OPENBLAS_LIBRARY, "libopenblas.so.0"}) {
      blas.handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
      if (blas.handle) break;
    }
    if (!blas.handle) {
      const char *why = dlerror();
      blas.error = std::string("cannot load OpenBLAS (") + LLMC_OPENBLAS_LIBRARY +
                   "): " + (why ? why : "unknown error");
      return;
    }
    blas.sgemm = reinterpret_cast<SgemmFn>(dlsym(blas.handle, "cblas_sgemm"));
    blas.corename = reinterpret_cast<char *(*)()>(dlsym(blas.handle, "openblas_get_corename"));
    blas.sgemv = reinterpret_cast<SgemvFn>(dlsym(blas.handle, "cblas_sgemv"));
    if (!blas.sgemm || !blas.sgemv) blas.error = "OpenBLAS has no cblas_sgemm or cblas_sgemv";
  });
  return blas;
}

} // namespace

SgemmFn blasSgemm(std::string &error) {
  OpenBlas &blas = openBlas();
  if (!blas.sgemm) error = blas.error;
  return blas.sgemm;
}

SgemvFn blasSgemv(std::string &error) {
  OpenBlas &blas = openBlas();
  if (!blas.sgemv) error = blas.error;
  return blas.sgemv;
}

std::string blasCoreName() {
  OpenBlas &blas = openBlas();
  return blas.corename ? blas.corename() : "";
}

} // namespace llmc::cpu
