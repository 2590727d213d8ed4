//===- Nf4Piece.h - verifying a piece of an NF4-stored weight ---*- C++ -*-===//
//
// qat.dequantize_nf4 and llm.matmul_nf4 read NF4 storage, whole or one
// rank's piece of a weight split by tensor parallelism, which the optional
// attributes whole_shape, chunks and piece_offset (and, for a stack of
// experts, held_chunks) place in the whole weight
// (common/Nf4Piece.h), with its absmax levels in the format absmax_format
// names (common/QuantScheme.h). Both verifiers check them here, the piece
// with the kernels' own check.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_DIALECTS_NF4PIECE_H
#define LLMC_DIALECTS_NF4PIECE_H

#include "common/Nf4Piece.h"
#include "common/QuantScheme.h"

#include "mlir/IR/Operation.h"

#include <optional>

namespace llmc {

/// The piece of a weight of `shape` in blocks of `block` that the optional
/// attributes describe (the first three all or none; none: the whole
/// weight; `heldChunks` only with them), or failure after an error on `op`.
inline mlir::FailureOr<Nf4Piece>
verifyNf4Piece(mlir::Operation *op, llvm::ArrayRef<int64_t> shape, int64_t block,
               std::optional<llvm::ArrayRef<int64_t>> wholeShape,
               std::optional<llvm::ArrayRef<int64_t>> chunks,
               std::optional<llvm::ArrayRef<int64_t>> pieceOffset,
               std::optional<llvm::ArrayRef<int64_t>> heldChunks = std::nullopt) {
  if (!wholeShape && !chunks && !pieceOffset && !heldChunks)
    return Nf4Piece();
  if (!wholeShape || !chunks || !pieceOffset)
    return op->emitOpError("whole_shape, chunks and piece_offset are given together");
  auto vec = [](llvm::ArrayRef<int64_t> a) { return std::vector<int64_t>(a.begin(), a.end()); };
  std::string error;
  Nf4Piece piece =
      makeNf4Piece(vec(shape), block, vec(*wholeShape), vec(*chunks), vec(*pieceOffset), error,
                   heldChunks ? vec(*heldChunks) : std::vector<int64_t>());
  if (!error.empty())
    return op->emitOpError(error);
  return piece;
}

/// Success when `format` names an absmax level format (int8, fp8_e4m3),
/// else failure after an error on `op`.
inline mlir::LogicalResult verifyAbsmaxFormat(mlir::Operation *op, llvm::StringRef format) {
  quant::AbsmaxFormat parsed;
  if (quant::parseAbsmaxFormat(format.str(), parsed))
    return mlir::success();
  return op->emitOpError("absmax_format must be \"int8\" or \"fp8_e4m3\", got \"")
         << format << "\"";
}

} // namespace llmc

#endif
