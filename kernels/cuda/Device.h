//===- Device.h - CUDA device discovery -------------------------*- C++ -*-===//
//
// Plain C++ header (no CUDA types) so the runtime and tests can ask whether
// a GPU is usable without including cuda_runtime.h.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CUDA_DEVICE_H
#define LLMC_KERNELS_CUDA_DEVICE_H

#include "kernels/AttentionImpl.h"

#include <cstddef>
#include <string>

namespace llmc::cuda {

/// Number of usable CUDA devices; 0 when there is no driver or no GPU (the
/// reason is in `why`).
int deviceCount(std::string *why = nullptr);

/// "NVIDIA H100 80GB HBM3, sm_90, 79.1 GiB" for device 0.
std::string describeDevice(int device = 0);

/// Versions of the CUDA runtime, cuBLASLt and NCCL this build links.
std::string libraryVersions();

/// Device memory and copies for code that must not include CUDA headers
/// (the runtime's host side, the tests). Every call throws
/// std::runtime_error naming the call and the CUDA error.
void *deviceAlloc(size_t bytes);
void deviceFree(void *ptr);
void copyToDevice(void *device, const void *host, size_t bytes);
void copyToHost(void *host, const void *device, size_t bytes);
/// Sets every byte of [ptr, ptr+bytes) to `value` (0xFF makes f32 and bf16 NaN).
void deviceFill(void *ptr, int value, size_t bytes);
/// Waits for all work on the device and reports any asynchronous error.
void synchronize();

/// Whether fp32 GEMMs may use TF32 tensor cores (10-bit mantissa). Off by
/// default so fp32 results match the CPU backend; `llmc-run --tf32` turns
/// it on. Read when a matmul is bound.
void setAllowTf32(bool allow);
bool allowTf32();

/// What attention kernels are bound to (`llmc-run --attention`, default
/// auto: cuDNN where it takes the op, else llmc's CUDA-core kernels).
/// Read when attention is bound (kernels/cuda/attention.cu).
void setAttentionImpl(AttentionImpl impl);
AttentionImpl attentionImpl();

/// Throws RuntimeError-style std::runtime_error with `what` when `status` is
/// not cudaSuccess (status is a cudaError_t passed as int).
void check(int status, const char *what, const char *file, int line);

} // namespace llmc::cuda

#endif
