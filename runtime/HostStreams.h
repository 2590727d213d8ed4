//===- HostStreams.h - the CPU's streams and their events -------*- C++ -*-===//
//
// A program compiled with communication on streams of its own
// (llmc-place-streams: collectives on stream 1, each pipeline transfer
// channel on another, common/TransferChannel.h) overlaps it with compute on
// the CPU as a GPU would. Streams run on lanes: lane 0 is the calling
// thread, every other lane a worker thread that runs the steps launched on
// its streams in launch order. Nothing else orders the lanes, only the
// program's events, with the GPU's semantics: a wait blocks its stream
// until the event has been recorded in the current run. The program checks
// (see StreamOrder.h) guarantee that each event is recorded once per run
// and before any wait for it is launched, so "recorded in this run" is
// exactly what cudaStreamWaitEvent would wait for; for streams sharing a
// lane the record has then already run.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_HOSTSTREAMS_H
#define LLMC_RUNTIME_HOSTSTREAMS_H

#include "runtime/ExecutionDevice.h"

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

namespace llmc {

class HostStreams {
public:
  /// `laneOfStream[s]` is the lane stream s runs on (stream 0 must be on
  /// lane 0); streams beyond the list run on lane 1. Empty: each stream a
  /// lane of its own.
  explicit HostStreams(std::vector<int> laneOfStream = {});
  ~HostStreams();
  HostStreams(const HostStreams &) = delete;
  HostStreams &operator=(const HostStreams &) = delete;

  /// Starts a program run: events recorded before count no more.
  void beginRun();
  /// Runs `step` now when `stream` is on lane 0, else queues it for its
  /// lane's thread (started on first use). `step` and `ctx` must outlive
  /// the run.
  void launch(int stream, const ExecutionDevice::Step &step, const StepContext &ctx);
  /// Called from the stream that reached the event.
  void record(int64_t event);
  /// Blocks the calling stream until `event` was recorded in this run;
  /// throws when another lane failed or the run is being abandoned.
  void wait(int64_t event);
  /// Waits until every worker lane ran everything launched on it;
  /// rethrows the first error a worker's step threw (the run is over then).
  void drain();
  /// After an error on lane 0: the workers skip what is still queued and
  /// leave their waits, and this returns once they are idle.
  void abandon();
  /// Testing aid: before every step, each lane sleeps a random 0..max µs
  /// (its own generator, seeded from `seed` and the lane).
  void setDelays(int maxMicros, uint64_t seed);

private:
  struct Item {
    const ExecutionDevice::Step *step;
    const StepContext *ctx;
  };
  /// A worker thread and the steps of this run launched on its streams.
  struct Lane {
    /// In launch order; next is the first not yet taken. Cleared per run,
    /// so after the first run launching does not allocate.
    std::vector<Item> queue;
    size_t next = 0;
    bool busy = false;
    std::mt19937_64 delayRng;
    std::thread thread;
  };
  int laneOf(int stream) const;
  Lane &lane(int index);
  void workerLoop(Lane &lane);
  void delay(std::mt19937_64 &rng);
  bool idle() const;

  std::vector<int> laneOfStream_;
  std::mutex mutex_;
  std::condition_variable changed_;
  /// Lane 0 has no thread (the caller); its generator is callerRng_.
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::mt19937_64 callerRng_;
  bool stopping_ = false, abandoning_ = false;
  std::exception_ptr error_;
  /// events_[e]: the run in which event e was last recorded.
  std::vector<uint64_t> events_;
  uint64_t run_ = 0;
  int maxDelayMicros_ = 0;
  uint64_t delaySeed_ = 0;
};

} // namespace llmc

#endif
