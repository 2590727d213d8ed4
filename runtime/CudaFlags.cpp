//===- CudaFlags.cpp - the flags that choose a GPU's kernels --------------===//

#include "runtime/CudaFlags.h"

namespace llmc {

void addCudaFlags(ArgParser &args, CudaOptions &options) {
  args.flag("--tf32", options.tf32);
  args.flag("--no-gemm-timing", options.gemmTiming, false);
  args.flag("--no-cuda-graphs", options.graphs, false);
  args.flag("--fp8-tensor-cores", options.fp8TensorCores);
  args.option(
      "--attention",
      [&options](const std::string &v) { return parseAttentionImpl(v, &options.attention); },
      attentionImplChoices());
  args.option(
      "--device-comm",
      [&options](const std::string &v) { return parseDeviceComm(v, &options.comm); },
      "auto, nccl or host");
  args.retired("--attention-tensor-cores",
               "--attention-tensor-cores is now --attention tensor-cores");
}

const char *const kCudaFlagsHelp =
    R"(  --tf32             cuda artifacts: fp32 matrix products on TF32 tensor cores
                     (faster; ~1e-3 relative error instead of fp32's)
  --attention I      cuda artifacts: what runs attention: auto (default: cuDNN's fused
                     flash attention where it is loaded and takes the op, else
                     cuda-cores), cudnn, tensor-cores (llmc's, bf16/f16 at head dim 64
                     or 128) or cuda-cores (llmc's); a start-up line says what each
                     attention op got (docs/cuda.md)
  --device-comm C    cuda artifacts: how ranks' collectives and transfers travel:
                     auto (default: NCCL, or the host transport through pinned
                     memory where ranks share a GPU, which NCCL refuses), nccl,
                     or host (docs/cuda.md)
  --no-gemm-timing   cuda artifacts: take cuBLASLt's heuristic algorithm for each
                     GEMM instead of timing its top candidates when the GEMM binds
                     (also LLMC_GEMM_TIMING=0)
  --no-cuda-graphs   cuda artifacts: launch every step's kernels one by one instead
                     of replaying the CUDA graph captured at the second step
                     (slower; tells a capture problem from a kernel's)
  --fp8-tensor-cores cuda artifacts: the experts' fp8 products on fp8 tensor cores
                     (sm_89+) instead of bf16 ones; not yet the default, as no GPU
                     has run it (also LLMC_CUDA_FP8_MMA=1; docs/fp8.md)
)";

} // namespace llmc
