//===- adamw8bit.cu - AdamW with 8-bit block-quantized moments on the GPU -===//
//
// The state format and the step are common/Adam8bit.h; the update is
// adamw.cu's (kernels/AdamWStep.h), so on equal inputs p', m', v' equal the CPU's
// and so do the codes.
//
// One thread block per quantization block of 2048 elements, 256 threads,
// each owning 8 elements in registers (indices tid + 256k, coalesced):
// decode m and v, update (writing p'), take the block's new absmax with a
// block reduction, then encode m'/absmax' (a true division, as the contract
// says). Every element a block writes it has read itself first, and the
// block's absmax is written only after every thread has read it (the
// reductions synchronise in between), so the outputs may alias the inputs.
//
// Encoding is the CPU's nearest-entry rule with ties to the lower index,
// taken exactly: for neighbouring entries lo < hi, encode picks lo up to a
// largest float t_j (the same decision thresholds adam8bit::Encoder
// builds), so the code of x is the number of thresholds t_j < x. The 255
// thresholds are found on the host at bind time with the Encoder's own
// float comparisons; on the device a code is an 8-step binary search over
// them in shared memory (NaN compares false everywhere and gets code 0, as
// on the CPU). The tables live in shared memory too: codes are random
// indices, which constant memory would serialise.
//
//===----------------------------------------------------------------------===//

#include "common/Adam8bit.h"
#include "kernels/contracts/AdamW8bit.h"
#include "kernels/cuda/AdamWStep.cuh"
#include "kernels/cuda/BindScratch.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

namespace llmc::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kPerThread = static_cast<int>(adam8bit::kBlock) / kThreads;
static_assert(kPerThread * kThreads == adam8bit::kBlock, "a quantization block per thread block");

/// Device layout of the bind-time tables: signed table, unsigned table,
/// signed thresholds, unsigned thresholds, 256 floats each (a threshold
/// array's last slot is unused).
constexpr int kTableFloats = 4 * 256;

/// adam8bit::decisionThresholds padded to 256 floats (the last slot +inf,
/// never below any x the binary search sees).
std::array<float, 256> thresholds(const std::array<float, 256> &table) {
  std::array<float, 255> decision = adam8bit::decisionThresholds(table);
  std::array<float, 256> out;
  std::copy(decision.begin(), decision.end(), out.begin());
  out[255] = INFINITY;
  return out;
}

/// The number of thresholds below x (0..255): encode(x).
__device__ __forceinline__ uint8_t encodeCode(const float *thr, float x) {
  int lo = 0, hi = 255;
  while (lo < hi) {
    int mid = (lo + hi) >> 1;
    if (thr[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return static_cast<uint8_t>(lo);
}

struct State8 {
  const uint8_t *mCodes, *vCodes;
  const float *mAbsmax, *vAbsmax;
  uint8_t *mCodesOut, *vCodesOut;
  float *mAbsmaxOut, *vAbsmaxOut;
};

template <typename T>
__global__ void __launch_bounds__(kThreads)
    adamw8bitKernel(const T *p, const T *g, State8 s, const float *tables, const float *lr,
                    const float *step, const float *norm, const float *lossScale, T *pOut,
                    int64_t n, int64_t blocks,
                    contracts::AdamWHyperparams config) {
  __shared__ float mTable[256], vTable[256], mThr[256], vThr[256], red[32];
  const int tid = threadIdx.x;
  mTable[tid] = tables[tid];
  vTable[tid] = tables[256 + tid];
  mThr[tid] = tables[512 + tid];
  vThr[tid] = tables[768 + tid];
  // Also publishes the tables.
  const AdamWStep k = blockStep(config, lr, step, norm, lossScale);
  if (k.skip) { // a non-finite norm: the state keeps its values
    for (int64_t b = blockIdx.x; b < blocks; b += gridDim.x) {
      const int64_t begin = b * adam8bit::kBlock;
      const int64_t len = min(static_cast<int64_t>(adam8bit::kBlock), n - begin);
      for (int64_t j = tid; j < len; j += kThreads) {
        pOut[begin + j] = p[begin + j];
        s.mCodesOut[begin + j] = s.mCodes[begin + j];
        s.vCodesOut[begin + j] = s.vCodes[begin + j];
      }
      if (tid == 0) {
        s.mAbsmaxOut[b] = s.mAbsmax[b];
        s.vAbsmaxOut[b] = s.vAbsmax[b];
      }
    }
    return;
  }

  for (int64_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    const int64_t begin = b * adam8bit::kBlock;
    const int64_t len = min(static_cast<int64_t>(adam8bit::kBlock), n - begin);
    const float mScale = s.mAbsmax[b], vScale = s.vAbsmax[b];
    float m[kPerThread], v[kPerThread];
    float mMax = 0.0f, vMax = 0.0f;
#pragma unroll
    for (int e = 0; e < kPerThread; ++e) {
      const int64_t j = tid + static_cast<int64_t>(e) * kThreads;
      m[e] = v[e] = 0.0f;
      if (j < len) {
        const int64_t i = begin + j;
        m[e] = __fmul_rn(mTable[s.mCodes[i]], mScale);
        v[e] = __fmul_rn(vTable[s.vCodes[i]], vScale);
        store(pOut, i, k.apply(load(p, i), load(g, i), m[e], v[e]));
        mMax = fmaxf(mMax, fabsf(m[e]));
        vMax = fmaxf(vMax, fabsf(v[e]));
      }
    }
    mMax = blockMax(mMax, red);
    vMax = blockMax(vMax, red);
    if (tid == 0) {
      s.mAbsmaxOut[b] = mMax;
      s.vAbsmaxOut[b] = vMax;
    }
#pragma unroll
    for (int e = 0; e < kPerThread; ++e) {
      const int64_t j = tid + static_cast<int64_t>(e) * kThreads;
      if (j < len) {
        const int64_t i = begin + j;
        s.mCodesOut[i] = mMax == 0.0f ? 0 : encodeCode(mThr, __fdiv_rn(m[e], mMax));
        s.vCodesOut[i] = vMax == 0.0f ? 0 : encodeCode(vThr, __fdiv_rn(v[e], vMax));
      }
    }
  }
}

template <typename T> class AdamW8bitKernel final : public Kernel {
public:
  AdamW8bitKernel(const KernelArgs &args, const contracts::AdamWHyperparams &config)
      : p_(args.inputs[0].as<T>()), g_(args.inputs[1].as<T>()),
        state_{args.inputs[2].as<uint8_t>(),  args.inputs[4].as<uint8_t>(),
               args.inputs[3].as<float>(),    args.inputs[5].as<float>(),
               args.outputs[1].as<uint8_t>(), args.outputs[3].as<uint8_t>(),
               args.outputs[2].as<float>(),   args.outputs[4].as<float>()},
        lr_(args.inputs[6].as<float>()), step_(args.inputs[7].as<float>()),
        norm_(args.inputs.size() > 8 ? args.inputs[8].as<float>() : nullptr),
        lossScale_(args.inputs.size() > 9 ? args.inputs[9].as<float>() : nullptr),
        pOut_(args.outputs[0].as<T>()), n_(args.inputs[0].numel()),
        blocks_(adam8bit::blockCount(n_)), config_(config), tables_(kTableFloats * sizeof(float)) {
    std::vector<float> host;
    host.reserve(kTableFloats);
    const std::array<float, 256> &mTable = adam8bit::signedTable(),
                                 &vTable = adam8bit::unsignedTable();
    std::array<float, 256> mThr = thresholds(mTable), vThr = thresholds(vTable);
    host.insert(host.end(), mTable.begin(), mTable.end());
    host.insert(host.end(), vTable.begin(), vTable.end());
    host.insert(host.end(), mThr.begin(), mThr.end());
    host.insert(host.end(), vThr.begin(), vThr.end());
    copyToDevice(tables_.as<void>(), host.data(), host.size() * sizeof(float));
  }

  void run(const StepContext &ctx) override {
    if (blocks_ == 0) return;
    const int grid = static_cast<int>(blocks_ < (1 << 30) ? blocks_ : (1 << 30));
    adamw8bitKernel<T><<<grid, kThreads, 0, streamOf(ctx)>>>(
        p_, g_, state_, tables_.as<float>(), lr_, step_, norm_, lossScale_, pOut_, n_, blocks_,
        config_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  const T *p_, *g_;
  State8 state_;
  const float *lr_, *step_, *norm_, *lossScale_;
  T *pOut_;
  int64_t n_, blocks_;
  contracts::AdamWHyperparams config_;
  BindScratch tables_;
};

std::unique_ptr<Kernel> makeCudaAdamW8bit(const KernelArgs &args, std::string &error) {
  contracts::AdamW8bitBinding b;
  if (!contracts::bindAdamW8bit(args, error, &b)) return nullptr;
  return makeFloatKernel<AdamW8bitKernel>(b.dtype, args, b.hyper);
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "adamw8bit", makeCudaAdamW8bit);

} // namespace llmc::cuda
