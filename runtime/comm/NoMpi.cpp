//===- NoMpi.cpp - the MPI entry points of a build without MPI ------------===//
//
// Built instead of MpiCommunicator.cpp when MPI is absent (a runtime-only
// build, -DLLMC_RUNTIME_ONLY=ON, on a machine without it). Several ranks are
// then started torchrun-style and meet over TCP (runtime/comm/TcpCommunicator.h);
// a launch by mpirun gets a clear error instead of a silent single rank.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/MpiCommunicator.h"
#include "runtime/support/Error.h"

namespace llmc {

namespace {
[[noreturn]] void noMpi() {
  fail("this build of llmc has no MPI support (it was configured without an MPI library); "
       "start the ranks torchrun-style instead (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), "
       "and they meet over TCP");
}
} // namespace

int mpiWorldRank() { noMpi(); }
int mpiWorldSize() { noMpi(); }
bool mpiCallableFromAnyThread() { noMpi(); }

std::unique_ptr<Communicator> makeMpiCommunicator(const std::vector<std::pair<std::string, int>> &,
                                                  const CommOptions &) {
  noMpi();
}

} // namespace llmc
