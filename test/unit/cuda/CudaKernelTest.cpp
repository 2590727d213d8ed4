//===- CudaKernelTest.cpp - CUDA kernels against the CPU kernels ----------===//
//
// Every CUDA kernel must compute what the CPU kernel of the same name does.
// Without a GPU the tests report SKIPPED with the reason (CI builds and links
// everything but has no GPU).
//
//===----------------------------------------------------------------------===//

#include "kernels/Kernel.h"
#include "kernels/cuda/Device.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace llmc;

namespace {

class CudaKernels : public ::testing::Test {
protected:
  void SetUp() override {
    std::string why;
    if (cuda::deviceCount(&why) == 0)
      GTEST_SKIP() << "no usable CUDA device (" << why << "): CUDA kernels are built but not run";
  }

  /// Binds and runs kernel `name` on `backend` with the given views.
  void run(Backend backend, const std::string &name, KernelArgs args) {
    KernelFactory factory = findKernel(backend, name);
    ASSERT_NE(factory, nullptr) << backendName(backend) << " has no kernel '" << name << "'";
    std::string error;
    std::unique_ptr<Kernel> kernel = factory(args, error);
    ASSERT_NE(kernel, nullptr) << error;
    kernel->run(StepContext{1, nullptr});
    if (backend == Backend::CUDA) {
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    }
  }
};

struct DeviceBuffer {
  explicit DeviceBuffer(size_t bytes) { EXPECT_EQ(cudaMalloc(&ptr, bytes), cudaSuccess); }
  ~DeviceBuffer() { cudaFree(ptr); }
  void *ptr = nullptr;
};

TEST_F(CudaKernels, FillMatchesCpuAndWritesEveryElement) {
  for (int64_t n : {1, 7, 1000, 1 << 20}) {
    std::vector<float> cpu(n, NAN), gpu(n, NAN);
    DeviceBuffer d(n * sizeof(float));
    cudaMemcpy(d.ptr, gpu.data(), n * sizeof(float), cudaMemcpyHostToDevice); // poison
    KernelArgs args;
    args.attrs.setFloat("value", -1.25);
    args.outputs = {TensorView{cpu.data(), DType::F32, {n}}};
    run(Backend::CPU, "fill", args);
    args.outputs = {TensorView{d.ptr, DType::F32, {n}}};
    run(Backend::CUDA, "fill", args);
    cudaMemcpy(gpu.data(), d.ptr, n * sizeof(float), cudaMemcpyDeviceToHost);
    EXPECT_EQ(std::memcmp(cpu.data(), gpu.data(), n * sizeof(float)), 0) << "n = " << n;
  }
}

TEST_F(CudaKernels, CopyMovesEveryByte) {
  const int64_t n = 12345;
  std::vector<float> host(n), back(n, NAN);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  for (float &v : host) v = normal(rng);
  DeviceBuffer a(n * 4), b(n * 4);
  cudaMemcpy(a.ptr, host.data(), n * 4, cudaMemcpyHostToDevice);
  KernelArgs args;
  args.inputs = {TensorView{a.ptr, DType::F32, {n}}};
  args.outputs = {TensorView{b.ptr, DType::F32, {n}}};
  run(Backend::CUDA, "copy", args);
  cudaMemcpy(back.data(), b.ptr, n * 4, cudaMemcpyDeviceToHost);
  EXPECT_EQ(host, back);
}

TEST(CudaBuild, LibrariesLinkAndDeviceQueryNeverCrashes) {
  // Runs everywhere: the CUDA, cuBLASLt and NCCL libraries are linked, and
  // asking for devices without a driver is an answer, not a crash.
  std::string why;
  int count = cuda::deviceCount(&why);
  EXPECT_GE(count, 0);
  std::string versions = cuda::libraryVersions();
  EXPECT_NE(versions.find("NCCL"), std::string::npos) << versions;
  std::cout << "[ info ] " << versions << "; devices: " << count
            << (count ? " (" + cuda::describeDevice(0) + ")" : " (" + why + ")") << "\n";
}

} // namespace
