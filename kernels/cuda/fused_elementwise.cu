//===- fused_elementwise.cu - the generated elementwise loop on the GPU ---===//
//
// One generic kernel for every common/ElementwiseProgram.h program: the
// program travels as a kernel parameter (constant memory, the same for
// every thread, so the dispatch on each opcode never diverges), and each
// thread of a grid-stride loop runs it over one element, reading the
// inputs and writing the results once. Each opcode calls the formula of
// the unfused kernel (Gelu.cuh, dropout.cu's mask) and rounds to its dtype
// where that kernel stored, so a fused chain is the unfused kernels' result
// up to their own CPU/GPU differences (expf against the CPU's expFast).
// For a piece of a larger tensor, dropout's mask index is the element's
// global index, from the row starts uploaded at bind time.
//
//===----------------------------------------------------------------------===//

#include "kernels/DropoutHash.h"
#include "common/ElementwiseProgram.h"
#include "kernels/contracts/FusedElementwise.h"
#include "kernels/cuda/BindScratch.h"
#include "kernels/cuda/Common.cuh"
#include "kernels/cuda/Gelu.cuh"

namespace llmc::cuda {
namespace {

/// One decoded instruction, with dropout's threshold and scale (or the
/// constant) computed at bind time.
struct Instr {
  int32_t op, dtype, a, b, c;
  float value;               ///< Const: the value; Dropout: the keep scale
  uint64_t seed, threshold;  ///< Dropout
};

/// The whole program as one kernel parameter (under the 4 KiB limit).
struct Program {
  Instr instrs[ew::kMaxInstructions];
  const void *inputs[ew::kMaxInputs];
  int64_t inputNumel[ew::kMaxInputs];
  int32_t inputDtype[ew::kMaxInputs];
  void *outputs[ew::kMaxResults];
  int32_t outputDtype[ew::kMaxResults];
  int32_t yields[ew::kMaxResults];
  int32_t count, numOutputs;
  /// Dropout's global index of each output row's first element (null: the
  /// outputs are the whole tensor), and the elements per row.
  const uint64_t *rowStarts;
  int64_t width;
};

__device__ __forceinline__ float roundTo(int32_t dtype, float v) {
  if (dtype == 1) return __bfloat162float(__float2bfloat16_rn(v));
  if (dtype == 2) return __half2float(__float2half_rn(v));
  return v;
}

__device__ __forceinline__ float loadAny(const void *p, int32_t dtype, int64_t i) {
  if (dtype == 1) return load(static_cast<const bf16 *>(p), i);
  if (dtype == 2) return load(static_cast<const f16 *>(p), i);
  return load(static_cast<const float *>(p), i);
}

__device__ __forceinline__ void storeAny(void *p, int32_t dtype, int64_t i, float v) {
  if (dtype == 1)
    store(static_cast<bf16 *>(p), i, v);
  else if (dtype == 2)
    store(static_cast<f16 *>(p), i, v);
  else
    store(static_cast<float *>(p), i, v);
}

/// `deviceStep`, when set, overrides `step` (a kernel replayed from a CUDA
/// graph keeps its captured arguments), as in dropout.cu.
__global__ void fusedElementwiseKernel(const __grid_constant__ Program p, int64_t n,
                                       uint64_t step, const int64_t *deviceStep) {
  if (deviceStep) step = static_cast<uint64_t>(*deviceStep);
  float r[ew::kMaxInstructions];
  LLMC_GRID_STRIDE(e, n) {
    for (int32_t i = 0; i < p.count; ++i) {
      const Instr &in = p.instrs[i];
      float v = 0.0f;
      switch (static_cast<ew::Opcode>(in.op)) {
      case ew::Opcode::Load: {
        int64_t inner = p.inputNumel[in.a]; // a full input needs no division
        v = loadAny(p.inputs[in.a], p.inputDtype[in.a], inner == n ? e : e % inner);
        break;
      }
      case ew::Opcode::Const: v = in.value; break;
      case ew::Opcode::Cast: v = r[in.a]; break;
      case ew::Opcode::Add: v = r[in.a] + r[in.b]; break;
      case ew::Opcode::Sub: v = r[in.a] - r[in.b]; break;
      case ew::Opcode::Mul: v = r[in.a] * r[in.b]; break;
      case ew::Opcode::Div: v = r[in.a] / r[in.b]; break;
      case ew::Opcode::Neg: v = -r[in.a]; break;
      case ew::Opcode::Exp: v = expf(r[in.a]); break;
      case ew::Opcode::Tanh: v = tanhf(r[in.a]); break;
      case ew::Opcode::Sigmoid: v = sigmoid(r[in.a]); break;
      case ew::Opcode::Gelu: v = geluTanh(r[in.a]); break;
      case ew::Opcode::GeluGrad: v = geluTanhGrad(r[in.a], r[in.b]); break;
      case ew::Opcode::Silu: v = siluOf(r[in.a]); break;
      case ew::Opcode::SiluGrad: v = siluGradOf(r[in.a], r[in.b]); break;
      case ew::Opcode::Swiglu: v = swigluOf(r[in.a], r[in.b]); break;
      case ew::Opcode::SwigluGradGate: v = swigluGradGate(r[in.a], r[in.b], r[in.c]); break;
      case ew::Opcode::SwigluGradUp: v = swigluGradUp(r[in.a], r[in.b]); break;
      case ew::Opcode::Dropout: {
        uint64_t index = p.rowStarts ? p.rowStarts[e / p.width] + static_cast<uint64_t>(e % p.width)
                                     : static_cast<uint64_t>(e);
        bool keep = dropoutHash(in.seed, step, index) >= in.threshold;
        v = keep ? r[in.a] * in.value : 0.0f;
        break;
      }
      case ew::Opcode::Select: v = r[in.a] != 0.0f ? r[in.b] : r[in.c]; break;
      case ew::Opcode::Sqrt: v = sqrtf(r[in.a]); break;
      }
      r[i] = in.op == static_cast<int32_t>(ew::Opcode::Load) ? v : roundTo(in.dtype, v);
    }
    for (int32_t k = 0; k < p.numOutputs; ++k)
      storeAny(p.outputs[k], p.outputDtype[k], e, r[p.yields[k]]);
  }
}

class FusedElementwiseKernel final : public Kernel {
public:
  FusedElementwiseKernel(const KernelArgs &args, const contracts::FusedElementwiseBinding &b)
      : n_(b.numel) {
    program_.count = static_cast<int32_t>(b.program.size() / ew::kFields);
    for (int32_t i = 0; i < program_.count; ++i) {
      ew::Instruction in = ew::instructionAt(b.program.data(), i);
      Instr &d = program_.instrs[i];
      d = Instr{static_cast<int32_t>(in.op), static_cast<int32_t>(in.dtype),
                static_cast<int32_t>(in.a), static_cast<int32_t>(in.b),
                static_cast<int32_t>(in.c), 0.0f, 0, 0};
      if (in.op == ew::Opcode::Const) d.value = static_cast<float>(ew::doubleOf(in.a));
      if (in.op == ew::Opcode::Dropout) {
        double rate = ew::doubleOf(in.c);
        d.b = d.c = 0;
        d.seed = static_cast<uint64_t>(in.b);
        d.threshold = dropoutThreshold(rate);
        d.value = static_cast<float>(1.0 / (1.0 - rate));
      }
    }
    for (size_t i = 0; i < args.inputs.size(); ++i) {
      program_.inputs[i] = args.inputs[i].data;
      program_.inputNumel[i] = b.inputNumel[i] ? b.inputNumel[i] : 1;
      program_.inputDtype[i] = static_cast<int32_t>(args.inputs[i].dtype);
    }
    program_.numOutputs = static_cast<int32_t>(args.outputs.size());
    for (size_t k = 0; k < args.outputs.size(); ++k) {
      program_.outputs[k] = args.outputs[k].data;
      program_.outputDtype[k] = static_cast<int32_t>(args.outputs[k].dtype);
      program_.yields[k] = static_cast<int32_t>(b.yields[k]);
    }
    const TensorView &out = args.outputs[0];
    program_.width = out.rank() && out.dim(-1) > 0 ? out.dim(-1) : 1;
    if (!b.rowStarts.empty()) {
      size_t bytes = b.rowStarts.size() * sizeof(uint64_t);
      rowStarts_ = BindScratch(bytes);
      copyToDevice(rowStarts_.as<void>(), b.rowStarts.data(), bytes);
      program_.rowStarts = rowStarts_.as<uint64_t>();
    }
  }

  void run(const StepContext &ctx) override {
    if (n_ == 0) return;
    fusedElementwiseKernel<<<gridFor(n_), kBlock, 0, streamOf(ctx)>>>(
        program_, n_, static_cast<uint64_t>(ctx.step), ctx.deviceStep);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  Program program_{};
  int64_t n_;
  BindScratch rowStarts_;
};

std::unique_ptr<Kernel> makeCudaFusedElementwise(const KernelArgs &args, std::string &error) {
  contracts::FusedElementwiseBinding b;
  if (!contracts::bindFusedElementwise(args, error, &b)) return nullptr;
  return std::make_unique<FusedElementwiseKernel>(args, b);
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "fused_elementwise", makeCudaFusedElementwise);

} // namespace llmc::cuda
