//===- Efficiency.h - how fast a device's kernels run, by shape -*- C++ -*-===//
//
// The GPU efficiency model behind `llmc plan`'s kernel prices. A datasheet
// peak is what no kernel reaches; each kind of kernel is priced at the rate
// the kernel that will run achieves:
//
// - GEMMs by their shape: the output is cut into tiles (128×128 or 128×256
//   on the presets), the tiles run in waves of one per SM, and the last,
//   partial wave costs a full one. A full wave runs at the device's
//   measured large-GEMM rate (e.g. cuBLASLt's 790 TF/s bf16 on an H200 for
//   an 8192³ product), never above it.
// - Attention at the measured rate of the flash-attention kernel for the
//   head dimension and sequence length (FlashAttention's FLOP count:
//   4·B·H·T²·D forward, halved when causal, 2.5× that backward).
// - Everything else at the bandwidth device memory achieves (measured, or
//   the datasheet's times a stated efficiency).
//
// The numbers come from a calibration file written on the device by
// `llmc-bench-calibrate` (scripts/gpu-check.sh) or from the cluster presets,
// each with its source (Cluster.cpp, docs/planner.md). Nothing here is
// fitted to a published training run.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMPILER_PLAN_EFFICIENCY_H
#define LLMC_COMPILER_PLAN_EFFICIENCY_H

#include <cstdint>
#include <string>
#include <vector>

namespace llmc::plan {

/// The output block one thread block of a GEMM computes.
struct GemmTile {
  int64_t rows = 0, cols = 0;
};

/// A measured rate of causal attention, forward and backward together.
struct AttentionRate {
  int64_t headDim = 0, seq = 0;
  double flopsPerSecond = 0;
};

/// The measured (or datasheet-derived) constants of one device.
struct Efficiency {
  /// Streaming multiprocessors that run GEMM tiles; 0 turns the wave model
  /// off (GEMMs at gemmFlops whatever their shape: CPU ranks).
  int64_t sms = 0;
  /// The output tiles the GEMM library picks among (the best one is taken).
  std::vector<GemmTile> tiles;
  /// A full wave's rate: the measured large-GEMM rate (0: the peak).
  double gemmFlops = 0;
  /// Measured attention rates (empty: attention at the peak).
  std::vector<AttentionRate> attention;
  /// Price attention as the unfused kernels of a system without flash
  /// attention (Megatron-LM 2021: the scores materialized by a batched
  /// GEMM, a fused scale-mask-softmax, a second GEMM; the backward's five
  /// GEMMs and softmax gradient over the stored probabilities) instead of
  /// at the measured flash-attention rate: to compare with published runs
  /// of such systems. llmc itself runs flash attention.
  bool unfusedAttention = false;
  /// With unfusedAttention: whether the probabilities are dropped out (as
  /// Megatron-LM and GPT-2 do at the hidden dropout rate); set from the
  /// model's dropout.
  bool attentionDropout = false;
  /// Where the numbers come from, printed with the plan.
  std::string source;
};

/// cuBLASLt's and CUTLASS's large bf16 output tiles on Ampere and Hopper
/// (128×256 either way round, and 128×128).
std::vector<GemmTile> largeGemmTiles();

/// One GEMM: `batch` independent products C[m, n] = A[m, k]·B[k, n].
struct GemmShape {
  int64_t batch = 1, m = 0, n = 0, k = 0;
};

/// How one GEMM runs on `sms` SMs with `tile`: tiles, waves and the share
/// of the waves' capacity that computes the product (1: no quantization).
struct WaveFit {
  GemmTile tile;
  int64_t tiles = 0, waves = 0;
  double efficiency = 1;
};

/// The tile of `efficiency.tiles` whose waves waste least for `shape`
/// (the first of equals); efficiency 1 when there is no wave model.
WaveFit bestWaveFit(const Efficiency &efficiency, const GemmShape &shape);

/// Seconds of the GEMM's arithmetic: 2·batch·m·n·k at the large-GEMM rate
/// (or `peak` when none is given) times `rateScale` (fp32's share of the
/// bf16 rate), divided by the wave efficiency.
double gemmSeconds(const Efficiency &efficiency, double peak, const GemmShape &shape,
                   double rateScale = 1);

/// The attention rate for head dimension `headDim` at sequence `seq`: of
/// the measured rates, those of the nearest head dimension (by ratio),
/// interpolated linearly in log2(seq) and held at the ends; at most `peak`.
/// `peak` when nothing is measured.
double attentionRate(const Efficiency &efficiency, double peak, int64_t headDim, int64_t seq);

/// The fastest rate any kernel counted in model FLOPs (GEMMs, attention)
/// is priced at, as a fraction of `peak`: no layout's MFU can exceed it.
double achievableFraction(const Efficiency &efficiency, double peak);

/// Checks the constants: positive rates, tiles and SMs; "" when valid,
/// else a message naming the field.
std::string validate(const Efficiency &efficiency);

} // namespace llmc::plan

#endif
