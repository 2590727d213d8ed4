//===- Trainer.h - the training loop of llmc-run ----------------*- C++ -*-===//
#ifndef LLMC_RUNTIME_TRAIN_TRAINER_H
#define LLMC_RUNTIME_TRAIN_TRAINER_H

#include "kernels/AttentionImpl.h"
#include "runtime/ExecutionDevice.h"
#include "runtime/checkpoint/Retention.h"
#include <cstdint>
#include <string>
#include <vector>

namespace llmc {

struct TrainOptions {
  std::string artifact;
  /// "bundled", a file (.bin token shard or text), a directory of .bin
  /// shards or a glob pattern (docs/data.md).
  std::string data = "bundled";
  std::string valData;           ///< same forms; empty: held out of `data`
  /// Hold out the last N shards of `data` for validation; -1: one shard
  /// when `data` has several, else the last 10% of its tokens.
  int64_t valShards = -1;
  int64_t steps = -1;            ///< run length (and LR schedule); -1: the artifact's
  int64_t stopAt = -1;           ///< stop (and checkpoint) after this step; -1: at `steps`
  double lr = -1, minLr = -1;    ///< -1: the artifact's defaults
  int64_t warmup = -1;
  std::string schedule;          ///< empty: the artifact's default
  int64_t seed = -1;             ///< -1: the artifact's default
  std::string ckptDir;
  int64_t ckptEvery = 0;         ///< 0: only at the end (and on Ctrl-C)
  RetentionPolicy retention;     ///< which older checkpoints to keep
  bool resume = false;
  std::string weights;           ///< start from this (plain or quantized) safetensors file
  int64_t calibrateBatches = 0;  ///< observer calibration batches before training
  std::string metrics;           ///< JSONL path
  int64_t logEvery = 1;
  int64_t evalEvery = 0;         ///< 0: only a final evaluation
  int64_t evalBatches = 8;
  int64_t sampleTokens = 0;      ///< generate this many tokens at the end
  std::string prompt = "Once upon a time";
  double temperature = 0.8;
  int64_t topK = 40;
  std::string dumpGrads;         ///< write params + gradients of batch 0 here
  std::string dumpLogits;        ///< write tokens + logits of batch 0 here
  double commTimeout = 300;      ///< seconds before a stuck collective aborts the job
  int debugCollectiveDelayMs = 0;///< random 0..N ms before each collective (testing)
  int debugStreamDelayMicros = 0;///< random 0..N µs before each instruction per stream (testing)
  bool profile = false;          ///< time every instruction; print a table at the end
  std::string trace;             ///< Chrome-trace JSON of every step's timeline
  bool quiet = false;
  CudaOptions cuda; ///< cuda artifacts: --tf32, --attention, ...
  /// Stop (with a checkpoint of the last good state) after this many
  /// consecutive steps skipped for a non-finite loss or gradient norm;
  /// 0: never stop.
  int64_t maxNonFiniteSteps = 3;
  /// Testing aid: at these steps rank `injectRank` makes its activations
  /// non-finite, so the step must be skipped on every rank.
  std::vector<int64_t> injectNonFinite;
  int injectRank = 0;
  /// fp16 dynamic loss scaling (artifacts compiled with --precision fp16);
  /// -1: the artifact's defaults.
  double lossScale = -1, lossScaleBackoff = -1, minLossScale = -1;
  int64_t lossScaleGrowthInterval = -1;
};

/// Runs `llmc-run`; returns the process exit code. Errors are printed as one
/// line on stderr.
int runTraining(const TrainOptions &options);

} // namespace llmc

#endif
