//===- matmul.cpp - batched matrix product reference ----------------------===//
//
// c = op(a)·op(b) over the last two dims, op optionally a transpose, with a
// 2-D b shared by every leading index of a. Three nested loops, no blocking
// or BLAS: the CPU kernel (OpenBLAS sgemm) is checked against it.
//
//===----------------------------------------------------------------------===//

#include "kernels/reference/Common.h"
#include "kernels/reference/Evaluator.h"

namespace llmc::ref {

RefTensor matmul(const RefTensor &a, const RefTensor &b, bool transposeA, bool transposeB) {
  size_t ra = a.shape.size(), rb = b.shape.size();
  require(ra >= 2 && rb >= 2, "matmul", "operands must have rank >= 2");
  int64_t m = transposeA ? a.shape[ra - 1] : a.shape[ra - 2];
  int64_t k = transposeA ? a.shape[ra - 2] : a.shape[ra - 1];
  int64_t kb = transposeB ? b.shape[rb - 1] : b.shape[rb - 2];
  int64_t n = transposeB ? b.shape[rb - 2] : b.shape[rb - 1];
  require(k == kb, "matmul", "contraction dims differ");
  bool shared = rb == 2;
  require(shared || (rb == ra && std::equal(a.shape.begin(), a.shape.end() - 2, b.shape.begin())),
          "matmul", "a batched b must have a's leading dims");

  std::vector<int64_t> shape(a.shape.begin(), a.shape.end() - 2);
  int64_t batch = product(shape);
  shape.push_back(m);
  shape.push_back(n);
  RefTensor c = RefTensor::zeros(shape);
  for (int64_t t = 0; t < batch; ++t) {
    const double *pa = a.data.data() + t * m * k;
    const double *pb = b.data.data() + (shared ? 0 : t * k * n);
    double *pc = c.data.data() + t * m * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0.0;
        for (int64_t p = 0; p < k; ++p) {
          double x = transposeA ? pa[p * m + i] : pa[i * k + p];
          double y = transposeB ? pb[j * k + p] : pb[p * n + j];
          sum += x * y;
        }
        pc[i * n + j] = sum;
      }
  }
  return c;
}

//===----------------------------------------------------------------------===//
// Evaluators of the ops these references define (kernels/reference/Evaluator.h)
//===----------------------------------------------------------------------===//
LLMC_REGISTER_EVALUATOR("llm.matmul", [](const RefCall &c) -> Results {
  return {matmul(c.in(0), c.in(1), c.flag("transpose_a"), c.flag("transpose_b"))};
});

} // namespace llmc::ref
