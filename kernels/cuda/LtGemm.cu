//===- LtGemm.cu - row-major batched GEMM through cuBLASLt ----------------===//
//
// Planning a cuBLASLt matmul is host work with a heuristic query; running
// one is a single call. So everything is decided when a kernel binds:
//  - one cublasLtHandle_t per process, created by the first GEMM planned;
//  - one 32 MiB workspace per device, allocated by the first GEMM planned on
//    it (GEMMs on one device run in stream order, so they can share it);
//  - per shape, one heuristic query, cached for the process: a model's
//    layers repeat the same few shapes, so loading a program asks cuBLASLt
//    only a handful of times;
//  - with timing on (cuda::gemmTiming(), the default), the heuristic's top
//    kCandidates algorithms are each run kTimedRuns times on scratch
//    buffers shaped and aligned like the bound operands (never the bound
//    tensors themselves, which may hold state), and the fastest is kept
//    for the shape if it beats the heuristic's first by kMargin — timing
//    noise near a tie would otherwise flip the choice, and with it the
//    summation order, from one process to the next. Never while a graph
//    is being captured, nor when the scratch cannot be had (the first
//    choice then stands);
//  - the leading dimension of each operand, and the alignment of its rows
//    (address, ld and batch stride), are part of the cache key, so a plan
//    made for aligned rows never runs on misaligned ones.
//
// Row-major c[M,N] = op(a)·op(b) is the column-major cᵀ[N,M] = op(b)ᵀ·op(a)ᵀ.
// Read column-major, row-major b[K,N] is bᵀ (N×K, ld N): exactly op(b)ᵀ when
// b is not transposed, so cuBLASLt's A is b with TRANSA = N; a stored
// transposed ([N,K]) reads as K×N and needs TRANSA = T. Symmetrically for a
// as cuBLASLt's B. Batches are strided (stride 0 shares a matrix); a shared
// b with an untransposed a is best folded into M by the caller (one GEMM).
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/LtGemm.h"

#include "kernels/cuda/Device.h"

#include <algorithm>
#include <climits>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace llmc::cuda {
namespace {

constexpr size_t kWorkspaceBytes = size_t(32) << 20;
/// Algorithms the heuristic is asked for, and timed when timing is on.
constexpr int kCandidates = 8;
/// Timed runs per candidate (after one untimed run).
constexpr int kTimedRuns = 5;
/// How much faster than the heuristic's first choice a candidate must be.
constexpr float kMargin = 0.03f;
/// Largest scratch (all operands) a timing allocates; larger GEMMs keep the
/// heuristic's choice.
constexpr size_t kTimingScratchLimit = size_t(2) << 30;

std::string statusText(cublasStatus_t status) {
  return std::string(cublasLtGetStatusName(status)) + " (" + cublasLtGetStatusString(status) +
         ")";
}

/// Records the first failing cuBLASLt call in `error`.
bool ok(cublasStatus_t status, const char *call, std::string &error) {
  if (status == CUBLAS_STATUS_SUCCESS) return true;
  if (error.empty()) error = std::string(call) + " failed: " + statusText(status);
  return false;
}

/// The process's handle, or null (with `error`) if cuBLASLt cannot start.
cublasLtHandle_t handle(std::string &error) {
  static cublasStatus_t status = CUBLAS_STATUS_NOT_INITIALIZED;
  static cublasLtHandle_t h = [] {
    cublasLtHandle_t created = nullptr;
    status = cublasLtCreate(&created);
    return status == CUBLAS_STATUS_SUCCESS ? created : nullptr;
  }();
  if (!h) ok(status, "cublasLtCreate", error);
  return h;
}

std::mutex &planMutex() {
  static std::mutex m;
  return m;
}

/// The workspace of `device`, allocated on first use (planMutex held) —
/// never while a graph is captured, where cudaMalloc would end the capture.
void *workspace(int device, std::string &error) {
  static std::map<int, void *> workspaces;
  auto it = workspaces.find(device);
  if (it != workspaces.end()) return it->second;
  if (capturingGraph()) {
    error = "the cuBLASLt workspace cannot be allocated while a CUDA graph is captured (bind "
            "GEMMs before capture)";
    return nullptr;
  }
  void *ptr = nullptr;
  cudaError_t status = cudaMalloc(&ptr, kWorkspaceBytes);
  if (status != cudaSuccess) {
    error = "cudaMalloc of the " + std::to_string(kWorkspaceBytes >> 20) +
            " MiB cuBLASLt workspace failed: " + cudaGetErrorString(status);
    return nullptr;
  }
  workspaces[device] = ptr;
  return ptr;
}

/// One operand as stored: rows of `cols` elements, `ld` apart, `batch`
/// matrices `stride` elements apart (stride 0: one shared matrix).
struct Stored {
  const void *ptr;
  int64_t rows, cols, ld, stride, batch;

  /// Largest power of two (at most 256) dividing the address of every row
  /// of every matrix: what an algorithm may assume about the operand.
  uint32_t alignment(size_t elementSize) const {
    uint64_t bits = reinterpret_cast<uintptr_t>(ptr) | 256u;
    if (rows > 1) bits |= static_cast<uint64_t>(ld) * elementSize;
    if (batch > 1 && stride != 0) bits |= static_cast<uint64_t>(stride) * elementSize;
    return static_cast<uint32_t>(bits & (~bits + 1)); // lowest set bit
  }
  /// Bytes from the first element to one past the last.
  size_t span(size_t elementSize) const {
    int64_t elements = (rows - 1) * ld + cols;
    if (batch > 1 && stride != 0) elements += (batch - 1) * stride;
    return static_cast<size_t>(elements) * elementSize;
  }
};

Stored storedA(const GemmDesc &d) {
  int64_t rows = d.transposeA ? d.k : d.m, cols = d.transposeA ? d.m : d.k;
  return {d.a, rows, cols, d.lda ? d.lda : cols, d.strideA, d.batch};
}
Stored storedB(const GemmDesc &d) {
  int64_t rows = d.transposeB ? d.n : d.k, cols = d.transposeB ? d.k : d.n;
  return {d.b, rows, cols, d.ldb ? d.ldb : cols, d.strideB, d.batch};
}
Stored storedC(const GemmDesc &d, const void *ptr) {
  return {ptr, d.m, d.n, d.ldc ? d.ldc : d.n, d.strideC, d.batch};
}

/// Bytes per element of a and b.
size_t operandSize(const GemmDesc &d) { return d.fp8 ? 1 : dtypeSize(d.dtype); }
/// Bytes per element of c (and an addend).
size_t outputSize(const GemmDesc &d) { return d.f32Output ? 4 : dtypeSize(d.dtype); }

/// cuBLASLt's type of fp8 codes of `kind`.
cudaDataType fp8Type(fp8::Kind kind) {
  return kind == fp8::Kind::E4M3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2;
}

/// Why cuBLASLt cannot take `d`'s fp8 operands, or empty.
std::string fp8Refusal(const GemmDesc &d) {
  if (!d.fp8)
    return "";
  if (d.transposeA || !d.transposeB)
    return "fp8 operands must be K-major (a [M, K], b [N, K])";
  if (d.epilogue != GemmEpilogue::None || d.addend || d.batch != 1)
    return "fp8 GEMMs take no epilogue, addend or batch";
  if (!d.scaleA || !d.scaleB)
    return "fp8 GEMMs need both scale pointers";
  if (d.fp8A == fp8::Kind::E5M2 && d.fp8B == fp8::Kind::E5M2)
    return "no fp8 GEMM multiplies two E5M2 operands";
  if (d.k % 16 != 0)
    return "fp8 GEMMs need K a multiple of 16";
  return "";
}

/// Device scratch shaped like a GEMM's operands, each placed at its bound
/// operand's offset modulo 256 so the timed runs see the same alignment.
class TimingScratch {
public:
  ~TimingScratch() {
    if (base_) cudaFree(base_);
  }
  /// Reserves room for an operand of `bytes` aligned like `like`; returns
  /// its offset (call before allocate()).
  size_t reserve(const void *like, size_t bytes) {
    size_t offset = total_ + (reinterpret_cast<uintptr_t>(like) & 255u);
    total_ = (offset + bytes + 255) / 256 * 256;
    return offset;
  }
  /// Allocates and zeroes everything reserved; false (the CUDA error
  /// cleared) when the device cannot spare it.
  bool allocate() {
    if (total_ == 0 || total_ > kTimingScratchLimit) return false;
    if (cudaMalloc(&base_, total_) != cudaSuccess || cudaMemset(base_, 0, total_) != cudaSuccess) {
      cudaGetLastError();
      base_ = nullptr;
      return false;
    }
    return true;
  }
  void *at(size_t offset) const { return static_cast<char *>(base_) + offset; }

private:
  void *base_ = nullptr;
  size_t total_ = 0;
};

/// The heuristic's candidates for one planned GEMM and what timing them
/// needs; time() returns the index of the one to use.
struct Candidates {
  cublasLtHandle_t lt;
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t a, b, c;
  const float *alpha, *beta;
  void *workspace;
  std::vector<cublasLtMatmulHeuristicResult_t> results;

  /// Mean µs of kTimedRuns launches of candidate i on `stream`, or a
  /// negative number when it does not run.
  float timeOne(size_t i, const void *ptrA, const void *ptrB, const void *ptrC, void *ptrD,
                cudaStream_t stream, cudaEvent_t start, cudaEvent_t stop) const {
    auto launch = [&] {
      return cublasLtMatmul(lt, op, alpha, ptrA, a, ptrB, b, beta, ptrC, c, ptrD, c,
                            &results[i].algo, workspace, kWorkspaceBytes, stream);
    };
    if (launch() != CUBLAS_STATUS_SUCCESS) return -1.0f;
    cudaEventRecord(start, stream);
    for (int r = 0; r < kTimedRuns; ++r)
      if (launch() != CUBLAS_STATUS_SUCCESS) return -1.0f;
    cudaEventRecord(stop, stream);
    float ms = 0.0f;
    if (cudaEventSynchronize(stop) != cudaSuccess || cudaEventElapsedTime(&ms, start, stop) != cudaSuccess) {
      cudaGetLastError();
      return -1.0f;
    }
    return ms * 1000.0f / kTimedRuns;
  }
};

/// Sets the epilogue's bias and aux pointers of `op` (to scratch for the
/// timed runs, back to the bound ones after).
void pointEpilogue(cublasLtMatmulDesc_t op, const void *bias, const void *aux) {
  if (bias) cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
  if (aux) cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux));
}

/// The fastest candidate of `cands` for `d` (with the epilogue's bias and
/// aux pointers, null where it has none) timed on scratch, or 0 (the
/// heuristic's first) when it is not clearly faster or timing is not
/// possible; `choice` says which and why. `provisional`: timing was not
/// possible now (a capture, no scratch) but may be later, so the choice is
/// not one to cache.
size_t timeCandidates(const GemmDesc &d, const Candidates &cands, const void *biasPointer,
                      void *aux, std::string &choice, bool &provisional) {
  choice = "heuristic";
  provisional = false;
  if (cands.results.size() < 2) return 0;
  if (!gemmTiming()) {
    choice = "heuristic (timing off)";
    return 0;
  }
  if (capturingGraph()) {
    choice = "heuristic (a graph was being captured)";
    provisional = true;
    return 0;
  }
  const size_t es = dtypeSize(d.dtype), abSize = operandSize(d), cSize = outputSize(d);
  TimingScratch scratch;
  const Stored a = storedA(d), b = storedB(d), c = storedC(d, d.c);
  const size_t offA = scratch.reserve(d.a, a.span(abSize)),
               offB = scratch.reserve(d.b, b.span(abSize));
  const size_t offD = scratch.reserve(d.c, c.span(cSize));
  const size_t offC = d.addend ? scratch.reserve(d.addend, c.span(cSize)) : offD;
  const size_t offBias = biasPointer ? scratch.reserve(biasPointer, static_cast<size_t>(d.n) * es) : 0;
  const size_t offAux = aux ? scratch.reserve(aux, static_cast<size_t>(d.m * d.n) * es) : 0;
  if (!scratch.allocate()) {
    choice = "heuristic (no device memory to time it)";
    provisional = true;
    return 0;
  }
  // Other work may be using the shared workspace; timing runs alone.
  if (cudaDeviceSynchronize() != cudaSuccess) {
    cudaGetLastError();
    choice = "heuristic (the device did not synchronize for timing)";
    provisional = true;
    return 0;
  }
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  std::vector<float> micros(cands.results.size(), -1.0f);
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess &&
      cudaEventCreate(&start) == cudaSuccess && cudaEventCreate(&stop) == cudaSuccess) {
    pointEpilogue(cands.op, biasPointer ? scratch.at(offBias) : nullptr,
                  aux ? scratch.at(offAux) : nullptr);
    // cuBLASLt's A is b and its B is a (row-major as column-major).
    for (size_t i = 0; i < cands.results.size(); ++i)
      micros[i] = cands.timeOne(i, scratch.at(offB), scratch.at(offA), scratch.at(offC),
                                scratch.at(offD), stream, start, stop);
    pointEpilogue(cands.op, biasPointer, aux);
  }
  if (stop) cudaEventDestroy(stop);
  if (start) cudaEventDestroy(start);
  if (stream) cudaStreamDestroy(stream);
  cudaGetLastError();
  size_t best = 0;
  for (size_t i = 1; i < micros.size(); ++i)
    if (micros[i] >= 0 && (micros[best] < 0 || micros[i] < micros[best])) best = i;
  if (micros[0] >= 0 && micros[best] > micros[0] * (1.0f - kMargin)) best = 0;
  std::ostringstream os;
  os << "timed: candidate " << best << " of " << micros.size() << ", " << micros[best]
     << " us vs " << micros[0] << " us for the first";
  choice = os.str();
  return best;
}

} // namespace

std::string LtGemm::describe(const GemmDesc &d) {
  std::ostringstream os;
  auto kindName = [](fp8::Kind kind) { return kind == fp8::Kind::E4M3 ? "e4m3" : "e5m2"; };
  if (d.fp8)
    os << "fp8 " << kindName(d.fp8A) << "·" << kindName(d.fp8B)
       << (d.fp8FastAccumulation ? " (fast accumulation)" : "") << " -> ";
  os << dtypeName(d.dtype) << (d.f32Output ? " -> f32" : "") << " c[";
  if (d.batch != 1) os << d.batch << "x";
  os << d.m << "x" << d.n << "] = a" << (d.transposeA ? "^T" : "") << "["
     << (d.transposeA ? d.k : d.m) << "x" << (d.transposeA ? d.m : d.k) << "]·b"
     << (d.transposeB ? "^T" : "") << "[" << (d.transposeB ? d.n : d.k) << "x"
     << (d.transposeB ? d.k : d.n) << "]";
  if (d.batch != 1 && d.strideB == 0) os << " (b shared)";
  if (d.lda || d.ldb || d.ldc)
    os << " (ld a " << storedA(d).ld << ", b " << storedB(d).ld << ", c " << storedC(d, d.c).ld
       << ")";
  if (d.accumulate) os << " + c";
  if (d.addend) os << " + addend";
  if (d.epilogue == GemmEpilogue::Bias) os << " + bias";
  if (d.epilogue == GemmEpilogue::GeluBias) os << " + bias, gelu";
  if (d.epilogue == GemmEpilogue::GeluAuxBias) os << " + bias, gelu (pre-activation kept)";
  if (d.epilogue == GemmEpilogue::BiasGradB) os << ", column sums of b";
  if (d.epilogue == GemmEpilogue::DGelu) os << ", gelu_grad(aux, ·)";
  if (d.epilogue == GemmEpilogue::DGeluBGrad) os << ", gelu_grad(aux, ·) and its column sums";
  return os.str();
}

std::unique_ptr<LtGemm> LtGemm::create(const GemmDesc &d, std::string &error) {
  error.clear();
  if (d.dtype != DType::F32 && d.dtype != DType::BF16 && d.dtype != DType::F16) {
    error = std::string("cuBLASLt GEMM: unsupported dtype ") + dtypeName(d.dtype);
    return nullptr;
  }
  if (d.m < 1 || d.n < 1 || d.k < 1 || d.batch < 1 || d.batch > INT_MAX) {
    error = "cuBLASLt GEMM: sizes must be positive (and the batch fit an int): " + describe(d);
    return nullptr;
  }
  if (d.f32Output && (d.fp8 || d.epilogue != GemmEpilogue::None || d.dtype == DType::F32)) {
    error =
        "cuBLASLt GEMM: an f32 output is for bf16 or f16 operands without epilogue: " + describe(d);
    return nullptr;
  }
  const bool biasGrad =
      d.epilogue == GemmEpilogue::BiasGradB || d.epilogue == GemmEpilogue::DGeluBGrad;
  const bool usesAux = d.epilogue == GemmEpilogue::GeluAuxBias ||
                       d.epilogue == GemmEpilogue::DGelu || d.epilogue == GemmEpilogue::DGeluBGrad;
  // The bias pointer: the bias, or where a bias gradient goes.
  const bool usesBias = d.epilogue != GemmEpilogue::None && d.epilogue != GemmEpilogue::DGelu;
  if (usesBias && !(biasGrad ? d.biasGrad : d.bias)) {
    error = "cuBLASLt GEMM: a bias epilogue needs a bias: " + describe(d);
    return nullptr;
  }
  if (std::string why = fp8Refusal(d); !why.empty()) {
    error = "cuBLASLt GEMM: " + why + ": " + describe(d);
    return nullptr;
  }
  if (d.accumulate && d.addend) {
    error = "cuBLASLt GEMM: accumulate into c or add an addend, not both: " + describe(d);
    return nullptr;
  }
  if (biasGrad && (d.batch != 1 || d.accumulate || d.addend)) {
    error = "cuBLASLt GEMM: the bias-gradient epilogue takes one product, not accumulated: " +
            describe(d);
    return nullptr;
  }
  if (usesAux && (!d.aux || d.n % 8 != 0 || d.batch != 1)) {
    error = "cuBLASLt GEMM: the GELU aux epilogues need an aux buffer, N a multiple of 8 and no "
            "batch: " + describe(d);
    return nullptr;
  }
  for (const Stored &o : {storedA(d), storedB(d), storedC(d, d.c)})
    if (o.ld < o.cols) {
      error = "cuBLASLt GEMM: a leading dimension is shorter than its rows: " + describe(d);
      return nullptr;
    }

  cublasLtHandle_t lt = handle(error);
  if (!lt) return nullptr;
  int device = 0;
  if (cudaError_t status = cudaGetDevice(&device); status != cudaSuccess) {
    error = std::string("cudaGetDevice failed: ") + cudaGetErrorString(status);
    return nullptr;
  }

  std::unique_ptr<LtGemm> g(new LtGemm());
  g->desc_ = d;
  g->beta_ = d.accumulate || d.addend ? 1.0f : 0.0f;

  const cudaDataType type = d.dtype == DType::BF16  ? CUDA_R_16BF
                            : d.dtype == DType::F16 ? CUDA_R_16F
                                                    : CUDA_R_32F;
  // cuBLASLt multiplies fp8 codes only with CUBLAS_COMPUTE_32F, whatever
  // --tf32 says about fp32 products.
  const cublasComputeType_t compute = d.dtype == DType::F32 && !d.fp8 && allowTf32()
                                          ? CUBLAS_COMPUTE_32F_FAST_TF32
                                          : CUBLAS_COMPUTE_32F;
  const size_t elementSize = dtypeSize(d.dtype), abSize = operandSize(d), cSize = outputSize(d);
  // cuBLASLt's A is b, its B is a (below).
  const cudaDataType typeA = d.fp8 ? fp8Type(d.fp8B) : type, typeB = d.fp8 ? fp8Type(d.fp8A) : type;
  const cudaDataType typeC = d.f32Output ? CUDA_R_32F : type;

  // Read column-major, a row-major operand stored as rows × cols (ld
  // apart) is cols × rows with leading dimension ld: its transpose.
  // cuBLASLt's A is b: stored [K,N] it reads as N×K = op(b)ᵀ, no transpose;
  // stored [N,K] it reads as K×N and is transposed. Its B is a, likewise.
  const cublasOperation_t opA = d.transposeB ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opB = d.transposeA ? CUBLAS_OP_T : CUBLAS_OP_N;
  const Stored a = storedA(d), b = storedB(d), c = storedC(d, d.c);

  const int32_t batch = static_cast<int32_t>(d.batch);
  auto makeLayout = [&](cublasLtMatrixLayout_t *layout, const Stored &o, cudaDataType type) {
    if (!ok(cublasLtMatrixLayoutCreate(layout, type, static_cast<uint64_t>(o.cols),
                                       static_cast<uint64_t>(o.rows), o.ld),
            "cublasLtMatrixLayoutCreate", error))
      return false;
    if (batch == 1)
      return true;
    return ok(cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                               sizeof(batch)),
              "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)", error) &&
           ok(cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                               &o.stride, sizeof(o.stride)),
              "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)", error);
  };
  if (!makeLayout(&g->layoutA_, b, typeA) || !makeLayout(&g->layoutB_, a, typeB) ||
      !makeLayout(&g->layoutC_, c, typeC)) {
    error += ": " + describe(d);
    return nullptr;
  }

  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  if (d.epilogue == GemmEpilogue::Bias) epilogue = CUBLASLT_EPILOGUE_BIAS;
  if (d.epilogue == GemmEpilogue::GeluBias) epilogue = CUBLASLT_EPILOGUE_GELU_BIAS;
  if (d.epilogue == GemmEpilogue::GeluAuxBias) epilogue = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  if (d.epilogue == GemmEpilogue::BiasGradB) epilogue = CUBLASLT_EPILOGUE_BGRADA;
  if (d.epilogue == GemmEpilogue::DGelu) epilogue = CUBLASLT_EPILOGUE_DGELU;
  if (d.epilogue == GemmEpilogue::DGeluBGrad) epilogue = CUBLASLT_EPILOGUE_DGELU_BGRAD;
  bool described =
      ok(cublasLtMatmulDescCreate(&g->op_, compute, CUDA_R_32F), "cublasLtMatmulDescCreate",
         error) &&
      ok(cublasLtMatmulDescSetAttribute(g->op_, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof(opA)),
         "cublasLtMatmulDescSetAttribute(TRANSA)", error) &&
      ok(cublasLtMatmulDescSetAttribute(g->op_, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof(opB)),
         "cublasLtMatmulDescSetAttribute(TRANSB)", error) &&
      ok(cublasLtMatmulDescSetAttribute(g->op_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                        sizeof(epilogue)),
         "cublasLtMatmulDescSetAttribute(EPILOGUE)", error);
  // The bias, or the bias gradient's output.
  const void *biasPointer = biasGrad ? d.biasGrad : d.bias;
  if (described && usesBias)
    described = ok(cublasLtMatmulDescSetAttribute(g->op_, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                  &biasPointer, sizeof(biasPointer)),
                   "cublasLtMatmulDescSetAttribute(BIAS_POINTER)", error);
  // The aux matrix is dense row-major [M, N] (column-major N×M): its
  // leading dimension is N, whatever c's.
  const int64_t auxLd = d.n;
  if (described && usesAux)
    described = ok(cublasLtMatmulDescSetAttribute(g->op_, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                                  &d.aux, sizeof(d.aux)),
                   "cublasLtMatmulDescSetAttribute(EPILOGUE_AUX_POINTER)", error) &&
                ok(cublasLtMatmulDescSetAttribute(g->op_, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                                                  &auxLd, sizeof(auxLd)),
                   "cublasLtMatmulDescSetAttribute(EPILOGUE_AUX_LD)", error);
  if (described && d.fp8) {
    // Scales of cuBLASLt's A (our b) and B (our a); fp32 accumulation as
    // the CPU's sgemm unless the product asks for fast accumulation (the
    // partial sums added in lower precision, which the forward tolerates).
    const int8_t fastAccumulation = d.fp8FastAccumulation ? 1 : 0;
    described = ok(cublasLtMatmulDescSetAttribute(g->op_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                                  &d.scaleB, sizeof(d.scaleB)),
                   "cublasLtMatmulDescSetAttribute(A_SCALE_POINTER)", error) &&
                ok(cublasLtMatmulDescSetAttribute(g->op_, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                                  &d.scaleA, sizeof(d.scaleA)),
                   "cublasLtMatmulDescSetAttribute(B_SCALE_POINTER)", error) &&
                ok(cublasLtMatmulDescSetAttribute(g->op_, CUBLASLT_MATMUL_DESC_FAST_ACCUM,
                                                  &fastAccumulation, sizeof(fastAccumulation)),
                   "cublasLtMatmulDescSetAttribute(FAST_ACCUM)", error);
  }
  if (!described) {
    error += ": " + describe(d);
    return nullptr;
  }

  // cuBLASLt's A is b, its B is a; its D is c, and so is its C unless an
  // addend is.
  const uint32_t alignA = b.alignment(abSize);
  const uint32_t alignB = a.alignment(abSize);
  const uint32_t alignC = storedC(d, d.addend ? d.addend : d.c).alignment(cSize);
  const uint32_t alignD = c.alignment(cSize);
  // No preference names the bias or the aux matrix; their alignment is part
  // of the cache key so an algorithm chosen for aligned ones is not reused
  // for misaligned ones.
  const uint32_t alignBias =
      usesBias ? Stored{biasPointer, 1, d.n, d.n, 0, 1}.alignment(elementSize) : 256u;
  const uint32_t alignAux =
      usesAux ? Stored{d.aux, d.m, d.n, d.n, 0, 1}.alignment(elementSize) : 256u;

  std::lock_guard<std::mutex> lock(planMutex());
  g->workspace_ = workspace(device, error);
  if (!g->workspace_) return nullptr;
  g->workspaceBytes_ = kWorkspaceBytes;

  // Plan cache: everything the query (and the timing) sees.
  struct Plan {
    cublasLtMatmulAlgo_t algo;
    std::string choice;
  };
  static std::map<std::vector<int64_t>, Plan> cache;
  const bool batched = d.batch > 1;
  std::vector<int64_t> key = {
      device,
      static_cast<int64_t>(d.dtype),
      d.f32Output ? 1 : 0,
      static_cast<int64_t>(compute),
      d.m,
      d.n,
      d.k,
      d.batch,
      batched ? d.strideA : 0,
      batched ? d.strideB : 0,
      batched ? d.strideC : 0,
      d.transposeA ? 1 : 0,
      d.transposeB ? 1 : 0,
      a.ld,
      b.ld,
      c.ld,
      static_cast<int64_t>(d.epilogue),
      d.fp8 ? 1 + static_cast<int64_t>(d.fp8A) * 2 + static_cast<int64_t>(d.fp8B) : 0,
      d.fp8 && d.fp8FastAccumulation ? 1 : 0,
      alignA,
      alignB,
      alignC,
      alignD,
      alignBias,
      alignAux};
  if (auto it = cache.find(key); it != cache.end()) {
    g->algo_ = it->second.algo;
    g->choice_ = it->second.choice;
    return g;
  }

  cublasLtMatmulPreference_t pref = nullptr;
  uint64_t wsBytes = kWorkspaceBytes;
  cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
  int found = 0;
  bool queried =
      ok(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate", error) &&
      ok(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                              &wsBytes, sizeof(wsBytes)),
         "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)", error) &&
      ok(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                              &alignA, sizeof(alignA)),
         "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT_A_BYTES)", error) &&
      ok(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                              &alignB, sizeof(alignB)),
         "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT_B_BYTES)", error) &&
      ok(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                              &alignC, sizeof(alignC)),
         "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT_C_BYTES)", error) &&
      ok(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                              &alignD, sizeof(alignD)),
         "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT_D_BYTES)", error) &&
      ok(cublasLtMatmulAlgoGetHeuristic(lt, g->op_, g->layoutA_, g->layoutB_, g->layoutC_,
                                        g->layoutC_, pref, kCandidates, results, &found),
         "cublasLtMatmulAlgoGetHeuristic", error);
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  if (!queried) {
    error += ": " + describe(d);
    return nullptr;
  }
  Candidates cands{lt, g->op_, g->layoutA_, g->layoutB_, g->layoutC_, &g->alpha_, &g->beta_,
                   g->workspace_, {}};
  for (int i = 0; i < found; ++i)
    if (results[i].state == CUBLAS_STATUS_SUCCESS) cands.results.push_back(results[i]);
  if (cands.results.empty()) {
    error = "cuBLASLt has no algorithm for " + describe(d) + " (alignment a " +
            std::to_string(alignB) + ", b " + std::to_string(alignA) + ", c " +
            std::to_string(alignD) + (d.addend ? ", addend " + std::to_string(alignC) : "") +
            " bytes)";
    return nullptr;
  }
  bool provisional = false;
  g->algo_ = cands
                 .results[timeCandidates(d, cands, usesBias ? biasPointer : nullptr,
                                         usesAux ? d.aux : nullptr, g->choice_, provisional)]
                 .algo;
  if (!provisional)
    cache.emplace(std::move(key), Plan{g->algo_, g->choice_});
  return g;
}

LtGemm::~LtGemm() {
  if (layoutC_) cublasLtMatrixLayoutDestroy(layoutC_);
  if (layoutB_) cublasLtMatrixLayoutDestroy(layoutB_);
  if (layoutA_) cublasLtMatrixLayoutDestroy(layoutA_);
  if (op_) cublasLtMatmulDescDestroy(op_);
}

void LtGemm::run(cudaStream_t stream) const {
  std::string unused;
  // Under --profile, the GEMM is a part of its instruction's time.
  PartTimer *parts = partTimer();
  if (parts) parts->mark(stream, "cuBLASLt GEMM");
  cublasStatus_t status = cublasLtMatmul(
      handle(unused), op_, &alpha_, desc_.b, layoutA_, desc_.a, layoutB_, &beta_,
      desc_.addend ? desc_.addend : desc_.c, layoutC_, desc_.c, layoutC_, &algo_, workspace_,
      workspaceBytes_, stream);
  if (parts) parts->mark(stream, nullptr);
  if (status != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error("cublasLtMatmul failed for " + describe(desc_) + ": " +
                             statusText(status));
}

} // namespace llmc::cuda
