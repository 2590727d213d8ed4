//===- Executor.h - a program bound to an arena and kernels -----*- C++ -*-===//
//
// Binding happens once: every kernel instruction is looked up in the
// backend's registry and bound to its arena tensors (the kernel factory
// checks shapes and attributes), every collective to its communicator group.
// run() then launches the instructions in order on their streams without
// allocating. A program with two streams is first checked to order every
// cross-stream hazard with an event (StreamOrder.h).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_EXECUTOR_H
#define LLMC_RUNTIME_EXECUTOR_H

#include "kernels/Kernel.h"
#include "runtime/Artifact.h"
#include "runtime/ExecutionDevice.h"
#include "runtime/comm/Communicator.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace llmc {

class BoundProgram {
public:
  /// Binds `program`; throws RuntimeError naming the instruction index,
  /// kernel and source location of the first instruction that cannot bind.
  /// Collectives run on `comm`, except those marked to run on the host
  /// (layers run on the host's cores), which run on `hostComm` (MPI or
  /// TCP; `comm` itself when null, as on CPU ranks).
  BoundProgram(const ProgramInfo &program, ExecutionDevice &device, Communicator &comm, int rank,
               Communicator *hostComm = nullptr);

  /// Runs every instruction once and returns when all of them finished.
  void run(const StepContext &ctx);
  /// Kernel::prepare of every kernel, its constant inputs the parameters
  /// no instruction of the program writes: call once they are loaded, in
  /// a program that writes no parameter an inference step reads.
  void prepare();

  /// The host-arena tensor of the named buffer (inputs, outputs, state);
  /// on a GPU, move it with toDevice/toHost around host access.
  TensorView view(const std::string &bufferName) const;
  void toDevice(const TensorView &hostView) const { device_.toDevice(hostView); }
  void toHost(const TensorView &hostView) const { device_.toHost(hostView); }
  bool has(const std::string &bufferName) const;
  const ProgramInfo &info() const { return program_; }

  /// When enabled, run() records each instruction's duration and start
  /// (µs; starts on the host's steady clock, comparable between processes)
  /// with the device's InstructionTimer, and on a GPU the named parts of
  /// an instruction's device time.
  void setProfiling(bool on);
  const std::vector<double> &instructionMicros() const { return micros_; }
  const std::vector<double> &instructionStarts() const { return starts_; }
  const std::vector<std::vector<TimedPart>> &instructionParts() const { return parts_; }
  /// Testing aid (llmc-run --inject-nonfinite): the next run() overwrites
  /// the buffer written by the instruction the compiler marked as the
  /// fault-injection site (the first activations this rank makes or
  /// receives) with NaN, so its loss and gradients come out non-finite as
  /// after an overflow. Throws when no instruction is marked.
  void poisonNextRun();

  /// Calls `observer(i)` after instruction i has finished, in every run
  /// until cleared with an empty function; runs then go eagerly, one
  /// instruction at a time. For tools that read an intermediate buffer
  /// right after the instruction that uses it, before a later one reuses
  /// its memory (GPTQ reads each matmul's input); read it with bufferView
  /// (and toHost on a GPU).
  void setInstructionObserver(std::function<void(size_t)> observer) {
    observer_ = std::move(observer);
  }
  /// The host-arena tensor of the program's buffer `index`.
  TensorView bufferView(uint32_t index) const;

private:
  /// The buffer at kernelBase (what kernels and collectives are bound to).
  TensorView viewOf(uint32_t index) const;
  /// Where `b` lives in host memory: the host arena, or where the arena
  /// placed it outside (Arena::placeOutside).
  uint8_t *hostAddress(const BufferInfo &b) const;
  /// Refuses instruction i when it writes a buffer placed outside the
  /// arena (a parameter read in place from a mapped file).
  void checkWritesStayInArena(size_t i, const std::string &prefix) const;
  void runSteps(const StepContext &ctx, bool poison);
  /// Fills buffer `index` with NaN, on the device too.
  void fillWithNaN(uint32_t index);

  /// "instruction i (kernel 'matmul' at model.mlir:3:5)".
  std::string describe(size_t i) const;
  // Binding instruction i; `prefix` ("rank r, program 'p', ") starts errors.
  ExecutionDevice::Step bindKernel(size_t i, const std::string &prefix);
  ExecutionDevice::Step bindCollective(size_t i, const std::string &prefix);
  /// The work of collective `inst` on `group`, in and out already checked.
  ExecutionDevice::Step collectiveStep(const InstructionInfo &inst, CommGroup &group,
                                       const TensorView &in, const TensorView &out);
  /// A send or receive; the first of a run opens a transfer group, the
  /// last closes it (Communicator::beginTransfers).
  ExecutionDevice::Step bindTransfer(size_t i, const std::string &prefix, bool opensGroup,
                                     bool closesGroup);
  ExecutionDevice::Step bindEvent(size_t i);
  /// Sets poisonAfter_/poisonBuffer_ from the marked instruction, if any.
  void findFaultSite();

  const ProgramInfo &program_;
  ExecutionDevice &device_;
  Communicator &comm_;
  Communicator &hostComm_;
  std::vector<ExecutionDevice::Step> steps_;
  std::vector<int> streams_; ///< each step's program stream
  std::vector<std::unique_ptr<Kernel>> kernels_;
  std::vector<size_t> kernelInstructions_; ///< kernels_[j]'s instruction
  bool profiling_ = false;
  std::unique_ptr<InstructionTimer> timer_; ///< while profiling
  std::vector<double> micros_, starts_;
  std::vector<std::vector<TimedPart>> parts_;
  /// poisonNextRun(): after which instruction, which buffer; -1: none.
  int64_t poisonAfter_ = -1;
  uint32_t poisonBuffer_ = 0;
  bool poisonNext_ = false;
  std::function<void(size_t)> observer_;
};

} // namespace llmc

#endif
