//===- LRSchedule.h - learning rate per step --------------------*- C++ -*-===//
//
// For 1-based step t: warmup lr = maxLr·t/warmup for t ≤ warmup; then with
// progress p = (t − warmup)/(total − warmup) clamped to [0, 1]:
//   cosine:   minLr + ½(maxLr − minLr)(1 + cos πp)
//   linear:   maxLr + (minLr − maxLr)·p
//   constant: maxLr
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_TRAIN_LRSCHEDULE_H
#define LLMC_RUNTIME_TRAIN_LRSCHEDULE_H

#include <cstdint>
#include <string>

namespace llmc {

struct LRSchedule {
  double maxLr = 1e-3, minLr = 0.0;
  int64_t warmupSteps = 0, totalSteps = 1;
  std::string kind = "cosine";
  double at(int64_t step) const;
};

} // namespace llmc

#endif
