//===- rope.cu - rotary position embedding on the GPU ---------------------===//
//
// x [B, T, H, D]: at position t the pair (x[i], x[i + D/2]) is rotated by
// t·θ^(−2i/D), that rate rescaled under the Llama 3 scaling attributes
// (common/RopeScaling.h), negated when `inverse` (the backward). The
// angles depend only on (t, i): their cos/sin are computed once at bind
// time on the host by the function kernels/cpu/rope.cpp uses
// (contracts::ropeTables) and uploaded, so both backends rotate by the same
// fp32 factors. The run is a grid-stride loop over pairs: a thread reads
// both halves of its pair before writing them, so out may alias x. With a
// positions input [B, T] (packed documents restart at 0) positions[b, t]
// replaces t; one outside [0, T) makes its pair NaN rather than read
// outside the table, as on the CPU.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/Rope.h"
#include "kernels/cuda/BindScratch.h"
#include "kernels/cuda/Common.cuh"

#include <vector>

namespace llmc::cuda {
namespace {

/// pairs = B·T·H·half; cs, sn are [rows, half]; positions [B, T] (i64 when
/// `wide`) or null.
template <typename T>
__global__ void ropeKernel(const T *x, T *out, const float *cs, const float *sn,
                           const void *positions, bool wide, int64_t pairs, int64_t t,
                           int64_t rows, int64_t h, int64_t half) {
  LLMC_GRID_STRIDE(p, pairs) {
    const int64_t i = p % half, row = p / half; // row = (b·T + t)·H + h
    const int64_t bt = row / h;
    const int64_t pos = !positions ? bt % t
                        : wide     ? static_cast<const int64_t *>(positions)[bt]
                                   : static_cast<const int32_t *>(positions)[bt];
    const int64_t base = row * 2 * half;
    if (pos < 0 || pos >= rows) {
      store(out, base + i, __int_as_float(0x7fc00000));
      store(out, base + i + half, __int_as_float(0x7fc00000));
      continue;
    }
    const float c = cs[pos * half + i], s = sn[pos * half + i];
    float lo = load(x, base + i), hi = load(x, base + i + half);
    store(out, base + i, lo * c - hi * s);
    store(out, base + i + half, hi * c + lo * s);
  }
}

template <typename T> class RopeKernel final : public Kernel {
public:
  RopeKernel(const KernelArgs &args, const contracts::RopeBinding &b)
      : x_(args.inputs[0].as<T>()), out_(args.outputs[0].as<T>()),
        positions_(args.inputs.size() > 1 ? args.inputs[1].data : nullptr),
        wide_(args.inputs.size() > 1 && args.inputs[1].dtype == DType::I64),
        b_(args.inputs[0].dim(0)),
        t_(args.inputs[0].dim(1)), h_(args.inputs[0].dim(2)), d_(args.inputs[0].dim(3)),
        half_(d_ / 2), rows_(b.rows), table_(2 * rows_ * half_ * sizeof(float)) {
    std::vector<float> host(static_cast<size_t>(2 * rows_ * half_));
    contracts::ropeTables(b, d_, host.data(), host.data() + rows_ * half_);
    if (!host.empty()) copyToDevice(table_.as<void>(), host.data(), host.size() * sizeof(float));
  }

  void run(const StepContext &ctx) override {
    const int64_t pairs = b_ * t_ * h_ * half_;
    if (pairs == 0) return;
    const float *cs = table_.as<float>();
    ropeKernel<T><<<gridFor(pairs), kBlock, 0, streamOf(ctx)>>>(
        x_, out_, cs, cs + rows_ * half_, positions_, wide_, pairs, t_, rows_, h_, half_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  const T *x_;
  T *out_;
  const void *positions_; // [B, T] or null: position t
  bool wide_;             // i64 positions
  int64_t b_, t_, h_, d_, half_;
  int64_t rows_;      // positions in [0, rows_)
  BindScratch table_; // cos [rows, D/2], then sin [rows, D/2] (negated when inverse)
};

std::unique_ptr<Kernel> makeCudaRope(const KernelArgs &args, std::string &error) {
  contracts::RopeBinding b;
  if (!contracts::bindRope(args, error, &b)) return nullptr;
  return makeFloatKernel<RopeKernel>(b.dtype, args, b);
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "rope", makeCudaRope);

} // namespace llmc::cuda
