//===- LtGemm.cu - row-major batched GEMM through cuBLASLt ----------------===//
//
// Planning a cuBLASLt matmul is host work with a heuristic query; running
// one is a single call. So everything is decided when a kernel binds:
//  - one cublasLtHandle_t per process, created by the first GEMM planned;
//  - one 32 MiB workspace per device, allocated by the first GEMM planned on
//    it (GEMMs on one device run in stream order, so they can share it);
//  - per shape, one heuristic query, cached for the process: a model's
//    layers repeat the same few shapes, so loading a program asks cuBLASLt
//    only a handful of times.
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

#include <climits>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace llmc::cuda {
namespace {

constexpr size_t kWorkspaceBytes = size_t(32) << 20;

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

/// The workspace of `device`, allocated on first use (planMutex held).
void *workspace(int device, std::string &error) {
  static std::map<int, void *> workspaces;
  auto it = workspaces.find(device);
  if (it != workspaces.end()) return it->second;
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

/// Largest power of two (at most 256) dividing the address and every batch
/// offset of an operand: what the algorithm may assume about each matrix.
uint32_t alignmentOf(const void *ptr, int64_t strideElements, size_t elementSize, int64_t batch) {
  uint64_t bits = reinterpret_cast<uintptr_t>(ptr) | 256u;
  if (batch > 1 && strideElements != 0) bits |= static_cast<uint64_t>(strideElements) * elementSize;
  return static_cast<uint32_t>(bits & (~bits + 1)); // lowest set bit
}

} // namespace

std::string LtGemm::describe(const GemmDesc &d) {
  std::ostringstream os;
  os << dtypeName(d.dtype) << " c[";
  if (d.batch != 1) os << d.batch << "x";
  os << d.m << "x" << d.n << "] = a" << (d.transposeA ? "^T" : "") << "["
     << (d.transposeA ? d.k : d.m) << "x" << (d.transposeA ? d.m : d.k) << "]·b"
     << (d.transposeB ? "^T" : "") << "[" << (d.transposeB ? d.n : d.k) << "x"
     << (d.transposeB ? d.k : d.n) << "]";
  if (d.batch != 1 && d.strideB == 0) os << " (b shared)";
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
  const cublasComputeType_t compute =
      d.dtype == DType::F32 && allowTf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const size_t elementSize = dtypeSize(d.dtype);

  // cuBLASLt's A is b: stored [K,N] it reads as N×K (ld N) = op(b)ᵀ, no
  // transpose; stored [N,K] it reads as K×N (ld K) and is transposed.
  const cublasOperation_t opA = d.transposeB ? CUBLAS_OP_T : CUBLAS_OP_N;
  const uint64_t aRows = d.transposeB ? d.k : d.n, aCols = d.transposeB ? d.n : d.k;
  // cuBLASLt's B is a: stored [M,K] it reads as K×M (ld K) = op(a)ᵀ; stored
  // [K,M] it reads as M×K (ld M) and is transposed.
  const cublasOperation_t opB = d.transposeA ? CUBLAS_OP_T : CUBLAS_OP_N;
  const uint64_t bRows = d.transposeA ? d.m : d.k, bCols = d.transposeA ? d.k : d.m;

  const int32_t batch = static_cast<int32_t>(d.batch);
  auto makeLayout = [&](cublasLtMatrixLayout_t *layout, uint64_t rows, uint64_t cols,
                        int64_t stride) {
    if (!ok(cublasLtMatrixLayoutCreate(layout, type, rows, cols, static_cast<int64_t>(rows)),
            "cublasLtMatrixLayoutCreate", error))
      return false;
    if (batch == 1) return true;
    return ok(cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                               sizeof(batch)),
              "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)", error) &&
           ok(cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                               &stride, sizeof(stride)),
              "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)", error);
  };
  if (!makeLayout(&g->layoutA_, aRows, aCols, d.strideB) ||
      !makeLayout(&g->layoutB_, bRows, bCols, d.strideA) ||
      !makeLayout(&g->layoutC_, static_cast<uint64_t>(d.n), static_cast<uint64_t>(d.m),
                  d.strideC)) {
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
  // The aux matrix is laid out as D (column-major N×M): its leading
  // dimension is D's row count, N.
  const int64_t auxLd = d.n;
  if (described && usesAux)
    described = ok(cublasLtMatmulDescSetAttribute(g->op_, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                                  &d.aux, sizeof(d.aux)),
                   "cublasLtMatmulDescSetAttribute(EPILOGUE_AUX_POINTER)", error) &&
                ok(cublasLtMatmulDescSetAttribute(g->op_, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                                                  &auxLd, sizeof(auxLd)),
                   "cublasLtMatmulDescSetAttribute(EPILOGUE_AUX_LD)", error);
  if (!described) {
    error += ": " + describe(d);
    return nullptr;
  }

  // cuBLASLt's A is b, its B is a; its D is c, and so is its C unless an
  // addend is.
  const uint32_t alignA = alignmentOf(d.b, d.strideB, elementSize, d.batch);
  const uint32_t alignB = alignmentOf(d.a, d.strideA, elementSize, d.batch);
  const uint32_t alignC = alignmentOf(d.addend ? d.addend : d.c, d.strideC, elementSize, d.batch);
  const uint32_t alignD = alignmentOf(d.c, d.strideC, elementSize, d.batch);
  // No preference names the bias or the aux matrix; their alignment is part
  // of the cache key so an algorithm chosen for aligned ones is not reused
  // for misaligned ones.
  const uint32_t alignBias = usesBias ? alignmentOf(biasPointer, 0, elementSize, 1) : 256u;
  const uint32_t alignAux = usesAux ? alignmentOf(d.aux, 0, elementSize, 1) : 256u;

  std::lock_guard<std::mutex> lock(planMutex());
  g->workspace_ = workspace(device, error);
  if (!g->workspace_) return nullptr;
  g->workspaceBytes_ = kWorkspaceBytes;

  // Heuristic cache: everything the query sees.
  static std::map<std::vector<int64_t>, cublasLtMatmulAlgo_t> cache;
  const bool batched = d.batch > 1;
  std::vector<int64_t> key = {device,
                              static_cast<int64_t>(d.dtype),
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
                              static_cast<int64_t>(d.epilogue),
                              alignA,
                              alignB,
                              alignC,
                              alignD,
                              alignBias,
                              alignAux};
  if (auto it = cache.find(key); it != cache.end()) {
    g->algo_ = it->second;
    return g;
  }

  cublasLtMatmulPreference_t pref = nullptr;
  uint64_t wsBytes = kWorkspaceBytes;
  cublasLtMatmulHeuristicResult_t result{};
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
                                        g->layoutC_, pref, 1, &result, &found),
         "cublasLtMatmulAlgoGetHeuristic", error);
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  if (!queried) {
    error += ": " + describe(d);
    return nullptr;
  }
  if (found < 1 || result.state != CUBLAS_STATUS_SUCCESS) {
    error = "cuBLASLt has no algorithm for " + describe(d) + " (alignment a " +
            std::to_string(alignB) + ", b " + std::to_string(alignA) + ", c " +
            std::to_string(alignD) + (d.addend ? ", addend " + std::to_string(alignC) : "") +
            " bytes)";
    return nullptr;
  }
  g->algo_ = result.algo;
  cache.emplace(std::move(key), result.algo);
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
  cublasStatus_t status = cublasLtMatmul(
      handle(unused), op_, &alpha_, desc_.b, layoutA_, desc_.a, layoutB_, &beta_,
      desc_.addend ? desc_.addend : desc_.c, layoutC_, desc_.c, layoutC_, &algo_, workspace_,
      workspaceBytes_, stream);
  if (status != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error("cublasLtMatmul failed for " + describe(desc_) + ": " +
                             statusText(status));
}

} // namespace llmc::cuda
