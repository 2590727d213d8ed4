//===- AttentionOnCudnn.cpp - attention kernels that run on cuDNN ---------===//
//
// Part of llmc: see AttentionOnCudnn.h. The workspace output, when the
// compiler planned one, holds attention_rope's rotated q and k first (each
// part aligned as contracts::cudnnRopeStagingBytes counts), then cuDNN's
// own workspace.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/AttentionOnCudnn.h"

#include "kernels/cuda/CudnnSdpa.h"

#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace llmc::cuda {
namespace {

/// Runs the rotations before the SDPA call and those after it (rope's
/// kernels, bound through the registry), then the call.
class CudnnAttentionKernel final : public Kernel {
public:
  CudnnAttentionKernel(std::vector<std::unique_ptr<Kernel>> before,
                       std::unique_ptr<CudnnSdpaCall> call,
                       std::vector<std::unique_ptr<Kernel>> after)
      : before_(std::move(before)), call_(std::move(call)), after_(std::move(after)) {}

  void run(const StepContext &ctx) override {
    for (auto &kernel : before_) kernel->run(ctx);
    call_->run(ctx.stream);
    for (auto &kernel : after_) kernel->run(ctx);
  }

private:
  std::vector<std::unique_ptr<Kernel>> before_;
  std::unique_ptr<CudnnSdpaCall> call_;
  std::vector<std::unique_ptr<Kernel>> after_;
};

/// rope of `x` ([B, T, heads, D]) into `to` (x's own bytes for the
/// in-place inverse) with attention_rope's rotation; null with `why`.
std::unique_ptr<Kernel> bindRotation(const KernelArgs &args, const contracts::AttentionBinding &b,
                                     const TensorView &x, void *to, bool inverse,
                                     std::string &why) {
  KernelArgs rope;
  rope.inputs.push_back(x);
  if (b.rotation.positions) rope.inputs.push_back(args.inputs[b.positionIndex]);
  TensorView out = x;
  out.data = to;
  rope.outputs.push_back(out);
  rope.attrs.setFloat("theta", b.rotation.theta);
  rope.attrs.setInt("inverse", inverse ? 1 : 0);
  const RopeScaling &s = b.rotation.scaling;
  if (s.scaled()) {
    rope.attrs.setFloat("scaling_factor", s.factor);
    rope.attrs.setFloat("low_freq_factor", s.lowFreqFactor);
    rope.attrs.setFloat("high_freq_factor", s.highFreqFactor);
    rope.attrs.setInt("original_max_positions", s.originalMaxPositions);
  }
  KernelFactory factory = findKernel(Backend::CUDA, "rope");
  std::string error = "no CUDA rope kernel";
  std::unique_ptr<Kernel> kernel = factory ? factory(rope, error) : nullptr;
  if (!kernel) why = "rope did not bind: " + error;
  return kernel;
}

/// q, k, v (or dq, dk, dv) of 16-bit elements: three tensors or the packed
/// one's column blocks.
template <typename T>
std::tuple<T *, T *, T *> halves(const std::vector<TensorView> &tensors,
                                 const contracts::AttentionBinding &b) {
  using Half = std::conditional_t<std::is_const_v<T>, const uint16_t, uint16_t>;
  auto [q, k, v] = contracts::qkvOf<Half>(tensors, b);
  return {q, k, v};
}

} // namespace

contracts::CudnnAttentionShape cudnnShapeOf(const contracts::AttentionBinding &b, bool backward) {
  contracts::CudnnAttentionShape s;
  s.halfPrecision = b.dtype == DType::BF16 || b.dtype == DType::F16;
  s.elementBytes = static_cast<int64_t>(dtypeSize(b.dtype));
  s.b = b.b, s.t = b.t, s.s = b.s, s.h = b.h, s.kv = b.kv, s.d = b.d;
  s.backward = backward;
  s.rope = b.rope;
  s.segments = b.segments;
  s.window = b.window;
  s.softcap = b.softcap > 0;
  return s;
}

std::unique_ptr<Kernel> bindAttentionOnCudnn(const KernelArgs &args,
                                             const contracts::AttentionBinding &b, bool backward,
                                             std::string &why) {
  const contracts::CudnnAttentionShape judged = cudnnShapeOf(b, backward);
  why = contracts::cudnnAttentionRefusal(judged);
  if (!why.empty()) return nullptr;

  CudnnSdpaShape shape;
  shape.bf16 = b.dtype == DType::BF16;
  shape.b = b.b, shape.t = b.t, shape.s = b.s, shape.h = b.h, shape.kv = b.kv, shape.d = b.d;
  shape.queryRow = b.queryStride();
  shape.keyRow = b.keyStride();
  shape.scale = b.scale;
  shape.causal = b.causal;
  shape.backward = backward;

  CudnnSdpaOperands o;
  std::tie(o.q, o.k, o.v) = halves<const void>(args.inputs, b);
  if (b.workspace) {
    o.workspace = args.outputs[b.workspaceIndex].data;
    o.workspaceBytes = static_cast<int64_t>(args.outputs[b.workspaceIndex].bytes());
  }
  const size_t rest = contracts::inputsAfterQkv(b); // out, lse, dout
  if (backward) {
    o.out = args.inputs[rest].data;
    o.lse = args.inputs[rest + 1].as<float>();
    o.dout = args.inputs[rest + 2].data;
    std::tie(o.dq, o.dk, o.dv) = halves<void>(args.outputs, b);
  } else {
    o.out = args.outputs[0].data;
    o.lse = args.outputs[1].as<float>();
  }

  // attention_rope: cuDNN reads q and k rotated into the workspace's head.
  std::vector<std::unique_ptr<Kernel>> before, after;
  if (b.rope) {
    const int64_t staging = contracts::cudnnRopeStagingBytes(judged);
    if (o.workspaceBytes < staging) {
      why = "the memory plan has no room for rope's rotated q and k (" +
            std::to_string(staging) + " bytes)";
      return nullptr;
    }
    char *base = static_cast<char *>(o.workspace);
    const TensorView &q = args.inputs[0], &k = args.inputs[1];
    void *qRotated = base, *kRotated = base + contracts::alignWorkspace(q.bytes());
    for (auto [x, to] : {std::pair{&q, qRotated}, std::pair{&k, kRotated}}) {
      before.push_back(bindRotation(args, b, *x, to, false, why));
      if (!before.back()) return nullptr;
    }
    o.q = qRotated, o.k = kRotated;
    o.workspace = base + staging;
    o.workspaceBytes -= staging;
    if (backward)
      for (const TensorView *grad : {&args.outputs[0], &args.outputs[1]}) {
        after.push_back(bindRotation(args, b, *grad, grad->data, true, why));
        if (!after.back()) return nullptr;
      }
  }
  std::unique_ptr<CudnnSdpaCall> call = bindCudnnSdpa(shape, o, why);
  if (!call) return nullptr;
  return std::make_unique<CudnnAttentionKernel>(std::move(before), std::move(call),
                                                std::move(after));
}

} // namespace llmc::cuda
