//===- BindScratch.h - device memory a kernel owns from bind to destruction ===//
//
// Kernels never allocate in run(): what they need besides their operands
// (per-block partial sums, sort buffers, tables) is allocated when they are
// bound and freed with them. Plain C++ on top of Device.h.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CUDA_BINDSCRATCH_H
#define LLMC_KERNELS_CUDA_BINDSCRATCH_H

#include "kernels/cuda/Device.h"

#include <cstddef>

namespace llmc::cuda {

/// `bytes` of device memory (at least one byte, so an empty operand still
/// gets a valid pointer), freed on destruction.
class BindScratch {
public:
  BindScratch() = default;
  explicit BindScratch(size_t bytes) : ptr_(deviceAlloc(bytes ? bytes : 1)) {}
  ~BindScratch() {
    if (ptr_) deviceFree(ptr_);
  }
  BindScratch(const BindScratch &) = delete;
  BindScratch &operator=(const BindScratch &) = delete;
  BindScratch(BindScratch &&other) noexcept : ptr_(other.ptr_) { other.ptr_ = nullptr; }
  BindScratch &operator=(BindScratch &&other) noexcept {
    if (this != &other) {
      if (ptr_) deviceFree(ptr_);
      ptr_ = other.ptr_;
      other.ptr_ = nullptr;
    }
    return *this;
  }

  template <typename T> T *as() const { return static_cast<T *>(ptr_); }

private:
  void *ptr_ = nullptr;
};

} // namespace llmc::cuda

#endif
