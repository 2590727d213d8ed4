//===- Adam8bit.h - the 8-bit AdamW state contract -------------*- C++ -*-===//
//
// What `llm.adamw8bit` computes, shared by the CPU kernel, the CUDA kernel
// and the double reference. Standard library only.
//
// AdamW's moments m and v are stored in 8 bits with block-wise dynamic
// quantization (Dettmers et al., "8-bit Optimizers via Block-wise
// Quantization", 2022): the state tensor, flattened, is cut into blocks of
// kAdam8bitBlock consecutive elements (the last one may be shorter); each
// block keeps its absolute maximum in fp32, and each element the index
// (uint8) of the entry of a 256-entry code table nearest to
// element / absmax. m uses the signed dynamic table, v (never negative) the
// unsigned one, whose sign bit buys one more bit of fraction.
//
// The tables are the paper's dynamic tree quantization: for e = 0..6 the
// midpoints of 2^e (signed) or 2^(e+1) (unsigned) equal steps of [0.1, 1],
// scaled by 10^(e−6), each also negated for the signed table; plus 0 and 1;
// sorted ascending. So relative precision is kept over seven decades.
//
// One step, per block, in fp32:
//   m = table_m[code_m] · absmax_m   (for every element of the block)
//   v = table_v[code_v] · absmax_v
//   the AdamW update of llm.adamw gives p', m', v';
//   absmax' = max |m'| over the block (v' likewise);
//   code' = the index of the table entry nearest to m' / absmax' (0 when
//           absmax' is 0; ties to the lower index).
// All-zero state (codes and absmax 0) decodes to m = v = 0: a fresh state.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMMON_ADAM8BIT_H
#define LLMC_COMMON_ADAM8BIT_H

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace llmc::adam8bit {

/// Elements per quantization block.
inline constexpr int64_t kBlock = 2048;

/// Blocks of a state tensor of `n` elements.
inline int64_t blockCount(int64_t n) { return (n + kBlock - 1) / kBlock; }

/// The 256-entry dynamic quantization table, ascending.
inline std::array<float, 256> makeTable(bool isSigned) {
  std::array<float, 256> table{};
  int count = 0;
  constexpr int kExponents = 7;
  for (int e = 0; e < kExponents; ++e) {
    int steps = isSigned ? (1 << e) : (1 << (e + 1));
    double scale = std::pow(10.0, e - (kExponents - 1));
    for (int k = 0; k < steps; ++k) {
      double lo = 0.1 + 0.9 * k / steps, hi = 0.1 + 0.9 * (k + 1) / steps;
      double mid = 0.5 * (lo + hi);
      table[count++] = static_cast<float>(scale * mid);
      if (isSigned)
        table[count++] = static_cast<float>(-scale * mid);
    }
  }
  table[count++] = 0.0f;
  table[count++] = 1.0f;
  std::sort(table.begin(), table.begin() + count);
  return table;
}

/// The signed (m) and unsigned (v) tables, built once.
inline const std::array<float, 256> &signedTable() {
  static const std::array<float, 256> table = makeTable(true);
  return table;
}
inline const std::array<float, 256> &unsignedTable() {
  static const std::array<float, 256> table = makeTable(false);
  return table;
}

/// The index of the entry of ascending `table` nearest to `x` (ties to the
/// lower index).
inline uint8_t encode(const std::array<float, 256> &table, float x) {
  const float *first = table.data(), *last = table.data() + table.size();
  const float *upper = std::lower_bound(first, last, x);
  if (upper == first)
    return 0;
  if (upper == last)
    return 255;
  const float *lower = upper - 1;
  return static_cast<uint8_t>((x - *lower <= *upper - x ? lower : upper) - first);
}

/// The decision thresholds of `table` (ascending): t_j is the largest float
/// for which encode() picks table[j] over table[j + 1], so encode(x) is the
/// number of thresholds below x.
inline std::array<float, 255> decisionThresholds(const std::array<float, 256> &table) {
  std::array<float, 255> thresholds;
  for (int j = 0; j + 1 < 256; ++j) {
    float lo = table[j], hi = table[j + 1];
    auto picksLo = [&](float x) { return x - lo <= hi - x; };
    float t = lo + (hi - lo) * 0.5f;
    while (picksLo(std::nextafter(t, hi))) t = std::nextafter(t, hi);
    while (!picksLo(t)) t = std::nextafter(t, lo);
    thresholds[j] = t;
  }
  return thresholds;
}

/// encode() for bulk use: the same code for every float (NaN and ±inf
/// included), found with one table lookup instead of a binary search.
///
/// For neighbours lo < hi, encode picks lo iff fl(x − lo) <= fl(hi − x).
/// Both sides are monotone in x, so lo wins exactly up to a largest float
/// t (the decision threshold of the pair), and encode(x) is the number of
/// thresholds below x. Floats sharing their top 17 bits (sign, exponent and
/// 8 mantissa bits) form an interval 2^−8 wide in relative terms, narrower
/// than the table's finest relative step (0.7%, the unsigned table near 1),
/// so it holds at most one threshold. One 32-bit entry per interval holds
/// the count of thresholds below the interval (bits 16..23) and the low 15
/// bits of the threshold inside it, if any (bits 0..14); the rest of t < x
/// is then an integer comparison of low bits. A loop of lookups vectorises
/// into one gather per value. The entries take 512 KiB per table; the
/// values a training run meets touch a few tens of KiB of them.
class Encoder {
public:
  explicit Encoder(const std::array<float, 256> &table) : entries_(size_t(1) << 17) {
    const std::array<float, 255> thresholds = decisionThresholds(table);
    for (uint32_t key = 0; key < entries_.size(); ++key) {
      // The interval's ends: negative floats grow in magnitude with their bits.
      bool negative = key >> 16;
      float lowest = fromBits((key << 15) | (negative ? 0x7FFFu : 0u));
      float highest = fromBits((key << 15) | (negative ? 0u : 0x7FFFu));
      const float *inside = std::lower_bound(thresholds.begin(), thresholds.end(), lowest);
      uint32_t below = static_cast<uint32_t>(inside - thresholds.begin());
      // With no threshold inside, low bits that x's never pass.
      uint32_t low = negative ? 0u : 0x7FFFu;
      if (inside != thresholds.end() && *inside <= highest) {
        low = toBits(*inside) & 0x7FFFu;
        if (inside + 1 != thresholds.end() && inside[1] <= highest) fits_ = false;
      }
      entries_[key] = below << 16 | low;
    }
  }

  /// Whether every interval holds at most one threshold (true for both
  /// tables of this file; a unit test checks it).
  bool fits() const { return fits_; }

  uint8_t operator()(float x) const { return lookup(entries(), x); }

  /// The lookup on the raw entries, for loops that hoist them.
  const uint32_t *entries() const { return entries_.data(); }
  static uint8_t lookup(const uint32_t *entries, float x) {
    uint32_t bits = toBits(x);
    uint32_t entry = entries[bits >> 15], low = bits & 0x7FFFu, threshold = entry & 0x7FFFu;
    // t < x, for floats of one sign and equal top bits.
    uint32_t above = (bits >> 31) ? threshold > low : threshold < low;
    uint32_t code = (entry >> 16) + above;
    return x == x ? static_cast<uint8_t>(code) : 0; // encode sends NaN to 0
  }

private:
  static float fromBits(uint32_t bits) {
    float x;
    std::memcpy(&x, &bits, sizeof(x));
    return x;
  }
  static uint32_t toBits(float x) {
    uint32_t bits;
    std::memcpy(&bits, &x, sizeof(bits));
    return bits;
  }

  std::vector<uint32_t> entries_;
  bool fits_ = true;
};

/// The encoders of signedTable() and unsignedTable(), built once.
inline const Encoder &signedEncoder() {
  static const Encoder encoder(signedTable());
  return encoder;
}
inline const Encoder &unsignedEncoder() {
  static const Encoder encoder(unsignedTable());
  return encoder;
}

} // namespace llmc::adam8bit

#endif // LLMC_COMMON_ADAM8BIT_H
