//===- RowGroupQuant.h - fake quantization group by group of rows -*- C++ -*-===//
//
// A mixture of experts' routed rows and their gradient, quantized one
// expert's rows at a time (each expert's GEMM with its own scales, as
// Transformer Engine's grouped linear layers scale them): used by llmc-qat
// for the rows and by qat.quantize_grad's VJP for dY.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_PASSES_LIB_ROWGROUPQUANT_H
#define LLMC_PASSES_LIB_ROWGROUPQUANT_H

#include "dialects/QAT/QATDialect.h"

#include "mlir/IR/Builders.h"

namespace llmc {

/// Whether rows quantized under `scheme` take a range per group of rows:
/// a per-tensor minmax (current) or delayed scheme without outlier columns.
bool quantizesRowGroups(qat::SchemeAttr scheme);

/// The per-row form (channel axis 0) of a per-tensor scheme: one range per
/// slice of dimension 0 (a row, or an expert of a stack viewed [G, A·B]).
qat::SchemeAttr perRowScheme(qat::SchemeAttr scheme);

/// The per-tensor form of a scheme (each group of rows of a per-row one).
qat::SchemeAttr perTensorScheme(qat::SchemeAttr scheme);

/// x [M, C] through fake quantization group by group of rows (`offsets`
/// [G + 1]) under per-tensor `scheme`: each row's range (qat.observe per
/// row), each group's (qat.group_ranges), max-combined over the mesh axes
/// `axes` (none: as is), given back to its rows (qat.row_ranges) for a
/// per-row qat.fake_quant. Rows past offsets[G] get the range [0, 0].
/// Under a delayed scheme `histories` ([G, history + 1], one amax history
/// per group) gives each group its range and records the group's observed
/// one (passes/lib/QuantRanges.h, `units` its units).
mlir::Value fakeQuantRowGroups(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                               mlir::Value offsets, qat::SchemeAttr scheme, mlir::ArrayAttr axes,
                               mlir::Value histories = {}, int64_t units = 1);

} // namespace llmc

#endif
