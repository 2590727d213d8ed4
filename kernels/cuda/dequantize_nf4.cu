//===- dequantize_nf4.cu - expand a QLoRA-stored weight on the GPU --------===//
//
// qat_dequantize_nf4, as kernels/cpu/dequantize_nf4.cpp: codes (u8, two
// NF4 indices per byte, low nibble first), absmax_q (u8 holding an 8-bit
// level per block, int8 or E4M3 as absmax_format says), absmax_scale (f32,
// one per 256 blocks), absmax_mean (f32 scalar) → the weight, or a
// tensor-parallel piece of it (its blocks' scales found through
// common/Nf4Piece.h). Each element is independent, so one thread per
// element in a grid-stride loop expands it (Nf4.cuh: the CPU's value bit
// for bit).
//
//===----------------------------------------------------------------------===//

#include "common/QuantScheme.h"
#include "kernels/contracts/DequantizeNf4.h"
#include "kernels/cuda/Common.cuh"
#include "kernels/cuda/Nf4.cuh"

namespace llmc::cuda {
namespace {

template <typename T>
__global__ void dequantizeNf4(const uint8_t *codes, const uint8_t *absmaxQ,
                              const float *absmaxScale, const float *absmaxMean, Nf4Levels levels,
                              Nf4Piece piece, quant::AbsmaxFormat format, int64_t n, int64_t block,
                              T *out) {
  const float mean = *absmaxMean;
  LLMC_GRID_STRIDE(i, n) {
    store(out, i, nf4Element(codes, absmaxQ, absmaxScale, mean, levels, piece, format, i, block));
  }
}

template <typename T> class DequantizeNf4Kernel final : public Kernel {
public:
  DequantizeNf4Kernel(const KernelArgs &args, int64_t block, Nf4Piece piece,
                      quant::AbsmaxFormat absmaxFormat)
      : codes_(args.inputs[0].as<uint8_t>()), absmaxQ_(args.inputs[1].as<uint8_t>()),
        absmaxScale_(args.inputs[2].as<float>()), absmaxMean_(args.inputs[3].as<float>()),
        out_(args.outputs[0].as<T>()), n_(args.outputs[0].numel()), block_(block), piece_(piece),
        absmaxFormat_(absmaxFormat) {
    levels_ = Nf4Levels::fromScheme();
  }

  void run(const StepContext &ctx) override {
    dequantizeNf4<T><<<gridFor(n_), kBlock, 0, streamOf(ctx)>>>(codes_, absmaxQ_, absmaxScale_,
                                                                absmaxMean_, levels_, piece_,
                                                                absmaxFormat_, n_, block_, out_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  const uint8_t *codes_, *absmaxQ_;
  const float *absmaxScale_, *absmaxMean_;
  T *out_;
  int64_t n_, block_;
  Nf4Piece piece_;
  quant::AbsmaxFormat absmaxFormat_;
  Nf4Levels levels_;
};

std::unique_ptr<Kernel> makeCudaDequantizeNf4(const KernelArgs &args, std::string &error) {
  contracts::DequantizeNf4Binding b;
  if (!contracts::bindDequantizeNf4(args, error, &b)) return nullptr;
  return makeFloatKernel<DequantizeNf4Kernel>(b.dtype, args, b.block, b.piece, b.absmaxFormat);
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "qat_dequantize_nf4", makeCudaDequantizeNf4);

} // namespace llmc::cuda
