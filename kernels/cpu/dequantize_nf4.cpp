//===- dequantize_nf4.cpp - expand a QLoRA-stored weight ------------------===//
//
// qat_dequantize_nf4: codes (u8, two NF4 indices per byte), absmax_q (u8
// holding an 8-bit level per block, int8 or E4M3 as absmax_format says),
// absmax_scale (f32, one per 256 blocks), absmax_mean (f32 scalar) → the
// weight (f32 or bf16, any shape whose last dimension `block` divides). The
// arithmetic is
// common/QuantScheme.h's nf4Absmax / nf4Value. A piece of a weight split
// by tensor parallelism finds its blocks' scales by their index in the
// whole weight (common/Nf4Piece.h). Blocks are independent, so they are
// shared out over threads; within a block the absmax is constant and each
// byte yields two elements.
//
//===----------------------------------------------------------------------===//

#include "common/QuantScheme.h"
#include "kernels/contracts/DequantizeNf4.h"
#include "kernels/cpu/Common.h"

namespace llmc::cpu {
namespace {

template <typename T> class DequantizeNf4Kernel final : public Kernel {
public:
  DequantizeNf4Kernel(const KernelArgs &args, int64_t block, Nf4Piece piece,
                      quant::AbsmaxFormat absmaxFormat)
      : codes_(args.inputs[0].as<uint8_t>()), absmaxQ_(args.inputs[1].as<uint8_t>()),
        absmaxScale_(args.inputs[2].as<float>()), absmaxMean_(args.inputs[3].as<float>()),
        out_(args.outputs[0].as<T>()), n_(args.outputs[0].numel()), block_(block), piece_(piece),
        absmaxFormat_(absmaxFormat) {}

  void run(const StepContext &) override {
    const int64_t blocks = n_ / block_;
    const float mean = *absmaxMean_;
#pragma omp parallel for schedule(static) if (n_ > kParallelGrain)
    for (int64_t g = 0; g < blocks; ++g) {
      float scale = absmaxScale_[piece_.wholeBlock(g) / quant::kNf4DoubleQuantBlock];
      float absmax = quant::nf4Absmax(absmaxQ_[g], absmaxFormat_, scale, mean);
      T *out = out_ + g * block_;
      for (int64_t i = 0, first = g * block_; i < block_; ++i)
        store(out, i, quant::nf4Value(quant::nf4Index(codes_, first + i), absmax));
    }
  }

private:
  const uint8_t *codes_, *absmaxQ_;
  const float *absmaxScale_, *absmaxMean_;
  T *out_;
  int64_t n_, block_;
  Nf4Piece piece_;
  quant::AbsmaxFormat absmaxFormat_;
};

std::unique_ptr<Kernel> makeDequantizeNf4(const KernelArgs &args, std::string &error) {
  contracts::DequantizeNf4Binding b;
  if (!contracts::bindDequantizeNf4(args, error, &b)) return nullptr;
  return makeFloatKernel<DequantizeNf4Kernel>(b.dtype, args, b.block, b.piece, b.absmaxFormat);
}

} // namespace

LLMC_REGISTER_KERNEL(CPU, "qat_dequantize_nf4", makeDequantizeNf4);

} // namespace llmc::cpu
