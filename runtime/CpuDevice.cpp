//===- CpuDevice.cpp - the CPU backend's execution device -----------------===//
//
// Kernels run on the host arena in program order on the calling thread, so
// streams and events are already satisfied and there is nothing to copy.
//
//===----------------------------------------------------------------------===//

#include "runtime/ExecutionDevice.h"
#include "runtime/support/Error.h"

#include <cstring>

namespace llmc {
namespace {

class CpuDevice final : public ExecutionDevice {
public:
  explicit CpuDevice(size_t arenaBytes) : arena_(arenaBytes) {}
  Backend backend() const override { return Backend::CPU; }
  Arena &hostArena() override { return arena_; }
  uint8_t *kernelBase() override { return arena_.base(); }
  void *stream(int) override { return nullptr; }
  const int64_t *deviceStep() override { return nullptr; }
  void copy(void *dst, const void *src, size_t bytes, int) override {
    if (dst != src)
      std::memmove(dst, src, bytes);
  }
  void recordEvent(int64_t, int) override {}
  void waitEvent(int64_t, int) override {}
  void runProgram(const void *, int64_t, bool, const std::function<void()> &enqueue) override {
    enqueue();
  }
  void synchronize() override {}
  void toDevice(size_t, size_t) override {}
  void toHost(size_t, size_t) override {}
  size_t highWaterMark() override { return arena_.highWaterMark(); }
  std::string describe() override { return ""; }

private:
  Arena arena_;
};

} // namespace

size_t ExecutionDevice::hostOffset(const TensorView &view) {
  const uint8_t *base = hostArena().base(), *p = static_cast<const uint8_t *>(view.data);
  if (p < base || p + view.bytes() > base + hostArena().size())
    fail("internal: ", view.describe(), " is not a view of the host arena");
  return static_cast<size_t>(p - base);
}

std::unique_ptr<ExecutionDevice> makeCpuDevice(size_t arenaBytes) {
  return std::make_unique<CpuDevice>(arenaBytes);
}

} // namespace llmc
