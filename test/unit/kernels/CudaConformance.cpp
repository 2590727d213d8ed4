//===- CudaConformance.cpp - CUDA kernels against their CPU twins ---------===//

#include "CudaConformance.h"
#include "Conformance.h"

#include <cmath>
#include <limits>

#include "kernels/cuda/AttentionChoice.h"
#include "kernels/cuda/CudnnLibrary.h"
#include "kernels/cuda/Device.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>

namespace llmc::test {

std::string missingGpuReason() {
  static const std::string reason = [] {
    std::string why;
    return cuda::deviceCount(&why) > 0 ? std::string() : why;
  }();
  return reason;
}

PinAttention::PinAttention(AttentionImpl impl) {
  cuda::setAttentionImpl(impl);
  cuda::takeAttentionNotes();
}

PinAttention::~PinAttention() {
  cuda::setAttentionImpl(AttentionImpl::Auto);
  cuda::takeAttentionNotes();
}

void expectBoundAsPinned() {
  const std::string impl = attentionImplName(cuda::attentionImpl());
  for (const std::string &line : cuda::takeAttentionNotes())
    EXPECT_TRUE(line.rfind("attention: " + impl + " for ", 0) == 0 && line.back() != ')') << line;
}

namespace {

bool isFloat(DType t) { return t == DType::F32 || t == DType::BF16 || t == DType::F16; }

/// Device copy of one Buffer, freed on scope exit.
struct DeviceCopy {
  explicit DeviceCopy(const Buffer &b) : bytes(b.view().bytes()), ptr(cuda::deviceAlloc(bytes)) {}
  ~DeviceCopy() { cuda::deviceFree(ptr); }
  DeviceCopy(const DeviceCopy &) = delete;
  DeviceCopy &operator=(const DeviceCopy &) = delete;
  size_t bytes;
  void *ptr;
};

} // namespace

std::vector<RefTensor> expectCudaMatchesCpu(const std::string &name,
                                            const std::vector<Buffer *> &inputs,
                                            const std::vector<Buffer *> &outputs,
                                            const KernelAttrs &attrs, const Comparison &cmp,
                                            int64_t step, bool keepOutputs) {
  std::vector<RefTensor> gpuOut;
  auto isInput = [&](const Buffer *b) {
    return std::find(inputs.begin(), inputs.end(), b) != inputs.end();
  };

  // CPU: on clones, so the caller's buffers stay the GPU's starting point.
  std::map<const Buffer *, std::unique_ptr<Buffer>> cpu;
  auto cpuOf = [&](Buffer *b) {
    auto &slot = cpu[b];
    if (!slot) {
      slot = std::make_unique<Buffer>(*b);
      if (!isInput(b) && !keepOutputs)
        slot->poison();
    }
    return slot.get();
  };
  std::vector<Buffer *> cpuIn, cpuOutputs;
  for (Buffer *b : inputs) cpuIn.push_back(cpuOf(b));
  for (Buffer *b : outputs) cpuOutputs.push_back(cpuOf(b));
  if (!runKernel(name, cpuIn, cpuOutputs, attrs, step))
    return gpuOut;

  // GPU: one device allocation per distinct buffer (aliases stay aliases).
  KernelFactory factory = findKernel(Backend::CUDA, name);
  if (!factory) {
    ADD_FAILURE() << "no CUDA kernel named " << name;
    return gpuOut;
  }
  std::map<const Buffer *, std::unique_ptr<DeviceCopy>> gpu;
  auto gpuView = [&](Buffer *b) {
    auto &slot = gpu[b];
    if (!slot) {
      slot = std::make_unique<DeviceCopy>(*b);
      if (isInput(b) || keepOutputs)
        cuda::copyToDevice(slot->ptr, b->view().data, slot->bytes);
      else
        cuda::deviceFill(slot->ptr, 0xFF, slot->bytes);
    }
    TensorView v = b->view();
    v.data = slot->ptr;
    return v;
  };
  KernelArgs args;
  for (Buffer *b : inputs) args.inputs.push_back(gpuView(b));
  for (Buffer *b : outputs) args.outputs.push_back(gpuView(b));
  args.attrs = attrs;
  std::string error;
  std::unique_ptr<Kernel> kernel = factory(args, error);
  if (!kernel) {
    ADD_FAILURE() << "binding CUDA " << name << " failed: " << error;
    return gpuOut;
  }
  StepContext ctx;
  ctx.step = step;
  try {
    kernel->run(ctx);
    cuda::synchronize();
  } catch (const std::exception &e) {
    ADD_FAILURE() << "CUDA " << name << ": " << e.what();
    return gpuOut;
  }

  for (size_t i = 0; i < outputs.size(); ++i) {
    Buffer back(outputs[i]->dtype, outputs[i]->shape);
    cuda::copyToHost(back.view().data, gpu[outputs[i]]->ptr, gpu[outputs[i]]->bytes);
    RefTensor got = back.toRef(), want = cpu[outputs[i]]->toRef();
    double tol = cmp.tolerances.empty()      ? tolerance(back.dtype)
                 : i < cmp.tolerances.size() ? cmp.tolerances[i]
                                             : cmp.tolerances.back();
    if (std::isinf(tol)) { // an output the kernel leaves unspecified (scratch)
      gpuOut.push_back(std::move(got));
      continue;
    }
    if (!isFloat(back.dtype))
      EXPECT_TRUE(std::equal(got.data.begin(), got.data.end(), want.data.begin()))
          << name << " output " << i << " (integer) differs from the CPU";
    else
      EXPECT_TRUE(closeTo(got, want, i < cmp.metrics.size() ? cmp.metrics[i] : cmp.metric, tol))
          << name << " output " << i;
    gpuOut.push_back(std::move(got));
  }
  return gpuOut;
}

std::string cudaBindError(const std::string &name, const std::vector<TensorView> &inputs,
                          const std::vector<TensorView> &outputs, const KernelAttrs &attrs) {
  KernelFactory factory = findKernel(Backend::CUDA, name);
  if (!factory)
    return "no CUDA kernel named " + name;
  KernelArgs args{inputs, outputs, attrs};
  std::string error;
  std::unique_ptr<Kernel> kernel = factory(args, error);
  if (kernel)
    return "";
  return error.empty() ? "<factory failed without a message>" : error;
}

void expectCudaBindErrorsMatchCpu(const std::vector<CudaBindErrorCase> &cases) {
  for (const CudaBindErrorCase &c : cases) {
    std::string expected = bindError(c.kernel, c.inputs, c.outputs, c.attrs);
    EXPECT_FALSE(expected.empty()) << c.kernel;
    EXPECT_EQ(cudaBindError(c.kernel, c.inputs, c.outputs, c.attrs), expected);
  }
}

namespace {

/// The tolerance of each output in one run, a planned workspace's last and
/// infinite (unchecked).
std::vector<double> runTolerances(const KernelCall &call, const CudaVariant &variant,
                                  size_t outputs) {
  const std::vector<double> &given =
      variant.tolerances.empty() ? call.cudaTolerances : variant.tolerances;
  std::vector<double> all;
  for (size_t i = 0; i < outputs; ++i)
    all.push_back(given.empty()      ? tolerance(call.buffers[call.outputs[i]].dtype)
                  : i < given.size() ? given[i]
                                     : given.back());
  if (variant.workspaceBytes > 0)
    all.push_back(std::numeric_limits<double>::infinity());
  return all;
}

/// One run of the CUDA half; false (and `why`) if it could not run.
bool runVariant(KernelCall &call, const ConformanceCase &c, const CudaVariant &variant,
                std::string &why) {
  if (variant.attention == AttentionImpl::Cudnn) {
    const cuda::CudnnLoad &cudnn = cuda::processCudnn();
    if (!cudnn.handle) {
      why = "cuDNN is not loaded (" + cudnn.why + "): its run is skipped";
      return false;
    }
  }
  std::vector<std::unique_ptr<ScopedEnv>> env;
  std::vector<std::unique_ptr<::testing::ScopedTrace>> envTraces;
  for (const auto &[name, value] : variant.env) {
    env.push_back(std::make_unique<ScopedEnv>(name.c_str(), value.c_str()));
    envTraces.push_back(
        std::make_unique<::testing::ScopedTrace>(__FILE__, __LINE__, name + "=" + value));
  }
  std::optional<PinAttention> pin;
  std::optional<::testing::ScopedTrace> trace;
  if (variant.attention != AttentionImpl::Auto) {
    pin.emplace(variant.attention);
    trace.emplace(__FILE__, __LINE__,
                  std::string("attention pinned to ") + attentionImplName(variant.attention));
  }
  std::vector<Buffer *> inputs, outputs;
  for (size_t i : call.inputs) inputs.push_back(&call.buffers[i]);
  for (size_t i : call.outputs) outputs.push_back(&call.buffers[i]);
  std::vector<double> tolerances = runTolerances(call, variant, outputs.size());
  Buffer workspace(DType::U8, {std::max<int64_t>(variant.workspaceBytes, 1)});
  if (variant.workspaceBytes > 0)
    outputs.push_back(&workspace);
  std::vector<RefTensor> got = expectCudaMatchesCpu(c.kernel, inputs, outputs, call.attrs,
                                                    {call.cudaMetric, tolerances, call.cudaMetrics},
                                                    call.step, call.keepOutputs);
  if (variant.attention != AttentionImpl::Auto)
    expectBoundAsPinned();
  if (call.cudaCheck && got.size() >= call.outputs.size()) {
    got.resize(call.outputs.size());
    EXPECT_TRUE(call.cudaCheck(got)) << c.kernel;
  }
  return true;
}

} // namespace

bool runCudaConformance(const ConformanceCase &c, std::string &why) {
  why = missingGpuReason();
  if (!why.empty()) {
    why = "no usable CUDA device (" + why + "): CUDA kernels are built, not run";
    return false;
  }
  KernelCall call = c.build();
  std::vector<CudaVariant> variants = call.cudaVariants;
  if (variants.empty())
    variants.push_back({});
  std::string skipped;
  for (const CudaVariant &variant : variants) {
    std::string reason;
    if (!runVariant(call, c, variant, reason))
      skipped = reason;
  }
  why = skipped;
  return skipped.empty();
}

} // namespace llmc::test
