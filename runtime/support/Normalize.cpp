//===- Normalize.cpp - Unicode normalization form C -----------------------===//
//
// UAX #15's algorithm, run by runs: a run is the code points between two
// invalid bytes. Each run is decomposed fully (table mappings applied
// recursively, Hangul syllables split into their jamo), each sequence of
// non-starters sorted stably by combining class, and composed again: a
// character combines with the last starter before it unless a character
// between them is blocked (has a class of zero or one at least its own).
//
//===----------------------------------------------------------------------===//

#include "runtime/support/Normalize.h"
#include "runtime/support/Unicode.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace llmc::unicode {
namespace {

struct CombiningClass {
  uint32_t code;
  uint8_t cls;
};
struct Decomposition {
  uint32_t code, first, second; ///< second: 0 for a singleton
};
struct Composition {
  uint32_t first, second, composite;
};

#include "runtime/support/NormalizationTables.inc"

// Hangul syllables (Unicode 3.12): S = SBase + (L·VCount + V)·TCount + T.
constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28;
constexpr uint32_t kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

uint8_t combiningClass(uint32_t code) {
  const auto *end = std::end(kCombiningClasses);
  const auto *it = std::lower_bound(std::begin(kCombiningClasses), end, code,
                                    [](const CombiningClass &c, uint32_t v) { return c.code < v; });
  return it != end && it->code == code ? it->cls : 0;
}

void decompose(uint32_t code, std::vector<uint32_t> &out) {
  if (code >= kSBase && code < kSBase + kSCount) {
    const uint32_t s = code - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0)
      out.push_back(kTBase + s % kTCount);
    return;
  }
  const auto *end = std::end(kDecompositions);
  const auto *it = std::lower_bound(std::begin(kDecompositions), end, code,
                                    [](const Decomposition &d, uint32_t v) { return d.code < v; });
  if (it == end || it->code != code) {
    out.push_back(code);
    return;
  }
  decompose(it->first, out);
  if (it->second != 0)
    decompose(it->second, out);
}

/// The primary composite of `first` and `second`, or 0 when they do not
/// compose.
uint32_t compose(uint32_t first, uint32_t second) {
  if (first >= kLBase && first < kLBase + kLCount && second >= kVBase && second < kVBase + kVCount)
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  if (first >= kSBase && first < kSBase + kSCount && (first - kSBase) % kTCount == 0 &&
      second > kTBase && second < kTBase + kTCount)
    return first + (second - kTBase);
  const auto *end = std::end(kCompositions);
  const auto *it = std::lower_bound(std::begin(kCompositions), end, std::make_pair(first, second),
                                    [](const Composition &c, std::pair<uint32_t, uint32_t> v) {
                                      return std::make_pair(c.first, c.second) < v;
                                    });
  return it != end && it->first == first && it->second == second ? it->composite : 0;
}

/// Canonical ordering: each run of non-starters sorted stably by class.
void reorder(std::vector<uint32_t> &codes) {
  for (size_t i = 0; i < codes.size();) {
    if (combiningClass(codes[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < codes.size() && combiningClass(codes[j]) != 0) ++j;
    std::stable_sort(codes.begin() + i, codes.begin() + j,
                     [](uint32_t a, uint32_t b) { return combiningClass(a) < combiningClass(b); });
    i = j;
  }
}

/// Canonical composition of a decomposed, ordered run.
void recompose(std::vector<uint32_t> &codes) {
  if (codes.empty())
    return;
  size_t starter = SIZE_MAX; // index in `out` of the last starter
  std::vector<uint32_t> out;
  int lastClass = -1;        // class of the last character kept after the starter
  for (uint32_t code : codes) {
    const int cls = combiningClass(code);
    const bool blocked = lastClass != -1 && (lastClass == 0 || lastClass >= cls);
    if (starter != SIZE_MAX && !blocked)
      if (uint32_t composite = compose(out[starter], code)) {
        out[starter] = composite;
        continue;
      }
    if (cls == 0) {
      starter = out.size();
      lastClass = -1;
    } else {
      lastClass = cls;
    }
    out.push_back(code);
  }
  codes.swap(out);
}

void appendNfc(std::vector<uint32_t> &run, std::string &out) {
  reorder(run);
  recompose(run);
  for (uint32_t code : run) append(out, code);
  run.clear();
}

} // namespace

std::string toNfc(const std::string &text) {
  std::string out;
  out.reserve(text.size());
  std::vector<uint32_t> run;
  for (size_t pos = 0; pos < text.size();) {
    const Decoded d = decode(text, pos);
    if (d.code == kInvalid) {
      appendNfc(run, out);
      out.append(text, pos, d.length);
    } else {
      decompose(d.code, run);
    }
    pos += d.length;
  }
  appendNfc(run, out);
  return out;
}

} // namespace llmc::unicode
