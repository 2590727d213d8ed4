//===- LRSchedule.cpp - learning rate per step ----------------------------===//

#include "runtime/train/LRSchedule.h"

#include <algorithm>
#include <cmath>

namespace llmc {

double LRSchedule::at(int64_t step) const {
  if (warmupSteps > 0 && step <= warmupSteps)
    return maxLr * static_cast<double>(step) / static_cast<double>(warmupSteps);
  if (kind == "constant")
    return maxLr;
  double span = static_cast<double>(std::max<int64_t>(totalSteps - warmupSteps, 1));
  double p = std::clamp(static_cast<double>(step - warmupSteps) / span, 0.0, 1.0);
  if (kind == "linear")
    return maxLr + (minLr - maxLr) * p;
  return minLr + 0.5 * (maxLr - minLr) * (1.0 + std::cos(M_PI * p));
}

} // namespace llmc
