//===- AttentionChoice.h - which attention each op got, and why -*- C++ -*-===//
//
// `llmc-run --attention` states a preference (kernels/AttentionImpl.h); each
// attention op ends up on cuDNN, llmc's tensor-core kernels or its
// CUDA-core kernels depending on its dtype, head dim, masks, the cuDNN
// library and the workspace planned for it. The factories record what each
// op got here, and the runtime prints the summary once the programs are
// bound, so the choice is never silent. Plain C++.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CUDA_ATTENTIONCHOICE_H
#define LLMC_KERNELS_CUDA_ATTENTIONCHOICE_H

#include <string>
#include <vector>

namespace llmc::cuda {

/// Records that a kernel named `op` (attention, attention_grad, ...) was
/// bound to `impl` (cudnn, tensor-cores, cuda-cores); `why` says why it is
/// not on the preferred implementation ("" when it is). Thread-safe.
void noteAttention(const std::string &op, const std::string &impl, const std::string &why);

/// The choices recorded since the last call, one line per implementation
/// and reason, in the order first seen: "attention: cudnn for 12
/// attention_packed, 12 attention_packed_grad" or "attention: cuda-cores
/// for 2 attention (f32 ...)". Clears the record.
std::vector<std::string> takeAttentionNotes();

} // namespace llmc::cuda

#endif
