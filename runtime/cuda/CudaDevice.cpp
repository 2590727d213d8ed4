//===- CudaDevice.cpp - the CUDA backend's execution device ---------------===//
//
// One GPU per rank. The arena is one cudaMalloc sized by the compiler's
// plan (filled with Arena::kPattern so the run's high-water mark can be
// measured, as on the CPU); the host arena is its mirror for the trainer.
// Program streams — 0 kernels, 1 collectives, one per pipeline transfer
// channel (common/TransferChannel.h) — are non-blocking streams created
// when a program first names one; program events are cudaEvents created on
// first use.
//
// A program runs eagerly the first time, since cuBLASLt and NCCL set
// themselves up on first use (which a graph capture forbids); the second
// time its instructions are captured from stream 0 into a CUDA graph (each
// other stream forks into the capture through an event recorded on stream
// 0 and is joined back at the end through one of its own), and later runs
// replay the graph: one launch per step. Replayed
// kernels keep the arguments they were captured with, so the only
// per-step value a kernel needs besides arena tensors (the step, for
// dropout masks) is written to a device word before every run and read
// there through StepContext::deviceStep.
//
// Profiled runs (--profile, --trace) stay eager: each launch is bracketed by
// CUDA events (CudaEventTimer.h), read when the program has finished. So do
// programs with host work, runs under --no-cuda-graphs, and a program whose
// capture failed: the capture is ended and thrown away, a warning says why,
// and the program runs eagerly from then on.
//
//===----------------------------------------------------------------------===//

#include "common/TransferChannel.h"
#include "runtime/ExecutionDevice.h"
#include "runtime/comm/CommWatchdog.h"
#include "runtime/cuda/CudaEventTimer.h"
#include "runtime/support/Error.h"

#include "kernels/cuda/AttentionChoice.h"
#include "kernels/cuda/Device.h"

#include <cuda_runtime.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <utility>
#include <vector>

namespace llmc {
namespace {

void check(cudaError_t status, const char *what) {
  if (status != cudaSuccess)
    fail("CUDA ", what, " failed: ", cudaGetErrorString(status));
}

/// The rank's index among the ranks on its host.
int localRank() {
  for (const char *name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "LOCAL_RANK",
                           "SLURM_LOCALID"})
    if (const char *value = std::getenv(name))
      return std::atoi(value);
  return 0;
}

std::string formatGiB(size_t bytes) {
  std::ostringstream os;
  os.precision(2);
  os << std::fixed << static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0) << " GiB";
  return os.str();
}

class CudaDevice final : public ExecutionDevice {
public:
  CudaDevice(size_t arenaBytes, size_t hostBytes, int device, bool graphs)
      : host_(arenaBytes + hostBytes), deviceBytes_(arenaBytes), device_(device),
        eagerOnly_(!graphs) {
    check(cudaSetDevice(device_), "cudaSetDevice");
    check(cudaMalloc(&base_, deviceBytes_ ? deviceBytes_ : 1), "cudaMalloc of the arena");
    check(cudaMemset(base_, Arena::kPattern, deviceBytes_), "cudaMemset of the arena");
    // Host memory (ZeRO-Offload) is the mirror's tail, pinned so the copy
    // kernels' cudaMemcpyAsync run asynchronously on their stream.
    if (hostBytes) {
      check(cudaHostRegister(host_.base() + deviceBytes_, hostBytes, cudaHostRegisterDefault),
            "cudaHostRegister of the host memory");
      pinned_ = host_.base() + deviceBytes_;
    }
    // The compute and collective streams always; a transfer channel's when
    // a program names it.
    streamAt(kComputeStream);
    streamAt(kCollectiveStream);
    check(cudaMalloc(&step_, sizeof(int64_t)), "cudaMalloc of the step word");
    check(cudaMallocHost(&hostStep_, sizeof(int64_t)), "cudaMallocHost");
    check(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming), "cudaEventCreate");
    check(cudaDeviceSynchronize(), "arena setup");
  }

  ~CudaDevice() override {
    cudaDeviceSynchronize();
    releaseGraphs();
    for (auto &[id, event] : events_) cudaEventDestroy(event);
    cudaEventDestroy(fork_);
    for (cudaEvent_t e : joins_)
      if (e)
        cudaEventDestroy(e);
    for (cudaStream_t s : streams_)
      if (s)
        cudaStreamDestroy(s);
    if (pinned_)
      cudaHostUnregister(pinned_);
    cudaFreeHost(hostStep_);
    cudaFree(step_);
    cudaFree(base_);
  }

  Backend backend() const override { return Backend::CUDA; }
  Arena &hostArena() override { return host_; }
  uint8_t *kernelBase() override { return base_; }
  void *stream(int index) override { return streamAt(index); }
  const int64_t *deviceStep() override { return step_; }

  void copy(void *dst, const void *src, size_t bytes, int stream) override {
    if (dst != src)
      check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, streamAt(stream)),
            "cudaMemcpyAsync (device to device)");
  }

  // Steps enqueue their work on the stream they were bound to.
  void launch(int, const Step &step, const StepContext &ctx) override { step(ctx); }

  /// A host kernel as a host function on its stream. The work and the
  /// context it runs with live in hostCalls_; a captured graph would replay
  /// the context of its capture, so a program with host work runs eagerly.
  Step hostStep(int stream, Step hostWork) override {
    eagerOnly_ = true;
    hostCalls_.push_back(std::make_unique<HostCall>());
    HostCall *call = hostCalls_.back().get();
    call->work = std::move(hostWork);
    call->failure = &hostFailure_;
    call->threads = omp_get_max_threads();
    cudaStream_t s = streamAt(stream);
    return [this, call, s](const StepContext &ctx) {
      call->ctx = ctx;
      check(cudaLaunchHostFunc(s, &HostCall::run, call), "cudaLaunchHostFunc");
    };
  }
  void setStreamDelays(int, uint64_t) override {
    fail("stream delays are a CPU testing aid; the CUDA backend has none");
  }

  void recordEvent(int64_t event, int stream) override {
    check(cudaEventRecord(eventAt(event), streamAt(stream)), "cudaEventRecord");
  }
  void waitEvent(int64_t event, int stream) override {
    check(cudaStreamWaitEvent(streamAt(stream), eventAt(event), 0), "cudaStreamWaitEvent");
  }

  void runProgram(const void *program, int64_t step, bool eager,
                  const std::function<void()> &enqueue) override {
    // An error left by a call whose failure was already dealt with (a
    // library's probe while binding) is not this program's: cleared, so no
    // launch check below reports it as its own.
    cudaGetLastError();
    // The step word first, on the compute stream: every kernel after it
    // (captured or not) sees this step's value.
    *hostStep_ = step;
    check(cudaMemcpyAsync(step_, hostStep_, sizeof(int64_t), cudaMemcpyHostToDevice, streams_[0]),
          "cudaMemcpyAsync of the step");
    Graph &graph = graphs_[program];
    eager = eager || eagerOnly_ || graph.uncapturable;
    if (graph.exec && !eager) {
      check(cudaGraphLaunch(graph.exec, streams_[0]), "cudaGraphLaunch");
    } else if (graph.runs < 1 || eager || !captureAndLaunch(graph, enqueue)) {
      forkStreams();
      enqueue();
      joinStreams();
    }
    ++graph.runs;
    if (watchdog_)
      watchdog_->begin({"the step's device work"});
    const cudaError_t finished = cudaStreamSynchronize(streams_[0]);
    // Causes before their effects: the watchdog's abort, then a host
    // function's failure (whose stale data later kernels may fault on).
    if (watchdog_)
      watchdog_->end();
    hostFailure_.rethrow();
    check(finished, "the program's kernels");
  }

  void runEagerly() override { eagerOnly_ = true; }
  void releaseGraphs() override {
    for (auto &[program, graph] : graphs_)
      if (graph.exec) {
        cudaGraphExecDestroy(graph.exec);
        graph.exec = nullptr;
      }
  }
  void setWatchdog(CommWatchdog *watchdog) override { watchdog_ = watchdog; }
  void synchronize() override {
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    hostFailure_.rethrow();
  }
  std::unique_ptr<InstructionTimer> makeInstructionTimer(size_t instructions) override {
    return makeCudaEventTimer(instructions, [this](int s) -> void * { return streamAt(s); });
  }

  // On the compute stream, not the legacy default stream: the program
  // streams are non-blocking, so only stream order puts an upload before
  // the kernels that read it (a pageable cudaMemcpy may return before its
  // DMA lands). The host buffer is staged before the call returns.
  // Host memory past the arena has no device copy: only the arena's part
  // of a range moves.
  void toDevice(size_t offset, size_t bytes) override {
    bytes = offset >= deviceBytes_ ? 0 : std::min(bytes, deviceBytes_ - offset);
    if (!bytes)
      return;
    check(cudaMemcpyAsync(base_ + offset, host_.base() + offset, bytes, cudaMemcpyHostToDevice,
                          streams_[0]),
          "cudaMemcpyAsync to the device");
  }
  void toHost(size_t offset, size_t bytes) override {
    bytes = offset >= deviceBytes_ ? 0 : std::min(bytes, deviceBytes_ - offset);
    if (!bytes)
      return;
    check(cudaMemcpyAsync(host_.base() + offset, base_ + offset, bytes, cudaMemcpyDeviceToHost,
                          streams_[0]),
          "cudaMemcpyAsync to the host");
    check(cudaStreamSynchronize(streams_[0]), "the copy to the host");
  }

  size_t highWaterMark() override {
    // Scans down from the end in chunks: only the tail is ever read.
    std::vector<uint8_t> chunk(size_t(64) << 20);
    size_t end = deviceBytes_;
    while (end > 0) {
      size_t n = std::min(chunk.size(), end);
      check(cudaMemcpy(chunk.data(), base_ + end - n, n, cudaMemcpyDeviceToHost),
            "cudaMemcpy (high-water mark)");
      for (size_t i = n; i > 0; --i)
        if (chunk[i - 1] != Arena::kPattern)
          return end - n + i;
      end -= n;
    }
    return 0;
  }

  std::string describe() override {
    size_t freeBytes = 0, totalBytes = 0;
    if (cudaMemGetInfo(&freeBytes, &totalBytes) != cudaSuccess)
      cudaGetLastError(); // a summary line without the figure, not an error

    return "GPU " + std::to_string(device_) + " (" + cuda::describeDevice(device_) + "): " +
           formatGiB(totalBytes - freeBytes) + " in use by all processes, arena " +
           formatGiB(deviceBytes_);
  }

  std::vector<std::string> bindingNotes() override { return cuda::takeAttentionNotes(); }

private:
  /// This thread is capturing a graph while one lives (cuda::capturingGraph).
  struct CaptureMark {
    CaptureMark() { cuda::setCapturingGraph(true); }
    ~CaptureMark() { cuda::setCapturingGraph(false); }
  };
  struct Graph {
    int64_t runs = 0;
    cudaGraphExec_t exec = nullptr;
    bool uncapturable = false; ///< its capture failed: it runs eagerly
  };

  /// Captures the program `enqueue` issues into `graph` and launches it.
  /// False when the capture fails: it is ended and discarded, the error
  /// cleared, a warning says why, and the program is eager from then on
  /// (the caller runs it now). Nothing ran while capturing, so running it
  /// eagerly after is running it once.
  bool captureAndLaunch(Graph &graph, const std::function<void()> &enqueue) {
    check(cudaStreamBeginCapture(streams_[0], cudaStreamCaptureModeThreadLocal),
          "cudaStreamBeginCapture");
    std::string why;
    try {
      // Kernels that must not be captured (LtGemm's timing) hold back.
      CaptureMark capturing;
      forkStreams();
      enqueue();
      joinStreams();
    } catch (const std::exception &e) {
      why = e.what();
      joinStreamsQuietly(); // so ending the capture takes every stream out of it
    }
    cudaGraph_t captured = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(streams_[0], &captured);
    cudaGetLastError();
    checkNothingCaptures(why.empty() ? "cudaStreamEndCapture" : why);
    if (why.empty() && ended != cudaSuccess)
      why = std::string("cudaStreamEndCapture: ") + cudaGetErrorString(ended);
    if (why.empty()) {
      const cudaError_t made = cudaGraphInstantiate(&graph.exec, captured, 0);
      if (made != cudaSuccess) {
        why = std::string("cudaGraphInstantiate: ") + cudaGetErrorString(made);
        graph.exec = nullptr;
      }
    }
    if (captured)
      cudaGraphDestroy(captured);
    if (!why.empty()) {
      cudaGetLastError();
      graph.uncapturable = true;
      std::cerr << "llmc: warning: a program could not be captured as a CUDA graph (" << why
                << "); it runs eagerly, one launch per kernel\n";
      return false;
    }
    check(cudaGraphLaunch(graph.exec, streams_[0]), "cudaGraphLaunch");
    return true;
  }

  cudaStream_t streamAt(int index) {
    if (index < 0 || index >= kMaxStreams)
      fail("program stream ", index, " does not exist (the CUDA backend has streams 0 to ",
           kMaxStreams - 1, ")");
    cudaStream_t &s = streams_[static_cast<size_t>(index)];
    if (!s) {
      check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
      check(cudaEventCreateWithFlags(&joins_[static_cast<size_t>(index)], cudaEventDisableTiming),
            "cudaEventCreate");
    }
    return s;
  }
  cudaEvent_t eventAt(int64_t id) {
    auto it = events_.find(id);
    if (it != events_.end())
      return it->second;
    cudaEvent_t event;
    check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
    events_[id] = event;
    return event;
  }
  /// Every other stream starts after everything already on stream 0 (the
  /// batch, the step word) and, inside a capture, joins it.
  void forkStreams() {
    check(cudaEventRecord(fork_, streams_[0]), "cudaEventRecord (fork)");
    for (size_t i = 1; i < streams_.size(); ++i)
      if (streams_[i])
        check(cudaStreamWaitEvent(streams_[i], fork_, 0), "cudaStreamWaitEvent (fork)");
  }
  /// Stream 0 ends after everything on every other stream (a capture must
  /// join each stream it forked).
  void joinStreams() {
    for (size_t i = 1; i < streams_.size(); ++i)
      if (streams_[i]) {
        check(cudaEventRecord(joins_[i], streams_[i]), "cudaEventRecord (join)");
        check(cudaStreamWaitEvent(streams_[0], joins_[i], 0), "cudaStreamWaitEvent (join)");
      }
  }

  /// joinStreams() on a capture that may be broken: each stream tried,
  /// whatever the others did.
  void joinStreamsQuietly() {
    for (size_t i = 1; i < streams_.size(); ++i)
      if (streams_[i] && cudaEventRecord(joins_[i], streams_[i]) == cudaSuccess)
        cudaStreamWaitEvent(streams_[0], joins_[i], 0);
    cudaGetLastError();
  }
  /// After a capture ends, no stream may still be capturing: a stream left
  /// in a broken capture would fail every later call on it with an error
  /// that hides `cause`.
  void checkNothingCaptures(const std::string &cause) {
    for (cudaStream_t s : streams_) {
      cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
      if (s && cudaStreamIsCapturing(s, &status) == cudaSuccess &&
          status != cudaStreamCaptureStatusNone)
        fail("a program stream is still in a CUDA graph capture after it ended (", cause,
             "); run with --no-cuda-graphs");
    }
  }

  /// A host kernel's work and the context of its latest launch.
  /// The first error of a host function. An exception must not leave a
  /// CUDA callback (that would terminate the process), so it is kept here
  /// and rethrown on the launching thread once the program has finished;
  /// the host work after it is skipped, since a collective after a failed
  /// one would only wait for peers in vain.
  class HostFailure {
  public:
    bool failed() {
      std::lock_guard<std::mutex> lock(mutex_);
      return first_ != nullptr;
    }
    void keep(std::exception_ptr failure) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!first_)
        first_ = std::move(failure);
    }
    void rethrow() {
      std::exception_ptr failure;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        std::swap(failure, first_);
      }
      if (failure)
        std::rethrow_exception(failure);
    }

  private:
    std::mutex mutex_;
    std::exception_ptr first_;
  };

  struct HostCall {
    Step work;
    StepContext ctx;
    HostFailure *failure = nullptr;
    /// The OpenMP threads of the thread that bound it (the rank's share of
    /// the cores): CUDA's callback thread, not OpenMP's, would otherwise
    /// start from the process default, every core.
    int threads = 1;
    static void CUDART_CB run(void *self) {
      auto *call = static_cast<HostCall *>(self);
      if (call->failure->failed())
        return;
      omp_set_num_threads(call->threads);
      try {
        call->work(call->ctx);
      } catch (...) {
        call->failure->keep(std::current_exception());
      }
    }
  };

  Arena host_;
  size_t deviceBytes_ = 0; ///< the mirror's first bytes, the device arena's
  uint8_t *pinned_ = nullptr; ///< the registered host memory, if any
  std::vector<std::unique_ptr<HostCall>> hostCalls_;
  HostFailure hostFailure_;
  int device_ = 0;
  uint8_t *base_ = nullptr;
  std::array<cudaStream_t, kMaxStreams> streams_{};
  std::array<cudaEvent_t, kMaxStreams> joins_{}; ///< per stream, its join into stream 0
  int64_t *step_ = nullptr, *hostStep_ = nullptr;
  CommWatchdog *watchdog_ = nullptr; ///< setWatchdog(): NCCL's, on several ranks
  bool eagerOnly_ = false; ///< runEagerly() (a host-staged communicator), --no-cuda-graphs
  cudaEvent_t fork_ = nullptr;
  std::map<int64_t, cudaEvent_t> events_;
  std::map<const void *, Graph> graphs_;
};

} // namespace

int visibleGpuCount() { return cuda::deviceCount(); }

std::unique_ptr<ExecutionDevice> makeCudaDevice(size_t arenaBytes, const CudaOptions &options,
                                                size_t hostBytes) {
  // Checked before anything is allocated: the answer on a machine without
  // a GPU is immediate.
  std::string why;
  int count = cuda::deviceCount(&why);
  if (count == 0)
    fail("this artifact was compiled with --target cuda, but no usable CUDA device is "
         "present (", why, "); compile with --target cpu to run on this machine");
  cuda::setAllowTf32(options.tf32);
  cuda::setAttentionImpl(options.attention);
  cuda::setGemmTiming(options.gemmTiming && cuda::gemmTiming());
  cuda::setFp8TensorCores(options.fp8TensorCores);
  return std::make_unique<CudaDevice>(arenaBytes, hostBytes, localRank() % count, options.graphs);
}

} // namespace llmc
