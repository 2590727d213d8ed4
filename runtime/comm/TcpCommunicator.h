//===- TcpCommunicator.h - collectives over TCP, moved by Gloo --*- C++ -*-===//
//
// The transport for ranks started without an MPI launcher: by torchrun
// (every process gets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) or by
// srun without an MPI plugin (SLURM_PROCID, SLURM_NTASKS, ...); see
// LaunchEnvironment.h. No MPI installation needed.
//
// Start-up: rank 0 serves a key-value store on MASTER_PORT (TcpStore.h);
// every rank connects to it, and rank 0 checks that all were started alike.
// Each group then gets a Gloo context, a full mesh of TCP connections among
// its members, set up through the store when the group is first asked for.
//
// Groups and their member order are those of the MPI communicator (see
// common/Mesh.h). Gloo's ring all-reduce reduces each element on one member
// and copies it to the others, so results are bit-identical on every
// member; bf16 travels and accumulates as fp32 and is rounded once.
//
// No wait is unbounded: a collective or a start-up step slower than the
// timeout, or a peer whose connection closes, throws an error naming this
// rank, the operation and the cause (the rank that died, failed or had
// already finished, or the ranks a timed-out collective waits for).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_COMM_TCPCOMMUNICATOR_H
#define LLMC_RUNTIME_COMM_TCPCOMMUNICATOR_H

#include "common/Mesh.h"
#include "runtime/comm/Communicator.h"
#include "runtime/comm/LaunchEnvironment.h"
#include "runtime/comm/MpiCommunicator.h" // CommOptions

#include <memory>
#include <string>

namespace llmc {

/// Connects this rank to the others (blocking until all are reachable or the
/// timeout passes) and returns the communicator for `mesh`. Throws when the
/// launch's world size differs from the mesh's rank count.
std::unique_ptr<Communicator> makeTcpCommunicator(const Mesh &mesh,
                                                  const LaunchEnvironment &launch,
                                                  const CommOptions &options);

} // namespace llmc

#endif
