//===- AttentionOnCudnn.h - attention kernels that run on cuDNN -*- C++ -*-===//
//
// The six attention kernel names bound to cuDNN's fused flash attention
// (CudnnSdpa.h) instead of llmc's kernels, with the same contract and
// results within the bf16/f16 tolerance. attention_rope(_grad) has no cuDNN
// node of its own: q and k are rotated by llmc's rope kernel into the
// op's workspace (rounded as rope stores them), cuDNN attends over the
// rotated copies, and the backward rotates dq and dk back in place with the
// inverse rope — the unfused rope, attention, rope ops in turn.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CUDA_ATTENTIONONCUDNN_H
#define LLMC_KERNELS_CUDA_ATTENTIONONCUDNN_H

#include "common/AttentionWorkspace.h"
#include "kernels/Kernel.h"
#include "kernels/contracts/Attention.h"

#include <memory>
#include <string>

namespace llmc::cuda {

/// The kernel for a binding the contract accepted (`backward`: one of the
/// _grad names) on cuDNN; null with `why` (one line) when cuDNN cannot take
/// it: dtype, head dim, segment ids (contracts::cudnnAttentionRefusal), the
/// library, the plan, or a workspace smaller than it needs.
std::unique_ptr<Kernel> bindAttentionOnCudnn(const KernelArgs &args,
                                             const contracts::AttentionBinding &b, bool backward,
                                             std::string &why);

/// The shape contracts::cudnnAttentionRefusal and the workspace formula
/// judge, for a binding.
contracts::CudnnAttentionShape cudnnShapeOf(const contracts::AttentionBinding &b, bool backward);

} // namespace llmc::cuda

#endif
