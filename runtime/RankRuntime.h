//===- RankRuntime.h - one rank's artifact, communicators and device -*- C++ -*-===//
//
// What every tool that runs an artifact (llmc-run's training loop, llmc
// generate) sets up first, the same way: which rank this process is (under
// mpirun, torchrun-style variables over TCP, or alone), its role of the
// artifact, the host communicator, the device with its arena and, on a GPU,
// the programs' NCCL communicator.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_RANKRUNTIME_H
#define LLMC_RUNTIME_RANKRUNTIME_H

#include "runtime/Artifact.h"
#include "runtime/Executor.h"
#include "runtime/ExecutionDevice.h"
#include "runtime/comm/Communicator.h"
#include "runtime/comm/MpiCommunicator.h"

#include <memory>
#include <string>

namespace llmc {

struct RankRuntimeOptions {
  CommOptions comm;
  CudaOptions cuda;           ///< cuda artifacts only
  int streamDelayMicros = 0;  ///< cpu artifacts: random 0..N µs before each instruction
};

struct RankRuntime {
  int rank = 0;
  bool mpi = false; ///< launched by mpirun
  Artifact artifact;
  std::unique_ptr<Communicator> comm;       ///< host values; MPI, TCP or one rank
  std::unique_ptr<ExecutionDevice> device;
  std::unique_ptr<Communicator> deviceComm; ///< the programs' on a GPU (NCCL)

  bool gpu() const { return artifact.backend == "cuda"; }
  Communicator &programComm() { return deviceComm ? *deviceComm : *comm; }
  /// The named program bound to this rank's device, or null when the
  /// artifact has none.
  std::unique_ptr<BoundProgram> bind(const char *program);
};

/// Program `name` of `artifact` bound to `device` and `comm`, or null when
/// the artifact has no such program.
/// Collectives the compiler moved to the host run on `hostComm` (null:
/// `comm`).
std::unique_ptr<BoundProgram> bindProgram(const Artifact &artifact, const char *name,
                                          ExecutionDevice &device, Communicator &comm, int rank,
                                          Communicator *hostComm = nullptr);

/// Fails, naming `where`, when `program` would call MPI from a thread other
/// than the main one and this MPI lacks the thread support that takes: on
/// CPU ranks an --overlap-comm program's communication thread; on a GPU,
/// CUDA's host-function thread, which runs the collectives the compiler
/// moved to the host. Call only under mpirun.
void checkMpiThreads(const ProgramInfo &program, bool gpu, const std::string &where);

/// Opens `artifactPath` as this process's rank; throws RuntimeError when the
/// launch does not match the artifact's world size or an option does not
/// apply to its backend.
RankRuntime openRankRuntime(const std::string &artifactPath, const RankRuntimeOptions &options);

/// Splits the machine's cores between the ranks on it (OpenMP and OpenBLAS
/// threads), unless OMP_NUM_THREADS / OPENBLAS_NUM_THREADS say otherwise.
/// `localRanks` comes from a launch without mpirun; 0: ask MPI's variables.
void shareCores(int localRanks);

} // namespace llmc

#endif
