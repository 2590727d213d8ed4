//===- QuantizedStorage.h - a split weight's quantized storage --*- C++ -*-===//
//
// Weight-only inference (llmc-weight-quant) and QLoRA (llmc-lora) keep a
// weight in the storage `llmc quantize` writes. Under tensor parallelism
// the storage takes the weight's split: codes shaped [rows, bytes per row]
// and per-block values [rows, blocks per row], each split along the
// dimension of the weight it indexes, so every rank holds its piece's. The
// flat file tensors load into them reshaped (runtime/checkpoint/Weights.cpp).
// NF4's double-quantized scales each cover 256 blocks of the whole weight
// in row-major order, across rows and pieces: every rank keeps all of them,
// and the ops that expand a piece carry where it lies in the whole weight
// (whole_shape, chunks, piece_offset; common/Nf4Piece.h).
//
// A mixture of experts' stacked weight [G, A, B] is quantized expert by
// expert, its storage stored expert after expert: the storage of the 2-D
// view [G·A, B], in which tensor parallelism's split of each expert's rows
// (A) is a split of the view's rows in G chunks, one per expert, expert
// parallelism's split of the experts (G) a split of the view's rows into
// runs of whole experts (after the first, as nested levels of the view's
// rows), and a split of each expert's columns (B) the view's column split.
// So the split stack's storage is a split matrix's, each expert's scales
// and codes where that matrix keeps them.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_PASSES_LIB_QUANTIZEDSTORAGE_H
#define LLMC_PASSES_LIB_QUANTIZEDSTORAGE_H

#include "passes/lib/ShardAttr.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "dialects/Dist/DistDialect.h"

#include <array>
#include <optional>
#include <string>

namespace llmc {

/// The four frozen parameters that hold a weight in NF4 (the layout of
/// `llmc quantize --scheme nf4:block<N>`, common/QuantScheme.h).
struct Nf4Storage {
  mlir::Value codes;       ///< `<name>.qweight`: i8 [(n + 1) / 2], two indices per byte
  mlir::Value absmaxQ;     ///< `<name>.absmax_q`: i8 [n / block]
  mlir::Value absmaxScale; ///< `<name>.absmax_scale`: f32 [nf4ScaleCount(n / block)]
  mlir::Value absmaxMean;  ///< `<name>.absmax_mean`: f32 scalar
};

/// The types of an Nf4Storage's codes, absmax_q and absmax_scale, and their
/// llmc.shard attributes (null: whole); flatNf4Storage and
/// splitNf4Storage make them.
struct Nf4StorageTypes {
  mlir::RankedTensorType codes, absmaxQ, absmaxScale;
  mlir::DictionaryAttr codesShard, absmaxQShard, absmaxScaleShard;
};

/// Adds the NF4 storage of parameter `name`, of `types`, to `func`'s
/// parameters, after the last one, frozen and zero-initialised (a quantized
/// weights file fills them).
Nf4Storage addNf4Storage(mlir::func::FuncOp func, mlir::Location loc, llvm::StringRef name,
                         const Nf4StorageTypes &types);

/// The frozen parameters that hold a weight as int8 or int4 codes (the
/// layout of `llmc quantize --scheme int8:... / int4:...`).
struct IntStorage {
  mlir::Value codes;     ///< `<name>.qweight`: i8, one code per byte (int8) or two (int4)
  mlir::Value scale;     ///< `<name>.scale`: f32, one per group
  mlir::Value zeroPoint; ///< `<name>.zero_point`: i32 like scale, asymmetric only (else null)
};

/// The types of an IntStorage's parameters and, for a weight split by
/// tensor parallelism, their llmc.shard attributes (null: whole).
struct IntStorageTypes {
  mlir::RankedTensorType codes, scale;
  mlir::DictionaryAttr codesShard, scaleShard;
};

/// Adds the int8/int4 storage of parameter `name` to `func`'s parameters,
/// as addNf4Storage does (the zero points, when `asymmetric`, of the
/// scales' shape and layout, as i32).
IntStorage addIntStorage(mlir::func::FuncOp func, mlir::Location loc, llvm::StringRef name,
                         const IntStorageTypes &types, bool asymmetric);

/// How tensor parallelism splits a 2-D weight, as quantized storage can
/// take it: each dimension at most once, evenly, into `parts` pieces, which
/// are `chunks` equal chunks (GPT-2's fused QKV columns: three) each split
/// over the ranks of `axes`. Rows may be a padded vocabulary's. A stack of
/// experts' view may also be split into runs of whole experts over
/// `expertAxes` (expert parallelism), beside its rows' and columns' split.
struct StorageSplit {
  mlir::DictionaryAttr shard;         ///< the weight's llmc.shard
  llvm::SmallVector<int64_t> global;  ///< the whole weight's shape, real rows
  llvm::SmallVector<int64_t> padded;  ///< the whole weight's shape, padded rows
  std::array<int64_t, 2> parts = {1, 1};
  std::array<int64_t, 2> chunks = {1, 1};
  std::array<llvm::SmallVector<std::string>, 2> axes;
  /// A stack of experts' matrices split as its 2-D view (readExpertSplit):
  /// the stack's own piece and global shape, which errors name; else empty.
  llvm::SmallVector<int64_t> stackLocal, stackGlobal;
  /// The runs of whole experts a stack's view rows split into, over
  /// `expertAxes`, and the index of that level in `shard`'s levels (-1:
  /// none).
  int64_t expertParts = 1;
  llvm::SmallVector<std::string> expertAxes;
  int expertLevel = -1;

  /// Indices of dimension `d` in one rank's piece of one chunk.
  int64_t piece(int d) const { return padded[d] / parts[d]; }
  /// Whether the weight has rows past its real ones (a padded vocabulary).
  bool padsRows() const { return padded[0] != global[0]; }
  /// Whether this is a stack of experts that expert parallelism splits
  /// (each rank holding whole experts, runs of the view's rows).
  bool splitsExperts() const { return expertParts > 1; }
  /// The llmc.shard of a storage tensor of `globalShape` whose dimension
  /// dims[d] indexes the weight's dimension d (-1: none does); null when
  /// no level is left. With `perExpert`, dims[0] indexes a stack's experts
  /// (one entry each): of the view rows' levels only expert parallelism's
  /// applies.
  mlir::DictionaryAttr levelsOn(mlir::MLIRContext *context, std::array<int64_t, 2> dims,
                                llvm::ArrayRef<int64_t> globalShape, bool perExpert = false) const;
};

/// The split of weight `name` (this rank's piece `local`, split as `shard`
/// records over `mesh`), or failure after an error on `op` ("<pass>:
/// '<name>' <local> of RxC: <why>") when quantized storage cannot take it.
mlir::FailureOr<StorageSplit> readStorageSplit(mlir::Operation *op, llvm::StringRef pass,
                                               llvm::StringRef name, mlir::RankedTensorType local,
                                               mlir::DictionaryAttr shard, dist::MeshOp mesh);

/// The split of a mixture of experts' stacked weight `name` [G, A, B] (this
/// rank's piece `local`, split as `shard` records over `mesh`) as the split
/// of its storage's 2-D view [G·A, B] (whose piece `viewLocal` gives), or
/// failure after an error on `op` when quantized storage cannot take it
/// (not evenly, or a dimension of the stack split twice). Expert
/// parallelism splits the view's rows into contiguous runs of whole
/// experts, after tensor parallelism's split of each expert's rows.
mlir::FailureOr<StorageSplit> readExpertSplit(mlir::Operation *op, llvm::StringRef pass,
                                              llvm::StringRef name, mlir::RankedTensorType local,
                                              mlir::DictionaryAttr shard, dist::MeshOp mesh,
                                              mlir::RankedTensorType &viewLocal);

/// An error on `op` about weight `name` of `split`, in readStorageSplit's
/// form (a stack of experts named by its own shapes).
mlir::InFlightDiagnostic refuseStorage(mlir::Operation *op, llvm::StringRef pass,
                                       llvm::StringRef name, mlir::RankedTensorType local,
                                       const StorageSplit &split);

/// The NF4 storage of a whole weight of type `weight` in blocks of `block`,
/// flat as the file holds it; with `realRows` > 0 only that many rows are
/// real (a padded vocabulary), and each tensor is the real weight's padded
/// at its end.
Nf4StorageTypes flatNf4Storage(mlir::RankedTensorType weight, int64_t block, int64_t realRows = 0);

/// The NF4 storage of weight `name`'s piece `local` of `split`, in blocks of
/// `block`, or failure after an error on `op` when its pieces are not whole
/// blocks (which the file's storage, quantized whole, must give each rank).
mlir::FailureOr<Nf4StorageTypes> splitNf4Storage(mlir::Operation *op, llvm::StringRef pass,
                                                 llvm::StringRef name, mlir::RankedTensorType local,
                                                 const StorageSplit &split, int64_t block);

/// The NF4 storage of weight `name` (this rank's piece `local`, split as its
/// llmc.shard `shard` records over `mesh`) in blocks of `block`: flat when
/// tensor parallelism does not split it (a padded vocabulary's rows padded
/// at its end), else split with it, `split` then saying how; or failure
/// after an error on `op` ("<pass>: ...").
mlir::FailureOr<Nf4StorageTypes> nf4StorageFor(mlir::Operation *op, llvm::StringRef pass,
                                               llvm::StringRef name, mlir::RankedTensorType local,
                                               mlir::DictionaryAttr shard, dist::MeshOp mesh,
                                               int64_t block, std::optional<StorageSplit> &split);

/// Sets whole_shape, chunks and piece_offset (with its #dist.rank_offset
/// terms) on `op`, a qat.dequantize_nf4 or llm.matmul_nf4 expanding this
/// rank's piece of a weight split as `split`.
void setNf4Piece(mlir::Operation *op, const StorageSplit &split);

} // namespace llmc

#endif
