//===- ExecKernels.h - llm, qat and dist ops as exec instructions -*- C++ -*-===//
//
// How llmc-lower-to-exec turns one op into instructions, apart from where
// its buffers live: the kernel an llm or qat op names and the attributes
// the kernel reads, a dist collective as its exec collective, the
// workspace a kernel needs on a target, and which ops mark the step's
// parts (pipeline actions, the fault-injection site).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_PASSES_LIB_EXECKERNELS_H
#define LLMC_PASSES_LIB_EXECKERNELS_H

#include "dialects/Exec/ExecDialect.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <string>

namespace llmc {

/// The kernels' format number (common/QuantScheme.h) of fp8 codes `v`.
int64_t fp8FormatOf(mlir::Value v);

/// The workspace the kernel of `op` needs on `target` besides its operands,
/// in bytes (0: none): under cuda, what cuDNN's attention may need and
/// the fp8 GEMM's transposed operands.
int64_t kernelWorkspaceBytes(mlir::Operation &op, llvm::StringRef target);

/// The exec kernel an llm or qat op runs: its name ("qat_<op>" for qat).
std::string kernelName(mlir::Operation &op);

/// Copies `op`'s attributes onto `kernel` as the kernels read them (every
/// number an i64 or f64; schemes, string choices and code formats as the
/// kernels' integers); fails naming an attribute with no encoding.
mlir::LogicalResult setKernelAttributes(mlir::Operation &op, exec::KernelOp kernel,
                                        mlir::OpBuilder &pb);

/// Emits dist collective `op` as the exec collective over the same mesh
/// axes, its buffers from `bufferFor`. Exec moves whole buffers, so gathers
/// and scatters must work on dimension 0.
mlir::LogicalResult emitCollective(mlir::OpBuilder &pb, mlir::Operation *op,
                                   llvm::function_ref<mlir::Value(mlir::Value)> bufferFor);

/// The part of the step `op` belongs to, for traces: its pipeline action,
/// or its microbatch's forward ("F3") or backward ("B3"); null for none.
mlir::StringAttr stepPartOf(mlir::Operation &op, mlir::Builder &b);

/// Whether `op` makes the rank's first floating-point activations: the
/// token embedding, or on a later pipeline stage the activations received
/// from the previous one. Its instruction becomes the fault-injection site.
bool isFaultSite(mlir::Operation &op);

} // namespace llmc

#endif // LLMC_PASSES_LIB_EXECKERNELS_H
