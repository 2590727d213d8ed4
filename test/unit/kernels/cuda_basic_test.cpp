//===- cuda_basic_test.cpp - CUDA build, device query and kernel twins ----===//
//
// fill and copy are conformance cases (shape_test.cpp); fill's binding
// errors are the CPU's (the shared contract, kernels/contracts/Fill.h).

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

TEST(CudaBuild, FillBindErrorsMatchCpu) {
  // Runs everywhere: refused while binding, before the device is touched.
  KernelAttrs noValue, intValue = attrs({{"value", 0.0}}, {}),
                       nanValue = attrs({{"value", std::nan("")}}, {});
  intValue.setInt("value", 3); // read as a float on both
  TensorView f32 = typeOnly(DType::F32, {4}), i32 = typeOnly(DType::I32, {4});
  expectCudaBindErrorsMatchCpu({{"fill", {}, {f32}, noValue},
                                {"fill", {}, {f32}, nanValue},
                                {"fill", {}, {i32}, intValue},
                                {"fill", {f32}, {f32}, intValue}});
}

} // namespace
} // namespace llmc::test
