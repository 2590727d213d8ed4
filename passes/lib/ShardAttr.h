//===- ShardAttr.h - the llmc.shard attribute -------------------*- C++ -*-===//
//
// How a value is split over the mesh (and a vocabulary padded) is recorded
// as its llmc.shard attribute, level by level; these read and extend it.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_PASSES_LIB_SHARDATTR_H
#define LLMC_PASSES_LIB_SHARDATTR_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include <optional>
#include <string>

namespace llmc {

/// One level of an llmc.shard attribute, read back: dimension `dim` of
/// the tensor (as split so far) is `blocks` equal blocks, each split over
/// the ranks of `axes`; or, with `padTo` (and no axes), grows to `padTo`,
/// the tail padding (a vocabulary padded by llmc-pad-vocab).
struct ShardSplit {
  int64_t dim;
  llvm::SmallVector<std::string> axes;
  int64_t blocks = 1;
  int64_t globalSize = 0; ///< the global extent of `dim`; 0: unknown
  int64_t padTo = 0;      ///< > 0: a padding level
  bool pads() const { return padTo > 0; }
};

/// The levels of `shard`, in order (none for a null attribute).
llvm::SmallVector<ShardSplit> shardSplits(mlir::DictionaryAttr shard);

/// Every mesh axis any level of `shard` splits over, in level order.
llvm::SmallVector<std::string> shardAxes(mlir::DictionaryAttr shard);

/// The global shape `shard` records, or `local`'s shape when it is null.
llvm::SmallVector<int64_t> shardGlobalShape(mlir::DictionaryAttr shard,
                                            mlir::RankedTensorType local);

/// `existing` (or no sharding) followed by one more split of `current` (the
/// tensor as sharded so far) along `dim` over `axes`.
mlir::DictionaryAttr addShardLevel(mlir::MLIRContext *context, mlir::DictionaryAttr existing,
                                   mlir::RankedTensorType current, mlir::ArrayAttr axes,
                                   int64_t dim, int64_t blocks = 1);

/// `existing` (or no sharding) followed by a padding level: dimension `dim`
/// of `current` (the tensor as sharded so far) grows to `padTo`.
mlir::DictionaryAttr addPadLevel(mlir::MLIRContext *context, mlir::DictionaryAttr existing,
                                 mlir::RankedTensorType current, int64_t dim, int64_t padTo);

/// The padding levels of `shard` (the padded vocabulary), in order.
llvm::SmallVector<ShardSplit> shardPadding(mlir::DictionaryAttr shard);

/// Appends a #dist.rank_offset term (on @mesh) to `op`: element `index` of
/// its attribute `attr` grows by the rank's position over `axes` × `stride`.
void addRankOffset(mlir::Operation *op, llvm::StringRef attr, int64_t index, mlir::ArrayAttr axes,
                   int64_t stride);

/// Records on an llm.dropout that dimension `dim` of its operand, of shape
/// `before`, was just split into `parts` over `axes`, so the mask stays the
/// global one (see llm.dropout's global_shape / offsets).
void markDropoutPiece(mlir::Operation *dropout, mlir::RankedTensorType before, int64_t dim,
                      mlir::ArrayAttr axes, int64_t parts);

/// The rows of a weight padded along dimension 0 (llmc-pad-vocab) that are
/// real, from its llmc.shard; 0 when it is not padded so. Fails (null) for
/// padding along another dimension, which flat storage cannot hold.
std::optional<int64_t> paddedRows(mlir::DictionaryAttr shard);

} // namespace llmc

#endif
