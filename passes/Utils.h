//===- Utils.h - helpers shared by llmc passes ------------------*- C++ -*-===//
#ifndef LLMC_PASSES_UTILS_H
#define LLMC_PASSES_UTILS_H

#include "dialects/Annotations/Annotations.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringRef.h"

#include <optional>

namespace llmc {

// The llmc.* attribute names (kBlockNameAttr, kRoleAttr, ...) are in
// dialects/Annotations/Annotations.h.

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
void addRankOffset(mlir::Operation *op, llvm::StringRef attr, int64_t index,
                   mlir::ArrayAttr axes, int64_t stride);

/// Records on an llm.dropout that dimension `dim` of its operand, of shape
/// `before`, was just split into `parts` over `axes`, so the mask stays the
/// global one (see llm.dropout's global_shape / offsets).
void markDropoutPiece(mlir::Operation *dropout, mlir::RankedTensorType before, int64_t dim,
                      mlir::ArrayAttr axes, int64_t parts);

/// Inlines every llm.block of `func` into its parent block, tagging the moved
/// ops with kBlockNameAttr.
void flattenBlocks(mlir::func::FuncOp func);

/// Inlines every func.call in `func` whose callee is defined in `module`.
mlir::LogicalResult inlineCalls(mlir::ModuleOp module, mlir::func::FuncOp func);

/// The modules holding programs: a pipeline's stage modules (nested, with
/// kStageRanksAttr) when there are any, else `module` itself.
llvm::SmallVector<mlir::ModuleOp> programModules(mlir::ModuleOp module);

/// 512 B, 3.5 KiB, 45.7 MiB, 1.2 GiB.
std::string formatSize(int64_t bytes);

/// How the memory plan's category names read in reports ("activation" →
/// "activations", "communication" → "communication buffers").
inline std::string memoryCategoryLabel(llvm::StringRef category) {
  if (category == "activation") return "activations";
  if (category == "grad") return "gradients";
  if (category == "input") return "inputs";
  if (category == "output") return "outputs";
  if (category == "communication") return "communication buffers";
  return category.str();
}

/// A function lowered to a program, and the program's name.
struct EntryPoint {
  llvm::StringLiteral function, program;
};
/// Every entry point, in the order lowering lays out their programs.
inline constexpr EntryPoint kEntryPoints[] = {{"train_step", "train_step"},
                                              {"forward", "eval"},
                                              {"logits", "logits"},
                                              {"grad", "grad"},
                                              {"calibrate", "calibrate"},
                                              {"prefill", "prefill"},
                                              {"decode", "decode"}};

/// The function named `name` in `module`, or null.
mlir::func::FuncOp lookupFunc(mlir::ModuleOp module, llvm::StringRef name);

/// The parameter argument of `func` that `v` is (through llm.cast, as mixed
/// precision reads weights, and qat.fake_quant), or null.
mlir::BlockArgument parameterRead(mlir::func::FuncOp func, mlir::Value v);

/// Whether `v` reaches the loss through shape ops, casts, bias adds and
/// all-reduces: the output head's matmul.
bool feedsLoss(mlir::Value v);

/// Whether a user's entry names parameter `name`: the name itself or a
/// dotted prefix of it ("h.0.mlp" names "h.0.mlp.c_fc.weight").
inline bool namesParameter(llvm::StringRef name, llvm::StringRef entry) {
  return name == entry ||
         (name.starts_with(entry) && name.drop_front(entry.size()).starts_with("."));
}

/// The four frozen parameters that hold a weight in NF4 (the layout of
/// `llmc quantize --scheme nf4:block<N>`, common/QuantScheme.h).
struct Nf4Storage {
  mlir::Value codes;       ///< `<name>.qweight`: i8 [(n + 1) / 2], two indices per byte
  mlir::Value absmaxQ;     ///< `<name>.absmax_q`: i8 [n / block]
  mlir::Value absmaxScale; ///< `<name>.absmax_scale`: f32 [nf4ScaleCount(n / block)]
  mlir::Value absmaxMean;  ///< `<name>.absmax_mean`: f32 scalar
};

/// The types of an Nf4Storage's codes, absmax_q and absmax_scale, and their
/// llmc.shard attributes (null: whole); passes/QuantizedStorage.h makes
/// them.
struct Nf4StorageTypes {
  mlir::RankedTensorType codes, absmaxQ, absmaxScale;
  mlir::DictionaryAttr codesShard, absmaxQShard, absmaxScaleShard;
};

/// Adds the NF4 storage of parameter `name`, of `types`, to `func`'s
/// parameters, after the last one, frozen and zero-initialised (a quantized
/// weights file fills them).
Nf4Storage addNf4Storage(mlir::func::FuncOp func, mlir::Location loc, llvm::StringRef name,
                         const Nf4StorageTypes &types);

/// The rows of a weight padded along dimension 0 (llmc-pad-vocab) that are
/// real, from its llmc.shard; 0 when it is not padded so. Fails (null) for
/// padding along another dimension, which flat storage cannot hold.
std::optional<int64_t> paddedRows(mlir::DictionaryAttr shard);

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

} // namespace llmc

#endif
