//===- Device.cu - CUDA device discovery and library versions -------------===//

#include "kernels/cuda/Device.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <sstream>
#include <stdexcept>

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
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess)
    return "no device";
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

void copyToDevice(void *device, const void *host, size_t bytes) {
  LLMC_CUDA_CHECK(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice));
}

void copyToHost(void *host, const void *device, size_t bytes) {
  LLMC_CUDA_CHECK(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost));
}

void deviceFill(void *ptr, int value, size_t bytes) {
  LLMC_CUDA_CHECK(cudaMemset(ptr, value, bytes));
}

void synchronize() { LLMC_CUDA_CHECK(cudaDeviceSynchronize()); }

namespace {
bool gAllowTf32 = false;
AttentionImpl gAttentionImpl = AttentionImpl::Auto;
} // namespace

void setAllowTf32(bool allow) { gAllowTf32 = allow; }
bool allowTf32() { return gAllowTf32; }
void setAttentionImpl(AttentionImpl impl) { gAttentionImpl = impl; }
AttentionImpl attentionImpl() { return gAttentionImpl; }

} // namespace llmc::cuda
