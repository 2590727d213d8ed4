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

/// Whether a GEMM's cuBLASLt algorithm is chosen by timing the heuristic's
/// top candidates on the device when its kernel binds (kernels/cuda/
/// LtGemm.cu), or is the heuristic's first choice. On by default unless
/// the environment sets LLMC_GEMM_TIMING=0; `llmc-run --no-gemm-timing`
/// turns it off. Read when a GEMM is planned.
void setGemmTiming(bool enable);
bool gemmTiming();

/// Whether fp8 grouped products (the experts') run on fp8 tensor cores
/// instead of bf16 ones (kernels/cuda/GroupedMmaFp8.cuh): on with
/// `llmc-run --fp8-tensor-cores` or LLMC_CUDA_FP8_MMA=1 in the
/// environment, off by default until a GPU has run it. Read when those
/// kernels bind; false with `error` set where LLMC_CUDA_FP8_MMA holds
/// anything but 0 or 1 (and the flag is not given).
void setFp8TensorCores(bool enable);
bool fp8TensorCores(bool &on, std::string &error);

/// Marks the calling thread as capturing a CUDA graph (the execution
/// device, around cudaStreamBeginCapture/EndCapture): work that must not
/// be captured (LtGemm's timing) is skipped while it is.
void setCapturingGraph(bool capturing);
bool capturingGraph();

/// The parts of one instruction's device work, for `llmc-run --profile`:
/// while the execution device times an instruction, a kernel that launches
/// several kinds of device work marks where each begins on its stream, and
/// the instruction's time is split at the marks.
class PartTimer {
public:
  virtual ~PartTimer() = default;
  /// The work enqueued on `stream` from here on is `part` (a string with
  /// static storage), or, for null, the instruction's own again.
  virtual void mark(void *stream, const char *part) = 0;
};
/// The calling thread's part timer (null: not profiling).
PartTimer *partTimer();
void setPartTimer(PartTimer *timer);

/// Throws RuntimeError-style std::runtime_error with `what` when `status` is
/// not cudaSuccess (status is a cudaError_t passed as int).
void check(int status, const char *what, const char *file, int line);

} // namespace llmc::cuda

#endif
