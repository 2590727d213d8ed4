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
// `omp simd` keeps that vectorised.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/Common.h"

namespace llmc::cpu {
namespace {

struct AdamWConfig {
  double beta1, beta2, eps, weightDecay, maxGradNorm;
};

template <typename T> class AdamWKernel final : public Kernel {
public:
  AdamWKernel(const KernelArgs &args, const AdamWConfig &config)
      : p_(args.inputs[0].as<T>()), g_(args.inputs[1].as<T>()), m_(args.inputs[2].as<T>()),
        v_(args.inputs[3].as<T>()), lr_(args.inputs[4].as<float>()),
        step_(args.inputs[5].as<float>()),
        norm_(args.inputs.size() > 6 ? args.inputs[6].as<float>() : nullptr),
        pOut_(args.outputs[0].as<T>()), mOut_(args.outputs[1].as<T>()),
        vOut_(args.outputs[2].as<T>()), n_(args.inputs[0].numel()), config_(config) {}

  void run(const StepContext &) override {
    const AdamWConfig &c = config_;
    double clip = 1.0;
    if (norm_ && c.maxGradNorm > 0.0)
      clip = std::min(1.0, c.maxGradNorm / (static_cast<double>(*norm_) + 1e-6));
    double step = *step_, lr = *lr_;
    const float gradScale = static_cast<float>(clip);
    const float beta1 = static_cast<float>(c.beta1), beta2 = static_cast<float>(c.beta2);
    const float oneMinusBeta1 = static_cast<float>(1.0 - c.beta1);
    const float oneMinusBeta2 = static_cast<float>(1.0 - c.beta2);
    const float invBias1 = static_cast<float>(1.0 / (1.0 - std::pow(c.beta1, step)));
    const float invBias2 = static_cast<float>(1.0 / (1.0 - std::pow(c.beta2, step)));
    const float eps = static_cast<float>(c.eps), lrF = static_cast<float>(lr);
    const float decay = static_cast<float>(lr * c.weightDecay);
    const T *p = p_, *g = g_, *m = m_, *v = v_;
    T *pOut = pOut_, *mOut = mOut_, *vOut = vOut_;
#pragma omp parallel for simd schedule(static) if (n_ > kParallelGrain)
    for (int64_t i = 0; i < n_; ++i) {
      float grad = load(g, i) * gradScale, param = load(p, i);
      float m1 = beta1 * load(m, i) + oneMinusBeta1 * grad;
      float v1 = beta2 * load(v, i) + oneMinusBeta2 * grad * grad;
      float update = (m1 * invBias1) / (std::sqrt(v1 * invBias2) + eps);
      store(mOut, i, m1);
      store(vOut, i, v1);
      store(pOut, i, param - lrF * update - decay * param);
    }
  }

private:
  const T *p_, *g_, *m_, *v_;
  const float *lr_, *step_, *norm_;
  T *pOut_, *mOut_, *vOut_;
  int64_t n_;
  AdamWConfig config_;
};

std::unique_ptr<Kernel> makeAdamW(const KernelArgs &args, std::string &error) {
  Validator v("adamw", args, error);
  AdamWConfig c;
  if (!v.arity(6, 7, 3) || !v.floatAttr("beta1", &c.beta1) || !v.floatAttr("beta2", &c.beta2) ||
      !v.floatAttr("epsilon", &c.eps) || !v.floatAttr("weight_decay", &c.weightDecay) ||
      !v.floatAttr("max_grad_norm", &c.maxGradNorm))
    return nullptr;
  if (!(c.beta1 >= 0.0 && c.beta1 < 1.0) || !(c.beta2 >= 0.0 && c.beta2 < 1.0))
    return v.reject("attributes 'beta1' and 'beta2' must be in [0, 1)");
  const TensorView &p = v.in(0);
  if (!v.isFloat(p, "param") || !v.hasType(v.in(1), "grad", p.dtype, p.shape) ||
      !v.hasType(v.in(2), "m", p.dtype, p.shape) || !v.hasType(v.in(3), "v", p.dtype, p.shape) ||
      !v.isF32Scalar(v.in(4), "lr") || !v.isF32Scalar(v.in(5), "step") ||
      (args.inputs.size() > 6 && !v.isF32Scalar(v.in(6), "norm")) ||
      !v.hasType(v.out(0), "param'", p.dtype, p.shape) ||
      !v.hasType(v.out(1), "m'", p.dtype, p.shape) || !v.hasType(v.out(2), "v'", p.dtype, p.shape))
    return nullptr;
  return makeFloatKernel<AdamWKernel>(p.dtype, args, c);
}

} // namespace

LLMC_REGISTER_KERNEL(CPU, "adamw", makeAdamW);

} // namespace llmc::cpu
