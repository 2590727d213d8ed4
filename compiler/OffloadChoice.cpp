//===- OffloadChoice.cpp - stream the offloaded layers, or run them on the host ===//

#include "compiler/OffloadChoice.h"

#include "compiler/plan/KernelCost.h"
#include "compiler/plan/ProgramCost.h"

#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <sstream>

using namespace mlir;

namespace llmc {

std::string parseRequest(const std::string &text, int64_t maxContext, RequestShape &request) {
  int64_t prompt = -1, fresh = -1;
  llvm::SmallVector<llvm::StringRef> items;
  llvm::StringRef(text).split(items, ',', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef item : items) {
    auto [key, value] = item.split('=');
    key = key.trim();
    int64_t *field = key == "prompt" ? &prompt : key == "new" ? &fresh : nullptr;
    if (!field)
      return "--request: unknown key '" + key.str() + "' (expected prompt=N,new=N)";
    if (value.trim().getAsInteger(10, *field) || *field < 0)
      return "--request: " + key.str() + " must be a non-negative integer, got '" + value.str() +
             "'";
  }
  // What is not given fills the context: half each, or the rest of it.
  if (prompt < 0 && fresh < 0)
    prompt = maxContext - maxContext / 2, fresh = maxContext / 2;
  request.promptTokens = prompt >= 0 ? prompt : std::max<int64_t>(0, maxContext - fresh);
  request.newTokens = fresh >= 0 ? fresh : std::max<int64_t>(0, maxContext - prompt);
  if (request.promptTokens + request.newTokens > maxContext)
    return "--request: prompt (" + std::to_string(request.promptTokens) + ") + new (" +
           std::to_string(request.newTokens) + ") exceeds max-context (" +
           std::to_string(maxContext) + ")";
  if (request.promptTokens + request.newTokens == 0)
    return "--request: a request of no tokens costs nothing either way";
  return "";
}

double StepPrice::seconds() const {
  return overlapped ? std::max(device, link) + host : device + host + link;
}

StepPrice priceStep(exec::ProgramOp program, const plan::Cluster &device,
                    const plan::MeshShape &mesh, double fp32MatmulScale) {
  StepPrice price;
  // costProgram leaves host kernels and copies out; they are priced below.
  plan::ProgramCost cost = plan::costProgram(program, device, mesh, fp32MatmulScale);
  for (auto &[phase, phaseCost] : cost.phases) price.device += phaseCost.seconds();
  // The node's CPUs and their memory are shared by its devices.
  double sharing = static_cast<double>(
      std::max<int64_t>(1, std::min(device.nodeSize, std::max<int64_t>(1, mesh.size("tp")))));
  double hostFlops = device.hostFlops / sharing;
  double hostBandwidth = device.hostMemoryBandwidth / sharing;
  // A collective of host layers (tensor parallelism's all-reduces) runs
  // through the host transport: the ring's bytes over host memory, at the
  // node's message latency.
  program.walk([&](Operation *op) {
    if (!exec::isCollective(op) || !op->hasAttr(exec::kOnHostAttr))
      return;
    int64_t ranks = 1;
    for (Attribute axis : op->getAttrOfType<ArrayAttr>("group"))
      ranks *= mesh.size(cast<StringAttr>(axis).getValue().str());
    price.host += plan::collectiveSeconds(plan::Collective::AllReduce, ranks,
                                          plan::bytesOf(op->getOperand(0).getType()),
                                          device.intraLatency, hostBandwidth);
  });
  program.walk([&](exec::KernelOp kernel) {
    llvm::StringRef callee = kernel.getCallee();
    if (callee == "copy_to_host" || callee == "copy_to_device") {
      price.link += plan::bytesOf(kernel->getOperand(0).getType()) / device.hostLinkBandwidth;
      return;
    }
    if (!kernel->hasAttr(exec::kOnHostAttr))
      return;
    double computeSeconds = hostFlops > 0 ? plan::kernelFlops(kernel) / hostFlops : 0;
    price.host +=
        std::max(computeSeconds, plan::kernelBytes(kernel) / hostBandwidth) + device.kernelOverhead;
  });
  return price;
}

double requestSeconds(const StepPrice &prefill, const StepPrice &decode, int64_t chunk,
                      const RequestShape &request) {
  int64_t prefills = (request.promptTokens + chunk - 1) / chunk;
  return static_cast<double>(prefills) * prefill.seconds() +
         static_cast<double>(request.newTokens) * decode.seconds();
}

} // namespace llmc
