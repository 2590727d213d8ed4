//===- PlaceStreams.cpp - compute and communication streams, and events ---===//
//
// Communication on its own stream, ordered by events
// (passes/lib/StreamPlacement.h), for the CPU executor's communication
// thread.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/lib/NcclTransfers.h"
#include "passes/lib/StreamPlacement.h"

namespace llmc {
#define GEN_PASS_DEF_PLACESTREAMS
#include "passes/Passes.h.inc"
} // namespace llmc

using namespace llmc;

namespace {

struct PlaceStreamsPass : public llmc::impl::PlaceStreamsBase<PlaceStreamsPass> {
  void runOnOperation() override {
    // The CPU matches transfers by tag, but it runs the channels and the
    // order CUDA needs too, so every --overlap-comm pipeline run checks them.
    assignTransferChannels(getOperation());
    if (failed(orderSendsAsReceived(getOperation())) ||
        failed(placeStreams(getOperation(), getArgument())))
      signalPassFailure();
  }
};

} // namespace
