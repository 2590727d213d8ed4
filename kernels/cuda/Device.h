//===- Device.h - CUDA device discovery -------------------------*- C++ -*-===//
//
// Plain C++ header (no CUDA types) so the runtime and tests can ask whether
// a GPU is usable without including cuda_runtime.h.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CUDA_DEVICE_H
#define LLMC_KERNELS_CUDA_DEVICE_H

#include <string>

namespace llmc::cuda {

/// Number of usable CUDA devices; 0 when there is no driver or no GPU (the
/// reason is in `why`).
int deviceCount(std::string *why = nullptr);

/// "NVIDIA H100 80GB HBM3, sm_90, 79.1 GiB" for device 0.
std::string describeDevice(int device = 0);

/// Versions of the CUDA runtime, cuBLASLt and NCCL this build links.
std::string libraryVersions();

/// Throws RuntimeError-style std::runtime_error with `what` when `status` is
/// not cudaSuccess (status is a cudaError_t passed as int).
void check(int status, const char *what, const char *file, int line);

} // namespace llmc::cuda

#endif
