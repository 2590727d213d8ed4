//===- adamw.cu - one AdamW step on the GPU -------------------------------===//
//
// The update of kernels/cpu/adamw.cpp, elementwise over a grid-stride loop.
// lr, step and the optional global norm are device scalars (the schedule
// and clip factor change every step, and reading them on the host would
// need a sync), so each block's thread 0 forms the step constants in double
// and shares them (AdamWStep.cuh); the constants and the per-element math
// are kernels/AdamWStep.h, the CPU's, float operation for float operation. Each thread reads p, g,
// m, v of its element before writing p', m', v', so the outputs may alias
// the inputs (the usual in-place update).
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/AdamW.h"
#include "kernels/cuda/AdamWStep.cuh"

namespace llmc::cuda {
namespace {

template <typename T>
__global__ void adamwKernel(const T *p, const T *g, const T *m, const T *v, const float *lr,
                            const float *step, const float *norm, const float *lossScale,
                            T *pOut, T *mOut, T *vOut,
                            int64_t n, contracts::AdamWHyperparams config) {
  const AdamWStep k = blockStep(config, lr, step, norm, lossScale);
  if (k.skip) { // a non-finite norm: the state keeps its values
    if (pOut != p || mOut != m || vOut != v)
      LLMC_GRID_STRIDE(i, n) {
        pOut[i] = p[i];
        mOut[i] = m[i];
        vOut[i] = v[i];
      }
    return;
  }
  LLMC_GRID_STRIDE(i, n) {
    float m1 = load(m, i), v1 = load(v, i);
    float param = k.apply(load(p, i), load(g, i), m1, v1);
    store(mOut, i, m1);
    store(vOut, i, v1);
    store(pOut, i, param);
  }
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

  void run(const StepContext &ctx) override {
    if (n_ == 0) return;
    adamwKernel<T><<<gridFor(n_), kBlock, 0, streamOf(ctx)>>>(p_, g_, m_, v_, lr_, step_, norm_,
                                                              lossScale_, pOut_, mOut_, vOut_, n_, config_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  const T *p_, *g_, *m_, *v_;
  const float *lr_, *step_, *norm_, *lossScale_;
  T *pOut_, *mOut_, *vOut_;
  int64_t n_;
  contracts::AdamWHyperparams config_;
};

std::unique_ptr<Kernel> makeCudaAdamW(const KernelArgs &args, std::string &error) {
  contracts::AdamWBinding b;
  if (!contracts::bindAdamW(args, error, &b)) return nullptr;
  return makeFloatKernel<AdamWKernel>(b.dtype, args, b.hyper);
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "adamw", makeCudaAdamW);

} // namespace llmc::cuda
