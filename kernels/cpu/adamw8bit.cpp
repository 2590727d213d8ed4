//===- adamw8bit.cpp - one AdamW step with 8-bit block-quantized moments --===//
//
// The state format and what one step computes are common/Adam8bit.h. The
// update itself is adamw.cpp's, float operation for float operation, so on
// state that 8 bits represent exactly both kernels give the same p'; p' is
// computed from the fp32 m', v' before they are quantized.
//
// Blocks are independent and are the unit of parallel work. Each decodes
// its m and v into local fp32 buffers, updates them (writing p'), takes the
// new absmax and encodes. Every input element of a block is read before the
// block's outputs are written, so the outputs may alias the inputs (the
// usual in-place update). Encoding uses adam8bit::Encoder, which gives
// encode()'s codes with a table lookup instead of a binary search; the ratio
// m'/absmax' is a true division, as the contract says, not a multiplication
// by a reciprocal (which would move some codes). A non-finite norm skips the
// step: params, codes and absmax keep their values (AdamWStep.h).
//
//===----------------------------------------------------------------------===//

#include "kernels/AdamWStep.h"
#include "common/Adam8bit.h"
#include "kernels/contracts/AdamW8bit.h"
#include "kernels/cpu/Common.h"

namespace llmc::cpu {
namespace {

using adam8bit::kBlock;

/// Codes of `len` values x[i] / absmax (all 0 when absmax is 0, as the
/// contract says: 0/0 would also give 0, but only by way of NaN).
void encodeBlock(const float *x, int64_t len, float absmax, const adam8bit::Encoder &encoder,
                 uint8_t *codes) {
  if (absmax == 0.0f) {
    std::memset(codes, 0, static_cast<size_t>(len));
    return;
  }
  const uint32_t *entries = encoder.entries();
#pragma omp simd
  for (int64_t i = 0; i < len; ++i) codes[i] = adam8bit::Encoder::lookup(entries, x[i] / absmax);
}

template <typename T> class AdamW8bitKernel final : public Kernel {
public:
  AdamW8bitKernel(const KernelArgs &args, const contracts::AdamWHyperparams &config)
      : p_(args.inputs[0].as<T>()), g_(args.inputs[1].as<T>()),
        mCodes_(args.inputs[2].as<uint8_t>()), mAbsmax_(args.inputs[3].as<float>()),
        vCodes_(args.inputs[4].as<uint8_t>()), vAbsmax_(args.inputs[5].as<float>()),
        lr_(args.inputs[6].as<float>()), step_(args.inputs[7].as<float>()),
        norm_(args.inputs.size() > 8 ? args.inputs[8].as<float>() : nullptr),
        lossScale_(args.inputs.size() > 9 ? args.inputs[9].as<float>() : nullptr),
        pOut_(args.outputs[0].as<T>()), mCodesOut_(args.outputs[1].as<uint8_t>()),
        mAbsmaxOut_(args.outputs[2].as<float>()), vCodesOut_(args.outputs[3].as<uint8_t>()),
        vAbsmaxOut_(args.outputs[4].as<float>()), n_(args.inputs[0].numel()), config_(config),
        mTable_(adam8bit::signedTable().data()), vTable_(adam8bit::unsignedTable().data()),
        mEncoder_(adam8bit::signedEncoder()), vEncoder_(adam8bit::unsignedEncoder()) {}

  void run(const StepContext &) override {
    const AdamWStep k = AdamWStep::at(config_, *lr_, *step_, norm_, lossScale_);
    const int64_t blocks = adam8bit::blockCount(n_);
    if (k.skip) {
      keep(pOut_, p_, n_);
      keep(mCodesOut_, mCodes_, n_);
      keep(vCodesOut_, vCodes_, n_);
      keep(mAbsmaxOut_, mAbsmax_, blocks);
      keep(vAbsmaxOut_, vAbsmax_, blocks);
      return;
    }
#pragma omp parallel for schedule(static) if (n_ > kParallelGrain)
    for (int64_t b = 0; b < blocks; ++b) updateBlock(b, k);
  }

private:
  /// A skipped step's output: the input's bytes (nothing to do in place).
  template <typename E> static void keep(E *out, const E *in, int64_t count) {
    if (out != in)
      std::memcpy(out, in, static_cast<size_t>(count) * sizeof(E));
  }

  void updateBlock(int64_t b, const AdamWStep k) const {
    const int64_t begin = b * kBlock, len = std::min(kBlock, n_ - begin);
    alignas(64) float m[kBlock], v[kBlock];
    const uint8_t *mCodes = mCodes_ + begin, *vCodes = vCodes_ + begin;
    const float mScale = mAbsmax_[b], vScale = vAbsmax_[b];
#pragma omp simd
    for (int64_t i = 0; i < len; ++i) {
      m[i] = mTable_[mCodes[i]] * mScale;
      v[i] = vTable_[vCodes[i]] * vScale;
    }

    // The update adamw.cpp runs (AdamWStep::apply), m and v in the buffers.
    const T *p = p_ + begin, *g = g_ + begin;
    T *pOut = pOut_ + begin;
    float mMax = 0.0f, vMax = 0.0f;
#pragma omp simd reduction(max : mMax, vMax)
    for (int64_t i = 0; i < len; ++i) {
      store(pOut, i, k.apply(load(p, i), load(g, i), m[i], v[i]));
      mMax = std::max(mMax, std::abs(m[i]));
      vMax = std::max(vMax, std::abs(v[i]));
    }

    mAbsmaxOut_[b] = mMax;
    vAbsmaxOut_[b] = vMax;
    encodeBlock(m, len, mMax, mEncoder_, mCodesOut_ + begin);
    encodeBlock(v, len, vMax, vEncoder_, vCodesOut_ + begin);
  }

  const T *p_, *g_;
  const uint8_t *mCodes_;
  const float *mAbsmax_;
  const uint8_t *vCodes_;
  const float *vAbsmax_, *lr_, *step_, *norm_, *lossScale_;
  T *pOut_;
  uint8_t *mCodesOut_;
  float *mAbsmaxOut_;
  uint8_t *vCodesOut_;
  float *vAbsmaxOut_;
  int64_t n_;
  contracts::AdamWHyperparams config_;
  const float *mTable_, *vTable_;
  const adam8bit::Encoder &mEncoder_, &vEncoder_;
};

std::unique_ptr<Kernel> makeAdamW8bit(const KernelArgs &args, std::string &error) {
  contracts::AdamW8bitBinding b;
  if (!contracts::bindAdamW8bit(args, error, &b)) return nullptr;
  return makeFloatKernel<AdamW8bitKernel>(b.dtype, args, b.hyper);
}

} // namespace

LLMC_REGISTER_KERNEL(CPU, "adamw8bit", makeAdamW8bit);

} // namespace llmc::cpu
