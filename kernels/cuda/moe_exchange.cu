//===- moe_exchange.cu - expert-parallel row copies on the GPU ------------===//
//
// The CUDA twin of kernels/cpu/moe_exchange.cpp (contracts/MoEExchange.h):
// moe_pack, moe_unpack, moe_regroup and moe_ungroup in two launches, with
// no host read of the offsets or counts, so a captured CUDA graph stays
// valid:
//  1. one thread runs the contract's plan (O(E) over the offsets or
//     counts, O(D·E) over pack's group counts; they stay in L1 after
//     their first line) into scratch: one
//     run of rows per (rank, expert) and whether the data were valid; it
//     also writes pack's kept or regroup's local_offsets;
//  2. one warp per output row: lane 0 finds the row's run by the
//     contract's binary search, then the lanes copy the row's elements as
//     stored (no conversion), write zeros, or NaN when the plan failed.
// The same plan and search as the CPU's, and copies only: the outputs
// equal the CPU's bit for bit.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/MoEExchange.h"
#include "kernels/cuda/BindScratch.h"
#include "kernels/cuda/Common.cuh"

namespace llmc::cuda {
namespace {

using contracts::IndexRead;
using contracts::MoeExchangeBinding;
using contracts::MoeExchangeOp;
using contracts::RowRun;

constexpr int kWarpsPerBlock = kBlock / 32;

IndexRead indexRead(const TensorView &t) { return {t.data, t.dtype == DType::I64}; }

/// Step 1, on one thread.
__global__ void planKernel(MoeExchangeBinding b, IndexRead first, IndexRead second,
                           const float *groupCounts, RowRun *runs, int32_t *valid,
                           int32_t *counts) {
  const bool ok = contracts::planExchange(b, first, second, groupCounts, runs);
  *valid = ok;
  if (counts)
    contracts::writeExchangeCounts(b, runs, ok, counts);
}

/// Step 2: one warp per output row.
template <typename T>
__global__ void copyRowsKernel(MoeExchangeBinding b, const RowRun *runs, const int32_t *valid,
                               const T *in, T *out) {
  const int lane = threadIdx.x & 31;
  const int64_t rows = b.outputRows(), c = b.width;
  const int64_t warp = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) >> 5;
  const int64_t warps = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5;
  const bool ok = *valid != 0;
  for (int64_t row = warp; row < rows; row += warps) {
    int64_t source = -1;
    if (ok && lane == 0)
      source = contracts::exchangeSource(b, runs, row);
    source = __shfl_sync(0xffffffffu, source, 0);
    T *to = out + row * c;
    if (!ok) {
      for (int64_t i = lane; i < c; i += 32) store(to, i, __int_as_float(0x7fc00000));
    } else if (source < 0) {
      for (int64_t i = lane; i < c; i += 32) store(to, i, 0.0f);
    } else {
      const T *from = in + source * c;
      for (int64_t i = lane; i < c; i += 32) to[i] = from[i];
    }
  }
}

template <typename T> class MoeExchangeKernel final : public Kernel {
public:
  MoeExchangeKernel(const KernelArgs &args, const MoeExchangeBinding &b)
      : in_(args.inputs[0].as<T>()), out_(args.outputs[0].as<T>()),
        counts_(args.outputs.size() > 1 ? args.outputs[1].as<int32_t>() : nullptr),
        first_(indexRead(args.inputs[1])),
        second_(b.op == MoeExchangeOp::Unpack ? indexRead(args.inputs[2]) : IndexRead{}),
        groupCounts_(b.groupRanks > 0 ? args.inputs[2].as<float>() : nullptr), b_(b),
        scratch_(static_cast<size_t>(b.experts()) * sizeof(RowRun) + sizeof(int64_t)) {}

  void run(const StepContext &ctx) override {
    cudaStream_t stream = streamOf(ctx);
    RowRun *runs = scratch_.as<RowRun>();
    int32_t *valid = reinterpret_cast<int32_t *>(runs + b_.experts());
    planKernel<<<1, 1, 0, stream>>>(b_, first_, second_, groupCounts_, runs, valid, counts_);
    LLMC_CUDA_CHECK_LAUNCH();
    const int64_t rows = b_.outputRows();
    if (rows == 0 || b_.width == 0)
      return;
    const int64_t blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
    const int grid = static_cast<int>(blocks < 65535 * 8 ? blocks : 65535 * 8);
    copyRowsKernel<T><<<grid, kBlock, 0, stream>>>(b_, runs, valid, in_, out_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  const T *in_;
  T *out_;
  int32_t *counts_; // pack's kept or regroup's local_offsets; else null
  IndexRead first_, second_;  // second: unpack's kept
  const float *groupCounts_; // pack's group_counts [D, E]; else null
  MoeExchangeBinding b_;
  BindScratch scratch_; // [E] runs, then the plan's verdict (i32)
};

template <bool (*Bind)(const KernelArgs &, std::string &, MoeExchangeBinding *)>
std::unique_ptr<Kernel> makeMoeExchange(const KernelArgs &args, std::string &error) {
  MoeExchangeBinding b;
  if (!Bind(args, error, &b))
    return nullptr;
  return makeFloatKernel<MoeExchangeKernel>(b.dtype, args, b);
}

std::unique_ptr<Kernel> makeCudaMoePack(const KernelArgs &args, std::string &error) {
  return makeMoeExchange<contracts::bindMoePack>(args, error);
}
std::unique_ptr<Kernel> makeCudaMoeUnpack(const KernelArgs &args, std::string &error) {
  return makeMoeExchange<contracts::bindMoeUnpack>(args, error);
}
std::unique_ptr<Kernel> makeCudaMoeRegroup(const KernelArgs &args, std::string &error) {
  return makeMoeExchange<contracts::bindMoeRegroup>(args, error);
}
std::unique_ptr<Kernel> makeCudaMoeUngroup(const KernelArgs &args, std::string &error) {
  return makeMoeExchange<contracts::bindMoeUngroup>(args, error);
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "moe_pack", makeCudaMoePack);
LLMC_REGISTER_KERNEL(CUDA, "moe_unpack", makeCudaMoeUnpack);
LLMC_REGISTER_KERNEL(CUDA, "moe_regroup", makeCudaMoeRegroup);
LLMC_REGISTER_KERNEL(CUDA, "moe_ungroup", makeCudaMoeUngroup);

} // namespace llmc::cuda
