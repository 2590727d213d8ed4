//===- matmul_int.cu - x · W with W expanded from int8/int4, a chunk at a time -===//
//
// matmul_int, as kernels/cpu/matmul_int.cpp: y = x · W (or x · Wᵀ) with W
// stored as int8 or int4 codes with a scale (and zero point) per group
// (kernels/IntWeight.h, whose element value — one fp32 product, never
// fused — is the CPU's bit for bit), through QuantizedMatmul.cuh; and
// grouped_matmul_int, each expert's slice stored so, expert after expert,
// through GroupedQuantizedMatmul.cuh.
//
//===----------------------------------------------------------------------===//

#include "kernels/IntWeight.h"
#include "kernels/cuda/GroupedQuantizedMatmul.cuh"
#include "kernels/cuda/QuantizedMatmul.cuh"

namespace llmc::cuda {
namespace {

struct IntElement {
  const uint8_t *codes;
  const float *scales;
  const int32_t *zeroPoints; ///< null: symmetric
  IntWeightLayout layout;

  __device__ float operator()(int64_t i) const {
    return intWeightElement(codes, scales, zeroPoints, layout, i);
  }
};

std::unique_ptr<Kernel> makeCudaMatmulInt(const KernelArgs &args, std::string &error) {
  contracts::MatmulIntBinding d;
  if (!contracts::bindMatmulInt(args, error, &d)) return nullptr;
  IntElement element{args.inputs[1].as<uint8_t>(), args.inputs[2].as<float>(),
                     d.layout.asymmetric ? args.inputs[3].as<int32_t>() : nullptr, d.layout};
  return makeQuantizedMatmul("matmul_int", args, d, element, error);
}

/// Element i of expert g's slice: its codes and groups follow the previous
/// experts'.
struct ExpertIntElement {
  IntElement first; ///< expert 0's
  int64_t expertBytes, expertGroups;

  __device__ float operator()(int64_t g, int64_t i) const {
    const int32_t *z = first.zeroPoints ? first.zeroPoints + g * expertGroups : nullptr;
    return intWeightElement(first.codes + g * expertBytes, first.scales + g * expertGroups, z,
                            first.layout, i);
  }
};

std::unique_ptr<Kernel> makeCudaGroupedMatmulInt(const KernelArgs &args, std::string &error) {
  contracts::GroupedMatmulIntBinding d;
  if (!contracts::bindGroupedMatmulInt(args, error, &d))
    return nullptr;
  IntElement first{args.inputs[2].as<uint8_t>(), args.inputs[3].as<float>(),
                   d.layout.asymmetric ? args.inputs[4].as<int32_t>() : nullptr, d.layout};
  return makeGroupedQuantizedMatmul(args, d,
                                    ExpertIntElement{first, d.expertBytes, d.expertGroups});
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "matmul_int", makeCudaMatmulInt);
LLMC_REGISTER_KERNEL(CUDA, "grouped_matmul_int", makeCudaGroupedMatmulInt);

} // namespace llmc::cuda
