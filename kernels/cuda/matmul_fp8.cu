//===- matmul_fp8.cu - fp8 codes of a tensor, and their cuBLASLt product ---===//
//
// qat_quantize_fp8 and qat_matmul_fp8 with the semantics of
// kernels/cpu/matmul_fp8.cpp.
//
// Quantizing is a map: every thread derives its slice's scale amax / fmax
// from the range (the same fp32 division as the CPU) and encodes x / scale with
// common/Fp8.h's encode, the function the CPU calls, so the codes are the
// CPU's bit for bit.
//
// The product is one cuBLASLt fp8 GEMM (LtGemm with fp8 operands): E4M3 or
// E5M2 codes, the two scales passed by pointer (they are data, computed on
// the device each step), fp32 accumulation (or cuBLASLt's fast
// accumulation where the product is marked fast_accumulation: the
// forward's, by default), c in bf16, f16 or f32. fp8
// tensor cores exist from sm_89 (Ada, Hopper); an older GPU is refused
// when the kernel binds, naming the device. cuBLASLt takes fp8 operands
// only K-major (a [M, K], b [N, K]); an operand stored the other way is
// first transposed into the kernel's workspace, which the memory plan
// sizes (LowerToExec: kernelWorkspaceBytes) and `llmc inspect` shows.
//
//===----------------------------------------------------------------------===//

#include "common/Fp8.h"
#include "kernels/contracts/MatmulFp8.h"
#include "kernels/cuda/Common.cuh"
#include "kernels/cuda/GroupOffsets.cuh"
#include "kernels/cuda/LtGemm.h"

#include <climits>

namespace llmc::cuda {
namespace {

//===----------------------------------------------------------------------===//
// qat_quantize_fp8
//===----------------------------------------------------------------------===//

/// The scale of a group with range [lo, hi] = [−min, max] (NaN for a NaN
/// range), and whether its values are encoded (amax > 0).
struct GroupScale {
  float scale;
  bool live;
};
__device__ __forceinline__ GroupScale groupScale(const float *range, fp8::Kind kind) {
  const float lo = range[0], hi = range[1];
  // std::max as the CPU takes it (the first of equal values: −0 of an
  // all-zero tensor's range, where fmaxf may give +0); NaN apart.
  const float amax = lo < hi ? hi : lo;
  const bool nan = lo != lo || hi != hi;
  return {nan ? lo + hi : amax / fp8::maxOf(kind), amax > 0.0f && !nan};
}

/// Element i of the tensor belongs to slice i / slice; the scale of each
/// slice is written by the thread that quantizes the slice's first element.
template <typename T>
__global__ void quantizeFp8(const T *x, const float *range, uint8_t *codes, float *scaleOut,
                            int64_t n, int64_t slice, fp8::Kind kind) {
  LLMC_GRID_STRIDE(i, n) {
    const int64_t g = i / slice;
    const GroupScale s = groupScale(range + 2 * g, kind);
    if (i == g * slice)
      scaleOut[g] = s.scale;
    codes[i] = s.live ? fp8::encode(load(x, i) / s.scale, kind) : 0;
  }
}

/// x [rows, rowSize] in row groups: element i of row r takes the scale of
/// r's group, code 0 past offsets[groups]; the first block writes the
/// groups' scales. Invalid offsets: codes 0, scales NaN.
template <typename T>
__global__ void quantizeFp8RowGroups(const T *x, const float *range, Offsets offsets,
                                     int64_t groups, int64_t rows, int64_t rowSize, uint8_t *codes,
                                     float *scaleOut, fp8::Kind kind) {
  const bool valid = validGroupOffsets(offsets, groups, rows);
  if (blockIdx.x == 0)
    for (int64_t g = threadIdx.x; g < groups; g += blockDim.x)
      scaleOut[g] = valid ? groupScale(range + 2 * g, kind).scale : __int_as_float(0x7fc00000);
  const int64_t used = valid ? offsets[groups] * rowSize : 0;
  LLMC_GRID_STRIDE(i, rows * rowSize) {
    uint8_t code = 0;
    if (i < used) {
      const GroupScale s = groupScale(range + 2 * groupOf(offsets, groups, i / rowSize), kind);
      code = s.live ? fp8::encode(load(x, i) / s.scale, kind) : 0;
    }
    codes[i] = code;
  }
}

template <typename T> class QuantizeFp8Kernel final : public Kernel {
public:
  QuantizeFp8Kernel(const KernelArgs &args, const contracts::QuantizeFp8Binding &b)
      : x_(args.inputs[0].as<T>()), range_(args.inputs[1].as<float>()),
        codes_(args.outputs[0].as<uint8_t>()), scale_(args.outputs[1].as<float>()), n_(b.numel),
        groups_(b.groups), rows_(b.rowGroups ? b.rows : 0),
        offsets_{b.rowGroups ? args.inputs[2].data : nullptr,
                 b.rowGroups && args.inputs[2].dtype == DType::I64},
        kind_(b.kind) {}

  void run(const StepContext &ctx) override {
    if (rows_ > 0) {
      quantizeFp8RowGroups<T><<<gridFor(n_), kBlock, 0, streamOf(ctx)>>>(
          x_, range_, offsets_, groups_, rows_, n_ / rows_, codes_, scale_, kind_);
    } else {
      if (n_ == 0)
        return;
      quantizeFp8<T><<<gridFor(n_), kBlock, 0, streamOf(ctx)>>>(x_, range_, codes_, scale_, n_,
                                                                n_ / groups_, kind_);
    }
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  const T *x_;
  const float *range_;
  uint8_t *codes_;
  float *scale_;
  int64_t n_, groups_;
  int64_t rows_; ///< M of x [M, K] in row groups; 0 otherwise
  Offsets offsets_;
  fp8::Kind kind_;
};

std::unique_ptr<Kernel> makeCudaQuantizeFp8(const KernelArgs &args, std::string &error) {
  contracts::QuantizeFp8Binding b;
  if (!contracts::bindQuantizeFp8(args, error, &b))
    return nullptr;
  return makeFloatKernel<QuantizeFp8Kernel>(b.dtype, args, b);
}

//===----------------------------------------------------------------------===//
// qat_matmul_fp8
//===----------------------------------------------------------------------===//

/// out [cols, rows] = in [rows, cols]ᵀ, bytes, through 32×32 shared tiles.
__global__ void transposeBytes(const uint8_t *in, uint8_t *out, int64_t rows, int64_t cols) {
  __shared__ uint8_t tile[32][33];
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * 32,
                c0 = static_cast<int64_t>(blockIdx.x) * 32;
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    int64_t r = r0 + i, c = c0 + threadIdx.x;
    if (r < rows && c < cols)
      tile[i][threadIdx.x] = in[r * cols + c];
  }
  __syncthreads();
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    int64_t c = c0 + i, r = r0 + threadIdx.x;
    if (r < rows && c < cols)
      out[c * rows + r] = tile[threadIdx.x][i];
  }
}

/// A transpose of one operand into the workspace before the GEMM.
struct Transpose {
  const uint8_t *from = nullptr;
  uint8_t *to = nullptr;
  int64_t rows = 0, cols = 0; ///< as stored in `from`

  void run(cudaStream_t stream) const {
    if (!from)
      return;
    dim3 grid(static_cast<unsigned>((cols + 31) / 32), static_cast<unsigned>((rows + 31) / 32));
    transposeBytes<<<grid, dim3(32, 8), 0, stream>>>(from, to, rows, cols);
    LLMC_CUDA_CHECK_LAUNCH();
  }
};

class MatmulFp8Kernel final : public Kernel {
public:
  MatmulFp8Kernel(Transpose a, Transpose b, std::unique_ptr<LtGemm> gemm)
      : a_(a), b_(b), gemm_(std::move(gemm)) {}

  void run(const StepContext &ctx) override {
    cudaStream_t stream = streamOf(ctx);
    a_.run(stream);
    b_.run(stream);
    gemm_->run(stream);
  }

private:
  Transpose a_, b_;
  std::unique_ptr<LtGemm> gemm_;
};

/// Empty c, or K = 0 (an empty sum): c = 0.
class ZeroKernel final : public Kernel {
public:
  ZeroKernel(void *c, size_t bytes) : c_(c), bytes_(bytes) {}
  void run(const StepContext &ctx) override {
    if (bytes_)
      LLMC_CUDA_CHECK(cudaMemsetAsync(c_, 0, bytes_, streamOf(ctx)));
  }

private:
  void *c_;
  size_t bytes_;
};

/// Empty when the current device has fp8 tensor cores (sm_89 or newer),
/// else why not, naming it.
std::string fp8Refusal() {
  int device = 0;
  cudaDeviceProp prop;
  LLMC_CUDA_CHECK(cudaGetDevice(&device));
  LLMC_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  if (prop.major * 10 + prop.minor >= 89)
    return "";
  return "fp8 GEMMs need fp8 tensor cores (sm_89 or newer: Ada, Hopper); GPU " +
         std::to_string(device) + " is " + prop.name + ", sm_" + std::to_string(prop.major) +
         std::to_string(prop.minor) + " (compile without --precision fp8, or with --qat at " +
         "fp32 compute on a CPU)";
}

/// 256-byte aligned size, as LowerToExec places the transposed operands.
int64_t alignedBytes(int64_t n) { return (n + 255) / 256 * 256; }

std::unique_ptr<Kernel> makeCudaMatmulFp8(const KernelArgs &args, std::string &error) {
  contracts::MatmulFp8Binding b;
  if (!contracts::bindMatmulFp8(args, error, &b))
    return nullptr;
  Validator v("qat_matmul_fp8", args, error);
  const contracts::MatmulBinding &dims = b.dims;
  const TensorView &a = v.in(0), &bv = v.in(2), &c = v.out(0);
  if (c.numel() == 0)
    return std::make_unique<ZeroKernel>(c.data, 0);
  if (dims.k == 0)
    return std::make_unique<ZeroKernel>(c.data, c.bytes());
  if (std::string why = fp8Refusal(); !why.empty())
    return v.reject(why);
  if (!dims.sharedB || (dims.transposeA && dims.batch > 1))
    return v.reject("fp8 GEMMs on CUDA take a shared 2-D b and a 2-D a when a is transposed, "
                    "got a " +
                    a.describe() + ", b " + bv.describe());
  const int64_t m = dims.transposeA ? dims.m : dims.batch * dims.m;
  // K-major copies in the workspace where an operand is stored the other way.
  const int64_t need = (dims.transposeA ? alignedBytes(a.numel()) : 0) +
                       (dims.transposeB ? 0 : alignedBytes(bv.numel()));
  uint8_t *workspace = args.outputs.size() > 1 ? args.outputs[1].as<uint8_t>() : nullptr;
  if (need > 0 && (!workspace || args.outputs[1].bytes() < static_cast<size_t>(need)))
    return v.reject("needs a workspace of " + std::to_string(need) +
                    " bytes for its K-major operand copies (the CUDA target plans it)");
  Transpose ta, tb;
  const uint8_t *aKMajor = a.as<uint8_t>(), *bKMajor = bv.as<uint8_t>();
  if (dims.transposeA) { // a stored [K, M]
    ta = {a.as<uint8_t>(), workspace, dims.k, m};
    aKMajor = ta.to;
  }
  if (!dims.transposeB) { // b stored [K, N]
    tb = {bv.as<uint8_t>(), workspace + (dims.transposeA ? alignedBytes(a.numel()) : 0), dims.k,
          dims.n};
    bKMajor = tb.to;
  }
  GemmDesc d;
  d.dtype = dims.dtype;
  d.m = m, d.n = dims.n, d.k = dims.k;
  d.transposeA = false, d.transposeB = true;
  d.fp8 = true, d.fp8A = b.a, d.fp8B = b.b;
  d.fp8FastAccumulation = b.fastAccumulation;
  d.scaleA = v.in(1).as<float>(), d.scaleB = v.in(3).as<float>();
  d.a = aKMajor, d.b = bKMajor, d.c = c.data;
  std::string gemmError;
  std::unique_ptr<LtGemm> gemm = LtGemm::create(d, gemmError);
  if (!gemm)
    return v.reject(gemmError);
  return std::make_unique<MatmulFp8Kernel>(ta, tb, std::move(gemm));
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "qat_quantize_fp8", makeCudaQuantizeFp8);
LLMC_REGISTER_KERNEL(CUDA, "qat_matmul_fp8", makeCudaMatmulFp8);

} // namespace llmc::cuda
