//===- CudaEventTimer.cpp - --profile's timer on a GPU --------------------===//
//
// Waiting for the device after every instruction (what the CPU's timer
// does) would serialise the two streams and time each kernel with a cold
// launch queue; instead each launch is bracketed by two CUDA events on its
// stream, and the events are read when the program has finished. A kernel
// that launches several kinds of work marks where each begins (through
// cuda::PartTimer, which this timer is while an instruction is being
// launched), so an instruction's time splits into named parts — cuBLASLt's
// GEMMs inside the fused LM head, say — without Nsight Compute. Events are
// pooled: a step's few thousand are created once and reused every step.
//
// Starts are placed on the host's steady clock through a reference event
// recorded, with the host time, before the program's first launch (the
// device is idle then), so --trace timelines line up across ranks as on
// the CPU.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaEventTimer.h"

#include "kernels/cuda/Device.h"
#include "runtime/support/Error.h"

#include <cuda_runtime.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace llmc {
namespace {

void check(cudaError_t status, const char *what) {
  if (status != cudaSuccess)
    fail("CUDA ", what, " failed (profiling): ", cudaGetErrorString(status));
}

class CudaEventTimer final : public InstructionTimer, public cuda::PartTimer {
public:
  CudaEventTimer(size_t instructions, std::function<void *(int)> streamOf)
      : instructions_(instructions), streamOf_(std::move(streamOf)) {}
  ~CudaEventTimer() override {
    if (cuda::partTimer() == this)
      cuda::setPartTimer(nullptr);
    for (cudaEvent_t e : pool_) cudaEventDestroy(e);
  }

  void begin(size_t i, int stream) override {
    cudaStream_t s = static_cast<cudaStream_t>(streamOf_(stream));
    if (marks_.empty()) {
      hostStart_ = std::chrono::duration<double, std::micro>(
                       std::chrono::steady_clock::now().time_since_epoch())
                       .count();
      reference_ = record(s);
    }
    current_ = i;
    marks_.push_back({i, Kind::Begin, nullptr, record(s)});
    cuda::setPartTimer(this);
  }

  void mark(void *stream, const char *part) override {
    marks_.push_back({current_, part ? Kind::Part : Kind::Resume, part,
                      record(static_cast<cudaStream_t>(stream))});
  }

  void end(size_t i, int stream) override {
    cuda::setPartTimer(nullptr);
    marks_.push_back({i, Kind::End, nullptr, record(static_cast<cudaStream_t>(streamOf_(stream)))});
  }

  void read(std::vector<double> &micros, std::vector<double> &starts,
            std::vector<std::vector<TimedPart>> &parts) override {
    micros.assign(instructions_, 0.0);
    starts.assign(instructions_, 0.0);
    parts.assign(instructions_, {});
    if (!marks_.empty())
      check(cudaEventSynchronize(marks_.back().event), "cudaEventSynchronize");
    // An instruction's marks are consecutive: its launches are issued
    // between its begin and end, on this thread.
    for (size_t j = 0; j < marks_.size(); ++j) {
      const Mark &m = marks_[j];
      if (m.kind == Kind::Begin) {
        starts[m.instruction] = hostStart_ + elapsed(reference_, m.event);
        size_t k = j;
        while (k < marks_.size() && marks_[k].kind != Kind::End) ++k;
        if (k < marks_.size()) // none when a launch threw
          micros[m.instruction] = elapsed(m.event, marks_[k].event);
      } else if (m.kind == Kind::Part && j + 1 < marks_.size()) {
        addPart(parts[m.instruction], m.part, elapsed(m.event, marks_[j + 1].event));
      }
    }
    marks_.clear();
    used_ = 0;
  }

private:
  enum class Kind { Begin, Part, Resume, End };
  struct Mark {
    size_t instruction;
    Kind kind;
    const char *part; ///< Kind::Part: its name
    cudaEvent_t event;
  };

  cudaEvent_t record(cudaStream_t stream) {
    if (used_ == pool_.size()) {
      cudaEvent_t e;
      check(cudaEventCreate(&e), "cudaEventCreate");
      pool_.push_back(e);
    }
    cudaEvent_t e = pool_[used_++];
    check(cudaEventRecord(e, stream), "cudaEventRecord");
    return e;
  }
  /// µs from `a` to `b`.
  static double elapsed(cudaEvent_t a, cudaEvent_t b) {
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    return 1000.0 * ms;
  }
  static void addPart(std::vector<TimedPart> &parts, const char *name, double micros) {
    for (TimedPart &p : parts)
      if (p.name == name) {
        p.micros += micros;
        ++p.count;
        return;
      }
    parts.push_back({name, micros, 1});
  }

  size_t instructions_;
  std::function<void *(int)> streamOf_;
  std::vector<cudaEvent_t> pool_;
  size_t used_ = 0;
  std::vector<Mark> marks_;
  size_t current_ = 0;
  cudaEvent_t reference_ = nullptr;
  double hostStart_ = 0;
};

} // namespace

std::unique_ptr<InstructionTimer> makeCudaEventTimer(size_t instructions,
                                                     std::function<void *(int)> streamOf) {
  return std::make_unique<CudaEventTimer>(instructions, std::move(streamOf));
}

} // namespace llmc
