//===- matmul_nf4.cu - x · W with W expanded from NF4, a chunk at a time --===//
//
// matmul_nf4, as kernels/cpu/matmul_nf4.cpp: y = x · W (or x · Wᵀ) with W
// in NF4 storage (common/QuantScheme.h), whole or a tensor-parallel piece
// (common/Nf4Piece.h), through QuantizedMatmul.cuh; grouped_matmul_nf4,
// the stacked experts' flat storage, through GroupedQuantizedMatmul.cuh. The
// expansion rounds as qat_dequantize_nf4 does (no fused multiply-add,
// Nf4.cuh), then to x's type.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/GroupedQuantizedMatmul.cuh"
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

/// Element i of expert g's slice: element g · slice + i of the stack (or
/// of this rank's piece of it, whose blocks find their scales in the whole
/// stack's).
struct ExpertNf4Element {
  Nf4Element stack; ///< the stack's storage, read as its view [G · rows, cols]
  int64_t slice;

  __device__ float operator()(int64_t g, int64_t i) const { return stack(g * slice + i); }
};

std::unique_ptr<Kernel> makeCudaGroupedMatmulNf4(const KernelArgs &args, std::string &error) {
  contracts::GroupedMatmulNf4Binding d;
  if (!contracts::bindGroupedMatmulNf4(args, error, &d))
    return nullptr;
  Nf4Element stack{args.inputs[2].as<uint8_t>(),
                   args.inputs[3].as<uint8_t>(),
                   args.inputs[4].as<float>(),
                   args.inputs[5].as<float>(),
                   d.block,
                   Nf4Levels::fromScheme(),
                   d.piece,
                   d.absmaxFormat};
  return makeGroupedQuantizedMatmul(args, d,
                                    ExpertNf4Element{stack, d.expert.rows * d.expert.cols});
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "matmul_nf4", makeCudaMatmulNf4);
LLMC_REGISTER_KERNEL(CUDA, "grouped_matmul_nf4", makeCudaGroupedMatmulNf4);

} // namespace llmc::cuda
