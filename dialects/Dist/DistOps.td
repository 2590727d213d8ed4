//===- DistOps.td - the dist dialect: meshes, shardings, collectives -*- tablegen -*-===//
//
// How a program is spread over ranks: a named device mesh, the sharding of
// each tensor over its axes, and the communication (collectives over mesh
// axes, point-to-point along one axis) that the sharded, SPMD program needs.
//
//===----------------------------------------------------------------------===//

#ifndef LLMC_DIST_OPS
#define LLMC_DIST_OPS

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "dialects/Traits.td"

def Dist_Dialect : Dialect {
  let name = "dist";
  let cppNamespace = "::llmc::dist";
  let summary = "Device meshes, tensor shardings and collectives over mesh axes";
  let description = [{
    A `dist.mesh` names the axes of the device grid (`dp`, `tp`, `pp`, ...).
    Rank r has coordinates given by r in row-major order over the axes in
    the order written: the last axis varies fastest, so with `tp` last a
    tensor-parallel group is a run of consecutive ranks (one node). Ops name
    the mesh by symbol and their groups by axes: "the ranks that differ only
    in these axes".
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Discardable attribute: an array of #dist.rank_offset terms.
    static constexpr ::llvm::StringLiteral kRankOffsetsAttrName = "dist.rank_offsets";
  }];
}

class Dist_Op<string mnemonic, list<Trait> traits = []>
    : Op<Dist_Dialect, mnemonic, traits>;

def Dist_ShardingAttr : AttrDef<Dist_Dialect, "Sharding"> {
  let mnemonic = "sharding";
  let summary = "How a tensor is split over mesh axes";
  let description = [{
    `dims[i]` lists the mesh axes dimension i is split over (outermost
    first; empty = replicated along that dimension); `partial` lists axes
    over which the value is a pending sum (each rank holds a partial sum
    that an all_reduce or reduce_scatter over those axes completes).

    ```mlir
    #dist.sharding<mesh = @world, dims = [["dp"], [], ["tp"]], partial = ["pp"]>
    ```
  }];
  let parameters = (ins "::mlir::FlatSymbolRefAttr":$mesh,
                        "::mlir::ArrayAttr":$dims,
                        DefaultValuedParameter<"::mlir::ArrayAttr", "::mlir::ArrayAttr()">:$partial);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Dist_RankOffsetAttr : AttrDef<Dist_Dialect, "RankOffset"> {
  let mnemonic = "rank_offset";
  let summary = "A rank-dependent term added to an integer attribute";
  let description = [{
    An SPMD program is the same on every rank, yet some ops must know where
    their local piece sits in the global tensor: a vocabulary shard's first
    row, a sequence slice's first position, a dropout mask's global element
    index. Such an op carries `dist.rank_offsets`, a list of these terms:
    element `index` of its integer (or integer-array) attribute `attr` is
    increased, on each rank, by the rank's position in the group over
    `axes` times `stride`. The runtime resolves the terms once, when it
    binds the program to a rank; on one rank every position is 0.

    ```mlir
    %e = llm.embedding %w, %ids {row_offset = 0 : i64, dist.rank_offsets = [
           #dist.rank_offset<mesh = @mesh, attr = "row_offset", index = 0,
                             axes = ["tp"], stride = 128>]} : ...
    ```
  }];
  let parameters = (ins "::mlir::FlatSymbolRefAttr":$mesh, "::mlir::StringAttr":$attr,
                        "int64_t":$index, "::mlir::ArrayAttr":$axes, "int64_t":$stride);
  let assemblyFormat = "`<` struct(params) `>`";
}

def Dist_MeshOp : Dist_Op<"mesh", [Symbol]> {
  let summary = "A named device mesh";
  let description = [{
    ```mlir
    dist.mesh @world axes ["pp", "dp", "tp"] shape [2, 2, 2]
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrArrayAttr:$axes,
                       DenseI64ArrayAttr:$shape);
  let assemblyFormat = "$sym_name `axes` $axes `shape` $shape attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Size of `axis`, or -1 when the mesh has no such axis.
    int64_t axisSize(::llvm::StringRef axis);
    int64_t numRanks();
  }];
}

def Dist_ShardOp : Dist_Op<"shard", [Pure, ExpensiveToRecompute, AllTypesMatch<["x", "result"]>]> {
  let summary = "Annotates a value with its sharding";
  let description = [{
    The sharding is checked against the mesh: every named axis exists, no
    axis is used twice, and each dimension divides evenly.

    ```mlir
    %s = dist.shard %x {sharding = #dist.sharding<mesh = @world, dims = [["dp"], []]>} : tensor<8x16xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$x, Dist_ShardingAttr:$sharding);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
  let hasVerifier = 1;
}

// Communication is worth keeping rather than redoing in backward; the
// all-gather, which sequence parallelism redoes anyway, opts out.
class Dist_CollectiveOp<string mnemonic, string what, dag extra, string format,
                        list<Trait> traits = [ExpensiveToRecompute]>
    : Dist_Op<mnemonic, !listconcat([Pure], traits)> {
  let summary = what # " over the ranks that differ only in `axes`";
  let arguments = !con((ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                            StrArrayAttr:$axes), extra);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input `on` $mesh `axes` $axes " # format #
                       " attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Dist_AllReduceOp : Dist_CollectiveOp<"all_reduce", "All-reduce",
    (ins DefaultValuedStrAttr<StrAttr, "sum">:$reduction), "`reduction` $reduction"> {
  let description = [{
    `reduction` is sum, max, min or mean. Backward: the same all_reduce.

    ```mlir
    %r = dist.all_reduce %x on @world axes ["tp"] reduction "sum" : tensor<4x8xf32> -> tensor<4x8xf32>
    ```
  }];
}

def Dist_AllGatherOp : Dist_CollectiveOp<"all_gather", "All-gather",
    (ins I64Attr:$dim, UnitAttr:$replicated_grad), "`dim` $dim", /*traits=*/[]> {
  let description = [{
    Concatenates every member's tensor along `dim` in group order.

    Backward, by default: reduce_scatter (sum) along the same dim — the
    gathered value feeds a sharded computation, so each rank holds a partial
    gradient of all of it (sequence parallelism's gather before a
    column-parallel matmul). With `replicated_grad` the gathered value feeds
    computation that every rank repeats identically, so its gradient is the
    same everywhere and the backward just keeps this rank's chunk
    (all_slice).

    ```mlir
    %g = dist.all_gather %x on @world axes ["dp"] dim 0 : tensor<4x8xf32> -> tensor<8x8xf32>
    %r = dist.all_gather %x on @world axes ["tp"] dim 1 {replicated_grad} : tensor<4x8xf32> -> tensor<4x16xf32>
    ```
  }];
}

def Dist_ReduceScatterOp : Dist_CollectiveOp<"reduce_scatter", "Reduce-scatter",
    (ins I64Attr:$dim, DefaultValuedStrAttr<StrAttr, "sum">:$reduction),
    "`dim` $dim `reduction` $reduction"> {
  let description = [{
    Reduces over the group and leaves member i with chunk i along `dim`.
    Backward: all_gather along the same dim.

    ```mlir
    %s = dist.reduce_scatter %x on @world axes ["dp"] dim 0 reduction "sum" : tensor<8x8xf32> -> tensor<4x8xf32>
    ```
  }];
}

def Dist_AllSliceOp : Dist_CollectiveOp<"all_slice", "Takes this rank's chunk",
    (ins I64Attr:$dim), "`dim` $dim"> {
  let description = [{
    Splits `dim` into group-size chunks and keeps the chunk of this rank's
    position in the group — no communication (the inverse of all_gather).
    ZeRO uses it to find the parameter shard a rank updates.

    ```mlir
    %s = dist.all_slice %x on @world axes ["dp"] dim 0 : tensor<8x8xf32> -> tensor<4x8xf32>
    ```
  }];
}

def Dist_BroadcastOp : Dist_CollectiveOp<"broadcast", "Broadcast from `root`",
    (ins I64Attr:$root), "`root` $root"> {
  let description = [{
    ```mlir
    %b = dist.broadcast %x on @world axes ["dp"] root 0 : tensor<8xf32> -> tensor<8xf32>
    ```
  }];
}

def Dist_ReduceOp : Dist_CollectiveOp<"reduce", "Reduce to `root`",
    (ins I64Attr:$root, DefaultValuedStrAttr<StrAttr, "sum">:$reduction),
    "`root` $root `reduction` $reduction"> {
  let description = [{
    The result is meaningful on the root only (parameter-server style
    synchronisation reduces then broadcasts).

    ```mlir
    %r = dist.reduce %x on @world axes ["dp"] root 0 reduction "sum" : tensor<8xf32> -> tensor<8xf32>
    ```
  }];
}

def Dist_AllToAllOp : Dist_CollectiveOp<"all_to_all", "All-to-all",
    (ins I64Attr:$split_dim, I64Attr:$concat_dim), "`split` $split_dim `concat` $concat_dim"> {
  let description = [{
    Splits `split_dim` into group-size chunks, sends chunk i to member i and
    concatenates what arrives along `concat_dim` (sequence ↔ head
    re-partitioning).

    ```mlir
    %a = dist.all_to_all %x on @world axes ["tp"] split 2 concat 1 : tensor<2x8x8x16xf32> -> tensor<2x16x4x16xf32>
    ```
  }];
}

def Dist_ReplicateOp : Dist_Op<"replicate", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "Marks a replicated value entering a sharded computation";
  let description = [{
    Forward it is the identity; its VJP all-reduces (sums) the gradient over
    `axes`, because each rank's sharded computation contributes a partial
    gradient for the replicated input (Megatron's f operator; all_reduce is
    its g: sum forward, identity backward).

    ```mlir
    %h2 = dist.replicate %h on @world axes ["tp"] : tensor<4x64x128xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input `on` $mesh `axes` $axes attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Dist_SendOp : Dist_Op<"send", [ExpensiveToRecompute]> {
  let summary = "Sends a tensor `shift` positions along one mesh axis";
  let description = [{
    Pipeline stages pass activations with `shift = 1` and gradients back
    with `shift = -1`; `tag` pairs a send with its recv.

    ```mlir
    dist.send %act on @world axis "pp" shift 1 tag 3 : tensor<4x64x128xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh, StrAttr:$axis,
                       I64Attr:$shift, I64Attr:$tag);
  let assemblyFormat = "$input `on` $mesh `axis` $axis `shift` $shift `tag` $tag attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Dist_RecvOp : Dist_Op<"recv", [ExpensiveToRecompute]> {
  let summary = "Receives a tensor from `shift` positions along one mesh axis";
  let description = [{
    ```mlir
    %act = dist.recv on @world axis "pp" shift -1 tag 3 : tensor<4x64x128xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$mesh, StrAttr:$axis, I64Attr:$shift, I64Attr:$tag);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "`on` $mesh `axis` $axis `shift` $shift `tag` $tag attr-dict `:` type($result)";
  let hasVerifier = 1;
}

#endif // LLMC_DIST_OPS
