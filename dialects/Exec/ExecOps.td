//===- ExecOps.td - the exec dialect: a rank's static program --*- tablegen -*-===//
//
// `exec` is what the runtime executes, one op per runtime instruction. Every
// buffer sits at a static offset in the rank's arena; kernels are named
// entries of the kernel registry (docs/kernels.md); collectives name the
// mesh axes their group spans. The artifact writer serializes this IR as is.
//
//===----------------------------------------------------------------------===//

#ifndef LLMC_EXEC_OPS
#define LLMC_EXEC_OPS

include "mlir/IR/OpBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/RegionKindInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Exec_Dialect : Dialect {
  let name = "exec";
  let cppNamespace = "::llmc::exec";
  let summary = "Per-rank static programs: arena buffers, kernel calls, communication";
  let description = [{
    A module holds one `exec.program` per entry point (`train_step`, `eval`,
    `logits`). The module attribute `exec.arena_bytes` is the size of the
    rank's arena; `exec.mesh` (a dictionary axis name → size) describes the
    device mesh collectives refer to; `exec.rank_count` the number of ranks.
  }];
}

class Exec_Op<string mnemonic, list<Trait> traits = []>
    : Op<Exec_Dialect, mnemonic, traits>;

def Exec_Buffer : MemRefRankOf<[AnyType], [0, 1, 2, 3, 4, 5, 6]>;

def Exec_ProgramOp : Exec_Op<"program", [Symbol, IsolatedFromAbove, NoTerminator,
                                         SingleBlock]> {
  let summary = "One entry point: an ordered list of instructions";
  let description = [{
    The runtime runs the body top to bottom once per call (`train_step` once
    per optimizer step). `kind` says which entry point this is.

    ```mlir
    exec.program @train_step kind "train_step" {
      %x = exec.buffer offset 0 : memref<4x64xf32>
      exec.kernel "fill" () -> (%x : memref<4x64xf32>) {value = 0.0 : f64}
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrAttr:$kind);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name `kind` $kind attr-dict-with-keyword $body";
  let hasVerifier = 1;
}

def Exec_BufferOp : Exec_Op<"buffer", [Pure, HasParent<"ProgramOp">]> {
  let summary = "A tensor at a static byte offset of the rank's arena";
  let description = [{
    `category` says what the bytes hold (param, grad, optim, kv_cache: an
    inference step's key/value block pools, activation: a
    forward value kept for the backward, communication: a collective's or
    receive's result, workspace: other temporaries, input, output) for the
    memory plan; persistent buffers
    (params, optimizer state, inputs) carry a `name` that the runtime and
    checkpoints use and that every program agrees on.

    ```mlir
    %w = exec.buffer offset 4096 name "wte" category "param" : memref<256x64xf32>
    %a = exec.buffer offset 69632 category "activation" : memref<4x64x64xf32>
    ```
  }];
  let arguments = (ins I64Attr:$offset, OptionalAttr<StrAttr>:$name,
                       DefaultValuedStrAttr<StrAttr, "activation">:$category);
  let results = (outs Exec_Buffer:$result);
  let assemblyFormat = [{
    `offset` $offset (`name` $name^)? (`category` $category^)? attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def Exec_KernelOp : Exec_Op<"kernel", [HasParent<"ProgramOp">, AttrSizedOperandSegments]> {
  let summary = "Calls a registered kernel on arena buffers";
  let description = [{
    `callee` is a kernel registry name (docs/kernels.md). Every other
    attribute is passed to the kernel (integers, floats, integer arrays).
    `stream` picks the execution stream. Every instruction defaults to
    stream 0: one ordered list. `llmc-place-streams` moves communication
    to stream 1 and orders the two streams with events.

    Under `llmc-offload-optimizer` a kernel with the unit attribute
    `exec.on_host` runs on the host's cores on buffers marked
    `exec.host_space` only; `copy_to_host` and `copy_to_device` are the
    device kernels that move bytes between the two memories.

    ```mlir
    exec.kernel "matmul" (%x, %w : memref<4x64xf32>, memref<64x64xf32>)
        -> (%y : memref<4x64xf32>) {transpose_b = 1 : i64}
    ```
  }];
  let arguments = (ins StrAttr:$callee, Variadic<Exec_Buffer>:$inputs,
                       Variadic<Exec_Buffer>:$outputs,
                       DefaultValuedAttr<I64Attr, "0">:$stream);
  let assemblyFormat = [{
    $callee `(` ($inputs^ `:` type($inputs))? `)` `->` `(` ($outputs^ `:` type($outputs))? `)`
    attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::LogicalResult verifyMemorySpaces();
  }];
}

class Exec_CollectiveOp<string mnemonic, string what> : Exec_Op<mnemonic,
    [HasParent<"ProgramOp">]> {
  let summary = what # " over the ranks that differ only in the `group` mesh axes";
  let arguments = (ins Exec_Buffer:$input, Exec_Buffer:$output,
                       ArrayAttr:$group,
                       DefaultValuedStrAttr<StrAttr, "sum">:$reduction,
                       DefaultValuedAttr<I64Attr, "0">:$root,
                       DefaultValuedAttr<I64Attr, "0">:$stream);
  let assemblyFormat = [{
    $input `->` $output `group` $group attr-dict `:` type($input) `->` type($output)
  }];
  let hasVerifier = 1;
}

def Exec_AllReduceOp : Exec_CollectiveOp<"all_reduce", "All-reduce"> {
  let description = [{
    Input and output have the same type (in place when they are the same
    buffer). `reduction` is sum, max or mean.

    ```mlir
    exec.all_reduce %g -> %g group ["dp"] : memref<64xf32> -> memref<64xf32>
    ```
  }];
}
def Exec_AllGatherOp : Exec_CollectiveOp<"all_gather", "All-gather along dim 0"> {
  let description = [{
    The output's dim 0 is the group size times the input's.

    ```mlir
    exec.all_gather %s -> %f group ["dp"] : memref<32xf32> -> memref<64xf32>
    ```
  }];
}
def Exec_ReduceScatterOp : Exec_CollectiveOp<"reduce_scatter", "Reduce-scatter along dim 0"> {
  let description = [{
    ```mlir
    exec.reduce_scatter %f -> %s group ["dp"] : memref<64xf32> -> memref<32xf32>
    ```
  }];
}
def Exec_AllSliceOp : Exec_CollectiveOp<"all_slice", "Keep this rank's chunk of dim 0"> {
  let description = [{
    No communication: output = chunk `group rank` of the input's dim 0.

    ```mlir
    exec.all_slice %f -> %s group ["dp"] : memref<64xf32> -> memref<32xf32>
    ```
  }];
}
def Exec_BroadcastOp : Exec_CollectiveOp<"broadcast", "Broadcast from `root`"> {
  let description = [{
    ```mlir
    exec.broadcast %p -> %p group ["dp"] {root = 0 : i64} : memref<64xf32> -> memref<64xf32>
    ```
  }];
}
def Exec_ReduceOp : Exec_CollectiveOp<"reduce", "Reduce to `root`"> {
  let description = [{
    ```mlir
    exec.reduce %g -> %g group ["dp"] {root = 0 : i64} : memref<64xf32> -> memref<64xf32>
    ```
  }];
}
def Exec_AllToAllOp : Exec_CollectiveOp<"all_to_all", "All-to-all along dim 0"> {
  let description = [{
    Chunk i of dim 0 goes to group member i.

    ```mlir
    exec.all_to_all %a -> %b group ["tp"] : memref<8x16xf32> -> memref<8x16xf32>
    ```
  }];
}

def Exec_SendOp : Exec_Op<"send", [HasParent<"ProgramOp">]> {
  let summary = "Sends a buffer to the rank `shift` steps along a mesh axis";
  let description = [{
    ```mlir
    exec.send %act axis "pp" shift 1 tag 3 : memref<4x64x64xf32>
    ```
    `channel` names the communicator it travels on (common/TransferChannel.h):
    0, the collectives' (the default); 1 and 2 downstream to the next stage,
    3 and 4 upstream to the previous one, for an even and an odd lower
    stage; 5 and 6 downstream and upstream further away; llmc-place-streams
    and llmc-target-cuda assign it.
  }];
  let arguments = (ins Exec_Buffer:$buffer, StrAttr:$axis, I64Attr:$shift,
                       I64Attr:$tag, DefaultValuedAttr<I64Attr, "0">:$stream,
                       DefaultValuedAttr<I64Attr, "0">:$channel);
  let assemblyFormat = "$buffer `axis` $axis `shift` $shift `tag` $tag attr-dict `:` type($buffer)";
  let hasVerifier = 1;
}

def Exec_RecvOp : Exec_Op<"recv", [HasParent<"ProgramOp">]> {
  let summary = "Receives a buffer from the rank `shift` steps along a mesh axis";
  let description = [{
    ```mlir
    exec.recv %act axis "pp" shift -1 tag 3 : memref<4x64x64xf32>
    ```
    `channel` as for `exec.send`: the sender's.
  }];
  let arguments = (ins Exec_Buffer:$buffer, StrAttr:$axis, I64Attr:$shift,
                       I64Attr:$tag, DefaultValuedAttr<I64Attr, "0">:$stream,
                       DefaultValuedAttr<I64Attr, "0">:$channel);
  let assemblyFormat = "$buffer `axis` $axis `shift` $shift `tag` $tag attr-dict `:` type($buffer)";
  let hasVerifier = 1;
}

def Exec_RecordEventOp : Exec_Op<"record_event", [HasParent<"ProgramOp">]> {
  let summary = "Marks a point on a stream that others can wait for";
  let description = [{
    ```mlir
    exec.record_event 3 stream 1
    ```
  }];
  let arguments = (ins I64Attr:$event, I64Attr:$stream);
  let assemblyFormat = "$event `stream` $stream attr-dict";
}

def Exec_WaitEventOp : Exec_Op<"wait_event", [HasParent<"ProgramOp">]> {
  let summary = "Makes a stream wait until an event has been recorded";
  let description = [{
    ```mlir
    exec.wait_event 3 stream 0
    ```
  }];
  let arguments = (ins I64Attr:$event, I64Attr:$stream);
  let assemblyFormat = "$event `stream` $stream attr-dict";
}

#endif // LLMC_EXEC_OPS
