//===- DeviceTensor.h - a GPU tensor for the benchmark programs -*- C++ -*-===//
//
// The CUDA benchmarks (attention_gpu.cpp, head_gpu.cpp, calibrate_gpu.cpp)
// bind kernels to tensors in device memory filled from the host.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_BENCH_DEVICETENSOR_H
#define LLMC_BENCH_DEVICETENSOR_H

#include "common/Half.h"
#include "kernels/Tensor.h"
#include "kernels/cuda/Device.h"

#include <cstdint>
#include <random>
#include <vector>

namespace llmc::bench {

struct DeviceTensor {
  DeviceTensor(DType dtype, std::vector<int64_t> shape) {
    view.dtype = dtype;
    view.shape = std::move(shape);
    view.data = cuda::deviceAlloc(view.bytes());
  }
  ~DeviceTensor() { cuda::deviceFree(view.data); }
  DeviceTensor(const DeviceTensor &) = delete;
  DeviceTensor &operator=(const DeviceTensor &) = delete;

  /// Normal values times `scale` (bf16), zero from element `zeroFrom` on.
  void randomize(uint64_t seed, float scale = 1.0f, int64_t zeroFrom = -1) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal;
    std::vector<uint16_t> host(static_cast<size_t>(view.numel()));
    for (size_t i = 0; i < host.size(); ++i)
      host[i] = zeroFrom >= 0 && static_cast<int64_t>(i) >= zeroFrom
                    ? 0
                    : floatToBf16(scale * normal(rng));
    cuda::copyToDevice(view.data, host.data(), view.bytes());
  }
  /// Integer ids in [0, bound) (i32).
  void ids(uint64_t seed, int64_t bound) {
    std::mt19937_64 rng(seed);
    std::vector<int32_t> host(static_cast<size_t>(view.numel()));
    for (int32_t &id : host) id = static_cast<int32_t>(rng() % static_cast<uint64_t>(bound));
    cuda::copyToDevice(view.data, host.data(), view.bytes());
  }
  /// One f32 value.
  void scalar(float value) { cuda::copyToDevice(view.data, &value, sizeof(float)); }

  TensorView view;
};

} // namespace llmc::bench

#endif
