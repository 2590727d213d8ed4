//===- moe_exchange.cpp - expert-parallel row copies around an all-to-all -===//
//
// moe_pack, moe_unpack, moe_regroup and moe_ungroup (contracts/
// MoEExchange.h): the shared plan turns offsets or counts into one run of
// rows per (rank, expert), serially (O(E)); then every output row, in
// parallel, finds its run by binary search and is copied whole, zeroed, or
// set to NaN when the plan found the data invalid.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/MoEExchange.h"
#include "kernels/cpu/Common.h"

namespace llmc::cpu {
namespace {

using contracts::IndexRead;
using contracts::MoeExchangeBinding;
using contracts::MoeExchangeOp;
using contracts::RowRun;

IndexRead indexRead(const TensorView &t) { return {t.data, t.dtype == DType::I64}; }

template <typename T> class MoeExchangeKernel final : public Kernel {
public:
  MoeExchangeKernel(const KernelArgs &args, const MoeExchangeBinding &b)
      : in_(args.inputs[0].as<T>()), out_(args.outputs[0].as<T>()),
        counts_(args.outputs.size() > 1 ? args.outputs[1].as<int32_t>() : nullptr),
        first_(indexRead(args.inputs[1])),
        second_(b.op == MoeExchangeOp::Unpack ? indexRead(args.inputs[2]) : IndexRead{}),
        groupCounts_(b.groupRanks > 0 ? args.inputs[2].as<float>() : nullptr), b_(b),
        runs_(static_cast<size_t>(b.experts())) {}

  void run(const StepContext &) override {
    const bool valid = contracts::planExchange(b_, first_, second_, groupCounts_, runs_.data());
    if (counts_)
      contracts::writeExchangeCounts(b_, runs_.data(), valid, counts_);
    const int64_t rows = b_.outputRows(), c = b_.width;
#pragma omp parallel for schedule(static) if (rows * c > kParallelGrain)
    for (int64_t row = 0; row < rows; ++row) copyRow(row, valid);
  }

private:
  void copyRow(int64_t row, bool valid) const {
    const int64_t c = b_.width;
    T *out = out_ + row * c;
    if (!valid) {
      for (int64_t i = 0; i < c; ++i) store(out, i, kNaN);
      return;
    }
    const int64_t source = contracts::exchangeSource(b_, runs_.data(), row);
    if (source < 0)
      std::memset(static_cast<void *>(out), 0, c * sizeof(T));
    else
      std::memcpy(static_cast<void *>(out), in_ + source * c, c * sizeof(T));
  }

  const T *in_;
  T *out_;
  int32_t *counts_; // pack's kept or regroup's local_offsets; else null
  IndexRead first_, second_;  // second: unpack's kept
  const float *groupCounts_; // pack's group_counts [D, E]; else null
  MoeExchangeBinding b_;
  std::vector<RowRun> runs_; // [E]: the plan
};

template <bool (*Bind)(const KernelArgs &, std::string &, MoeExchangeBinding *)>
std::unique_ptr<Kernel> makeMoeExchange(const KernelArgs &args, std::string &error) {
  MoeExchangeBinding b;
  if (!Bind(args, error, &b))
    return nullptr;
  return makeFloatKernel<MoeExchangeKernel>(b.dtype, args, b);
}

std::unique_ptr<Kernel> makeMoePack(const KernelArgs &args, std::string &error) {
  return makeMoeExchange<contracts::bindMoePack>(args, error);
}
std::unique_ptr<Kernel> makeMoeUnpack(const KernelArgs &args, std::string &error) {
  return makeMoeExchange<contracts::bindMoeUnpack>(args, error);
}
std::unique_ptr<Kernel> makeMoeRegroup(const KernelArgs &args, std::string &error) {
  return makeMoeExchange<contracts::bindMoeRegroup>(args, error);
}
std::unique_ptr<Kernel> makeMoeUngroup(const KernelArgs &args, std::string &error) {
  return makeMoeExchange<contracts::bindMoeUngroup>(args, error);
}

} // namespace

LLMC_REGISTER_KERNEL(CPU, "moe_pack", makeMoePack);
LLMC_REGISTER_KERNEL(CPU, "moe_unpack", makeMoeUnpack);
LLMC_REGISTER_KERNEL(CPU, "moe_regroup", makeMoeRegroup);
LLMC_REGISTER_KERNEL(CPU, "moe_ungroup", makeMoeUngroup);

} // namespace llmc::cpu
