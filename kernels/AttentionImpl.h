//===- AttentionImpl.h - which implementation runs CUDA attention -*- C++ -*-===//
//
// `llmc-run --attention auto|cudnn|tensor-cores|cuda-cores` picks what runs
// the attention kernels of a cuda artifact (docs/cuda.md): cuDNN's fused
// flash attention (kernels/cuda/attention_cudnn.cpp), llmc's tensor-core
// kernels (kernels/cuda/AttentionMma.cuh) or its CUDA-core kernels
// (kernels/cuda/attention.cu). Plain C++ so that the runtime, llmc-run and
// the kernels share one list of names, CUDA or not.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_ATTENTIONIMPL_H
#define LLMC_KERNELS_ATTENTIONIMPL_H

#include <string>

namespace llmc {

/// What an attention op asks for. `Auto` (the default) takes cuDNN where it
/// is loaded and accepts the op, else the CUDA-core kernels; `Cudnn` is the
/// same preference stated; `TensorCores` and `CudaCores` pin llmc's kernels.
enum class AttentionImpl { Auto, Cudnn, TensorCores, CudaCores };

/// The flag's spelling of `impl`.
inline const char *attentionImplName(AttentionImpl impl) {
  switch (impl) {
  case AttentionImpl::Auto: return "auto";
  case AttentionImpl::Cudnn: return "cudnn";
  case AttentionImpl::TensorCores: return "tensor-cores";
  case AttentionImpl::CudaCores: return "cuda-cores";
  }
  return "auto";
}

/// Parses the flag's value; false for anything else.
inline bool parseAttentionImpl(const std::string &name, AttentionImpl *out) {
  for (AttentionImpl impl : {AttentionImpl::Auto, AttentionImpl::Cudnn,
                             AttentionImpl::TensorCores, AttentionImpl::CudaCores})
    if (name == attentionImplName(impl)) {
      *out = impl;
      return true;
    }
  return false;
}

/// The accepted values, for messages: "auto, cudnn, tensor-cores or cuda-cores".
inline const char *attentionImplChoices() { return "auto, cudnn, tensor-cores or cuda-cores"; }

} // namespace llmc

#endif
