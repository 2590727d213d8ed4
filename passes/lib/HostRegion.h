//===- HostRegion.h - run a stretch of a program on the host's cores -*- C++ -*-===//
//
// `--device-memory … --offloaded-layers host`: the decoder layers whose
// weights and KV cache llmc-offload-weights keeps in host memory run on
// the host's cores instead of being copied to the device every step, as
// llama.cpp runs the layers it does not offload to the GPU.
//
// The host region of a program is every instruction from the first to the
// last that touches one of those host buffers (they are the last layers,
// so the region is one stretch). Its kernels run on the host
// (`exec.on_host`), and so do its collectives (under tensor parallelism,
// each layer's all-reduces of its partial sums, on the host transport:
// MPI or TCP, never NCCL). Every device buffer they touch gets a host mirror:
// at the region's start, each one it reads before writing is copied to
// the host (the residual stream, positions, block tables); at its end,
// each one it wrote that is read later, or that the step returns, is
// copied back (the last layer's output). Mirrors keep the offsets of their
// device buffers (less the lowest of them), so buffers that shared device
// memory at different times share host memory the same way.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_PASSES_LIB_HOSTREGION_H
#define LLMC_PASSES_LIB_HOSTREGION_H

#include "dialects/Exec/ExecDialect.h"

#include "llvm/ADT/DenseSet.h"

namespace llmc {

/// Moves the stretch of `program` touching `hostBuffers` (buffers already
/// in the host space) onto the host, as above. Mirrors are placed from
/// host offset `scratchBase` (relative to the host space); `scratchBytes`
/// grows to the bytes they need. Fails, naming the instruction, when the
/// stretch holds one that cannot run on the host (a copy, a send or
/// receive).
mlir::LogicalResult runRegionOnHost(exec::ProgramOp program,
                                    const llvm::DenseSet<mlir::Value> &hostBuffers,
                                    int64_t scratchBase, int64_t &scratchBytes);

} // namespace llmc

#endif
