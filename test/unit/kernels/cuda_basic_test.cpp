//===- cuda_basic_test.cpp - CUDA build, device query and kernel twins ----===//
//
// fill and copy are conformance cases (shape_test.cpp).

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

} // namespace
} // namespace llmc::test
