//===- KernelCost.h - FLOPs, bytes and seconds of one exec kernel -*- C++ -*-===//
//
// What one `exec.kernel` computes and moves, and how long it takes on a
// cluster's device under the efficiency model (Efficiency.h): GEMMs by
// their tile waves at the large-GEMM rate, attention at the measured flash
// attention rate, everything else at the achieved memory bandwidth; each
// at least its bytes over that bandwidth, plus the per-kernel launch cost.
//
// Under expert parallelism (`expertRanks` = ep > 1) the experts' grouped
// matmuls run on the exchange's receive buffers, [ep·R, C]: sized for the
// worst case dropless routing allows (every peer sending all its R routed
// rows here), but the kernels compute only the rows received, R per rank
// on average when routing is balanced (the load-balancing loss's aim).
// Their GEMMs, FLOPs and row bytes are priced at those R rows, not ep·R.
//
// Model FLOPs are counted here too, kernel by kernel, so that MFU divides
// by FLOPs the time model prices: every product (a GEMM's 2·m·n·k) and
// attention's score and value products, the backward of attention counted
// as twice its forward (PaLM's convention) although the kernel is priced
// for the 2.5× it computes with its recomputation.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMPILER_PLAN_KERNELCOST_H
#define LLMC_COMPILER_PLAN_KERNELCOST_H

#include "compiler/plan/Cluster.h"

#include "mlir/IR/Operation.h"

#include <vector>

namespace llmc::plan {

/// FLOPs of one kernel call (0 for pure data movement): matmul 2·|C|·K;
/// attention 4·B·H·Tq·Tk·d (halved when causal; with a sliding window W
/// < T, scaled to the (W·T − W(W−1)/2) pairs it scores), its gradient 2.5× that
/// (the forward's two products recomputed plus three more); everything
/// else one operation per output element.
double kernelFlops(mlir::Operation *kernel, int64_t expertRanks = 1);

/// Bytes of a buffer of memref `type` (sub-byte elements take a byte; 0
/// for anything but a memref).
double bytesOf(mlir::Type type);

/// Bytes a kernel reads and writes: every operand and result once.
/// (Under expert parallelism a grouped matmul's row buffers count their
/// received rows only.)
double kernelBytes(mlir::Operation *kernel, int64_t expertRanks = 1);

/// The FLOPs of `kernel` that count as model FLOPs: all of a product's,
/// attention's forward, and twice the forward for attention's backward; 0
/// for every other kernel.
double kernelModelFlops(mlir::Operation *kernel, int64_t expertRanks = 1);

/// The GEMMs a product kernel runs, as cuBLASLt is called for them (the
/// fused head's chunks each as their own); empty for other kernels.
std::vector<GemmShape> kernelGemms(mlir::Operation *kernel, int64_t expertRanks = 1);

/// Seconds of one call of `kernel` on `cluster`'s device. fp32 products run
/// at `fp32MatmulScale` of the bf16 rate (TF32 on tensor cores).
double kernelSeconds(mlir::Operation *kernel, const Cluster &cluster, double fp32MatmulScale,
                     int64_t expertRanks = 1);

} // namespace llmc::plan

#endif
