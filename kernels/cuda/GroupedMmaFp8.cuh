//===- GroupedMmaFp8.cuh - fp8 grouped tiles on fp8 tensor cores -*- CUDA -*-===//
//
// The fp8 grouped products' tiles on fp8 tensor cores (sm_89 and newer):
// codes staged in shared memory as they are stored, a byte each, and
// multiplied by mma.sync m16n8k32 for the pairing of E4M3 and E5M2 the
// operands have, with fp32 sums. GroupedMma.cuh's MmaTile<bf16> stages the
// same codes decoded into bf16 for WMMA; this tile moves half the bytes
// through shared memory, decodes nothing and runs at the fp8 rate.
// grouped_matmul_fp8.cu takes it where LLMC_CUDA_FP8_MMA=1 when the kernel
// binds; bf16 staging stays the default until it has run on a GPU.
//
// Geometry: MmaTile's. The block's 8 warps share its 64 × 64 output tile,
// warp w owning rows 16 (w mod 4) .. +16 and columns 32 (w div 4) .. +32
// as four m16n8 accumulators; K advances 64 a stage (two mma k-steps). a
// is staged [64 rows][64 K] and b [64 columns][64 K] (mma's B is column-
// major: K contiguous for each output column), each row padded to 80
// bytes so that a warp's fragment loads (lane l: row l / 4, bytes
// 4 (l mod 4) ..) fall in 32 distinct banks.
//
// Fragments (PTX ISA, mma.m16n8k32 with 8-bit operands): lane l holds A's
// rows l / 4 and l / 4 + 8 and B's column l / 4, each as the 4-byte words
// at K = 4 (l mod 4) and 16 + 4 (l mod 4), and the sums of rows l / 4 and
// l / 4 + 8 at columns 2 (l mod 4) and + 1. A's and B's registers take
// their words from the same K for each lane, so every product pairs the
// two codes of one staged K, whatever order the hardware sums them in.
//
// Sums: each stage's two mma start from zero and their sums are added to
// the tile's in fp32: fp8 tensor cores may keep fewer bits than fp32 while
// they accumulate (DeepSeek-V3's report, section 3.3.2, measured about 14
// on Hopper), so no long run of K is summed inside them.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CUDA_GROUPEDMMAFP8_CUH
#define LLMC_KERNELS_CUDA_GROUPEDMMAFP8_CUH

#include "kernels/cuda/GroupedMma.cuh"

#include <cstdint>

namespace llmc::cuda::grouped {

constexpr int kFp8K = 64;          ///< K per shared stage
constexpr int kLdFp8 = kFp8K + 16; ///< bytes of a staged row

/// Shared memory of an fp8 tile: a and b as codes, sums in fp32.
struct Fp8MmaTiles {
  alignas(128) uint8_t a[kTileM * kLdFp8];
  alignas(128) uint8_t b[kTileN * kLdFp8];
  alignas(128) float sums[kTileM * kLdSums];
};

/// The formats of an mma's A and B.
enum class Fp8Pair { E4m3E4m3, E4m3E5m2, E5m2E4m3, E5m2E5m2 };

__device__ __forceinline__ Fp8Pair pairOf(fp8::Kind a, fp8::Kind b) {
  const bool a5 = a == fp8::Kind::E5M2, b5 = b == fp8::Kind::E5M2;
  return a5 ? (b5 ? Fp8Pair::E5m2E5m2 : Fp8Pair::E5m2E4m3)
            : (b5 ? Fp8Pair::E4m3E5m2 : Fp8Pair::E4m3E4m3);
}

/// d += a · b, one m16n8k32 step with A and B in `pair`'s formats.
__device__ __forceinline__ void mmaFp8(float (&d)[4], const uint32_t (&a)[4],
                                       const uint32_t (&b)[2], Fp8Pair pair) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
#define LLMC_MMA_FP8(A, B)                                                                         \
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f32." A "." B ".f32 {%0, %1, %2, %3}, "          \
               "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"                                   \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                    \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]))
  switch (pair) {
  case Fp8Pair::E4m3E4m3: LLMC_MMA_FP8("e4m3", "e4m3"); break;
  case Fp8Pair::E4m3E5m2: LLMC_MMA_FP8("e4m3", "e5m2"); break;
  case Fp8Pair::E5m2E4m3: LLMC_MMA_FP8("e5m2", "e4m3"); break;
  case Fp8Pair::E5m2E5m2: LLMC_MMA_FP8("e5m2", "e5m2"); break;
  }
#undef LLMC_MMA_FP8
#else
  // Built for a GPU without fp8 tensor cores: the kernel's binary version
  // is below 8.9 there, and grouped_matmul_fp8.cu never launches this tile.
  __trap();
#endif
}

/// The 4 bytes at p (4-byte aligned) as one word.
__device__ __forceinline__ uint32_t wordAt(const uint8_t *p) {
  return *reinterpret_cast<const uint32_t *>(p);
}

/// FmaTile's interface on fp8 tensor cores (geometry above) for two fp8
/// operands (Fp8Operand), staged as their codes.
struct Fp8MmaTile {
  using Shared = Fp8MmaTiles;
  using Value = uint8_t;
  static constexpr int kK = kFp8K;
  Fp8MmaTiles &t;
  Fp8Pair pair;
  float sums[4][4] = {}; ///< [accumulator][fragment element]

  __device__ Fp8MmaTile(Fp8MmaTiles &shared, fp8::Kind a, fp8::Kind b)
      : t(shared), pair(pairOf(a, b)) {}
  /// What an operand's element i is staged as: its code.
  template <typename Operand> __device__ static uint8_t value(const Operand &o, int64_t i) {
    return o.code(i);
  }
  /// Stages a's element (output row m, stage column kk), b's (kk, column n).
  __device__ __forceinline__ void putA(int m, int kk, uint8_t code) { t.a[m * kLdFp8 + kk] = code; }
  __device__ __forceinline__ void putB(int kk, int n, uint8_t code) { t.b[n * kLdFp8 + kk] = code; }

  /// The warp's sums += a · b over the stage.
  __device__ __forceinline__ void multiply() {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, wr = warp % 4, wc = warp / 4;
    const int row = lane / 4, k = 4 * (lane % 4);
    float part[4][4] = {};
#pragma unroll
    for (int k0 = 0; k0 < kFp8K; k0 += 32) {
      const uint8_t *pa = t.a + (16 * wr + row) * kLdFp8 + k0 + k;
      const uint32_t a[4] = {wordAt(pa), wordAt(pa + 8 * kLdFp8), wordAt(pa + 16),
                             wordAt(pa + 8 * kLdFp8 + 16)};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint8_t *pb = t.b + (32 * wc + 8 * j + row) * kLdFp8 + k0 + k;
        const uint32_t b[2] = {wordAt(pb), wordAt(pb + 16)};
        mmaFp8(part[j], a, b, pair);
      }
    }
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) sums[j][e] += part[j][e];
  }

  /// Stores the tile's sums · scale over rows [lo, hi) of the tile at
  /// (r0, c0) of a [rows, cols] output, through t.sums.
  template <typename T>
  __device__ void store(T *out, int64_t r0, int64_t c0, int64_t lo, int64_t hi, int64_t cols,
                        float scale) const {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, wr = warp % 4, wc = warp / 4;
    float *first = t.sums + (16 * wr + lane / 4) * kLdSums + 32 * wc + 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float *at = first + 8 * j;
      at[0] = sums[j][0], at[1] = sums[j][1];
      at[8 * kLdSums] = sums[j][2], at[8 * kLdSums + 1] = sums[j][3];
    }
    __syncthreads();
    storeStagedSums(t.sums, out, r0, c0, lo, hi, cols, scale);
  }
};

} // namespace llmc::cuda::grouped

#endif
