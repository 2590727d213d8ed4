//===- OffloadChoiceTest.cpp - pricing --offloaded-layers auto's choice ---===//

#include "compiler/OffloadChoice.h"
#include "compiler/Compiler.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;

namespace {

TEST(OffloadChoice, RequestDefaultsToHalfTheContextEach) {
  llmc::RequestShape r;
  ASSERT_EQ(llmc::parseRequest("", 64, r), "");
  EXPECT_EQ(r.promptTokens, 32);
  EXPECT_EQ(r.newTokens, 32);
  ASSERT_EQ(llmc::parseRequest("", 7, r), "");
  EXPECT_EQ(r.promptTokens, 4);
  EXPECT_EQ(r.newTokens, 3);
}

TEST(OffloadChoice, RequestGivenOneWayFillsTheRestOfTheContext) {
  llmc::RequestShape r;
  ASSERT_EQ(llmc::parseRequest("prompt=60", 64, r), "");
  EXPECT_EQ(r.promptTokens, 60);
  EXPECT_EQ(r.newTokens, 4);
  ASSERT_EQ(llmc::parseRequest("new=10", 64, r), "");
  EXPECT_EQ(r.promptTokens, 54);
  EXPECT_EQ(r.newTokens, 10);
  ASSERT_EQ(llmc::parseRequest("prompt=2, new=3", 64, r), "");
  EXPECT_EQ(r.promptTokens, 2);
  EXPECT_EQ(r.newTokens, 3);
}

TEST(OffloadChoice, RequestErrorsNameTheKey) {
  llmc::RequestShape r;
  EXPECT_EQ(llmc::parseRequest("prompt=40,new=40", 64, r),
            "--request: prompt (40) + new (40) exceeds max-context (64)");
  EXPECT_EQ(llmc::parseRequest("tokens=4", 64, r),
            "--request: unknown key 'tokens' (expected prompt=N,new=N)");
  EXPECT_EQ(llmc::parseRequest("new=-1", 64, r),
            "--request: new must be a non-negative integer, got '-1'");
  EXPECT_EQ(llmc::parseRequest("prompt=0,new=0", 64, r),
            "--request: a request of no tokens costs nothing either way");
}

TEST(OffloadChoice, StreamedCopiesHideBehindTheDeviceOnlyWhenOverlapped) {
  llmc::StepPrice p;
  p.device = 3e-3;
  p.host = 1e-3;
  p.link = 5e-3;
  EXPECT_DOUBLE_EQ(p.seconds(), 9e-3);
  p.overlapped = true;
  EXPECT_DOUBLE_EQ(p.seconds(), 6e-3); // max(device, link) + host
}

TEST(OffloadChoice, RequestCountsWholePrefillChunksAndOneDecodePerToken) {
  llmc::StepPrice prefill, decode;
  prefill.device = 10e-3;
  decode.device = 1e-3;
  llmc::RequestShape r{/*promptTokens=*/300, /*newTokens=*/7};
  // ceil(300 / 256) = 2 prefills, 7 decodes.
  EXPECT_DOUBLE_EQ(llmc::requestSeconds(prefill, decode, 256, r), 2 * 10e-3 + 7 * 1e-3);
}

// A step with one device kernel, one host kernel and a copy each way:
// the copies go over the host link, the host kernel at the host's rates
// (memory bound here: 64 KiB read and written), the device kernel as
// costProgram prices it.
constexpr const char *kStep = R"mlir(
module {
  exec.program @decode kind "decode" {
    %0 = exec.buffer offset 0 : memref<4096xf32>
    %1 = exec.buffer offset 16384 : memref<4096xf32>
    %2 = exec.buffer offset 32768 {exec.host_space} : memref<4096xf32>
    %3 = exec.buffer offset 49152 {exec.host_space} : memref<4096xf32>
    exec.kernel "mul"(%0, %0 : memref<4096xf32>, memref<4096xf32>) -> (%1 : memref<4096xf32>)
    exec.kernel "copy_to_host"(%1 : memref<4096xf32>) -> (%2 : memref<4096xf32>)
    exec.kernel "mul"(%2, %2 : memref<4096xf32>, memref<4096xf32>) -> (%3 : memref<4096xf32>) {exec.on_host}
    exec.kernel "copy_to_device"(%3 : memref<4096xf32>) -> (%1 : memref<4096xf32>)
  }
}
)mlir";

TEST(OffloadChoice, StepPricesHostKernelsAndCopiesApartFromTheDevice) {
  MLIRContext context;
  llmc::prepareContext(context);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kStep, &context);
  ASSERT_TRUE(module);
  auto program = *module->getOps<llmc::exec::ProgramOp>().begin();
  llmc::plan::Cluster device = llmc::plan::targetDevice("cuda");
  llmc::StepPrice p = llmc::priceStep(program, device, {}, 0.5);
  EXPECT_GT(p.device, 0);
  EXPECT_DOUBLE_EQ(p.link, 2 * 16384 / device.hostLinkBandwidth);
  // One device on the node's CPUs: its whole memory bandwidth; the kernel
  // reads two 16 KiB operands and writes one.
  EXPECT_DOUBLE_EQ(p.host, 3 * 16384 / device.hostMemoryBandwidth + device.kernelOverhead);
  // Two tp ranks share the host.
  llmc::StepPrice shared =
      llmc::priceStep(program, device, llmc::plan::MeshShape::parse("tp=2"), 0.5);
  EXPECT_DOUBLE_EQ(shared.host, 2 * 3 * 16384 / device.hostMemoryBandwidth + device.kernelOverhead);
}

// A host layer's tp all-reduce: priced on the host (a ring all-reduce
// over the ranks' share of host memory, at the node's message latency),
// not among the device's collectives.
constexpr const char *kHostCollective = R"mlir(
module attributes {exec.mesh = {tp = 2 : i64}, exec.mesh_axes = ["tp"]} {
  exec.program @decode kind "decode" {
    %0 = exec.buffer offset 0 {exec.host_space} : memref<4096xf32>
    %1 = exec.buffer offset 16384 {exec.host_space} : memref<4096xf32>
    exec.all_reduce %0 -> %1 group ["tp"] {exec.on_host} : memref<4096xf32> -> memref<4096xf32>
  }
}
)mlir";

TEST(OffloadChoice, StepPricesHostCollectivesOnTheHost) {
  MLIRContext context;
  llmc::prepareContext(context);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kHostCollective, &context);
  ASSERT_TRUE(module);
  auto program = *module->getOps<llmc::exec::ProgramOp>().begin();
  llmc::plan::Cluster device = llmc::plan::targetDevice("cuda");
  llmc::StepPrice p = llmc::priceStep(program, device, llmc::plan::MeshShape::parse("tp=2"), 0.5);
  EXPECT_DOUBLE_EQ(p.device, 0);
  EXPECT_DOUBLE_EQ(p.link, 0);
  EXPECT_DOUBLE_EQ(p.host, llmc::plan::collectiveSeconds(llmc::plan::Collective::AllReduce, 2,
                                                         16384, device.intraLatency,
                                                         device.hostMemoryBandwidth / 2));
  EXPECT_GT(p.host, 0);
}

} // namespace
