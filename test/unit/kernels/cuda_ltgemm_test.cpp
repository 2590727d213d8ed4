//===- cuda_ltgemm_test.cpp - LtGemm's leading dimensions, timing, parts --===//
//
// LtGemm (kernels/cuda/LtGemm.h) directly, for what no kernel binding
// reaches yet: operands whose rows lie `ld` elements apart (a vocabulary
// padded to 16-byte rows; the padding is never read or written), the plan
// cache keeping layouts of one shape apart, the choice between the
// heuristic's candidates by timing (and its off switches), 16-bit
// products summed into an f32 output, and the mark a GEMM leaves for
// `llmc-run --profile`. Products are compared with the CPU
// matmul kernel on the dense operands (norm metric, as cuda_matmul_test).

#include "CudaConformance.h"

#include "kernels/cuda/Device.h"
#include "kernels/cuda/LtGemm.h"

#include <cmath>
#include <limits>
#include <memory>
#include <utility>

namespace llmc::test {
namespace {

using cuda::GemmDesc;
using cuda::LtGemm;

/// A row-major matrix of `rows` × `cols` stored with rows `ld` apart on the
/// device; the padding holds `pad`.
struct Strided {
  Strided(const RefTensor &dense, DType dtype, int64_t ld, double pad)
      : dtype(dtype), rows(dense.shape[0]), cols(dense.shape[1]), ld(ld) {
    RefTensor padded = RefTensor::zeros({rows, ld});
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < ld; ++c)
        padded.data[r * ld + c] = c < cols ? dense.data[r * cols + c] : pad;
    Buffer host = Buffer::of(padded, dtype);
    bytes = host.view().bytes();
    ptr = cuda::deviceAlloc(bytes);
    cuda::copyToDevice(ptr, host.view().data, bytes);
  }
  ~Strided() { cuda::deviceFree(ptr); }
  Strided(const Strided &) = delete;
  Strided &operator=(const Strided &) = delete;

  /// The whole stored matrix, padding included, as doubles.
  RefTensor download() const {
    Buffer host(dtype, {rows, ld});
    cuda::copyToHost(host.view().data, ptr, bytes);
    return host.toRef();
  }
  /// Its [rows, cols] part.
  RefTensor dense() const {
    RefTensor all = download(), out = RefTensor::zeros({rows, cols});
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) out.data[r * cols + c] = all.data[r * ld + c];
    return out;
  }

  DType dtype;
  int64_t rows, cols, ld;
  size_t bytes;
  void *ptr;
};

/// One product c = op(a)·op(b) with the given leading dimensions (0:
/// dense), planned, run and checked against the CPU matmul; the padding of
/// c must keep its sentinel. Returns the plan's choice.
std::string checkProduct(DType dtype, int64_t m, int64_t k, int64_t n, bool ta, bool tb,
                         int64_t lda, int64_t ldb, int64_t ldc, uint64_t seed) {
  SCOPED_TRACE(std::string(dtypeName(dtype)) + " m" + std::to_string(m) + " k" +
               std::to_string(k) + " n" + std::to_string(n) + " ta " + std::to_string(ta) +
               " tb " + std::to_string(tb) + " ld " + std::to_string(lda) + "/" +
               std::to_string(ldb) + "/" + std::to_string(ldc));
  const double nan = std::numeric_limits<double>::quiet_NaN(), sentinel = 7.0;
  RefTensor a = roundTo(randomTensor({ta ? k : m, ta ? m : k}, seed), dtype);
  RefTensor b = roundTo(randomTensor({tb ? n : k, tb ? k : n}, seed + 1), dtype);
  // Input padding is NaN: a read of it would poison the product.
  Strided da(a, dtype, lda ? lda : a.shape[1], nan), db(b, dtype, ldb ? ldb : b.shape[1], nan);
  Strided dc(RefTensor::zeros({m, n}), dtype, ldc ? ldc : n, sentinel);
  GemmDesc d;
  d.dtype = dtype, d.m = m, d.n = n, d.k = k, d.transposeA = ta, d.transposeB = tb;
  d.lda = lda, d.ldb = ldb, d.ldc = ldc;
  d.a = da.ptr, d.b = db.ptr, d.c = dc.ptr;
  std::string error;
  std::unique_ptr<LtGemm> gemm = LtGemm::create(d, error);
  if (!gemm) {
    ADD_FAILURE() << error;
    return "";
  }
  gemm->run(nullptr);
  cuda::synchronize();

  Buffer ab = Buffer::of(a, dtype), bb = Buffer::of(b, dtype), cb(dtype, {m, n});
  EXPECT_TRUE(runKernel("matmul", {&ab, &bb}, {&cb},
                        attrs({}, {{"transpose_a", ta}, {"transpose_b", tb}})));
  EXPECT_CLOSE(dc.dense(), cb.toRef(), Metric::Norm, tolerance(dtype));
  RefTensor all = dc.download();
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = n; c < dc.ld; ++c)
      EXPECT_EQ(all.data[r * dc.ld + c], sentinel) << "padding of c at row " << r << " column " << c;
  return gemm->choice();
}

TEST(CudaStepLtGemm, HonoursLeadingDimensions) {
  LLMC_REQUIRE_GPU();
  uint64_t seed = 12000;
  // GPT-2's vocabulary: 50257 bf16 columns are 100514-byte rows; padded to
  // 50264 they are 16-byte aligned.
  for (DType dtype : {DType::F32, DType::BF16})
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        const int64_t m = 6, k = 24, n = 50257;
        const int64_t aCols = ta ? m : k, bCols = tb ? k : n;
        checkProduct(dtype, m, k, n, ta, tb, aCols + 8, bCols + 8, 50264, ++seed);
        // Leading dimensions that leave rows only 2- or 4-byte aligned.
        checkProduct(dtype, m, k, 37, ta, tb, aCols + 1, (tb ? k : 37) + 3, 41, ++seed);
      }
}

TEST(CudaStepLtGemm, PlansOfOneShapeKeepTheirLayoutsApart) {
  // Planned in turn, a dense and a padded product of one shape must each
  // run with its own layout (the plan cache's key holds the lds).
  LLMC_REQUIRE_GPU();
  for (int64_t ldc : {0, 136, 0, 144})
    checkProduct(DType::BF16, 64, 32, 128, false, true, 0, 0, ldc, 12100);
}

TEST(CudaStepLtGemm, LeadingDimensionShorterThanARowIsRefused) {
  LLMC_REQUIRE_GPU();
  GemmDesc d;
  d.dtype = DType::F32, d.m = 4, d.n = 8, d.k = 3, d.ldc = 7;
  std::string error;
  EXPECT_EQ(LtGemm::create(d, error), nullptr);
  EXPECT_NE(error.find("a leading dimension is shorter than its rows"), std::string::npos) << error;
}

TEST(CudaStepLtGemm, AddsSixteenBitProductsIntoAnF32Sum) {
  // c (f32) = a1·b1, then c += a2·b2, operands bf16 or f16: the sum of the
  // two products in fp32, neither rounded to 16 bits (the LM head's weight
  // gradient over its chunks).
  LLMC_REQUIRE_GPU();
  const int64_t m = 96, k = 40, n = 136;
  for (DType dtype : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtypeName(dtype));
    RefTensor a1 = roundTo(randomTensor({k, m}, 12400), dtype);
    RefTensor b1 = roundTo(randomTensor({k, n}, 12401), dtype);
    RefTensor a2 = roundTo(randomTensor({k, m}, 12402), dtype);
    RefTensor b2 = roundTo(randomTensor({k, n}, 12403), dtype);
    Strided da1(a1, dtype, m, 0), db1(b1, dtype, n, 0), da2(a2, dtype, m, 0), db2(b2, dtype, n, 0);
    Strided dc(RefTensor::zeros({m, n}), DType::F32, n, 0);
    std::string error;
    auto plan = [&](const Strided &a, const Strided &b, bool accumulate) {
      GemmDesc d;
      d.dtype = dtype, d.m = m, d.n = n, d.k = k, d.transposeA = true;
      d.f32Output = true, d.accumulate = accumulate;
      d.a = a.ptr, d.b = b.ptr, d.c = dc.ptr;
      return LtGemm::create(d, error);
    };
    std::unique_ptr<LtGemm> first = plan(da1, db1, false), second = plan(da2, db2, true);
    ASSERT_TRUE(first && second) << error;
    first->run(nullptr);
    second->run(nullptr);
    cuda::synchronize();

    RefTensor expected = RefTensor::zeros({m, n});
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p)
          sum += a1.data[p * m + i] * b1.data[p * n + j] + a2.data[p * m + i] * b2.data[p * n + j];
        expected.data[i * n + j] = sum;
      }
    EXPECT_CLOSE(dc.dense(), expected, Metric::Norm, 1e-6);
  }
}

TEST(CudaStepLtGemm, AnF32OutputNeedsSixteenBitOperandsAndNoEpilogue) {
  // Refused while planning, before cuBLASLt is asked: no GPU needed.
  GemmDesc d;
  d.m = 4, d.n = 8, d.k = 3, d.f32Output = true;
  for (auto [dtype, epilogue] : {std::pair{DType::F32, cuda::GemmEpilogue::None},
                                 std::pair{DType::BF16, cuda::GemmEpilogue::Bias}}) {
    d.dtype = dtype, d.epilogue = epilogue;
    std::string error;
    EXPECT_EQ(LtGemm::create(d, error), nullptr);
    EXPECT_NE(error.find("an f32 output is for bf16 or f16 operands without epilogue"),
              std::string::npos)
        << error;
  }
}

/// Restores the process's GEMM settings when a test ends.
struct GemmSettings {
  bool timing = cuda::gemmTiming();
  ~GemmSettings() {
    cuda::setGemmTiming(timing);
    cuda::setCapturingGraph(false);
  }
};

TEST(CudaStepLtGemm, TimingChoosesACandidateAndCanBeTurnedOff) {
  LLMC_REQUIRE_GPU();
  GemmSettings restore;
  // Each shape is new to the plan cache, so each is planned afresh.
  cuda::setGemmTiming(true);
  std::string timed = checkProduct(DType::BF16, 1024, 1024, 1024, false, false, 0, 0, 0, 12200);
  EXPECT_TRUE(timed == "heuristic" || timed.rfind("timed: candidate ", 0) == 0) << timed;
  cuda::setGemmTiming(false);
  std::string off = checkProduct(DType::BF16, 1032, 1024, 1024, false, false, 0, 0, 0, 12201);
  EXPECT_TRUE(off == "heuristic" || off == "heuristic (timing off)") << off;
  cuda::setGemmTiming(true);
  cuda::setCapturingGraph(true);
  std::string capturing =
      checkProduct(DType::BF16, 1040, 1024, 1024, false, false, 0, 0, 0, 12202);
  EXPECT_TRUE(capturing == "heuristic" || capturing == "heuristic (a graph was being captured)")
      << capturing;
}

/// Records the marks a kernel leaves for the profiler.
struct RecordingTimer final : cuda::PartTimer {
  void mark(void *stream, const char *part) override { marks.emplace_back(stream, part); }
  std::vector<std::pair<void *, const char *>> marks;
};

TEST(CudaStepLtGemm, MarksItsPartForTheProfiler) {
  LLMC_REQUIRE_GPU();
  RecordingTimer timer;
  cuda::setPartTimer(&timer);
  checkProduct(DType::F32, 16, 16, 16, false, false, 0, 0, 0, 12300);
  cuda::setPartTimer(nullptr);
  ASSERT_EQ(timer.marks.size(), 2u);
  EXPECT_EQ(std::string(timer.marks[0].second), "cuBLASLt GEMM");
  EXPECT_EQ(timer.marks[1].second, nullptr);
  EXPECT_EQ(timer.marks[0].first, nullptr); // the stream the GEMM ran on
}

} // namespace
} // namespace llmc::test
