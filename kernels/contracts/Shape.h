//===- Shape.h - binding contract of the data-movement kernels -*- C++ -*-===//
//
// The checks and derived numbers of transpose, slice, pad, concat and
// reduce_sum, shared by the CPU factories (kernels/cpu/shape.cpp) and the
// CUDA ones (kernels/cuda/shape.cu). transpose, slice and pad each come down
// to one strided box copy from x into out, described here in elements; each
// backend then lays the box out its own way (merged dims, widened elements).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_SHAPE_H
#define LLMC_KERNELS_CONTRACTS_SHAPE_H

#include "kernels/Kernel.h"

#include <cstdint>
#include <string>
#include <vector>

namespace llmc::contracts {

/// A box of `sizes` elements of x, read at `srcStrides` from element
/// `srcBase` of x and written at `dstStrides` from element `dstBase` of out
/// (strides in elements, one per dim of the box).
struct BoxCopyBinding {
  DType dtype = DType::F32; ///< x's and out's
  std::vector<int64_t> sizes, srcStrides, dstStrides;
  int64_t srcBase = 0, dstBase = 0;
};

/// transpose(x) -> out, attribute `permutation`.
bool bindTranspose(const KernelArgs &args, std::string &error, BoxCopyBinding *out);
/// slice(x) -> out, attribute `offsets` (of out within x).
bool bindSlice(const KernelArgs &args, std::string &error, BoxCopyBinding *out);
/// pad(x) -> out, attribute `offsets` (of x within out); out is zero elsewhere.
bool bindPad(const KernelArgs &args, std::string &error, BoxCopyBinding *out);

/// concat(inputs...) -> out, attribute `dim`.
struct ConcatBinding {
  DType dtype = DType::F32;
  int64_t dim = 0; ///< in [0, rank)
};
bool bindConcat(const KernelArgs &args, std::string &error, ConcatBinding *out);

/// reduce_sum(x) -> out, out's shape a suffix of x's.
struct ReduceSumBinding {
  DType dtype = DType::F32;
};
bool bindReduceSum(const KernelArgs &args, std::string &error, ReduceSumBinding *out);

} // namespace llmc::contracts

#endif
