//===- adamw8bit.cpp - 8-bit AdamW step reference -------------------------===//
//
// llm.adamw8bit with the state format of common/Adam8bit.h: decode the
// block-quantized moments (table · absmax in fp32, as the contract says), take
// the double adamw() step, and encode the new moments by a plain scan for the
// nearest table entry. That scan is the ideal code the kernels' faster
// encoders are held to.
//
//===----------------------------------------------------------------------===//

#include "kernels/reference/Common.h"

#include "common/Adam8bit.h"

#include <array>

namespace llmc::ref {

namespace {

/// Block-quantized state (common/Adam8bit.h) decoded: table[code] · absmax
/// of the element's block, the product in fp32 as the contract defines it.
RefTensor decodeAdam8bit(const std::array<float, 256> &table, const RefTensor &codes,
                         const RefTensor &absmax) {
  RefTensor x = like(codes);
  for (int64_t i = 0; i < x.numel(); ++i) {
    float scale = static_cast<float>(absmax.data[i / adam8bit::kBlock]);
    x.data[i] = table[static_cast<size_t>(codes.data[i])] * scale;
  }
  return x;
}

/// {codes, absmax} of x: per block, absmax = max |x| and each code the index
/// of the table entry nearest to x / absmax (a plain scan, ties to the
/// lower index), 0 where absmax is 0.
std::vector<RefTensor> encodeAdam8bit(const std::array<float, 256> &table, const RefTensor &x) {
  RefTensor codes = like(x), absmax = RefTensor::zeros({adam8bit::blockCount(x.numel())});
  for (int64_t i = 0; i < x.numel(); ++i) {
    double &scale = absmax.data[i / adam8bit::kBlock];
    scale = std::max(scale, std::abs(x.data[i]));
  }
  for (int64_t i = 0; i < x.numel(); ++i) {
    double scale = absmax.data[i / adam8bit::kBlock];
    if (scale == 0.0) continue;
    double ratio = x.data[i] / scale, best = std::numeric_limits<double>::infinity();
    for (size_t k = 0; k < table.size(); ++k) {
      double distance = std::abs(table[k] - ratio);
      if (distance < best) best = distance, codes.data[i] = static_cast<double>(k);
    }
  }
  return {codes, absmax};
}

} // namespace

std::vector<RefTensor> adamw8bit(const RefTensor &p, const RefTensor &g, const RefTensor &mCodes,
                                 const RefTensor &mAbsmax, const RefTensor &vCodes,
                                 const RefTensor &vAbsmax, double lr, double step,
                                 const double *gradNorm, double beta1, double beta2, double eps,
                                 double weightDecay, double maxGradNorm, double lossScale) {
  // A skipped step keeps the codes as they are (re-encoding decoded state
  // need not give the same codes back).
  if (gradNorm && !std::isfinite(*gradNorm))
    return {p, mCodes, mAbsmax, vCodes, vAbsmax};
  std::vector<int64_t> blocks = {adam8bit::blockCount(p.numel())};
  require(mCodes.shape == p.shape && vCodes.shape == p.shape, "adamw8bit",
          "m_codes and v_codes must have param's shape");
  require(mAbsmax.shape == blocks && vAbsmax.shape == blocks, "adamw8bit",
          "m_absmax and v_absmax must have one element per block");
  const std::array<float, 256> &mTable = adam8bit::signedTable();
  const std::array<float, 256> &vTable = adam8bit::unsignedTable();
  std::vector<RefTensor> updated =
      adamw(p, g, decodeAdam8bit(mTable, mCodes, mAbsmax), decodeAdam8bit(vTable, vCodes, vAbsmax),
            lr, step, gradNorm, beta1, beta2, eps, weightDecay, maxGradNorm, lossScale);
  std::vector<RefTensor> m = encodeAdam8bit(mTable, updated[1]);
  std::vector<RefTensor> v = encodeAdam8bit(vTable, updated[2]);
  return {updated[0], m[0], m[1], v[0], v[1]};
}

} // namespace llmc::ref
