//===- adamw.cpp - one AdamW step -----------------------------------------===//
//
// With g' = g·min(1, max_grad_norm/(norm + 1e-6)) when a norm is given and
// max_grad_norm > 0, and t = step:
//   m' = β1·m + (1−β1)·g',  v' = β2·v + (1−β2)·g'²
//   p' = p − lr·( (m'/(1−β1^t)) / (√(v'/(1−β2^t)) + ε) + wd·p )
// lr, step and norm are f32 scalars read at run time (the schedule and the
// clip factor change every step); the per-step constants are formed once in
// double. The update is elementwise and reads every input element before
// writing it, so p', m', v' may alias p, m, v (the usual in-place update);
// `omp simd` keeps that vectorised. A non-finite norm skips the step: the
// outputs keep the inputs' values (AdamWStep.h).
//
// multi_tensor_adamw (llmc-fuse's multi-tensor-adamw) runs the same span
// of updates (updateSpan, one instantiation for both kernels, so the same
// code rounds alike) over a list of tensors cut into chunks, one parallel
// loop for the whole list, and writes each cast as the cast kernel does:
// store(out, i, load(p', i)).
//
//===----------------------------------------------------------------------===//

#include "kernels/AdamWStep.h"
#include "kernels/contracts/AdamW.h"
#include "kernels/cpu/Common.h"

namespace llmc::cpu {
namespace {

/// Elements [begin, end) of one tensor's update (G: the gradient's type).
template <typename T, typename G>
void updateSpan(const AdamWStep &step, const T *p, const G *g, const T *m, const T *v, T *pOut,
                T *mOut, T *vOut, int64_t begin, int64_t end) {
  // A local copy: the vectoriser sees loop-invariant scalars.
  const AdamWStep k = step;
#pragma omp simd
  for (int64_t i = begin; i < end; ++i) {
    float m1 = load(m, i), v1 = load(v, i);
    float param = k.apply(load(p, i), load(g, i), m1, v1);
    store(mOut, i, m1);
    store(vOut, i, v1);
    store(pOut, i, param);
  }
}

/// A skipped step's output: the input's bytes (nothing to do in place).
void keepBytes(void *out, const void *in, size_t bytes) {
  if (out != in)
    std::memcpy(out, in, bytes);
}

template <typename T> class AdamWKernel final : public Kernel {
public:
  AdamWKernel(const KernelArgs &args, const contracts::AdamWHyperparams &config)
      : p_(args.inputs[0].as<T>()), g_(args.inputs[1].as<T>()), m_(args.inputs[2].as<T>()),
        v_(args.inputs[3].as<T>()), lr_(args.inputs[4].as<float>()),
        step_(args.inputs[5].as<float>()),
        norm_(args.inputs.size() > 6 ? args.inputs[6].as<float>() : nullptr),
        lossScale_(args.inputs.size() > 7 ? args.inputs[7].as<float>() : nullptr),
        pOut_(args.outputs[0].as<T>()), mOut_(args.outputs[1].as<T>()),
        vOut_(args.outputs[2].as<T>()), n_(args.inputs[0].numel()), config_(config) {}

  void run(const StepContext &) override {
    // A local copy: the vectoriser sees loop-invariant scalars.
    const AdamWStep k = AdamWStep::at(config_, *lr_, *step_, norm_, lossScale_);
    if (k.skip) {
      keep(pOut_, p_);
      keep(mOut_, m_);
      keep(vOut_, v_);
      return;
    }
    const int64_t chunks = (n_ + kParallelGrain - 1) / kParallelGrain;
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c)
      updateSpan(k, p_, g_, m_, v_, pOut_, mOut_, vOut_, c * kParallelGrain,
                 std::min(n_, (c + 1) * kParallelGrain));
  }

private:
  void keep(T *out, const T *in) const {
    keepBytes(out, in, static_cast<size_t>(n_) * sizeof(T));
  }

  const T *p_, *g_, *m_, *v_;
  const float *lr_, *step_, *norm_, *lossScale_;
  T *pOut_, *mOut_, *vOut_;
  int64_t n_;
  contracts::AdamWHyperparams config_;
};

std::unique_ptr<Kernel> makeAdamW(const KernelArgs &args, std::string &error) {
  contracts::AdamWBinding b;
  if (!contracts::bindAdamW(args, error, &b)) return nullptr;
  return makeFloatKernel<AdamWKernel>(b.dtype, args, b.hyper);
}

/// One tensor of a multi_tensor_adamw call, its element type erased.
struct TensorUpdate {
  const void *p, *g, *m, *v;
  void *pOut, *mOut, *vOut;
  void *cast; ///< its cast's output, or null
  int64_t n;
  size_t bytes; ///< of p (and m, v)
  bool decay;
  /// updateSpan for its types, and the cast of [begin, end) of p'.
  void (*update)(const AdamWStep &, const TensorUpdate &, int64_t, int64_t);
  void (*narrow)(const TensorUpdate &, int64_t, int64_t);
};

template <typename T, typename G>
void updateErased(const AdamWStep &k, const TensorUpdate &t, int64_t begin, int64_t end) {
  updateSpan(k, static_cast<const T *>(t.p), static_cast<const G *>(t.g),
             static_cast<const T *>(t.m), static_cast<const T *>(t.v), static_cast<T *>(t.pOut),
             static_cast<T *>(t.mOut), static_cast<T *>(t.vOut), begin, end);
}

/// The cast kernel's loop, from the f32 updated parameter.
template <typename C> void narrowErased(const TensorUpdate &t, int64_t begin, int64_t end) {
  const float *p = static_cast<const float *>(t.pOut);
  C *out = static_cast<C *>(t.cast);
#pragma omp simd
  for (int64_t i = begin; i < end; ++i) store(out, i, load(p, i));
}

template <typename T>
auto updateFor(DType grad) -> void (*)(const AdamWStep &, const TensorUpdate &, int64_t, int64_t) {
  if (grad == DType::BF16) return updateErased<T, bf16>;
  if (grad == DType::F16) return updateErased<T, f16>;
  return updateErased<T, float>;
}

auto narrowFor(DType to) -> void (*)(const TensorUpdate &, int64_t, int64_t) {
  if (to == DType::BF16) return narrowErased<bf16>;
  if (to == DType::F16) return narrowErased<f16>;
  return narrowErased<float>;
}

class MultiTensorAdamWKernel final : public Kernel {
public:
  MultiTensorAdamWKernel(const KernelArgs &args, const contracts::MultiTensorAdamWBinding &b)
      : lr_(args.inputs[b.lr].as<float>()), step_(args.inputs[b.step].as<float>()),
        norm_(b.hasNorm ? args.inputs[b.norm].as<float>() : nullptr),
        lossScale_(b.hasLossScale ? args.inputs[b.lossScale].as<float>() : nullptr),
        config_(b.hyper) {
    const size_t n = b.tensors.size();
    for (size_t i = 0; i < n; ++i) {
      const contracts::MultiTensorAdamWTensor &t = b.tensors[i];
      TensorUpdate u{args.inputs[i].data,      args.inputs[n + i].data,
                     args.inputs[2 * n + i].data, args.inputs[3 * n + i].data,
                     args.outputs[i].data,     args.outputs[n + i].data,
                     args.outputs[2 * n + i].data,
                     t.cast >= 0 ? args.outputs[static_cast<size_t>(t.cast)].data : nullptr,
                     t.numel,                  args.inputs[i].bytes(),
                     t.decay,                  nullptr,
                     narrowFor(t.castTo)};
      u.update = t.param == DType::BF16  ? updateFor<bf16>(t.grad)
                 : t.param == DType::F16 ? updateFor<f16>(t.grad)
                                         : updateFor<float>(t.grad);
      // Chunks of at most kParallelGrain elements: one parallel loop over
      // the whole list balances large and small tensors alike.
      for (int64_t begin = 0; begin < t.numel; begin += kParallelGrain)
        chunks_.push_back({tensors_.size(), begin, std::min(t.numel, begin + kParallelGrain)});
      tensors_.push_back(u);
    }
  }

  void run(const StepContext &) override {
    contracts::AdamWHyperparams noDecay = config_;
    noDecay.weightDecay = 0.0;
    const AdamWStep decayed = AdamWStep::at(config_, *lr_, *step_, norm_, lossScale_);
    const AdamWStep plain = AdamWStep::at(noDecay, *lr_, *step_, norm_, lossScale_);
    const bool skip = decayed.skip;
    if (skip)
      for (const TensorUpdate &t : tensors_) {
        keepBytes(t.pOut, t.p, t.bytes);
        keepBytes(t.mOut, t.m, t.bytes);
        keepBytes(t.vOut, t.v, t.bytes);
      }
    const int64_t chunks = static_cast<int64_t>(chunks_.size());
#pragma omp parallel for schedule(dynamic, 4) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
      const Chunk &chunk = chunks_[static_cast<size_t>(c)];
      const TensorUpdate &t = tensors_[chunk.tensor];
      if (!skip)
        t.update(t.decay ? decayed : plain, t, chunk.begin, chunk.end);
      if (t.cast)
        t.narrow(t, chunk.begin, chunk.end);
    }
  }

private:
  struct Chunk {
    size_t tensor;
    int64_t begin, end;
  };
  const float *lr_, *step_, *norm_, *lossScale_;
  contracts::AdamWHyperparams config_;
  std::vector<TensorUpdate> tensors_;
  std::vector<Chunk> chunks_;
};

std::unique_ptr<Kernel> makeMultiTensorAdamW(const KernelArgs &args, std::string &error) {
  contracts::MultiTensorAdamWBinding b;
  if (!contracts::bindMultiTensorAdamW(args, error, &b)) return nullptr;
  return std::make_unique<MultiTensorAdamWKernel>(args, b);
}

} // namespace

LLMC_REGISTER_KERNEL(CPU, "adamw", makeAdamW);
LLMC_REGISTER_KERNEL(CPU, "multi_tensor_adamw", makeMultiTensorAdamW);

} // namespace llmc::cpu
