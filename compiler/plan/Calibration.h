//===- Calibration.h - a device's measured rates, from a file -*- C++ -*-===//
//
// `llmc-bench-calibrate` (bench/calibrate_gpu.cpp, run by scripts/gpu-check.sh
// as the bench-calibrate step) times cuBLASLt GEMMs, a device-to-device
// copy and llmc's attention kernels on the GPU it runs on and writes what
// it measured as JSON; `llmc plan --calibration FILE` reads it in place of
// the preset's datasheet device:
//
//   {
//     "kind": "llmc-gpu-calibration", "schema": 1,
//     "device": "NVIDIA H200", "date": "2026-12-01",
//     "sms": 132,                          // required
//     "peak_tflops": 989.4,                // dense bf16; optional
//     "memory_bytes": 150754820096,        // optional
//     "bandwidth_gbs": 4310.5,             // a large copy, read + write; required
//     "kernel_overhead_us": 2.4,           // optional
//     "gemm": {"large_tflops": 790.0,      // required: a full wave's rate
//              "tiles": [[128, 256], [256, 128], [128, 128]],   // optional
//              "shapes": [...]},           // the other shapes timed (reported only)
//     "attention": [{"head_dim": 128, "seq": 2048, "tflops": 387.4}, ...]  // ≥ 1
//   }
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMPILER_PLAN_CALIBRATION_H
#define LLMC_COMPILER_PLAN_CALIBRATION_H

#include "compiler/plan/Cluster.h"

#include <string>

namespace llmc::plan {

/// Replaces `cluster`'s device (its SMs, rates, bandwidth, and the peak,
/// memory and kernel cost where the file gives them) with the calibration
/// in `text`, read from `path` (named in errors). False with `error` set,
/// naming the file and the field, when the text is not a calibration.
bool applyCalibration(const std::string &text, const std::string &path, Cluster &cluster,
                      std::string &error);

/// Reads the file at `path` and applies it (as above).
bool loadCalibration(const std::string &path, Cluster &cluster, std::string &error);

} // namespace llmc::plan

#endif
