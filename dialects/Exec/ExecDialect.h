//===- ExecDialect.h - the exec dialect -------------------------*- C++ -*-===//
//
// A rank's static program. See ExecOps.td and Rationale.md.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_DIALECTS_EXEC_EXECDIALECT_H
#define LLMC_DIALECTS_EXEC_EXECDIALECT_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/Exec/ExecOpsDialect.h.inc"

#define GET_OP_CLASSES
#include "dialects/Exec/ExecOps.h.inc"

namespace llmc::exec {

/// Module attributes that describe the rank the program runs on.
inline constexpr llvm::StringLiteral kArenaBytesAttr = "exec.arena_bytes";
inline constexpr llvm::StringLiteral kMeshAttr = "exec.mesh";
/// Mesh axis names in rank order (dictionaries sort their keys).
inline constexpr llvm::StringLiteral kMeshAxesAttr = "exec.mesh_axes";
/// On any instruction: the part of the step it belongs to ("F0", "B1.2").
inline constexpr llvm::StringLiteral kActionAttr = "exec.action";
/// On the instruction after which `llmc-run --inject-nonfinite` overwrites
/// the buffer it writes (a kernel's first output, a receive's buffer) with
/// NaN: the rank's first floating-point activations. A testing aid the
/// compiler places, so the runtime needs no knowledge of kernel names.
inline constexpr llvm::StringLiteral kFaultSiteAttr = "exec.fault_site";
/// Module attribute: bytes of the host memory space (llmc-offload-optimizer),
/// numbered after the device arena: [exec.arena_bytes, + exec.host_bytes).
inline constexpr llvm::StringLiteral kHostBytesAttr = "exec.host_bytes";
/// On a buffer: its bytes are in the host memory space.
inline constexpr llvm::StringLiteral kHostSpaceAttr = "exec.host_space";
/// On a kernel or collective: it runs on the host's cores (a collective on
/// the host transport), on host-space buffers only.
inline constexpr llvm::StringLiteral kOnHostAttr = "exec.on_host";

/// Bytes a buffer of this memref type occupies.
int64_t bufferBytes(mlir::MemRefType type);

/// Whether `op` is a collective (exec.all_reduce ... exec.all_to_all).
bool isCollective(mlir::Operation *op);

/// The buffers instruction `op` reads: a kernel's inputs, a collective's
/// input, a send's buffer; none for an event.
llvm::SmallVector<mlir::Value> buffersRead(mlir::Operation *op);

/// The buffers instruction `op` writes: a kernel's outputs, a
/// collective's output, a receive's buffer; none for an event.
llvm::SmallVector<mlir::Value> buffersWritten(mlir::Operation *op);

/// The alignment of every planned buffer, in bytes (a cache line, and
/// enough for any vector load).
inline constexpr int64_t kBufferAlignment = 64;

} // namespace llmc::exec

#endif
