//===- RankRuntime.cpp - one rank's artifact, communicators and device ----===//
//
// Part of llmc: see RankRuntime.h.
//
//===----------------------------------------------------------------------===//

#include "runtime/RankRuntime.h"

#include "runtime/StreamOrder.h"
#include "runtime/comm/CollectiveCheck.h"
#include "runtime/comm/HostStagedCommunicator.h"
#include "runtime/comm/LaunchEnvironment.h"
#include "runtime/comm/MpiCommunicator.h"
#include "runtime/comm/NcclCommunicator.h"
#include "runtime/comm/OpenGroups.h"
#include "runtime/comm/TcpCommunicator.h"
#include "runtime/support/Error.h"

#include <cstdlib>
#include <omp.h>
#include <thread>

namespace llmc {

bool parseDeviceComm(const std::string &text, DeviceComm *out) {
  if (text == "auto")
    *out = DeviceComm::Auto;
  else if (text == "nccl")
    *out = DeviceComm::Nccl;
  else if (text == "host")
    *out = DeviceComm::Host;
  else
    return false;
  return true;
}

namespace {

/// The ranks on this host: the launcher's count (torchrun, Slurm), Open
/// MPI's or MPICH's, else 1.
int localRankCount(const LaunchEnvironment &launch) {
  if (launch.localWorldSize > 0)
    return launch.localWorldSize;
  for (const char *name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"})
    if (const char *value = std::getenv(name))
      return std::max(1, std::atoi(value));
  return 1;
}

/// NCCL between ranks on distinct GPUs; the host transport where ranks
/// share one (NCCL refuses that) or where asked.
std::unique_ptr<Communicator> makeDeviceCommunicator(const RankRuntime &r, int localRanks,
                                                     DeviceComm choice, double timeoutSeconds) {
  bool shared = localRanks > visibleGpuCount();
  if (choice == DeviceComm::Host || (choice == DeviceComm::Auto && shared)) {
    r.device->runEagerly();
    return makeHostStagedCommunicator(*r.comm, *r.device);
  }
  if (shared && r.artifact.worldSize > 1)
    fail(localRanks, " ranks share ", visibleGpuCount(),
         " GPU(s) here, and NCCL needs a GPU per rank; use --device-comm host (or auto)");
  return makeNcclCommunicator(r.artifact.mesh, *r.comm, *r.device, timeoutSeconds);
}

} // namespace

/// Several ranks on one host share its cores: unless the user chose thread
/// counts, give each rank cores/local-ranks threads for OpenMP and OpenBLAS
/// (which reads its variable when the first GEMM loads it), instead of every
/// rank spinning up one thread per core.
void shareCores(int localRanks) {
  const char *local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (!local)
    local = std::getenv("MPI_LOCALNRANKS");
  int ranks = localRanks > 0 ? localRanks : local ? std::max(1, std::atoi(local)) : 1;
  int threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / ranks);
  if (!std::getenv("OMP_NUM_THREADS"))
    omp_set_num_threads(threads);
  if (!std::getenv("OPENBLAS_NUM_THREADS"))
    setenv("OPENBLAS_NUM_THREADS", std::to_string(threads).c_str(), 0);
}

std::unique_ptr<BoundProgram> bindProgram(const Artifact &artifact, const char *name,
                                          ExecutionDevice &device, Communicator &comm, int rank,
                                          Communicator *hostComm) {
  const ProgramInfo *p = artifact.program(name);
  return p ? std::make_unique<BoundProgram>(*p, device, comm, rank, hostComm) : nullptr;
}

std::unique_ptr<BoundProgram> RankRuntime::bind(const char *program) {
  if (const ProgramInfo *p = artifact.program(program); p && mpi)
    checkMpiThreads(*p, gpu(), std::string("program '") + program + "'");
  return bindProgram(artifact, program, *device, programComm(), rank, comm.get());
}

void checkMpiThreads(const ProgramInfo &program, bool gpu, const std::string &where) {
  bool hostCommunication = false;
  for (const InstructionInfo &inst : program.instructions)
    hostCommunication |= inst.onHost && inst.kind != InstructionKind::Kernel;
  if (!(gpu ? hostCommunication : usesStreams(program)) || mpiCallableFromAnyThread())
    return;
  const char *thread = gpu ? "its collectives on the host run in CUDA's host-function thread, which"
                           : "compiled with --overlap-comm, its communication thread";
  fail(where, ": ", thread,
       " needs an MPI with MPI_THREAD_SERIALIZED support, which this one "
       "lacks; launch the ranks without mpirun (over TCP, docs/parallelism.md)",
       gpu ? "" : " or recompile without --overlap-comm");
}

RankRuntime openRankRuntime(const std::string &artifactPath, const RankRuntimeOptions &options) {
  RankRuntime r;
  // Under mpirun every rank loads its own role; without it, torchrun- or
  // Slurm-style variables (RANK, WORLD_SIZE, MASTER_ADDR, ...) start the
  // ranks over TCP; alone, a multi-rank artifact is an error rather than a
  // silent single-rank run.
  r.mpi = launchedByMpi();
  LaunchEnvironment launch = r.mpi ? LaunchEnvironment{} : readLaunchEnvironment();
  bool tcp = !r.mpi && launch.worldSize > 1;
  r.rank = r.mpi ? mpiWorldRank() : launch.rank;
  if (r.mpi || tcp)
    shareCores(launch.localWorldSize);
  if (r.mpi || !launch.sizeVariable.empty()) {
    // Every rank checks the launch size before looking for its role, so an
    // extra rank reports the same error as the others.
    int launched = r.mpi ? mpiWorldSize() : launch.worldSize;
    Artifact first = loadArtifact(artifactPath, 0);
    if (first.worldSize != launched)
      fail(worldSizeMismatch(first.mesh, launched, launch.sizeVariable));
  }
  r.artifact = loadArtifact(artifactPath, r.rank);
  if (!r.mpi && !tcp && r.artifact.worldSize != 1)
    fail(artifactPath, ": compiled for ", r.artifact.worldSize,
         " ranks; launch it with mpirun -np ", r.artifact.worldSize,
         " (or give each process RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT)");
  if (r.mpi)
    r.comm = makeMpiCommunicator(r.artifact.mesh, options.comm);
  else if (tcp)
    r.comm = makeTcpCommunicator(r.artifact.mesh, launch, options.comm);
  else
    r.comm = makeSingleRankCommunicator();
  checkCollectiveSequences(r.artifact, r.rank, *r.comm);
  openGroupsOfEveryRank(r.artifact, *r.comm);
  if (options.cuda.tf32 && !r.gpu())
    fail("--tf32 applies to artifacts compiled with --target cuda");
  if (options.cuda.attention != AttentionImpl::Auto && !r.gpu())
    fail("--attention ", attentionImplName(options.cuda.attention),
         " applies to artifacts compiled with --target cuda");
  if (options.cuda.comm != DeviceComm::Auto && !r.gpu())
    fail("--device-comm applies to artifacts compiled with --target cuda");
  if (!options.cuda.gemmTiming && !r.gpu())
    fail("--no-gemm-timing applies to artifacts compiled with --target cuda");
  if (!options.cuda.graphs && !r.gpu())
    fail("--no-cuda-graphs applies to artifacts compiled with --target cuda");
  if (options.cuda.fp8TensorCores && !r.gpu())
    fail("--fp8-tensor-cores applies to artifacts compiled with --target cuda");
  if (options.streamDelayMicros > 0 && r.gpu())
    fail("--debug-stream-delay-us applies to artifacts compiled for --target cpu");
  r.device = r.gpu()
                 ? makeCudaDevice(r.artifact.memory.arenaBytes, options.cuda,
                                  r.artifact.memory.hostBytes)
                 : makeCpuDevice(r.artifact.memory.arenaBytes, r.artifact.memory.hostBytes,
                                 r.artifact.memory.persistentBytes);
  if (options.streamDelayMicros > 0)
    r.device->setStreamDelays(options.streamDelayMicros, static_cast<uint64_t>(r.rank) + 1);
  if (r.gpu()) {
    r.deviceComm = makeDeviceCommunicator(r, localRankCount(launch), options.cuda.comm,
                                          options.comm.timeoutSeconds);
    openGroupsOfEveryRank(r.artifact, *r.deviceComm);
  }
  return r;
}

} // namespace llmc
