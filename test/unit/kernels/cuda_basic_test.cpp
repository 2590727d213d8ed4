//===- cuda_basic_test.cpp - CUDA build, device query, fill and copy ------===//

#include "CudaConformance.h"

#include "kernels/cuda/Device.h"

#include <algorithm>
#include <iostream>

namespace llmc::test {
namespace {

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

TEST(CudaBuild, EveryCpuKernelHasACudaTwin) {
  // Runs everywhere: a program compiled for --target cuda binds every
  // kernel name the compiler can emit.
  std::vector<std::string> cpu = kernelNames(Backend::CPU), gpu = kernelNames(Backend::CUDA);
  for (const std::string &name : cpu)
    EXPECT_NE(std::find(gpu.begin(), gpu.end(), name), gpu.end())
        << "kernel '" << name << "' has no CUDA implementation";
}

TEST(CudaKernels, FillWritesEveryElement) {
  LLMC_REQUIRE_GPU();
  for (DType t : kFloatTypes)
    for (int64_t n : {1, 7, 1000, 1 << 20 | 3}) {
      Buffer out(t, {n});
      expectCudaMatchesCpu("fill", {}, {&out}, attrs({{"value", -1.25}}), {Metric::Elementwise, {0.0}});
    }
}

TEST(CudaKernels, CopyMovesEveryByte) {
  LLMC_REQUIRE_GPU();
  Buffer in = Buffer::of(randomTensor({123, 45}, 3), DType::F32);
  Buffer out(DType::F32, {45, 123});
  expectCudaMatchesCpu("copy", {&in}, {&out}, {}, {Metric::Elementwise, {0.0}});
}

} // namespace
} // namespace llmc::test
