//===- HostStreams.h - the CPU's two streams and their events ---*- C++ -*-===//
//
// A program compiled with communication on stream 1 (llmc-place-streams)
// overlaps it with compute on the CPU as a GPU would: stream 0 runs on the
// calling thread, stream 1 on a worker thread that runs the steps launched
// on it in launch order. Nothing else orders the two, only the program's
// events, with the GPU's semantics: a wait blocks its stream until the
// event has been recorded in the current run. The program checks (see
// StreamOrder.h) guarantee that each event is recorded once per run and
// before any wait for it is launched, so "recorded in this run" is exactly
// what cudaStreamWaitEvent would wait for.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_HOSTSTREAMS_H
#define LLMC_RUNTIME_HOSTSTREAMS_H

#include "runtime/ExecutionDevice.h"

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

namespace llmc {

class HostStreams {
public:
  HostStreams() = default;
  ~HostStreams();
  HostStreams(const HostStreams &) = delete;
  HostStreams &operator=(const HostStreams &) = delete;

  /// Starts a program run: events recorded before count no more.
  void beginRun();
  /// Runs `step` on stream 0 now, or queues it for stream 1 (whose thread
  /// starts on first use). `step` and `ctx` must outlive the run.
  void launch(int stream, const ExecutionDevice::Step &step, const StepContext &ctx);
  /// Called from the stream that reached the event.
  void record(int64_t event);
  /// Blocks the calling stream until `event` was recorded in this run;
  /// throws when the other stream failed or the run is being abandoned.
  void wait(int64_t event);
  /// Waits until stream 1 ran everything launched on it; rethrows the
  /// first error a step of stream 1 threw (the run is over then).
  void drain();
  /// After an error on stream 0: stream 1 skips what is still queued and
  /// leaves its waits, and this returns once it is idle.
  void abandon();
  /// Testing aid: before every step, each stream sleeps a random 0..max µs
  /// (its own generator, seeded from `seed` and the stream).
  void setDelays(int maxMicros, uint64_t seed);

private:
  struct Item {
    const ExecutionDevice::Step *step;
    const StepContext *ctx;
  };
  void workerLoop();
  void delay(int stream);

  std::mutex mutex_;
  std::condition_variable changed_;
  /// Stream 1's steps of this run in launch order; next_ is the first not
  /// yet taken. Cleared per run, so after the first run launching does not
  /// allocate.
  std::vector<Item> queue_;
  size_t next_ = 0;
  bool busy_ = false, stopping_ = false, abandoning_ = false;
  std::exception_ptr error_;
  /// events_[e]: the run in which event e was last recorded.
  std::vector<uint64_t> events_;
  uint64_t run_ = 0;
  int maxDelayMicros_ = 0;
  std::mt19937_64 delayRng_[2];
  std::thread worker_;
};

} // namespace llmc

#endif
