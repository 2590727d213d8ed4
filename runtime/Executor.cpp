//===- Executor.cpp - a program bound to an arena and kernels -------------===//

#include "runtime/Executor.h"
#include "common/TransferChannel.h"
#include "runtime/StreamOrder.h"
#include "runtime/support/Error.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>

namespace llmc {
namespace {

/// A collective's output size follows from its input's and the group's; a
/// pair that would make the communicator read or write past a buffer (a
/// corrupted or hand-edited artifact) is described, else "".
std::string collectiveSizeError(InstructionKind kind, const TensorView &in,
                                const TensorView &out, int groupSize) {
  int64_t parts = groupSize, n = in.numel(), expected = n;
  bool splits = kind == InstructionKind::ReduceScatter || kind == InstructionKind::AllSlice ||
                kind == InstructionKind::AllToAll;
  if (kind == InstructionKind::AllGather)
    expected = n * parts;
  else if (kind == InstructionKind::ReduceScatter || kind == InstructionKind::AllSlice)
    expected = n / parts;
  if ((splits && n % parts != 0) || out.numel() != expected)
    return std::string(instructionKindName(kind)) + " over " + std::to_string(groupSize) +
           " ranks cannot take input " + in.describe() + " to output " + out.describe();
  return "";
}

/// Where a run of sends and receives on one stream opens and closes: the
/// run, waits between its transfers included, is issued as one group
/// (Communicator::beginTransfers; the waits, enqueued at once while the
/// transfers start at the group's end, come first). Kernels on other
/// streams may come between; any other communication closes the run first,
/// since NCCL would take it into the open group (another stream's transfers
/// or a collective). The compiler proves this grouping free of deadlock
/// with the same rule (passes/lib/NcclTransfers.cpp).
struct TransferRun {
  bool opens = false, closes = false;
};

std::vector<TransferRun> transferRuns(const ProgramInfo &program) {
  const auto &insts = program.instructions;
  std::vector<TransferRun> runs(insts.size());
  std::map<int32_t, size_t> openRun; // stream -> the run's last transfer so far
  for (size_t i = 0; i < insts.size(); ++i) {
    InstructionKind kind = insts[i].kind;
    bool communicates = kind != InstructionKind::Kernel && kind != InstructionKind::RecordEvent &&
                        kind != InstructionKind::WaitEvent;
    if (communicates) {
      for (auto it = openRun.begin(); it != openRun.end();)
        if (it->first != insts[i].stream) {
          runs[it->second].closes = true;
          it = openRun.erase(it);
        } else {
          ++it;
        }
    }
    auto open = openRun.find(insts[i].stream);
    if (kind == InstructionKind::Send || kind == InstructionKind::Recv) {
      runs[i].opens = open == openRun.end();
      openRun[insts[i].stream] = i;
    } else if (kind != InstructionKind::WaitEvent && open != openRun.end()) {
      runs[open->second].closes = true;
      openRun.erase(open);
    }
  }
  for (auto [stream, last] : openRun)
    runs[last].closes = true;
  return runs;
}

} // namespace

uint8_t *BoundProgram::hostAddress(const BufferInfo &b) const {
  const Arena &arena = device_.hostArena();
  if (const uint8_t *outside = arena.outside(b.offset, b.bytes()))
    return const_cast<uint8_t *>(outside); // read only: writes are refused when binding
  return arena.base() + b.offset;
}

void BoundProgram::checkWritesStayInArena(size_t i, const std::string &prefix) const {
  const InstructionInfo &inst = program_.instructions[i];
  std::vector<uint32_t> written = inst.outputs;
  if (inst.kind == InstructionKind::Recv)
    written = inst.inputs;
  for (uint32_t index : written) {
    const BufferInfo &b = program_.buffers[index];
    if (device_.hostArena().outside(b.offset, b.bytes()))
      fail(prefix, describe(i), ": writes '", b.name,
           "', which is read in place from its weights file (load with --copy-weights)");
  }
}

TensorView BoundProgram::viewOf(uint32_t index) const {
  const BufferInfo &b = program_.buffers[index];
  TensorView view;
  // Kernels on the host arena (the CPU) read placed-outside bytes where
  // they are; a GPU's arena holds everything itself. Host memory
  // (ZeRO-Offload) is the host arena's, past the device arena, everywhere.
  view.data = b.host || device_.kernelBase() == device_.hostArena().base()
                  ? hostAddress(b)
                  : device_.kernelBase() + b.offset;
  view.dtype = b.dtype;
  view.shape = b.shape;
  return view;
}

std::string BoundProgram::describe(size_t i) const {
  const InstructionInfo &inst = program_.instructions[i];
  return "instruction " + std::to_string(i) + " (" +
         (inst.kind == InstructionKind::Kernel ? "kernel '" + inst.kernel + "'"
                                                : std::string(instructionKindName(inst.kind))) +
         (inst.location.empty() ? "" : " at " + inst.location) + ")";
}

BoundProgram::BoundProgram(const ProgramInfo &program, ExecutionDevice &device, Communicator &comm,
                           int rank, Communicator *hostComm)
    : program_(program), device_(device), comm_(comm), hostComm_(hostComm ? *hostComm : comm) {
  std::string prefix = "rank " + std::to_string(rank) + ", program '" + program.name + "', ";
  // Streams run concurrently: refuse a program whose events leave a
  // race before it runs, on any backend; and one whose events could never
  // be recorded (a wait would block forever), even on a single stream.
  checkStreamOrder(program, [&](size_t i) { return prefix + describe(i); });
  std::vector<TransferRun> runs = transferRuns(program);
  for (size_t i = 0; i < program.instructions.size(); ++i) {
    const InstructionInfo &inst = program.instructions[i];
    streams_.push_back(inst.stream);
    checkWritesStayInArena(i, prefix);
    switch (inst.kind) {
    case InstructionKind::Kernel: steps_.push_back(bindKernel(i, prefix)); break;
    case InstructionKind::AllReduce:
    case InstructionKind::AllGather:
    case InstructionKind::ReduceScatter:
    case InstructionKind::Broadcast:
    case InstructionKind::Reduce:
    case InstructionKind::AllToAll:
    case InstructionKind::AllSlice: steps_.push_back(bindCollective(i, prefix)); break;
    case InstructionKind::Send:
    case InstructionKind::Recv:
      steps_.push_back(bindTransfer(i, prefix, runs[i].opens, runs[i].closes));
      break;
    case InstructionKind::RecordEvent:
    case InstructionKind::WaitEvent: steps_.push_back(bindEvent(i)); break;
    }
  }
  micros_.assign(steps_.size(), 0.0);
  starts_.assign(steps_.size(), 0.0);
  parts_.assign(steps_.size(), {});
  findFaultSite();
}

ExecutionDevice::Step BoundProgram::bindKernel(size_t i, const std::string &prefix) {
  const InstructionInfo &inst = program_.instructions[i];
  // A host kernel (ZeRO-Offload's update) is the CPU backend's on any device.
  Backend backend = inst.onHost ? Backend::CPU : device_.backend();
  KernelFactory factory = findKernel(backend, inst.kernel);
  if (!factory)
    fail(prefix, describe(i), ": the ", backendName(backend), " backend has no kernel named '",
         inst.kernel, "'");
  KernelArgs args;
  for (uint32_t index : inst.inputs) args.inputs.push_back(viewOf(index));
  for (uint32_t index : inst.outputs) args.outputs.push_back(viewOf(index));
  args.attrs = inst.attrs;
  // Where this rank's piece lies (vocabulary shard, sequence slice, ...).
  for (const RankOffsetInfo &term : inst.rankOffsets) {
    int64_t delta = comm_.group(term.axes).rank() * term.stride;
    if (args.attrs.hasInt(term.attr)) {
      args.attrs.setInt(term.attr, args.attrs.getInt(term.attr) + delta);
    } else {
      std::vector<int64_t> values = args.attrs.getInts(term.attr);
      values[static_cast<size_t>(term.index)] += delta;
      args.attrs.setInts(term.attr, std::move(values));
    }
  }
  std::string error;
  std::unique_ptr<Kernel> kernel = factory(args, error);
  if (!kernel)
    fail(prefix, describe(i), ": ", error.empty() ? "kernel rejected its arguments" : error);
  Kernel *k = kernel.get();
  kernels_.push_back(std::move(kernel));
  kernelInstructions_.push_back(i);
  void *stream = device_.stream(inst.stream);
  if (inst.onHost)
    return device_.hostStep(inst.stream, [k](const StepContext &ctx) {
      StepContext on = ctx;
      on.stream = nullptr;
      on.deviceStep = nullptr;
      k->run(on);
    });
  const int64_t *deviceStep = device_.deviceStep();
  return [k, stream, deviceStep](const StepContext &ctx) {
    StepContext on = ctx;
    on.stream = stream;
    on.deviceStep = deviceStep;
    k->run(on);
  };
}

ExecutionDevice::Step BoundProgram::bindCollective(size_t i, const std::string &prefix) {
  const InstructionInfo &inst = program_.instructions[i];
  auto where = [&] { return prefix + describe(i); };
  if (inst.inputs.size() != 1 || inst.outputs.size() != 1)
    fail(where(), ": a collective needs exactly one input and one output buffer");
  // A GPU's communicator enqueues on the communication stream.
  if (device_.backend() == Backend::CUDA && inst.stream != 1)
    fail(where(), ": the CUDA backend runs communication on stream 1, not ", inst.stream);
  CommGroup &group = (inst.onHost ? hostComm_ : comm_).group(inst.group);
  TensorView in = viewOf(inst.inputs[0]), out = viewOf(inst.outputs[0]);
  if (in.dtype != out.dtype)
    fail(where(), ": input and output dtypes differ");
  if (std::string error = collectiveSizeError(inst.kind, in, out, group.size()); !error.empty())
    fail(where(), ": ", error);
  ExecutionDevice::Step step = collectiveStep(inst, group, in, out);
  // On the host: host memory, the host transport, in the stream's order.
  return inst.onHost ? device_.hostStep(inst.stream, std::move(step)) : step;
}

ExecutionDevice::Step BoundProgram::collectiveStep(const InstructionInfo &inst, CommGroup &group,
                                                   const TensorView &in, const TensorView &out) {
  Reduction op = parseReduction(inst.reduction.empty() ? "sum" : inst.reduction);
  size_t n = static_cast<size_t>(in.numel());
  int root = static_cast<int>(inst.root), stream = inst.stream;
  // Copies within the step: the device's, or plain memory on the host
  // (a host function may not call into the GPU's runtime).
  ExecutionDevice &device = device_;
  const bool onHost = inst.onHost;
  auto copy = [&device, onHost, stream](void *to, const void *from, size_t bytes) {
    if (!onHost)
      device.copy(to, from, bytes, stream);
    else if (to != from)
      std::memmove(to, from, bytes);
  };
  switch (inst.kind) {
  case InstructionKind::AllReduce:
    return [&group, in, out, n, op](const StepContext &) {
      group.allReduce(in.data, out.data, n, in.dtype, op);
    };
  case InstructionKind::AllGather:
    return [&group, in, out, n](const StepContext &) {
      group.allGather(in.data, out.data, n, in.dtype);
    };
  case InstructionKind::ReduceScatter: {
    size_t per = static_cast<size_t>(out.numel());
    return [&group, in, out, per, op](const StepContext &) {
      group.reduceScatter(in.data, out.data, per, in.dtype, op);
    };
  }
  case InstructionKind::Broadcast:
    return [&group, copy, in, out, n, root](const StepContext &) {
      copy(out.data, in.data, n * dtypeSize(in.dtype));
      group.broadcast(out.data, n, in.dtype, root);
    };
  case InstructionKind::Reduce:
    return [&group, in, out, n, op, root](const StepContext &) {
      group.reduce(in.data, out.data, n, in.dtype, op, root);
    };
  case InstructionKind::AllSlice: {
    // This rank's chunk; the group position is fixed, so the source
    // address is resolved here, once.
    size_t bytes = out.bytes();
    const uint8_t *src = static_cast<const uint8_t *>(in.data) + bytes * group.rank();
    return [copy, src, out, bytes](const StepContext &) { copy(out.data, src, bytes); };
  }
  default: {
    size_t per = n / static_cast<size_t>(group.size());
    return [&group, in, out, per](const StepContext &) {
      group.allToAll(in.data, out.data, per, in.dtype);
    };
  }
  }
}

ExecutionDevice::Step BoundProgram::bindTransfer(size_t i, const std::string &prefix,
                                                 bool opensGroup, bool closesGroup) {
  const InstructionInfo &inst = program_.instructions[i];
  if (inst.inputs.size() != 1)
    fail(prefix, describe(i), ": send/recv needs exactly one buffer");
  // A GPU's communicator enqueues a channel's transfers on its stream.
  if (device_.backend() == Backend::CUDA && inst.stream != streamOfChannel(inst.channel))
    fail(prefix, describe(i), ": the CUDA backend runs channel ", inst.channel, " (",
         channelName(inst.channel), ") on stream ", streamOfChannel(inst.channel), ", not ",
         inst.stream);
  device_.stream(inst.stream); // created (and checked) at bind time, never in a capture
  TensorView buf = viewOf(inst.inputs[0]);
  std::string axis = inst.axis;
  int shift = static_cast<int>(inst.shift), tag = static_cast<int>(inst.tag);
  int channel = inst.channel;
  bool isSend = inst.kind == InstructionKind::Send;
  Communicator &comm = comm_;
  return [&comm, buf, axis, shift, tag, channel, isSend, opensGroup,
          closesGroup](const StepContext &) {
    if (opensGroup)
      comm.beginTransfers();
    try {
      if (isSend)
        comm.send(buf.data, buf.bytes(), axis, shift, tag, channel);
      else
        comm.recv(buf.data, buf.bytes(), axis, shift, tag, channel);
    } catch (...) {
      // The run's group (NCCL's) is not left open for the next run to nest
      // in: a capture that failed here runs the program again eagerly.
      try {
        comm.endTransfers();
      } catch (...) {
      }
      throw;
    }
    if (closesGroup)
      comm.endTransfers();
  };
}

ExecutionDevice::Step BoundProgram::bindEvent(size_t i) {
  // Run by the stream that reaches them: cudaEvents on a GPU, HostStreams
  // on the CPU.
  const InstructionInfo &inst = program_.instructions[i];
  int64_t event = inst.event;
  int stream = inst.stream;
  ExecutionDevice &device = device_;
  device.stream(stream); // a GPU rejects a stream it lacks here, at bind time
  if (inst.kind == InstructionKind::RecordEvent)
    return [&device, event, stream](const StepContext &) { device.recordEvent(event, stream); };
  return [&device, event, stream](const StepContext &) { device.waitEvent(event, stream); };
}

void BoundProgram::findFaultSite() {
  // The instruction the compiler marked: the rank's first float activations
  // (the loader checked it writes a float buffer).
  for (size_t i = 0; i < program_.instructions.size(); ++i) {
    const InstructionInfo &inst = program_.instructions[i];
    if (!inst.faultSite)
      continue;
    poisonAfter_ = static_cast<int64_t>(i);
    poisonBuffer_ = inst.kind == InstructionKind::Recv ? inst.inputs.at(0) : inst.outputs.at(0);
    // A received buffer holds its data once its run of transfers has been
    // issued (NCCL runs a group's transfers at its end): poisoned before,
    // the receive would overwrite the NaN.
    if (inst.kind == InstructionKind::Recv) {
      std::vector<TransferRun> runs = transferRuns(program_);
      for (size_t j = i; j < runs.size(); ++j)
        if (program_.instructions[j].stream == inst.stream && runs[j].closes) {
          poisonAfter_ = static_cast<int64_t>(j);
          break;
        }
    }
    return;
  }
}

void BoundProgram::poisonNextRun() {
  if (poisonAfter_ < 0)
    fail("program '", program_.name,
         "': no instruction is marked as the fault-injection site (the compiler marks "
         "the first float activations; artifacts before schema 1.6 have none)");
  poisonNext_ = true;
}

void BoundProgram::fillWithNaN(uint32_t index) {
  device_.synchronize(); // the instruction that wrote it has finished
  TensorView v = viewOf(index);
  v.data = device_.hostArena().base() + program_.buffers[index].offset;
  int64_t n = v.numel();
  if (v.dtype == DType::F32) {
    std::fill_n(v.as<float>(), n, std::numeric_limits<float>::quiet_NaN());
  } else {
    // The quiet NaN of bf16 and of fp16.
    uint16_t nan = v.dtype == DType::BF16 ? 0x7FC0 : 0x7E00;
    std::fill_n(v.as<uint16_t>(), n, nan);
  }
  device_.toDevice(v);
  // The upload is on stream 0; a later reader on another stream waits for
  // no event of it.
  device_.synchronize();
}

void BoundProgram::run(const StepContext &ctx) {
  bool poison = poisonNext_;
  poisonNext_ = false;
  // Poisoning is a host write between two instructions: run eagerly, not
  // from a captured graph.
  device_.runProgram(this, ctx.step, profiling_ || poison || observer_,
                     [&] { runSteps(ctx, poison); });
  if (profiling_)
    timer_->read(micros_, starts_, parts_);
  // The plan keeps sent buffers intact until the program's end (a no-op
  // when nothing was sent).
  comm_.completeSends();
}

void BoundProgram::prepare() {
  std::vector<bool> written(program_.buffers.size(), false);
  for (const InstructionInfo &inst : program_.instructions)
    for (uint32_t out : inst.outputs) written[out] = true;
  for (size_t j = 0; j < kernels_.size(); ++j) {
    const InstructionInfo &inst = program_.instructions[kernelInstructions_[j]];
    std::vector<bool> constant;
    for (uint32_t in : inst.inputs)
      constant.push_back(program_.buffers[in].category == "param" && !written[in]);
    kernels_[j]->prepare(constant);
  }
}

void BoundProgram::runSteps(const StepContext &ctx, bool poison) {
  if (!poison && !observer_ && !profiling_) {
    for (size_t i = 0; i < steps_.size(); ++i) device_.launch(streams_[i], steps_[i], ctx);
    return;
  }
  // One instruction at a time, with what is asked of each: timed (the
  // device's timer: on the CPU it waits for the instruction, on a GPU it
  // records events), the poisoned buffer after its instruction, a wait for
  // the device before the instruction is observed.
  for (size_t i = 0; i < steps_.size(); ++i) {
    if (profiling_)
      timer_->begin(i, streams_[i]);
    device_.launch(streams_[i], steps_[i], ctx);
    if (profiling_)
      timer_->end(i, streams_[i]);
    if (poison && static_cast<int64_t>(i) == poisonAfter_)
      fillWithNaN(poisonBuffer_);
    if (observer_) {
      device_.synchronize();
      observer_(i);
    }
  }
}

void BoundProgram::setProfiling(bool on) {
  profiling_ = on;
  if (on && !timer_)
    timer_ = device_.makeInstructionTimer(steps_.size());
}

bool BoundProgram::has(const std::string &bufferName) const {
  return program_.findBuffer(bufferName) >= 0;
}

TensorView BoundProgram::view(const std::string &bufferName) const {
  int index = program_.findBuffer(bufferName);
  if (index < 0)
    fail("program '", program_.name, "' has no buffer named '", bufferName, "'");
  return bufferView(static_cast<uint32_t>(index));
}

TensorView BoundProgram::bufferView(uint32_t index) const {
  TensorView v = viewOf(index);
  v.data = hostAddress(program_.buffers[index]);
  return v;
}

} // namespace llmc
