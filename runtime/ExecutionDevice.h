//===- ExecutionDevice.h - where a rank's programs execute ------*- C++ -*-===//
//
// The arena lives in host memory on the CPU backend and in device memory on
// a GPU; the trainer, initialisation and checkpoints always work on the
// host arena. On a GPU the host arena is a mirror: the trainer moves the
// few tensors it touches (the batch, lr/step, the loss, the persistent
// state around initialisation and checkpoints) with toDevice/toHost, which
// are no-ops on the CPU. Kernels are bound to kernelBase().
//
// A program's instructions name streams (0 compute, 1 communication) and
// events (inserted by llmc-place-streams). A GPU enqueues them on CUDA
// streams; the CPU runs stream 0 on the calling thread and stream 1 on a
// thread of its own (HostStreams.h).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_EXECUTIONDEVICE_H
#define LLMC_RUNTIME_EXECUTIONDEVICE_H

#include "kernels/AttentionImpl.h"
#include "kernels/Kernel.h"
#include "runtime/Arena.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace llmc {

class CommWatchdog;

/// A named part of one instruction's device time (`llmc-run --profile` on
/// a GPU: the cuBLASLt GEMMs inside a fused kernel, say).
struct TimedPart {
  std::string name;
  double micros = 0;
  int64_t count = 0; ///< launches of the part within the instruction
};

/// Times a program's instructions for --profile and --trace. The CPU's
/// waits for each instruction and reads the host's clock; a GPU's records
/// events around each launch and reads them once the program has finished,
/// so instructions run as they would unprofiled (in stream order, the two
/// streams overlapping), only launched one by one instead of as a graph.
class InstructionTimer {
public:
  virtual ~InstructionTimer() = default;
  /// Just before / after instruction `i` is launched on program stream
  /// `stream`.
  virtual void begin(size_t i, int stream) = 0;
  virtual void end(size_t i, int stream) = 0;
  /// After the program has finished: each instruction's time and start
  /// (µs; starts on the host's steady clock, comparable between processes)
  /// and its parts (none on the CPU).
  virtual void read(std::vector<double> &micros, std::vector<double> &starts,
                    std::vector<std::vector<TimedPart>> &parts) = 0;
};

class ExecutionDevice {
public:
  virtual ~ExecutionDevice() = default;
  virtual Backend backend() const = 0;
  /// The host arena (the mirror, on a GPU).
  virtual Arena &hostArena() = 0;
  /// The address kernels and collectives are bound to for arena offset 0.
  virtual uint8_t *kernelBase() = 0;
  /// The backend stream handle of program stream `index` (null on the CPU).
  virtual void *stream(int index) = 0;
  /// Where captured kernels read the current step (null on the CPU, whose
  /// kernels read StepContext::step).
  virtual const int64_t *deviceStep() = 0;

  /// A bound instruction (BoundProgram).
  using Step = std::function<void(const StepContext &)>;
  /// Issues `step` on program stream `stream`, in issue order on that
  /// stream. A GPU's steps enqueue device work themselves and run here;
  /// the CPU runs stream 0 here and queues stream 1 for its thread.
  /// `step` and `ctx` must live until runProgram returns.
  virtual void launch(int stream, const Step &step, const StepContext &ctx) = 0;
  /// A step that runs `hostWork` (a host kernel, ZeRO-Offload's update) on
  /// the host in the order of program stream `stream`: after the work issued
  /// before it, before the work issued after it. The CPU runs it as is; a
  /// GPU enqueues it as a host function on the stream.
  virtual Step hostStep(int stream, Step hostWork) { return hostWork; }
  /// Testing aid (llmc-run --debug-stream-delay-us): a random 0..maxMicros
  /// µs pause before every instruction on every stream; the CPU only.
  virtual void setStreamDelays(int maxMicros, uint64_t seed) = 0;

  /// Byte copy between arena addresses on program stream `stream`.
  virtual void copy(void *dst, const void *src, size_t bytes, int stream) = 0;
  virtual void recordEvent(int64_t event, int stream) = 0;
  virtual void waitEvent(int64_t event, int stream) = 0;

  /// Runs one program: `enqueue` issues all of its instructions in order.
  /// A GPU runs it eagerly the first time (libraries set themselves up),
  /// captures it as a CUDA graph the second time and replays the graph
  /// from then on, unless `eager` (profiling: each launch timed). It
  /// returns when every stream has finished.
  virtual void runProgram(const void *program, int64_t step, bool eager,
                          const std::function<void()> &enqueue) = 0;
  /// From now on every runProgram is eager: a host-staged communicator
  /// (HostStagedCommunicator.h) blocks the launching thread, which no CUDA
  /// graph can hold. A no-op where programs are never captured.
  virtual void runEagerly() {}
  /// Destroys every captured graph (a later run captures its program
  /// again; one still running is freed when it ends). NCCL neither destroys
  /// nor aborts a communicator whose work a live graph holds, so its owner
  /// calls this first. A no-op where programs are never captured.
  virtual void releaseGraphs() {}
  /// From now on each runProgram's wait for its streams is watched by
  /// `watchdog` (null: no longer), which may abort what the program waits
  /// on and make runProgram throw why; its owner clears it before it goes.
  /// A no-op where waits cannot hang on other ranks (the CPU's collectives
  /// time out themselves).
  virtual void setWatchdog(CommWatchdog *) {}
  /// Waits for all outstanding work.
  virtual void synchronize() = 0;
  /// A timer for the `instructions` of one program (BoundProgram's
  /// profiling).
  virtual std::unique_ptr<InstructionTimer> makeInstructionTimer(size_t instructions) = 0;

  /// [offset, offset+bytes) of the arena from the host mirror to the
  /// device / back (no-ops on the CPU, where there is one arena).
  virtual void toDevice(size_t offset, size_t bytes) = 0;
  virtual void toHost(size_t offset, size_t bytes) = 0;
  /// The bytes of a view of the host arena (BoundProgram::view).
  void toDevice(const TensorView &hostView) { toDevice(hostOffset(hostView), hostView.bytes()); }
  void toHost(const TensorView &hostView) { toHost(hostOffset(hostView), hostView.bytes()); }

  /// One past the highest arena byte the run wrote (see Arena).
  virtual size_t highWaterMark() = 0;
  /// Device facts for the run's summary ("" on the CPU).
  virtual std::string describe() = 0;
  /// What the kernels bound since the last call chose where a backend has
  /// choices (a GPU: which implementation runs each attention op), one
  /// line each; none on the CPU.
  virtual std::vector<std::string> bindingNotes() { return {}; }

private:
  /// Where a view of the host arena starts; throws for any other pointer.
  size_t hostOffset(const TensorView &hostView);
};

/// The CPU backend: kernels run on the host arena on the calling thread,
/// communication on stream 1 (if any) on a thread of its own. The arena's
/// first `persistentBytes` start zero and untouched (Arena).
std::unique_ptr<ExecutionDevice> makeCpuDevice(size_t arenaBytes, size_t persistentBytes = 0);
/// The CPU backend with host memory beside the arena (ZeRO-Offload): the
/// arena's `arenaBytes` stand for device memory and `hostBytes` follow them
/// in the same allocation; highWaterMark() measures the arena alone.
std::unique_ptr<ExecutionDevice> makeCpuDevice(size_t arenaBytes, size_t hostBytes,
                                               size_t persistentBytes);

/// How a GPU rank's collectives and transfers travel (llmc-run
/// --device-comm): NCCL, or the host transport staged through pinned
/// memory (runtime/comm/HostStagedCommunicator.h), which works where ranks
/// share a GPU; auto picks the host where they do.
enum class DeviceComm { Auto, Nccl, Host };
bool parseDeviceComm(const std::string &text, DeviceComm *out);

/// The GPUs this process can use (0 without CUDA or without a GPU).
int visibleGpuCount();

/// What llmc-run's flags choose for a GPU's kernels (read when they bind).
struct CudaOptions {
  bool tf32 = false;                 ///< fp32 GEMMs on TF32 tensor cores
  AttentionImpl attention = AttentionImpl::Auto; ///< what runs attention (--attention)
  /// Each GEMM's cuBLASLt algorithm timed among the heuristic's candidates
  /// when it binds (false: the heuristic's first). The default also heeds
  /// LLMC_GEMM_TIMING=0 (kernels/cuda/Device.h).
  bool gemmTiming = true;
  /// The experts' fp8 products on fp8 tensor cores (--fp8-tensor-cores;
  /// also LLMC_CUDA_FP8_MMA=1, kernels/cuda/Device.h).
  bool fp8TensorCores = false;
  DeviceComm comm = DeviceComm::Auto; ///< --device-comm
  /// Programs captured as CUDA graphs after their first run (false:
  /// --no-cuda-graphs, every run eager).
  bool graphs = true;
};

/// A GPU for the CUDA backend: the arena in device memory, a host mirror,
/// compute and communication streams, events and graphs. The GPU is the
/// rank's local index (mpirun, torchrun or Slurm) modulo the visible GPUs.
/// Throws RuntimeError saying why when this build has no CUDA or no GPU is
/// usable.
std::unique_ptr<ExecutionDevice> makeCudaDevice(size_t arenaBytes, const CudaOptions &options,
                                                size_t hostBytes = 0);

} // namespace llmc

#endif
