//===- Retention.h - which checkpoints a run keeps --------------*- C++ -*-===//
//
// `--ckpt-every 1` writes a checkpoint per step; a long run must not fill
// the disk. After `latest` names a new checkpoint, the older ones outside
// the policy are deleted. Deleting never touches the one `latest` names,
// and is safe to interrupt at any point: a checkpoint is first renamed out
// of the step_* namespace (atomically), then removed, so a half-deleted
// directory is never taken for a checkpoint, and the next pruning finishes
// the job.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_CHECKPOINT_RETENTION_H
#define LLMC_RUNTIME_CHECKPOINT_RETENTION_H

#include <cstdint>
#include <string>
#include <vector>

namespace llmc {

struct RetentionPolicy {
  int64_t keepLast = 0;  ///< the newest K checkpoints (0: keep every one)
  int64_t keepEvery = 0; ///< also every checkpoint whose step is a multiple of M (0: none)
};

/// The step directories under `dir` (step_NNNNNNNN), sorted by step.
std::vector<int64_t> checkpointSteps(const std::string &dir);

/// Deletes the checkpoints under `dir` that `policy` does not keep, never
/// the one `latest` names; returns the steps deleted. Also removes what an
/// interrupted deletion left, the temporary of an interrupted write of
/// `latest`, and checkpoints newer than `latest` (never published: a run
/// stopped while writing them).
std::vector<int64_t> pruneCheckpoints(const std::string &dir, const RetentionPolicy &policy);

} // namespace llmc

#endif
