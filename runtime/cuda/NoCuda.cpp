//===- NoCuda.cpp - the CUDA entry points of a build without nvcc ---------===//
//
// Built instead of CudaDevice.cpp and NcclCommunicator.cpp when CUDA is off,
// so llmc-run links everywhere and a cuda artifact gets a clear error.
//
//===----------------------------------------------------------------------===//

#include "runtime/ExecutionDevice.h"
#include "runtime/comm/HostStagedCommunicator.h"
#include "runtime/comm/NcclCommunicator.h"
#include "runtime/support/Error.h"

namespace llmc {

namespace {
[[noreturn]] void noCuda() {
  fail("this build of llmc has no CUDA support (it was configured without nvcc, or with "
       "-DLLMC_ENABLE_CUDA=OFF); rebuild with the CUDA toolkit, or compile the model with "
       "--target cpu");
}
} // namespace

std::unique_ptr<ExecutionDevice> makeCudaDevice(size_t, const CudaOptions &, size_t) { noCuda(); }

int visibleGpuCount() { return 0; }

std::unique_ptr<Communicator> makeHostStagedCommunicator(Communicator &, ExecutionDevice &) {
  noCuda();
}

std::unique_ptr<Communicator> makeNcclCommunicator(const std::vector<std::pair<std::string, int>> &,
                                                   Communicator &, ExecutionDevice &, double) {
  noCuda();
}

} // namespace llmc
