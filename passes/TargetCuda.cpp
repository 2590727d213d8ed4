//===- TargetCuda.cpp - programs for the CUDA executor --------------------===//
//
// The CUDA executor runs the programs on several streams (passes/lib/
// StreamPlacement.h) and pipeline transfers as NCCL sends and receives, one
// communicator per channel, which hang unless each rank posts them in the
// order its peer does.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/lib/NcclTransfers.h"
#include "passes/lib/StreamPlacement.h"

namespace llmc {
#define GEN_PASS_DEF_TARGETCUDA
#include "passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;
using namespace llmc;

namespace {

struct TargetCudaPass : public llmc::impl::TargetCudaBase<TargetCudaPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Pipeline transfers are NCCL sends and receives on their channel's
    // stream: in the order the peer receives them, and proven not to hang.
    assignTransferChannels(module);
    if (failed(orderSendsAsReceived(module)) || failed(placeStreams(module, getArgument())) ||
        failed(verifyPointToPointProgress(module)))
      return signalPassFailure();
    module->setAttr("exec.backend", StringAttr::get(module.getContext(), "cuda"));
  }
};

} // namespace
