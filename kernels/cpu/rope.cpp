//===- rope.cpp - rotary position embedding -------------------------------===//
//
// x [B, T, H, D]: at position t (dim 1) the pair (x[i], x[i + D/2]) is
// rotated by t·θ^(−2i/D) (the Hugging Face "rotate_half" layout), the rate
// θ^(−2i/D) rescaled when the Llama 3 scaling attributes are given
// (common/RopeScaling.h); `inverse` rotates by the negative angle, which
// is exactly the backward. With a positions input [B, T] (packed documents
// restart at 0) position positions[b, t] replaces t. The angles depend only
// on (position, i), so their cos/sin for positions 0..T−1
// (0..position_limit−1 when given) are computed once at bind time in double
// and the run is a streaming multiply-add; a position outside the table
// makes its row NaN rather than read outside it. Each pair is read before
// it is written, so out may alias x.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/Rope.h"
#include "kernels/cpu/Common.h"
#include "kernels/cpu/RopeRotate.h"

namespace llmc::cpu {
namespace {

template <typename T> class RopeKernel final : public Kernel {
public:
  RopeKernel(const KernelArgs &args, const contracts::RopeBinding &b)
      : x_(args.inputs[0].as<T>()), out_(args.outputs[0].as<T>()),
        positions_(args.inputs.size() > 1 ? IdView(args.inputs[1]) : IdView()),
        b_(args.inputs[0].dim(0)),
        t_(args.inputs[0].dim(1)), h_(args.inputs[0].dim(2)), d_(args.inputs[0].dim(3)),
        half_(d_ / 2), rows_(b.rows), cos_(rows_ * half_), sin_(rows_ * half_) {
    contracts::ropeTables(b, d_, cos_.data(), sin_.data());
  }

  void run(const StepContext &) override {
    const int64_t half = half_, d = d_;
#pragma omp parallel for schedule(static) if (b_ * t_ * h_ * d > kParallelGrain)
    for (int64_t bt = 0; bt < b_ * t_; ++bt) {
      int64_t t = positions_.data ? positions_[bt] : bt % t_;
      if (t < 0 || t >= rows_) {
        for (int64_t e = 0; e < h_ * d; ++e) store(out_ + bt * h_ * d, e, kNaN);
        continue;
      }
      const float *cs = cos_.data() + t * half, *sn = sin_.data() + t * half;
      for (int64_t h = 0; h < h_; ++h) {
        const T *x = x_ + (bt * h_ + h) * d;
        T *out = out_ + (bt * h_ + h) * d;
        rotatePairs(x, cs, sn, half, [&](int64_t i, float lo, float hi) {
          store(out, i, lo);
          store(out, i + half, hi);
        });
      }
    }
  }

private:
  const T *x_;
  T *out_;
  IdView positions_; // null data: position t
  int64_t b_, t_, h_, d_, half_;
  int64_t rows_;                 // positions in [0, rows_)
  std::vector<float> cos_, sin_; // [rows, D/2]; sin negated when inverse
};

std::unique_ptr<Kernel> makeRope(const KernelArgs &args, std::string &error) {
  contracts::RopeBinding b;
  if (!contracts::bindRope(args, error, &b)) return nullptr;
  return makeFloatKernel<RopeKernel>(b.dtype, args, b);
}

} // namespace

LLMC_REGISTER_KERNEL(CPU, "rope", makeRope);

} // namespace llmc::cpu
