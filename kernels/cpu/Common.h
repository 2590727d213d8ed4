//===- Common.h - helpers shared by the CPU kernels (private) -------------===//
//
// What every CPU kernel file needs and nothing more:
//  - `bf16` and `f16`, storage-only element types, and load/store that
//    widen to and narrow from fp32 so one template body serves every float
//    dtype;
//  - `Validator`, which turns a bad binding into the one-line error the
//    registry contract asks for ("layernorm: gamma must be f32[128], got
//    f32[64]");
//  - per-thread scratch sized at bind time (run() never allocates), and a
//    parallel byte copy;
//  - expFast, a vectorisable exp (Cephes polynomial, ~1 ulp) for the
//    softmax-heavy kernels, since libm's expf does not vectorise without
//    -ffast-math, and the tanh GELU built on it (gelu, linear).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CPU_COMMON_H
#define LLMC_KERNELS_CPU_COMMON_H

#include "common/Fp8.h"
#include "common/Half.h"
#include "kernels/DtypeDispatch.h"
#include "kernels/Kernel.h"
#include "kernels/Validator.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace llmc::cpu {

//===----------------------------------------------------------------------===//
// Element types
//===----------------------------------------------------------------------===//

/// bfloat16 storage; arithmetic always happens in fp32.
struct bf16 {
  uint16_t bits;
};

/// IEEE binary16 storage (fp16 training); arithmetic happens in fp32. The
/// conversions are common/Half.h's, bit for bit those of the CUDA side.
struct f16 {
  uint16_t bits;
};

inline float load(const float *p, int64_t i) { return p[i]; }
inline float load(const bf16 *p, int64_t i) { return bf16ToFloat(p[i].bits); }
inline float load(const f16 *p, int64_t i) { return half::toFloat(p[i].bits); }
inline void store(float *p, int64_t i, float v) { p[i] = v; }
inline void store(bf16 *p, int64_t i, float v) { p[i].bits = floatToBf16(v); }
inline void store(f16 *p, int64_t i, float v) { p[i].bits = half::fromFloat(v); }

/// The DType of a storage type.
template <typename T> constexpr DType dtypeOf();
template <> constexpr DType dtypeOf<float>() { return DType::F32; }
template <> constexpr DType dtypeOf<bf16>() { return DType::BF16; }
template <> constexpr DType dtypeOf<f16>() { return DType::F16; }

/// This backend's storage types, for dispatchFloat (kernels/DtypeDispatch.h).
using FloatTypes = FloatStorage<float, bf16, f16>;

/// Instantiates `K<float>`, `K<bf16>` or `K<f16>` for a float dtype.
template <template <typename> class K, typename... Args>
std::unique_ptr<Kernel> makeFloatKernel(DType dtype, Args &&...args) {
  return makeFloatKernelFor<FloatTypes, K>(dtype, std::forward<Args>(args)...);
}

/// The row `r` of x as fp32: x itself for f32, else widened into `scratch`.
template <typename T> const float *rowAsFloat(const T *x, int64_t r, int64_t c, float *scratch) {
  if constexpr (std::is_same_v<T, float>) {
    return x + r * c;
  } else {
    const T *row = x + r * c;
#pragma omp simd
    for (int64_t i = 0; i < c; ++i) scratch[i] = load(row, i);
    return scratch;
  }
}

/// `v` rounded to T and widened back (the identity for fp32): what the
/// next kernel reads of a value this one stores.
template <typename T> inline float roundTo(float v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    T t;
    store(&t, 0, v);
    return load(&t, 0);
  }
}

/// The row `r` of a + b, stored into `sum` as `add` stores it, and returned
/// as fp32 (the stored row for f32, else the rounded values in `scratch`),
/// so a fused kernel reads the sum it wrote without a second pass. `sum`
/// may be `a` or `b` (written in place, element by element). With `bias`
/// ([c]) the row is a + (b + bias), b + bias rounded as its own `add`
/// stores it.
template <typename T>
const float *rowSumAsFloat(const T *a, const T *b, T *sum, int64_t r, int64_t c, float *scratch,
                           const T *bias = nullptr) {
  const T *ar = a + r * c, *br = b + r * c;
  T *sr = sum + r * c;
  if constexpr (std::is_same_v<T, float>) {
    if (bias) {
#pragma omp simd
      for (int64_t i = 0; i < c; ++i) sr[i] = ar[i] + (br[i] + bias[i]);
    } else {
#pragma omp simd
      for (int64_t i = 0; i < c; ++i) sr[i] = ar[i] + br[i];
    }
    return sr;
  } else {
    if (bias) {
#pragma omp simd
      for (int64_t i = 0; i < c; ++i) {
        store(sr, i, load(ar, i) + roundTo<T>(load(br, i) + load(bias, i)));
        scratch[i] = load(sr, i);
      }
    } else {
#pragma omp simd
      for (int64_t i = 0; i < c; ++i) {
        store(sr, i, load(ar, i) + load(br, i));
        scratch[i] = load(sr, i);
      }
    }
    return scratch;
  }
}

/// out[i] = values[i] rounded to T, plus addend[i], over a row: a fused
/// backward adds another gradient to its dx (`values`, in scratch) rounded
/// as storing dx and then `add` round. A separate loop, not `+ addend` in
/// the loop that computes dx: there the compiler may contract dx's last
/// product and the sum into an FMA, which the unfused kernels never form.
/// out may be addend (the planner writes dx over a dying addend).
template <typename T> void storePlusRow(T *out, const float *values, const T *addend, int64_t c) {
#pragma omp simd
  for (int64_t i = 0; i < c; ++i) store(out, i, roundTo<T>(values[i]) + load(addend, i));
}

/// Widens n elements to fp32 (serial: used for parameter vectors).
template <typename T> void widenVector(const T *in, float *out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = load(in, i);
}

/// i32 or i64 ids, read as int64.
struct IdView {
  const void *data = nullptr;
  bool wide = false;

  IdView() = default;
  explicit IdView(const TensorView &t) : data(t.data), wide(t.dtype == DType::I64) {}
  int64_t operator[](int64_t i) const {
    return wide ? static_cast<const int64_t *>(data)[i] : static_cast<const int32_t *>(data)[i];
  }
};

/// `n` NaNs into a float output.
template <typename T> void fillNaN(T *out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) store(out, i, std::numeric_limits<float>::quiet_NaN());
}

/// Whether group offsets [G + 1] cut the first of `rows` rows into
/// `groups` groups: offsets[0] = 0, never decreasing, offsets[G] <= rows
/// (contracts/GroupedMatmul.h).
inline bool validGroupOffsets(const IdView &offsets, int64_t groups, int64_t rows) {
  if (offsets[0] != 0 || offsets[groups] > rows)
    return false;
  for (int64_t g = 0; g < groups; ++g)
    if (offsets[g + 1] < offsets[g])
      return false;
  return true;
}

//===----------------------------------------------------------------------===//
// Threads and scratch
//===----------------------------------------------------------------------===//

/// The thread count a kernel binds its per-thread scratch to; run() opens
/// parallel regions with exactly this many threads so omp_get_thread_num()
/// indexes the scratch.
inline int bindThreads() { return std::max(1, omp_get_max_threads()); }

/// `threads` slices of `perThread` floats, 64-byte aligned each.
class ThreadScratch {
public:
  ThreadScratch() = default;
  ThreadScratch(int threads, size_t perThread)
      : stride_((perThread + 15) / 16 * 16), data_(new float[stride_ * threads + 16]) {}
  float *at(int thread) const {
    uintptr_t base = reinterpret_cast<uintptr_t>(data_.get());
    float *aligned = reinterpret_cast<float *>((base + 63) & ~uintptr_t(63));
    return aligned + stride_ * thread;
  }

private:
  size_t stride_ = 0;
  std::unique_ptr<float[]> data_;
};

/// Copies `bytes` bytes in parallel chunks of 1 MiB.
inline void copyBytes(void *dst, const void *src, size_t bytes) {
  constexpr size_t kChunk = size_t(1) << 20;
  int64_t chunks = static_cast<int64_t>((bytes + kChunk - 1) / kChunk);
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    size_t begin = c * kChunk;
    std::memcpy(static_cast<char *>(dst) + begin, static_cast<const char *>(src) + begin,
                std::min(kChunk, bytes - begin));
  }
}

/// Below this many elements a kernel runs on one thread: the fork/join costs
/// more than the work.
constexpr int64_t kParallelGrain = 1 << 15;

/// Widens n elements to fp32, over the threads when n is large (a
/// bf16/f16 operand copied for sgemm).
template <typename T> void widenParallel(const T *in, float *out, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
  for (int64_t i = 0; i < n; ++i) out[i] = load(in, i);
}

/// Rounds n fp32 values to T (nearest even), over the threads when n is
/// large (sgemm's fp32 result stored in the operands' type).
template <typename T> void narrowParallel(const float *in, T *out, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
  for (int64_t i = 0; i < n; ++i) store(out, i, in[i]);
}

/// Widens n fp8 codes of `kind` to their exact fp32 values (a 256-entry
/// table), over the threads when n is large (an fp8 operand for sgemm).
inline void widenFp8Parallel(const uint8_t *codes, int64_t n, fp8::Kind kind, float *out) {
  const float *values = fp8::values(kind);
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
  for (int64_t i = 0; i < n; ++i) out[i] = values[codes[i]];
}

//===----------------------------------------------------------------------===//
// Math
//===----------------------------------------------------------------------===//

/// exp(x) in fp32, vectorisable: 2^n · p(r) with n = round(x/ln2), Cephes'
/// degree-6 polynomial on |r| <= ln2/2 (max error ~1 ulp). Saturates at
/// exp(88) above and returns 0 below −87 (so exp(−inf) = 0); NaN stays NaN.
inline float expFast(float x) {
  float xc = x < -87.0f ? -87.0f : x;
  xc = xc > 88.0f ? 88.0f : xc;
  // Round to nearest by the 1.5·2^23 trick (no libm call, so it vectorises).
  float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = p * r * r + r + 1.0f;
  // A NaN x leaves n NaN (y is NaN already); converting NaN to an integer
  // is undefined, so the exponent is taken from 0 instead. The shift is on
  // unsigned bits: n + 127 is in [1, 254] for every clamped x.
  float nc = n == n ? n : 0.0f;
  uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(nc) + 127) << 23;
  float pow2;
  std::memcpy(&pow2, &bits, sizeof(pow2));
  return x < -87.0f ? 0.0f : y * pow2;
}

/// The max and Σ exp(x − max) of one row of V fp32 logits (the softmax
/// kernels'; an empty row gives −inf and 0).
inline float rowSumExp(const float *row, int64_t vocab, float *maxOut) {
  float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t j = 0; j < vocab; ++j) m = std::max(m, row[j]);
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < vocab; ++j) sum += expFast(row[j] - m);
  *maxOut = m;
  return sum;
}

/// The max and log Σ exp of one row of V fp32 logits.
inline float rowLogSumExp(const float *row, int64_t vocab, float *maxOut) {
  const float sum = rowSumExp(row, vocab, maxOut);
  return *maxOut + std::log(sum);
}

inline float sigmoidFast(float x) { return 1.0f / (1.0f + expFast(-x)); }

/// The tanh GELU's constants: u = kGeluC·(x + kGeluA·x³).
constexpr float kGeluC = 0.7978845608028654f; // √(2/π)
constexpr float kGeluA = 0.044715f;

/// GELU, tanh approximation, as x·σ(2u) (1 + tanh(u) = 2·σ(2u)): gelu's
/// formula, shared with the fused matmul epilogue so both round alike.
inline float geluTanh(float x) {
  float u = kGeluC * (x + kGeluA * x * x * x);
  return x * sigmoidFast(2.0f * u);
}

// The activations' per-element formulas, one definition each: the
// activation kernels and the fused elementwise program
// (fused_elementwise.cpp) call these, so both compute (and contract into
// FMAs) alike and fused chains equal the unfused ops bit for bit.

/// dy · gelu'(x) = dy · (σ(2u) + 2x·σ(2u)(1 − σ(2u))·u'(x)).
inline float geluTanhGrad(float x, float dy) {
  float u = kGeluC * (x + kGeluA * x * x * x);
  float du = kGeluC * (1.0f + 3.0f * kGeluA * x * x);
  float s = sigmoidFast(2.0f * u);
  return dy * (s + 2.0f * x * s * (1.0f - s) * du);
}
inline float siluOf(float x) { return x * sigmoidFast(x); }
inline float siluGradOf(float x, float dy) {
  float s = sigmoidFast(x);
  return dy * s * (1.0f + x * (1.0f - s));
}
inline float sigmoidGradOf(float x, float dy) {
  float s = sigmoidFast(x);
  return dy * s * (1.0f - s);
}
inline float swigluOf(float gate, float up) { return gate * sigmoidFast(gate) * up; }
inline float swigluGradGate(float gate, float up, float dy) {
  float s = sigmoidFast(gate);
  return dy * up * s * (1.0f + gate * (1.0f - s));
}
inline float swigluGradUp(float gate, float dy) { return dy * gate * sigmoidFast(gate); }

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

} // namespace llmc::cpu

#endif
