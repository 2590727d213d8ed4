//===- shape.cu - transpose, slice, pad, concat, copy, reduce_sum (GPU) ---===//
//
// Data movement is type-blind, as on the CPU: elements move by size, so one
// instantiation per width (1, 2, 4, 8, 16 bytes) serves every dtype.
// transpose, slice, pad and concat are each reduced at bind time to "copy a
// strided box": unit dims are dropped, dims contiguous on both sides are
// merged (so [B,T,H,D] → [B,H,T,D] moves whole D rows), and when the
// innermost run is contiguous on both sides and every offset allows it, the
// box is re-expressed in wider words (up to 16 bytes) so a slice or concat
// of bf16 rows moves uint4s. The kernel is a grid-stride loop over
// destination elements: thread i writes destination element i of the box
// (coalesced writes), decoding its source offset from the merged dims, whose
// sizes and strides travel by value in a small struct.
//
// copy (the same bytes, possibly another shape) is one device-to-device
// cudaMemcpyAsync, skipped when out aliases x.
//
// reduce_sum (the backward of a broadcast) sums x[outer, inner] over the
// outer rows. A block owns 32 columns and one chunk of rows: lane tx reads
// column tx (a warp reads 32 consecutive elements of one row), the 8 warps
// take every 8th row of the chunk, each thread sums in double, and the 8
// per-warp sums are added in warp order through shared memory. When the
// rows are split into several chunks (narrow suffixes need it to fill the
// GPU), the chunk sums go to bind-time scratch and a second kernel adds them
// in chunk order. The chunking depends only on the shape, so the result is
// the same on every run.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/Shape.h"
#include "kernels/cuda/Common.cuh"

#include <algorithm>
#include <vector>

namespace llmc::cuda {
namespace {

//===----------------------------------------------------------------------===//
// Strided box copy
//===----------------------------------------------------------------------===//

/// Outer dims a box may keep after merging. Rank-8 tensors always fit
/// (their innermost dim becomes the contiguous run).
constexpr int kMaxBoxDims = 8;

/// A box read at source strides and written at destination strides, in
/// elements of `elementSize` bytes; the innermost run is contiguous in the
/// destination. Passed to the kernel by value.
struct BoxParams {
  int rank = 0;                       // outer dims in use
  int64_t sizes[kMaxBoxDims] = {};    // outer dim sizes
  int64_t srcStrides[kMaxBoxDims] = {};
  int64_t dstStrides[kMaxBoxDims] = {};
  int64_t inner = 1;                  // elements per innermost run
  int64_t innerSrcStride = 1;         // source stride within that run
  int64_t srcBase = 0, dstBase = 0;   // element offsets
  int64_t total = 0;                  // elements in the box
};

struct Box {
  BoxParams p;
  int elementSize = 4;
};

/// The CPU's makeBox: drops unit dims, merges dims contiguous on both
/// sides, and splits off a destination-contiguous innermost run. Fails (with
/// `why`) when more than kMaxBoxDims outer dims remain.
bool makeBox(const std::vector<int64_t> &sizes, const std::vector<int64_t> &srcStrides,
             const std::vector<int64_t> &dstStrides, size_t elementSize, Box *box,
             std::string *why) {
  std::vector<int64_t> s, ss, ds;
  int64_t total = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    total *= sizes[i];
    if (sizes[i] == 1) continue;
    if (!s.empty() && ss.back() == sizes[i] * srcStrides[i] &&
        ds.back() == sizes[i] * dstStrides[i]) {
      s.back() *= sizes[i];
      ss.back() = srcStrides[i];
      ds.back() = dstStrides[i];
      continue;
    }
    s.push_back(sizes[i]);
    ss.push_back(srcStrides[i]);
    ds.push_back(dstStrides[i]);
  }
  BoxParams p;
  if (!s.empty() && ds.back() == 1) {
    p.inner = s.back();
    p.innerSrcStride = ss.back();
    s.pop_back(), ss.pop_back(), ds.pop_back();
  }
  if (s.size() > static_cast<size_t>(kMaxBoxDims)) {
    *why = "needs " + std::to_string(s.size()) + " strided dims after merging; the CUDA backend " +
           "supports " + std::to_string(kMaxBoxDims);
    return false;
  }
  p.rank = static_cast<int>(s.size());
  for (int d = 0; d < p.rank; ++d) {
    p.sizes[d] = s[d];
    p.srcStrides[d] = ss[d];
    p.dstStrides[d] = ds[d];
  }
  p.total = total;
  box->p = p;
  box->elementSize = static_cast<int>(elementSize);
  return true;
}

/// Re-expresses a box in the widest word (≤ 16 bytes) that every offset,
/// stride, run length and both pointers are multiples of. Only when the run
/// is contiguous on both sides (a strided run must move element by element).
void widen(Box &box, const void *src, const void *dst) {
  BoxParams &p = box.p;
  if (p.total == 0 || (p.innerSrcStride != 1 && p.inner != 1)) return;
  const int64_t e = box.elementSize;
  uint64_t bits = 16 | reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst);
  bits |= static_cast<uint64_t>(p.inner * e) | static_cast<uint64_t>(p.srcBase * e) |
          static_cast<uint64_t>(p.dstBase * e);
  for (int d = 0; d < p.rank; ++d)
    bits |= static_cast<uint64_t>(p.srcStrides[d] * e) | static_cast<uint64_t>(p.dstStrides[d] * e);
  const int64_t word = static_cast<int64_t>(bits & (~bits + 1)); // lowest set bit, ≤ 16
  if (word <= e) return;
  const int64_t factor = word / e;
  p.inner /= factor;
  p.innerSrcStride = 1;
  p.srcBase /= factor;
  p.dstBase /= factor;
  for (int d = 0; d < p.rank; ++d) {
    p.srcStrides[d] /= factor;
    p.dstStrides[d] /= factor;
  }
  p.total /= factor;
  box.elementSize = static_cast<int>(word);
}

template <typename E>
__global__ void copyBoxKernel(const E *__restrict__ src, E *__restrict__ dst, BoxParams p) {
  LLMC_GRID_STRIDE(i, p.total) {
    int64_t row = i / p.inner, j = i - row * p.inner;
    int64_t srcOffset = p.srcBase + j * p.innerSrcStride, dstOffset = p.dstBase + j;
    for (int d = p.rank - 1; d >= 0; --d) {
      int64_t q = row / p.sizes[d], index = row - q * p.sizes[d];
      row = q;
      srcOffset += index * p.srcStrides[d];
      dstOffset += index * p.dstStrides[d];
    }
    dst[dstOffset] = src[srcOffset];
  }
}

void launchBox(const Box &box, const void *src, void *dst, cudaStream_t stream) {
  const BoxParams &p = box.p;
  if (p.total == 0) return;
  const int grid = gridFor(p.total);
  switch (box.elementSize) {
  case 1:
    copyBoxKernel<<<grid, kBlock, 0, stream>>>(static_cast<const uint8_t *>(src),
                                               static_cast<uint8_t *>(dst), p);
    break;
  case 2:
    copyBoxKernel<<<grid, kBlock, 0, stream>>>(static_cast<const uint16_t *>(src),
                                               static_cast<uint16_t *>(dst), p);
    break;
  case 8:
    copyBoxKernel<<<grid, kBlock, 0, stream>>>(static_cast<const uint2 *>(src),
                                               static_cast<uint2 *>(dst), p);
    break;
  case 16:
    copyBoxKernel<<<grid, kBlock, 0, stream>>>(static_cast<const uint4 *>(src),
                                               static_cast<uint4 *>(dst), p);
    break;
  default:
    copyBoxKernel<<<grid, kBlock, 0, stream>>>(static_cast<const uint32_t *>(src),
                                               static_cast<uint32_t *>(dst), p);
    break;
  }
  LLMC_CUDA_CHECK_LAUNCH();
}

/// transpose and slice: one box copy; pad: zero the output, then one box
/// copy; concat: one box per input.
class BoxKernel final : public Kernel {
public:
  BoxKernel(std::vector<Box> boxes, std::vector<const void *> sources, void *dst, size_t zeroBytes)
      : boxes_(std::move(boxes)), sources_(std::move(sources)), dst_(dst), zeroBytes_(zeroBytes) {}

  void run(const StepContext &ctx) override {
    cudaStream_t stream = streamOf(ctx);
    if (zeroBytes_) LLMC_CUDA_CHECK(cudaMemsetAsync(dst_, 0, zeroBytes_, stream));
    for (size_t i = 0; i < boxes_.size(); ++i) launchBox(boxes_[i], sources_[i], dst_, stream);
  }

private:
  std::vector<Box> boxes_;
  std::vector<const void *> sources_;
  void *dst_;
  size_t zeroBytes_;
};

/// The contract's box from `x` into `out`, widened, as a kernel (pad zeroes
/// `out` first). Fails, as `kernel`, when the box has too many merged dims.
std::unique_ptr<Kernel> boxKernel(const char *kernel, const KernelArgs &args, std::string &error,
                                  const contracts::BoxCopyBinding &b, bool zeroFirst) {
  const TensorView &x = args.inputs[0], &out = args.outputs[0];
  Box box;
  std::string why;
  if (!makeBox(b.sizes, b.srcStrides, b.dstStrides, dtypeSize(x.dtype), &box, &why))
    return Validator(kernel, args, error).reject("x " + x.describe() + " " + why);
  box.p.srcBase = b.srcBase;
  box.p.dstBase = b.dstBase;
  widen(box, x.data, out.data);
  return std::make_unique<BoxKernel>(std::vector<Box>{box}, std::vector<const void *>{x.data},
                                     out.data, zeroFirst ? out.bytes() : 0);
}

std::unique_ptr<Kernel> makeCudaTranspose(const KernelArgs &args, std::string &error) {
  contracts::BoxCopyBinding b;
  if (!contracts::bindTranspose(args, error, &b)) return nullptr;
  return boxKernel("transpose", args, error, b, false);
}

std::unique_ptr<Kernel> makeCudaSlice(const KernelArgs &args, std::string &error) {
  contracts::BoxCopyBinding b;
  if (!contracts::bindSlice(args, error, &b)) return nullptr;
  return boxKernel("slice", args, error, b, false);
}

std::unique_ptr<Kernel> makeCudaPad(const KernelArgs &args, std::string &error) {
  contracts::BoxCopyBinding b;
  if (!contracts::bindPad(args, error, &b)) return nullptr;
  return boxKernel("pad", args, error, b, true);
}

std::unique_ptr<Kernel> makeCudaConcat(const KernelArgs &args, std::string &error) {
  contracts::ConcatBinding b;
  if (!contracts::bindConcat(args, error, &b)) return nullptr;
  Validator v("concat", args, error);
  const TensorView &out = v.out(0);
  const int64_t dim = b.dim;

  // Input i is an [outer, chunk_i] box written at column offset Σ_{j<i} chunk_j
  // of the [outer, row] output.
  const size_t elementSize = dtypeSize(out.dtype);
  const int64_t outer = product(out.shape, 0, dim);
  const int64_t row = product(out.shape, dim, out.shape.size());
  std::vector<Box> boxes;
  std::vector<const void *> sources;
  int64_t at = 0;
  for (const TensorView &x : args.inputs) {
    const int64_t chunk = product(x.shape, dim, x.shape.size());
    Box box;
    std::string why;
    if (!makeBox({outer, chunk}, {chunk, 1}, {row, 1}, elementSize, &box, &why))
      return v.reject(why); // unreachable: two dims always fit
    box.p.dstBase = at;
    widen(box, x.data, out.data);
    if (box.p.total > 0) {
      boxes.push_back(box);
      sources.push_back(x.data);
    }
    at += chunk;
  }
  return std::make_unique<BoxKernel>(std::move(boxes), std::move(sources), out.data, 0);
}

//===----------------------------------------------------------------------===//
// copy
//===----------------------------------------------------------------------===//

class CopyKernel final : public Kernel {
public:
  CopyKernel(TensorView in, TensorView out) : in_(std::move(in)), out_(std::move(out)) {}
  void run(const StepContext &ctx) override {
    if (in_.data != out_.data)
      LLMC_CUDA_CHECK(cudaMemcpyAsync(out_.data, in_.data, in_.bytes(),
                                      cudaMemcpyDeviceToDevice,
                                      streamOf(ctx)));
  }

private:
  TensorView in_, out_;
};

std::unique_ptr<Kernel> makeCudaCopy(const KernelArgs &args, std::string &error) {
  if (args.inputs.size() != 1 || args.outputs.size() != 1) {
    error = "copy: expects one input and one output";
    return nullptr;
  }
  if (args.inputs[0].bytes() != args.outputs[0].bytes() ||
      args.inputs[0].dtype != args.outputs[0].dtype) {
    error = "copy: input " + args.inputs[0].describe() + " and output " +
            args.outputs[0].describe() + " differ in dtype or size";
    return nullptr;
  }
  return std::make_unique<CopyKernel>(args.inputs[0], args.outputs[0]);
}

//===----------------------------------------------------------------------===//
// copy_to_host / copy_to_device (ZeRO-Offload)
//===----------------------------------------------------------------------===//

/// Between device memory and the pinned host memory past the arena, on the
/// kernel's stream. cudaMemcpyDefault lets unified addressing tell the
/// direction from the pointers, so the same kernel also runs between two
/// device buffers (the conformance tests' binding).
class SpaceCopyKernel final : public Kernel {
public:
  SpaceCopyKernel(TensorView in, TensorView out) : in_(std::move(in)), out_(std::move(out)) {}
  void run(const StepContext &ctx) override {
    LLMC_CUDA_CHECK(cudaMemcpyAsync(out_.data, in_.data, in_.bytes(), cudaMemcpyDefault,
                                    streamOf(ctx)));
  }

private:
  TensorView in_, out_;
};

std::unique_ptr<Kernel> makeCudaSpaceCopy(const char *name, const KernelArgs &args,
                                          std::string &error) {
  if (args.inputs.size() != 1 || args.outputs.size() != 1) {
    error = std::string(name) + ": expects one input and one output";
    return nullptr;
  }
  const TensorView &x = args.inputs[0], &out = args.outputs[0];
  if (x.dtype != out.dtype || x.shape != out.shape || (x.data && x.data == out.data)) {
    error = std::string(name) + ": input " + x.describe() + " and output " + out.describe() +
            " must be distinct buffers of one dtype and shape";
    return nullptr;
  }
  return std::make_unique<SpaceCopyKernel>(x, out);
}
std::unique_ptr<Kernel> makeCudaCopyToHost(const KernelArgs &args, std::string &error) {
  return makeCudaSpaceCopy("copy_to_host", args, error);
}
std::unique_ptr<Kernel> makeCudaCopyToDevice(const KernelArgs &args, std::string &error) {
  return makeCudaSpaceCopy("copy_to_device", args, error);
}

//===----------------------------------------------------------------------===//
// reduce_sum
//===----------------------------------------------------------------------===//

constexpr int kSumColumns = 32; // columns per block: one per lane
constexpr int kSumWarps = 8;    // row groups per block: one per warp

/// Sums rows [chunk·rowsPerChunk, ...) of x[outer, inner] for 32 columns.
/// Writes `out` (chunks == 1) or partial[chunk, inner] in double.
template <typename T>
__global__ void reduceSumKernel(const T *__restrict__ x, T *__restrict__ out,
                                double *__restrict__ partial, int64_t outer, int64_t inner,
                                int64_t columnBlocks, int64_t rowsPerChunk, bool direct) {
  __shared__ double sums[kSumWarps][kSumColumns];
  const int64_t columnBlock = blockIdx.x % columnBlocks, chunk = blockIdx.x / columnBlocks;
  const int64_t column = columnBlock * kSumColumns + threadIdx.x;
  const int64_t r0 = chunk * rowsPerChunk, r1 = min(outer, r0 + rowsPerChunk);
  double acc = 0.0;
  if (column < inner)
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kSumWarps) acc += load(x, r * inner + column);
  sums[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && column < inner) {
    double total = 0.0;
    for (int w = 0; w < kSumWarps; ++w) total += sums[w][threadIdx.x];
    if (direct)
      store(out, column, static_cast<float>(total));
    else
      partial[chunk * inner + column] = total;
  }
}

/// out[j] = Σ_chunk partial[chunk, j], in chunk order.
template <typename T>
__global__ void sumChunksKernel(const double *__restrict__ partial, T *__restrict__ out,
                                int64_t inner, int64_t chunks) {
  LLMC_GRID_STRIDE(j, inner) {
    double total = 0.0;
    for (int64_t c = 0; c < chunks; ++c) total += partial[c * inner + j];
    store(out, j, static_cast<float>(total));
  }
}

template <typename T> class ReduceSumKernel final : public Kernel {
public:
  explicit ReduceSumKernel(const KernelArgs &args)
      : x_(args.inputs[0].as<T>()), out_(args.outputs[0].as<T>()), inner_(args.outputs[0].numel()),
        outer_(inner_ ? args.inputs[0].numel() / inner_ : 0) {
    // Enough blocks to fill the GPU (~1000), but at least 64 rows (8 per
    // warp) per chunk; a function of the shape only.
    columnBlocks_ = (inner_ + kSumColumns - 1) / kSumColumns;
    if (columnBlocks_ > 0) {
      int64_t wanted = std::max<int64_t>(1, 1024 / columnBlocks_);
      chunks_ = std::clamp<int64_t>(std::min(wanted, (outer_ + 63) / 64), 1, 65535);
      rowsPerChunk_ = std::max<int64_t>(1, (outer_ + chunks_ - 1) / chunks_);
      chunks_ = std::max<int64_t>(1, (outer_ + rowsPerChunk_ - 1) / rowsPerChunk_);
    }
    if (chunks_ > 1) partial_ = static_cast<double *>(deviceAlloc(chunks_ * inner_ * sizeof(double)));
  }
  ~ReduceSumKernel() override { deviceFree(partial_); }
  ReduceSumKernel(const ReduceSumKernel &) = delete;
  ReduceSumKernel &operator=(const ReduceSumKernel &) = delete;

  void run(const StepContext &ctx) override {
    if (inner_ == 0) return;
    cudaStream_t stream = streamOf(ctx);
    const bool direct = chunks_ == 1;
    dim3 block(kSumColumns, kSumWarps);
    reduceSumKernel<<<static_cast<unsigned>(columnBlocks_ * chunks_), block, 0, stream>>>(
        x_, out_, partial_, outer_, inner_, columnBlocks_, rowsPerChunk_, direct);
    LLMC_CUDA_CHECK_LAUNCH();
    if (direct) return;
    sumChunksKernel<<<gridFor(inner_), kBlock, 0, stream>>>(partial_, out_, inner_, chunks_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  const T *x_;
  T *out_;
  int64_t inner_, outer_;
  int64_t columnBlocks_ = 0, chunks_ = 1, rowsPerChunk_ = 1;
  double *partial_ = nullptr; // [chunks, inner] when chunks > 1
};

std::unique_ptr<Kernel> makeCudaReduceSum(const KernelArgs &args, std::string &error) {
  contracts::ReduceSumBinding b;
  if (!contracts::bindReduceSum(args, error, &b)) return nullptr;
  return makeFloatKernel<ReduceSumKernel>(b.dtype, args);
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "transpose", makeCudaTranspose);
LLMC_REGISTER_KERNEL(CUDA, "slice", makeCudaSlice);
LLMC_REGISTER_KERNEL(CUDA, "pad", makeCudaPad);
LLMC_REGISTER_KERNEL(CUDA, "concat", makeCudaConcat);
LLMC_REGISTER_KERNEL(CUDA, "copy", makeCudaCopy);
LLMC_REGISTER_KERNEL(CUDA, "copy_to_host", makeCudaCopyToHost);
LLMC_REGISTER_KERNEL(CUDA, "copy_to_device", makeCudaCopyToDevice);
LLMC_REGISTER_KERNEL(CUDA, "reduce_sum", makeCudaReduceSum);

} // namespace llmc::cuda
