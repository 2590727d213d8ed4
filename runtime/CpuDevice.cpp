//===- CpuDevice.cpp - the CPU backend's execution device -----------------===//
//
// Kernels run on the host arena on the calling thread (stream 0); a
// program with communication on streams of its own (collectives on 1, the
// pipeline transfer channels on theirs) runs all of them on a second
// thread, ordered by its events (HostStreams). One thread, in launch
// order, because the host transports take one caller at a time (MPI is
// initialised MPI_THREAD_SERIALIZED) and their sends return at once, so
// no transfer channel can hold up another as an NCCL send would; the
// events between compute and every communication stream are the GPU's.
// There is nothing to copy. Host memory (ZeRO-Offload) follows the arena
// in the same allocation; the first bytes stand for the device's.
//
//===----------------------------------------------------------------------===//

#include "common/TransferChannel.h"
#include "runtime/ExecutionDevice.h"
#include "runtime/HostStreams.h"
#include "runtime/support/Error.h"

#include <chrono>
#include <cstring>

namespace llmc {
namespace {

/// Host times: each instruction is waited for (both streams drained), so
/// its time is its own.
class HostInstructionTimer final : public InstructionTimer {
public:
  HostInstructionTimer(ExecutionDevice &device, size_t instructions)
      : device_(device), micros_(instructions), starts_(instructions) {}
  void begin(size_t i, int) override { start_ = clock::now(); starts_[i] = sinceEpoch(start_); }
  void end(size_t i, int) override {
    device_.synchronize();
    micros_[i] = std::chrono::duration<double, std::micro>(clock::now() - start_).count();
  }
  void read(std::vector<double> &micros, std::vector<double> &starts,
            std::vector<std::vector<TimedPart>> &parts) override {
    micros = micros_;
    starts = starts_;
    parts.assign(micros_.size(), {});
  }

private:
  using clock = std::chrono::steady_clock;
  static double sinceEpoch(clock::time_point t) {
    return std::chrono::duration<double, std::micro>(t.time_since_epoch()).count();
  }
  ExecutionDevice &device_;
  clock::time_point start_;
  std::vector<double> micros_, starts_;
};

class CpuDevice final : public ExecutionDevice {
public:
  CpuDevice(size_t arenaBytes, size_t hostBytes, size_t persistentBytes)
      : arena_(arenaBytes + hostBytes, persistentBytes), deviceBytes_(arenaBytes) {}
  Backend backend() const override { return Backend::CPU; }
  Arena &hostArena() override { return arena_; }
  uint8_t *kernelBase() override { return arena_.base(); }
  void *stream(int index) override {
    if (index < 0 || index >= kMaxStreams)
      fail("the CPU backend has streams 0 (compute) to ", kMaxStreams - 1,
           " (communication, then copies), not ", index);
    return nullptr;
  }
  const int64_t *deviceStep() override { return nullptr; }
  void copy(void *dst, const void *src, size_t bytes, int) override {
    if (dst != src)
      std::memmove(dst, src, bytes);
  }
  void launch(int stream, const Step &step, const StepContext &ctx) override {
    streams_.launch(stream, step, ctx);
  }
  void recordEvent(int64_t event, int) override { streams_.record(event); }
  void waitEvent(int64_t event, int) override { streams_.wait(event); }
  void runProgram(const void *, int64_t, bool, const std::function<void()> &enqueue) override {
    streams_.beginRun();
    try {
      enqueue();
    } catch (...) {
      // A communication stream's error, when it has one, is the cause of stream 0's.
      streams_.abandon();
      streams_.drain();
      throw;
    }
    streams_.drain();
  }
  void synchronize() override { streams_.drain(); }
  std::unique_ptr<InstructionTimer> makeInstructionTimer(size_t instructions) override {
    return std::make_unique<HostInstructionTimer>(*this, instructions);
  }
  void setStreamDelays(int maxMicros, uint64_t seed) override {
    streams_.setDelays(maxMicros, seed);
  }
  void toDevice(size_t, size_t) override {}
  void toHost(size_t, size_t) override {}
  size_t highWaterMark() override { return arena_.highWaterMark(deviceBytes_); }
  std::string describe() override { return ""; }

private:
  /// Stream 0 on the calling thread, every communication stream on lane 1,
  /// the copy stream on lane 2 (its copies overlap compute as on a GPU).
  static std::vector<int> communicationLanes() {
    std::vector<int> lanes(kMaxStreams, 1);
    lanes[kComputeStream] = 0;
    lanes[kCopyStream] = 2;
    return lanes;
  }
  Arena arena_;
  size_t deviceBytes_; ///< the arena's bytes that stand for device memory
  HostStreams streams_{communicationLanes()};
};

} // namespace

size_t ExecutionDevice::hostOffset(const TensorView &view) {
  const uint8_t *base = hostArena().base(), *p = static_cast<const uint8_t *>(view.data);
  if (p < base || p + view.bytes() > base + hostArena().size())
    fail("internal: ", view.describe(), " is not a view of the host arena");
  return static_cast<size_t>(p - base);
}

std::unique_ptr<ExecutionDevice> makeCpuDevice(size_t arenaBytes, size_t persistentBytes) {
  return std::make_unique<CpuDevice>(arenaBytes, 0, persistentBytes);
}

std::unique_ptr<ExecutionDevice> makeCpuDevice(size_t arenaBytes, size_t hostBytes,
                                               size_t persistentBytes) {
  return std::make_unique<CpuDevice>(arenaBytes, hostBytes, persistentBytes);
}

} // namespace llmc
