//===- TcpCommunicator.h - collectives over TCP sockets ---------*- C++ -*-===//
//
// The transport for ranks started without an MPI launcher: torchrun-style
// (every process gets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) or by
// srun without an MPI plugin (SLURM_PROCID, SLURM_NTASKS, ...). Plain POSIX
// sockets, so a cluster with no MPI installation can still train.
//
// Start-up: rank 0 listens on MASTER_PORT; every other rank opens its own
// listening socket, connects to MASTER_ADDR:MASTER_PORT and reports its rank
// and port; rank 0 answers with everybody's address, and the ranks connect
// pairwise (the higher rank dials the lower), so every pair of ranks shares
// one TCP stream.
//
// Groups and their member order are those of the MPI communicator (see
// runtime/Mesh.h). Reductions run as a ring reduce-scatter followed by a ring
// all-gather; each element is summed in one fixed order on one member and
// copied to the others, so results are bit-identical on every member and
// from run to run. bf16 travels and accumulates as fp32 and is rounded once.
//
// No wait is unbounded: a collective or a start-up step slower than the
// timeout, or a peer whose connection closes without saying goodbye (it
// died), throws an error naming this rank, the operation and the peer.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_COMM_TCPCOMMUNICATOR_H
#define LLMC_RUNTIME_COMM_TCPCOMMUNICATOR_H

#include "runtime/Mesh.h"
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
