//===- matmul_nf4.cpp - x · W with W expanded from NF4 inside the product -===//
//
// matmul_nf4: y[m, :] = x[m, :] · W (or · Wᵀ), W held as NF4 storage
// (kernels/QuantScheme.h: a 4-bit level per element, a double-quantized
// absmax per block of its last dimension). W is never expanded whole: a
// decode step is memory bound, and reading 4.5 bits per weight instead of
// 32 is the point.
//
//  - Few rows (M ≤ kFewRows, a decode step): threads share out the output
//    columns. W [K, N]: a thread takes a tile of whole blocks of columns
//    (its share of N where its accumulators fit), expands a few rows of it
//    at a time into its own L1-sized scratch — each a contiguous read of
//    the codes, so the prefetchers keep up — and adds x[m, k] · row into an
//    fp32 accumulator over the tile's contiguous columns. W [N, K]
//    (transpose_b): a thread expands a few rows of W and takes each one's
//    dot product with every row of x. No BLAS here: OpenBLAS must not be
//    called from inside an OpenMP region.
//  - Many rows (prefill): W is expanded one column chunk (a few MiB) at a
//    time into scratch allocated at bind time, and sgemm writes that chunk's
//    columns of y (ldc = N). The expansion costs K·N, the product M·K·N.
//
// Expansion multiplies a level by its block's absmax exactly as
// qat_dequantize_nf4 does (a single fp32 product; 0 where the absmax is not
// > 0), so the weights are those `llmc quantize` dequantizes. Levels are
// looked up with vpermps: sixteen at a time where the CPU has AVX-512
// (chosen at bind time, the library being built for AVX2; the environment
// variable LLMC_CPU_NO_AVX512 keeps to AVX2), else eight.
// bf16 and f16 x are widened into fp32 scratch and y rounded back once.
//
//===----------------------------------------------------------------------===//

#include "kernels/QuantScheme.h"
#include "kernels/contracts/MatmulNf4.h"
#include "kernels/cpu/Blas.h"
#include "kernels/cpu/Common.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace llmc::cpu {
namespace {

/// Rows up to which the product is a per-thread tile loop, not sgemm.
constexpr int64_t kFewRows = 16;
/// Few-rows path, W [K, N]: a thread's accumulators (rows × tile columns)
/// and its expanded rows of W, in floats; both stay in L1/L2.
constexpr int64_t kAccFloats = 8192, kExpandedFloats = 4096;
/// Rows of W [N, K] a thread expands at a time on the few-rows path.
constexpr int64_t kRowGroup = 4;
/// Bytes of expanded W per sgemm on the many-rows path.
constexpr int64_t kChunkBytes = 4 << 20;

/// Expands elements [first, first + count) of W (flat, row-major) into
/// `out`.
class Nf4Expander {
public:
  Nf4Expander(const uint8_t *codes, const uint8_t *absmaxQ, const float *absmaxScale,
              float mean, int64_t block, bool avx512)
      : codes_(codes), absmaxQ_(absmaxQ), absmaxScale_(absmaxScale), mean_(mean),
        block_(block), avx512_(avx512) {}

  void operator()(int64_t first, int64_t count, float *out) const {
    // Whole blocks of an even size (every call of the few-rows paths, and
    // the sgemm path's once its chunk is whole blocks): one division, then
    // a block's bytes at a time.
    if (wholeBlocks(first, count)) {
      const int64_t half = block_ / 2, g0 = first / block_, g1 = g0 + count / block_;
      const uint8_t *bytes = codes_ + g0 * half;
      for (int64_t g = g0; g < g1; ++g, bytes += half, out += block_)
        expandBytes(bytes, half, scaleOf(g), out);
      return;
    }
    int64_t end = first + count;
    while (first < end) {
      int64_t g = first / block_;
      int64_t stop = std::min(end, (g + 1) * block_);
      const float a = scaleOf(g);
      int64_t i = first;
      if (i % 2 != 0 && i < stop) *out++ = quant::kNf4Levels[codes_[i / 2] >> 4] * a, ++i;
      int64_t pairs = (stop - i) / 2;
      expandBytes(codes_ + i / 2, pairs, a, out);
      out += 2 * pairs;
      i += 2 * pairs;
      if (i < stop) *out++ = quant::kNf4Levels[codes_[i / 2] & 0x0F] * a, ++i;
      first = stop;
    }
  }

  /// Whether [first, first + count) is whole blocks of an even size, which
  /// accumulate() takes.
  bool wholeBlocks(int64_t first, int64_t count) const {
    return block_ % 2 == 0 && first % block_ == 0 && count % block_ == 0;
  }

  /// acc[j] += xv · W[first + j] for j < count (whole blocks), without
  /// storing the expanded weights.
  void accumulate(int64_t first, int64_t count, float xv, float *acc) const {
    const int64_t half = block_ / 2, g0 = first / block_, g1 = g0 + count / block_;
    const uint8_t *bytes = codes_ + g0 * half;
    for (int64_t g = g0; g < g1; ++g, bytes += half, acc += block_)
      bytesTo<true>(bytes, half, scaleOf(g), xv, acc);
  }

private:
  /// Block g's absmax, or nf4Value's 0 where it is not > 0.
  float scaleOf(int64_t g) const {
    float absmax = quant::nf4Absmax(static_cast<int8_t>(absmaxQ_[g]),
                                    absmaxScale_[g / quant::kNf4DoubleQuantBlock], mean_);
    return absmax > 0.0f ? absmax : 0.0f;
  }

  inline void expandBytes(const uint8_t *bytes, int64_t n, float a, float *out) const {
    bytesTo<false>(bytes, n, a, 0.0f, out);
  }

  /// out[2j], out[2j + 1] = the low and high levels of bytes[j], times a;
  /// with Accumulate, out[i] += xv · that (a fused multiply-add).
  template <bool Accumulate>
  inline void bytesTo(const uint8_t *bytes, int64_t n, float a, float xv, float *out) const {
    int64_t j = 0;
#if defined(__AVX2__)
    if (avx512_) {
      j = bytesTo512<Accumulate>(bytes, n, a, xv, out);
    } else {
      j = bytesTo256<Accumulate>(bytes, n, a, xv, out);
    }
#endif
    for (; j < n; ++j) {
      float w0 = quant::kNf4Levels[bytes[j] & 0x0F] * a, w1 = quant::kNf4Levels[bytes[j] >> 4] * a;
      if constexpr (Accumulate) {
        out[2 * j] = std::fma(xv, w0, out[2 * j]);
        out[2 * j + 1] = std::fma(xv, w1, out[2 * j + 1]);
      } else {
        out[2 * j] = w0;
        out[2 * j + 1] = w1;
      }
    }
  }

#if defined(__AVX2__)
// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on their own
// _mm512_undefined operands (GCC PR 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
  /// bytesTo's vector part with AVX-512, where one vpermps looks up all 16
  /// levels; returns the bytes done.
  template <bool Accumulate>
  __attribute__((target("avx512f,avx512bw"))) static int64_t
  bytesTo512(const uint8_t *bytes, int64_t n, float a, float xv, float *out) {
    const __m512 levels = _mm512_loadu_ps(quant::kNf4Levels);
    const __m512 scale = _mm512_set1_ps(a), x = _mm512_set1_ps(xv);
    const __m128i nibble = _mm_set1_epi8(0x0F);
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
      __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(bytes + j));
      __m128i low = _mm_and_si128(b, nibble);
      __m128i high = _mm_and_si128(_mm_srli_epi16(b, 4), nibble);
      // Element order: lo0 hi0 lo1 hi1 ...; a lambda would not inherit the
      // target, hence the two halves written out.
      __m512 w0 = _mm512_mul_ps(
          _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(low, high)), levels), scale);
      __m512 w1 = _mm512_mul_ps(
          _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_unpackhi_epi8(low, high)), levels), scale);
      float *p = out + 2 * j;
      if constexpr (Accumulate) {
        _mm512_storeu_ps(p, _mm512_fmadd_ps(x, w0, _mm512_loadu_ps(p)));
        _mm512_storeu_ps(p + 16, _mm512_fmadd_ps(x, w1, _mm512_loadu_ps(p + 16)));
      } else {
        _mm512_storeu_ps(p, w0);
        _mm512_storeu_ps(p + 16, w1);
      }
    }
    return j;
  }

#pragma GCC diagnostic pop

  template <bool Accumulate>
  static int64_t bytesTo256(const uint8_t *bytes, int64_t n, float a, float xv, float *out) {
    int64_t j = 0;
    const __m256 lo8 = _mm256_loadu_ps(quant::kNf4Levels);
    const __m256 hi8 = _mm256_loadu_ps(quant::kNf4Levels + 8);
    const __m256 scale = _mm256_set1_ps(a), x = _mm256_set1_ps(xv);
    const __m128i nibble = _mm_set1_epi8(0x0F);
    auto put = [&](float *p, __m128i idx8) { // 8 indices in the low bytes → 8 levels · a
      __m256i idx = _mm256_cvtepu8_epi32(idx8);
      __m256 low = _mm256_permutevar8x32_ps(lo8, idx);
      __m256 high = _mm256_permutevar8x32_ps(hi8, idx);
      // Bit 3 of the index, moved to the sign bit, picks the upper half.
      __m256 pick = _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28));
      __m256 w = _mm256_mul_ps(_mm256_blendv_ps(low, high, pick), scale);
      if constexpr (Accumulate)
        _mm256_storeu_ps(p, _mm256_fmadd_ps(x, w, _mm256_loadu_ps(p)));
      else
        _mm256_storeu_ps(p, w);
    };
    for (; j + 16 <= n; j += 16) {
      __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(bytes + j));
      __m128i low = _mm_and_si128(b, nibble);
      __m128i high = _mm_and_si128(_mm_srli_epi16(b, 4), nibble);
      // Element order: lo0 hi0 lo1 hi1 ...
      __m128i first = _mm_unpacklo_epi8(low, high), second = _mm_unpackhi_epi8(low, high);
      put(out + 2 * j, first);
      put(out + 2 * j + 8, _mm_srli_si128(first, 8));
      put(out + 2 * j + 16, second);
      put(out + 2 * j + 24, _mm_srli_si128(second, 8));
    }
    return j;
  }
#endif

  const uint8_t *codes_, *absmaxQ_;
  const float *absmaxScale_;
  float mean_;
  int64_t block_;
  bool avx512_;
};

/// Whether the AVX-512 expansion runs: where the CPU has it, unless
/// LLMC_CPU_NO_AVX512 is set (so the AVX2 path can be tested and compared
/// on such a CPU). Read when a kernel binds.
bool useAvx512() {
#if defined(__AVX2__)
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         !std::getenv("LLMC_CPU_NO_AVX512");
#else
  return false;
#endif
}

template <typename T> class MatmulNf4Kernel final : public Kernel {
public:
  MatmulNf4Kernel(const KernelArgs &args, const contracts::MatmulNf4Binding &d, SgemmFn sgemm)
      : d_(d), sgemm_(sgemm), x_(args.inputs[0].as<T>()), codes_(args.inputs[1].as<uint8_t>()),
        absmaxQ_(args.inputs[2].as<uint8_t>()), absmaxScale_(args.inputs[3].as<float>()),
        absmaxMean_(args.inputs[4].as<float>()), y_(args.outputs[0].as<T>()) {
    if constexpr (!std::is_same_v<T, float>) {
      xWide_.resize(d.m * d.k);
      yWide_.resize(d.m * d.n);
    }
    if (d.m <= kFewRows) {
      // Per thread: W [N, K]: a few rows of W expanded; W [K, N]: a column
      // tile's accumulators and k-chunk of expanded rows.
      const int64_t threads = omp_get_max_threads();
      if (d.transposeB) {
        perThread_ = kRowGroup * d.k;
      } else {
        // As wide as a thread's share of N (each row segment a contiguous
        // read), within the accumulator budget; whole blocks.
        int64_t width = std::min((d.n + threads - 1) / threads, kAccFloats / d.m);
        tile_ = std::max(d.block, width - width % d.block);
        tileRows_ = std::max<int64_t>(1, kExpandedFloats / tile_);
        perThread_ = (tileRows_ + d.m) * tile_;
      }
      scratch_.resize(perThread_ * threads);
    } else {
      chunk_ = std::max<int64_t>(1, kChunkBytes / (4 * d.k));
      if (!d.transposeB && chunk_ >= d.block) chunk_ -= chunk_ % d.block;
      chunk_ = std::min(chunk_, d.n);
      scratch_.resize(chunk_ * d.k);
    }
  }

  void run(const StepContext &) override {
    if (d_.m == 0) return;
    const float *x;
    float *y;
    if constexpr (std::is_same_v<T, float>) {
      x = x_, y = y_;
    } else {
      const int64_t n = d_.m * d_.k;
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
      for (int64_t i = 0; i < n; ++i) xWide_[i] = load(x_, i);
      x = xWide_.data(), y = yWide_.data();
    }
    Nf4Expander expand(codes_, absmaxQ_, absmaxScale_, *absmaxMean_, d_.block, avx512_);
    if (d_.m > kFewRows)
      manyRows(expand, x, y);
    else if (d_.transposeB)
      fewRowsTransposed(expand, x, y);
    else
      fewRows(expand, x, y);
    if constexpr (!std::is_same_v<T, float>) {
      const int64_t n = d_.m * d_.n;
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
      for (int64_t i = 0; i < n; ++i) store(y_, i, yWide_[i]);
    }
  }

private:
  /// W [K, N]: column tiles over threads (one per thread where the
  /// accumulators fit); per tile, chunks of rows of W expanded into scratch
  /// and added into an fp32 accumulator row per x row. Every row segment is
  /// a contiguous read of the codes.
  void fewRows(const Nf4Expander &expand, const float *x, float *y) {
    const int64_t m = d_.m, k = d_.k, n = d_.n, tw = tile_, kr = tileRows_;
    const int64_t tiles = (n + tw - 1) / tw;
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < tiles; ++t) {
      float *rows = scratch_.data() + perThread_ * omp_get_thread_num();
      float *acc = rows + kr * tw;
      const int64_t c0 = t * tw, w = std::min(tw, n - c0);
      std::fill(acc, acc + m * tw, 0.0f);
      if (m == 1 && expand.wholeBlocks(c0, w)) {
        // One row of x (batch-1 decode): each weight is read once, so it is
        // multiplied in as it is expanded, never stored.
        for (int64_t r = 0; r < k; ++r) expand.accumulate(r * n + c0, w, x[r], acc);
        std::memcpy(y + c0, acc, w * sizeof(float));
        continue;
      }
      for (int64_t k0 = 0; k0 < k; k0 += kr) {
        const int64_t kc = std::min(kr, k - k0);
        for (int64_t r = 0; r < kc; ++r) expand((k0 + r) * n + c0, w, rows + r * tw);
        for (int64_t i = 0; i < m; ++i) {
          float *row = acc + i * tw;
          const float *xi = x + i * k + k0;
          for (int64_t r = 0; r < kc; ++r) {
            const float xv = xi[r];
            const float *wr = rows + r * tw;
#pragma omp simd
            for (int64_t j = 0; j < w; ++j) row[j] += xv * wr[j];
          }
        }
      }
      for (int64_t i = 0; i < m; ++i)
        std::memcpy(y + i * n + c0, acc + i * tw, w * sizeof(float));
    }
  }

  /// W [N, K]: groups of rows of W over threads; each row expanded whole
  /// (K floats) and dotted with every row of x.
  void fewRowsTransposed(const Nf4Expander &expand, const float *x, float *y) {
    const int64_t m = d_.m, k = d_.k, n = d_.n;
    const int64_t groups = (n + kRowGroup - 1) / kRowGroup;
#pragma omp parallel for schedule(static)
    for (int64_t g = 0; g < groups; ++g) {
      float *rows = scratch_.data() + perThread_ * omp_get_thread_num();
      const int64_t r0 = g * kRowGroup, rc = std::min(kRowGroup, n - r0);
      expand(r0 * k, rc * k, rows);
      for (int64_t i = 0; i < m; ++i) {
        const float *xi = x + i * k;
        for (int64_t r = 0; r < rc; ++r) {
          const float *wr = rows + r * k;
          float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
          for (int64_t p = 0; p < k; ++p) sum += xi[p] * wr[p];
          y[i * n + r0 + r] = sum;
        }
      }
    }
  }

  /// Column chunks of W expanded into bind-time scratch, one sgemm each.
  void manyRows(const Nf4Expander &expand, const float *x, float *y) {
    const int64_t m = d_.m, k = d_.k, n = d_.n;
    float *w = scratch_.data();
    for (int64_t c0 = 0; c0 < n; c0 += chunk_) {
      const int64_t nc = std::min(chunk_, n - c0);
      if (d_.transposeB) {
        // Rows c0.. of W [N, K]: one contiguous range, [nc, K].
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < nc; ++r) expand((c0 + r) * k, k, w + r * k);
        sgemm_(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m),
               static_cast<int>(nc), static_cast<int>(k), 1.0f, x, static_cast<int>(k), w,
               static_cast<int>(k), 0.0f, y + c0, static_cast<int>(n));
      } else {
        // Columns c0.. of W [K, N]: a segment of every row, [K, nc].
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < k; ++r) expand(r * n + c0, nc, w + r * nc);
        sgemm_(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m),
               static_cast<int>(nc), static_cast<int>(k), 1.0f, x, static_cast<int>(k), w,
               static_cast<int>(nc), 0.0f, y + c0, static_cast<int>(n));
      }
    }
  }

  contracts::MatmulNf4Binding d_;
  SgemmFn sgemm_;
  const T *x_;
  const uint8_t *codes_, *absmaxQ_;
  const float *absmaxScale_, *absmaxMean_;
  T *y_;
  bool avx512_ = useAvx512();
  int64_t perThread_ = 0, chunk_ = 0;
  int64_t tile_ = 0, tileRows_ = 0; // few rows, W [K, N]: columns per tile, rows expanded at once
  std::vector<float> scratch_;      // expanded tiles (and accumulators), or a column chunk
  std::vector<float> xWide_, yWide_; // bf16, f16 only: fp32 copies
};

std::unique_ptr<Kernel> makeMatmulNf4(const KernelArgs &args, std::string &error) {
  contracts::MatmulNf4Binding d;
  if (!contracts::bindMatmulNf4(args, error, &d)) return nullptr;
  SgemmFn sgemm = nullptr;
  if (d.m > kFewRows) {
    std::string blasError;
    sgemm = blasSgemm(blasError);
    if (!sgemm) return Validator("matmul_nf4", args, error).reject(blasError);
  }
  return makeFloatKernel<MatmulNf4Kernel>(d.dtype, args, d, sgemm);
}

} // namespace

LLMC_REGISTER_KERNEL(CPU, "matmul_nf4", makeMatmulNf4);

} // namespace llmc::cpu
