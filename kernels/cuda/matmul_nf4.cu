//===- matmul_nf4.cu - x · W with W expanded from NF4, a chunk at a time --===//
//
// matmul_nf4, as kernels/cpu/matmul_nf4.cpp: y = x · W (or x · Wᵀ) with W
// in NF4 storage (common/QuantScheme.h), whole or a tensor-parallel piece
// (common/Nf4Piece.h), through QuantizedMatmul.cuh. The
// expansion rounds as qat_dequantize_nf4 does (no fused multiply-add,
// Nf4.cuh), then to x's type.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Nf4.cuh"
#include "kernels/cuda/QuantizedMatmul.cuh"

namespace llmc::cuda {
namespace {

/// Element i of an NF4-stored weight; the mean is read on the device, so
/// weights loaded after binding count.
struct Nf4Element {
  const uint8_t *codes, *absmaxQ;
  const float *absmaxScale, *absmaxMean;
  int64_t block;
  Nf4Levels levels;
  Nf4Piece piece;
  quant::AbsmaxFormat absmaxFormat;

  __device__ float operator()(int64_t i) const {
    return nf4Element(codes, absmaxQ, absmaxScale, *absmaxMean, levels, piece, absmaxFormat, i,
                      block);
  }
};

std::unique_ptr<Kernel> makeCudaMatmulNf4(const KernelArgs &args, std::string &error) {
  contracts::MatmulNf4Binding d;
  if (!contracts::bindMatmulNf4(args, error, &d)) return nullptr;
  Nf4Element element{args.inputs[1].as<uint8_t>(),
                     args.inputs[2].as<uint8_t>(),
                     args.inputs[3].as<float>(),
                     args.inputs[4].as<float>(),
                     d.block,
                     Nf4Levels::fromScheme(),
                     d.piece,
                     d.absmaxFormat};
  return makeQuantizedMatmul("matmul_nf4", args, d, element, error);
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "matmul_nf4", makeCudaMatmulNf4);

} // namespace llmc::cuda
