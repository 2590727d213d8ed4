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
// multi_tensor_adamw updates a list of tensors in one launch. A device
// table of the tensors' pointers, sizes and types is built when the kernel
// binds, with each tensor's first chunk (kChunk elements) in a running
// count; block b takes chunks b, b + gridDim.x, ..., finds each chunk's
// tensor by binary search over the counts and updates its elements with
// the per-tensor kernel's arithmetic (the step constants formed once per
// block, with and without weight decay), then narrows them into the
// tensor's cast, the thread that wrote an element reading it back, as the
// cast kernel rounds (bf16 by __float2bfloat16_rn, f16 by common/Half.h).
//
//===----------------------------------------------------------------------===//

#include "common/Half.h"
#include "kernels/contracts/AdamW.h"
#include "kernels/cuda/AdamWStep.cuh"
#include "kernels/cuda/BindScratch.h"

#include <vector>

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

/// One tensor of a multi_tensor_adamw call, as the device reads it.
struct DeviceTensor {
  const void *p, *g, *m, *v;
  void *pOut, *mOut, *vOut;
  void *cast; ///< null: no cast
  int64_t n;
  DType param, grad, castTo;
  bool decay;
};

/// Elements of one chunk of a multi_tensor_adamw call.
constexpr int64_t kChunk = 16 * kBlock;

template <typename T, typename G>
__device__ void updateChunk(const AdamWStep &k, const DeviceTensor &t, int64_t begin,
                            int64_t end) {
  const T *p = static_cast<const T *>(t.p), *m = static_cast<const T *>(t.m),
          *v = static_cast<const T *>(t.v);
  const G *g = static_cast<const G *>(t.g);
  T *pOut = static_cast<T *>(t.pOut), *mOut = static_cast<T *>(t.mOut),
    *vOut = static_cast<T *>(t.vOut);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    float m1 = load(m, i), v1 = load(v, i);
    float param = k.apply(load(p, i), load(g, i), m1, v1);
    store(mOut, i, m1);
    store(vOut, i, v1);
    store(pOut, i, param);
  }
}

template <typename T>
__device__ void updateChunkFor(const AdamWStep &k, const DeviceTensor &t, int64_t begin,
                               int64_t end) {
  if (t.grad == DType::BF16) updateChunk<T, bf16>(k, t, begin, end);
  else if (t.grad == DType::F16) updateChunk<T, f16>(k, t, begin, end);
  else updateChunk<T, float>(k, t, begin, end);
}

/// A skipped step's outputs: the inputs' elements, where not in place.
template <typename T>
__device__ void keepChunk(const DeviceTensor &t, int64_t begin, int64_t end) {
  if (t.pOut == t.p && t.mOut == t.m && t.vOut == t.v) return;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    static_cast<T *>(t.pOut)[i] = static_cast<const T *>(t.p)[i];
    static_cast<T *>(t.mOut)[i] = static_cast<const T *>(t.m)[i];
    static_cast<T *>(t.vOut)[i] = static_cast<const T *>(t.v)[i];
  }
}

/// The cast kernel's rounding of the f32 updated parameter.
__device__ void castChunk(const DeviceTensor &t, int64_t begin, int64_t end) {
  const float *p = static_cast<const float *>(t.pOut);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    if (t.castTo == DType::BF16) store(static_cast<bf16 *>(t.cast), i, p[i]);
    else if (t.castTo == DType::F16) static_cast<uint16_t *>(t.cast)[i] = half::fromFloat(p[i]);
    else static_cast<float *>(t.cast)[i] = p[i];
  }
}

/// The tensor chunk `c` belongs to: the last t with firstChunk[t] <= c.
__device__ int tensorOf(const int64_t *firstChunk, int tensors, int64_t c) {
  int lo = 0, hi = tensors - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) >> 1;
    if (firstChunk[mid] <= c) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

__global__ void multiTensorAdamWKernel(const DeviceTensor *tensors, const int64_t *firstChunk,
                                       int count, int64_t chunks, const float *lr,
                                       const float *step, const float *norm,
                                       const float *lossScale,
                                       contracts::AdamWHyperparams config) {
  __shared__ AdamWStep decayed, plain;
  if (threadIdx.x == 0) {
    decayed = AdamWStep::at(config, *lr, *step, norm, lossScale);
    contracts::AdamWHyperparams noDecay = config;
    noDecay.weightDecay = 0.0;
    plain = AdamWStep::at(noDecay, *lr, *step, norm, lossScale);
  }
  __syncthreads();
  for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    const int index = tensorOf(firstChunk, count, c);
    const DeviceTensor t = tensors[index];
    const int64_t begin = (c - firstChunk[index]) * kChunk;
    const int64_t end = begin + kChunk < t.n ? begin + kChunk : t.n;
    const AdamWStep &k = t.decay ? decayed : plain;
    if (k.skip) {
      if (t.param == DType::F32) keepChunk<float>(t, begin, end);
      else keepChunk<uint16_t>(t, begin, end);
    } else if (t.param == DType::BF16) {
      updateChunkFor<bf16>(k, t, begin, end);
    } else if (t.param == DType::F16) {
      updateChunkFor<f16>(k, t, begin, end);
    } else {
      updateChunkFor<float>(k, t, begin, end);
    }
    // Each element's cast is read back by the thread that wrote it.
    if (t.cast) castChunk(t, begin, end);
  }
}

class MultiTensorAdamWKernel final : public Kernel {
public:
  MultiTensorAdamWKernel(const KernelArgs &args, const contracts::MultiTensorAdamWBinding &b)
      : lr_(args.inputs[b.lr].as<float>()), step_(args.inputs[b.step].as<float>()),
        norm_(b.hasNorm ? args.inputs[b.norm].as<float>() : nullptr),
        lossScale_(b.hasLossScale ? args.inputs[b.lossScale].as<float>() : nullptr),
        config_(b.hyper), count_(static_cast<int>(b.tensors.size())) {
    const size_t n = b.tensors.size();
    std::vector<DeviceTensor> table;
    std::vector<int64_t> firstChunk;
    for (size_t i = 0; i < n; ++i) {
      const contracts::MultiTensorAdamWTensor &t = b.tensors[i];
      table.push_back({args.inputs[i].data, args.inputs[n + i].data,
                       args.inputs[2 * n + i].data, args.inputs[3 * n + i].data,
                       args.outputs[i].data, args.outputs[n + i].data,
                       args.outputs[2 * n + i].data,
                       t.cast >= 0 ? args.outputs[static_cast<size_t>(t.cast)].data : nullptr,
                       t.numel, t.param, t.grad, t.castTo, t.decay});
      firstChunk.push_back(chunks_);
      chunks_ += (t.numel + kChunk - 1) / kChunk;
    }
    tensors_ = BindScratch(table.size() * sizeof(DeviceTensor));
    firstChunk_ = BindScratch(firstChunk.size() * sizeof(int64_t));
    copyToDevice(tensors_.as<void>(), table.data(), table.size() * sizeof(DeviceTensor));
    copyToDevice(firstChunk_.as<void>(), firstChunk.data(), firstChunk.size() * sizeof(int64_t));
  }

  void run(const StepContext &ctx) override {
    if (chunks_ == 0) return;
    const int64_t grid = chunks_ < 65535 * 8 ? chunks_ : 65535 * 8;
    multiTensorAdamWKernel<<<static_cast<int>(grid), kBlock, 0, streamOf(ctx)>>>(
        tensors_.as<DeviceTensor>(), firstChunk_.as<int64_t>(), count_, chunks_, lr_, step_,
        norm_, lossScale_, config_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  const float *lr_, *step_, *norm_, *lossScale_;
  contracts::AdamWHyperparams config_;
  int count_;
  int64_t chunks_ = 0;
  BindScratch tensors_, firstChunk_; // the device table and each tensor's first chunk
};

std::unique_ptr<Kernel> makeCudaMultiTensorAdamW(const KernelArgs &args, std::string &error) {
  contracts::MultiTensorAdamWBinding b;
  if (!contracts::bindMultiTensorAdamW(args, error, &b)) return nullptr;
  return std::make_unique<MultiTensorAdamWKernel>(args, b);
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "adamw", makeCudaAdamW);
LLMC_REGISTER_KERNEL(CUDA, "multi_tensor_adamw", makeCudaMultiTensorAdamW);

} // namespace llmc::cuda
