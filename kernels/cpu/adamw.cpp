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
//===----------------------------------------------------------------------===//

#include "kernels/AdamWStep.h"
#include "kernels/contracts/AdamW.h"
#include "kernels/cpu/Common.h"

namespace llmc::cpu {
namespace {

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
    const T *p = p_, *g = g_, *m = m_, *v = v_;
    T *pOut = pOut_, *mOut = mOut_, *vOut = vOut_;
#pragma omp parallel for simd schedule(static) if (n_ > kParallelGrain)
    for (int64_t i = 0; i < n_; ++i) {
      float m1 = load(m, i), v1 = load(v, i);
      float param = k.apply(load(p, i), load(g, i), m1, v1);
      store(mOut, i, m1);
      store(vOut, i, v1);
      store(pOut, i, param);
    }
  }

private:
  /// A skipped step's output: the input's bytes (nothing to do in place).
  void keep(T *out, const T *in) const {
    if (out != in)
      std::memcpy(out, in, static_cast<size_t>(n_) * sizeof(T));
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

} // namespace

LLMC_REGISTER_KERNEL(CPU, "adamw", makeAdamW);

} // namespace llmc::cpu
