//===- OffloadCost.cpp - the price of ZeRO-Offload's copies and update ----===//

#include "compiler/plan/OffloadCost.h"

#include <algorithm>

namespace llmc::plan {

OffloadTraffic OffloadTraffic::shard(int64_t zero, int64_t dp) const {
  if (zero < 1 || dp <= 1)
    return *this;
  double n = static_cast<double>(dp);
  return {downBytes / n,    upBytes / n,         updateBytes / n,    stateBytes / n,
          stagingBytes / n, activationCopyBytes, activationHostBytes};
}

double offloadSeconds(const OffloadTraffic &t, const Cluster &c) {
  if (t.downBytes + t.upBytes + t.updateBytes + t.activationCopyBytes == 0)
    return 0;
  double sharing = static_cast<double>(std::max<int64_t>(1, std::min(c.nodeSize, c.devices)));
  if (t.updateBytes == 0)
    return (t.downBytes + t.upBytes + t.activationCopyBytes) / c.hostLinkBandwidth;
  return (t.downBytes + t.upBytes + t.activationCopyBytes) / c.hostLinkBandwidth +
         t.updateBytes / (c.hostMemoryBandwidth / sharing);
}

} // namespace llmc::plan
