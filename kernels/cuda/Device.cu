//===- Device.cu - CUDA device discovery and library versions -------------===//
//
// Also the process's CUDA settings that llmc-run's flags choose and the
// kernels read when they bind (TF32, tensor-core attention, GEMM timing),
// and the per-thread state of the execution device the kernels consult
// (graph capture, the profiler's part timer).
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Device.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>

namespace llmc::cuda {

void check(int status, const char *what, const char *file, int line) {
  if (status == cudaSuccess)
    return;
  std::ostringstream os;
  os << what << " failed at " << file << ":" << line << ": "
     << cudaGetErrorString(static_cast<cudaError_t>(status));
  throw std::runtime_error(os.str());
}

int deviceCount(std::string *why) {
  int count = 0; // cudaGetDeviceCount leaves it untouched when it fails
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    if (why)
      *why = cudaGetErrorString(status);
    cudaGetLastError(); // clear the sticky error for later callers
    return 0;
  }
  if (count == 0 && why)
    *why = "no CUDA device present";
  return count;
}

std::string describeDevice(int device) {
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    cudaGetLastError(); // answered here, not left for the next launch check
    return "no device";
  }
  std::ostringstream os;
  os << prop.name << ", sm_" << prop.major << prop.minor << ", "
     << prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0) << " GiB";
  return os.str();
}

std::string libraryVersions() {
  int runtime = 0, nccl = 0;
  cudaRuntimeGetVersion(&runtime);
  ncclGetVersion(&nccl);
  std::ostringstream os;
  os << "CUDA runtime " << runtime / 1000 << "." << (runtime % 1000) / 10 << ", cuBLASLt "
     << cublasLtGetVersion() << ", NCCL " << nccl;
  return os.str();
}

#define LLMC_CUDA_CHECK(expr) check((expr), #expr, __FILE__, __LINE__)

void *deviceAlloc(size_t bytes) {
  void *ptr = nullptr;
  LLMC_CUDA_CHECK(cudaMalloc(&ptr, bytes ? bytes : 1));
  return ptr;
}

void deviceFree(void *ptr) {
  if (ptr)
    cudaFree(ptr); // never throws: called from destructors
}

// Kernels upload their tables when they bind, on the legacy stream, which
// the programs' non-blocking streams do not wait for: a pageable cudaMemcpy
// may return before its DMA lands and cudaMemset returns at once, so both
// wait for the device before returning (binding only: never in a step).
void copyToDevice(void *device, const void *host, size_t bytes) {
  LLMC_CUDA_CHECK(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice));
  LLMC_CUDA_CHECK(cudaDeviceSynchronize());
}

void copyToHost(void *host, const void *device, size_t bytes) {
  LLMC_CUDA_CHECK(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost));
}

void deviceFill(void *ptr, int value, size_t bytes) {
  LLMC_CUDA_CHECK(cudaMemset(ptr, value, bytes));
  LLMC_CUDA_CHECK(cudaDeviceSynchronize());
}

void synchronize() { LLMC_CUDA_CHECK(cudaDeviceSynchronize()); }

namespace {
bool gAllowTf32 = false;
AttentionImpl gAttentionImpl = AttentionImpl::Auto;
/// LLMC_GEMM_TIMING=0 (or "off") turns GEMM timing off by default.
bool gemmTimingFromEnvironment() {
  const char *value = std::getenv("LLMC_GEMM_TIMING");
  return !value || (std::string(value) != "0" && std::string(value) != "off");
}
bool gGemmTiming = gemmTimingFromEnvironment();
bool gFp8TensorCores = false; // --fp8-tensor-cores
thread_local bool tCapturing = false;
thread_local PartTimer *tPartTimer = nullptr;
} // namespace

void setGemmTiming(bool enable) { gGemmTiming = enable; }
bool gemmTiming() { return gGemmTiming; }
void setFp8TensorCores(bool enable) { gFp8TensorCores = enable; }
bool fp8TensorCores(bool &on, std::string &error) {
  const char *value = std::getenv("LLMC_CUDA_FP8_MMA");
  const std::string v = value ? value : "";
  on = gFp8TensorCores || v == "1";
  if (gFp8TensorCores || v.empty() || v == "0" || v == "1")
    return true;
  error = "LLMC_CUDA_FP8_MMA=" + v + " must be 1 (fp8 tensor cores) or 0 (bf16 ones)";
  return false;
}
void setCapturingGraph(bool capturing) { tCapturing = capturing; }
bool capturingGraph() { return tCapturing; }
PartTimer *partTimer() { return tPartTimer; }
void setPartTimer(PartTimer *timer) { tPartTimer = timer; }

void setAllowTf32(bool allow) { gAllowTf32 = allow; }
bool allowTf32() { return gAllowTf32; }
void setAttentionImpl(AttentionImpl impl) { gAttentionImpl = impl; }
AttentionImpl attentionImpl() { return gAttentionImpl; }

} // namespace llmc::cuda
