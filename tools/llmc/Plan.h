//===- Plan.h - `llmc plan`: rank parallel layouts for a cluster -*- C++ -*-===//
//
//   llmc plan --model gpt2 --preset 1.5B --cluster dgx-h100:64 --global-batch 512
//       --seq 1024 [--target cuda|cpu] [--calibration FILE] [--top 10]
//       [--explain] [--emit-flags N]
//
// Prints the layouts the target compiles that fit, fastest first, each
// priced by the device's efficiency model (compiler/plan/Planner.h,
// Efficiency.h).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_TOOLS_LLMC_PLAN_H
#define LLMC_TOOLS_LLMC_PLAN_H

#include "llvm/Support/CommandLine.h"

namespace llmc {

extern llvm::cl::SubCommand planCommand;
llvm::cl::OptionCategory &planCategory();
int runPlan();

} // namespace llmc

#endif
