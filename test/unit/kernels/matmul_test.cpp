//===- matmul_test.cpp - matmul conformance cases -------------------------===//
//
// matmul's cases (Conformance.h), run on the CPU against the reference and
// on a GPU (cuBLASLt) against the CPU. Norm metric: each element is a
// K-term dot product whose value can cancel to near zero. f32 runs without
// TF32 (the default), so 1e-5 holds on both backends; 16-bit outputs are
// rounded once on store.

#include "Conformance.h"

namespace llmc::test {
namespace {

struct MatmulShape {
  std::vector<int64_t> lead; // a's leading dims
  int64_t m, k, n;
  bool batchedB; // b has a's leading dims (else a shared 2-D b)
};

std::vector<int64_t> shapeOf(const std::vector<int64_t> &lead, int64_t rows, int64_t cols) {
  std::vector<int64_t> shape = lead;
  shape.push_back(rows);
  shape.push_back(cols);
  return shape;
}

/// c = op(a)·op(b), or c0 + op(a)·op(b) when accumulating.
ConformanceCase matmulCase(DType dtype, const MatmulShape &c, int ta, int tb, bool accumulate,
                           uint64_t seed) {
  std::string label = std::string(dtypeName(dtype)) + "_" +
                      (c.lead.empty() ? "" : shapeLabel(c.lead) + "_") + "m" + std::to_string(c.m) +
                      "k" + std::to_string(c.k) + "n" + std::to_string(c.n) +
                      (c.batchedB ? "_batched_b" : "") + (ta ? "_ta" : "") + (tb ? "_tb" : "") +
                      (accumulate ? "_accumulate" : "");
  return {"matmul", label, [=] {
            KernelCall k;
            k.input(randomTensor(shapeOf(c.lead, ta ? c.k : c.m, ta ? c.m : c.k), seed), dtype);
            std::vector<int64_t> bLead = c.batchedB ? c.lead : std::vector<int64_t>{};
            k.input(randomTensor(shapeOf(bLead, tb ? c.n : c.k, tb ? c.k : c.n), seed + 1), dtype);
            RefTensor c0 = roundTo(randomTensor(shapeOf(c.lead, c.m, c.n), seed + 2), dtype);
            k.output(Buffer::of(c0, dtype));
            k.keepOutputs = accumulate;
            k.attrs = attrs(
                {}, {{"transpose_a", ta}, {"transpose_b", tb}, {"accumulate", accumulate ? 1 : 0}});
            k.reference = [=](const std::vector<RefTensor> &in) {
              RefTensor product = ref::matmul(in[0], in[1], ta, tb);
              return std::vector<RefTensor>{accumulate ? ref::add(c0, product) : product};
            };
            k.metric = k.cudaMetric = Metric::Norm;
            if (c.k == 0) // no products: zeros, or c0 kept, exactly
              k.metric = k.cudaMetric = Metric::Elementwise,
              k.tolerances = k.cudaTolerances = {0.0};
            return k;
          }};
}

/// Unit and odd sizes in every position, batched and shared b, folded
/// (shared b, untransposed a) and strided-batched products, one row (a
/// decode step: the GEMV path), an empty contraction; accumulation; and
/// GPT-2 small's MLP at B·T = 2·64 (x·Wᵀ, x·W, dx = dy·W, dW += xᵀ·dy) and
/// attention's batched q·kᵀ over [B·H] heads.
std::vector<ConformanceCase> matmulCases() {
  const std::vector<MatmulShape> small = {
      {{}, 1, 1, 1, false},     {{}, 1, 7, 1, false},       {{}, 7, 1, 13, false},
      {{}, 1, 129, 37, false},  {{}, 37, 129, 1, false},    {{}, 3, 1000, 7, false},
      {{}, 37, 13, 129, false}, {{}, 7, 13, 33, false},     {{2, 3}, 7, 13, 5, false},
      {{3}, 7, 13, 9, true},    {{2, 2}, 33, 17, 13, true}, {{4}, 65, 128, 70, false},
      {{5}, 1, 37, 1, false},   {{1}, 1, 1, 1, true},       {{3}, 1, 7, 129, true},
      {{37}, 3, 7, 1, true},    {{}, 1, 13, 33, false},     {{1, 1}, 1, 64, 70, false},
  };
  const std::vector<MatmulShape> accumulating = {{{}, 7, 13, 33, false},
                                                 {{3}, 7, 13, 33, false},
                                                 {{3}, 7, 13, 33, true},
                                                 {{1}, 1, 13, 33, false},
                                                 {{2, 2}, 1, 129, 37, true}};
  struct Model {
    MatmulShape c;
    int ta, tb;
    bool accumulate;
  };
  const std::vector<Model> models = {
      {{{2}, 64, 768, 3072, false}, 0, 1, false}, // fc: x [2,64,768] · W[3072,768]ᵀ
      {{{2}, 64, 768, 3072, false}, 0, 0, false}, // x · W[768,3072]
      {{{2}, 64, 3072, 768, false}, 0, 0, false}, // dx = dy · W[3072,768]
      {{{}, 768, 128, 3072, false}, 1, 0, true},  // dW += xᵀ[128,768] · dy[128,3072]
      {{{24}, 64, 64, 64, true}, 0, 1, false},    // scores = q · kᵀ per head
  };
  std::vector<ConformanceCase> cases;
  uint64_t seed = 1000;
  for (DType dtype : kFloatTypes) {
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        for (const MatmulShape &c : small)
          cases.push_back(matmulCase(dtype, c, ta, tb, false, seed += 3));
        for (const MatmulShape &c : accumulating)
          cases.push_back(matmulCase(dtype, c, ta, tb, true, seed += 3));
      }
    for (const Model &m : models)
      cases.push_back(matmulCase(dtype, m.c, m.ta, m.tb, m.accumulate, seed += 3));
    for (bool accumulate : {false, true})
      cases.push_back(matmulCase(dtype, {{}, 3, 0, 5, false}, 0, 0, accumulate, seed += 3));
  }
  return cases;
}

LLMC_CONFORMANCE_CASES(Matmul, matmulCases);

} // namespace
} // namespace llmc::test
