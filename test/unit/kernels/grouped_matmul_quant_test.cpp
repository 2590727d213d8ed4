//===- grouped_matmul_quant_test.cpp - experts over quantized storage -----===//
//
// grouped_matmul_int and grouped_matmul_nf4: a mixture of experts' stacked
// weights kept quantized, each expert's rows times its own slice.
//
// Conformance cases (Conformance.h): every int scheme (int8, int4, fp8; one
// scale per expert, per row, per column, blocks; asymmetric) and NF4, both
// layouts ([G, K, F] and [G, F, K]), odd shapes, an expert with no rows,
// rows past the last group (zeros) and invalid offsets (NaN), against the
// reference: each expert dequantized (ref::dequantizeInt / dequantizeNf4),
// stacked, and multiplied by ref::groupedMatmul in double. Norm metric:
// 1e-5 where every product keeps x in fp32; where an expert gets at most 16
// rows of a W [N, K] in whole blocks of 32 the CPU takes the decode step's
// integer dots (x quantized to int8 per 32: each product moves by at most
// Σ d/2 · Σ |W|, about 0.5% of the norm on random data, docs/inference.md),
// and the case allows 2e-2.
//
// "ten_blocks": a decode step over rows of ten NF4 blocks of 32, each
// expert's blocks starting mid-way through a 256-block group of the
// double-quantized scales, so the vector path for a row's block scales
// meets a group boundary inside its eight (expert 1's row 21: the stack's
// blocks 510..517).
//
// A tensor-parallel rank's NF4 piece of a stack (each expert's rows, or
// its columns; the whole stack's double-quantized scales) against the
// whole stack's values there: in blocks of 16, and in blocks of 32 over
// rows of 10 and 20 blocks (the integer dots, the block scales' vector
// path from each row's first block in the whole stack).
//
// ExpertsAreTheDenseProducts: each expert's rows of y are, bit for bit,
// what matmul_int / matmul_nf4 computes for those rows alone against that
// expert's storage — the grouped kernel takes the dense kernel's path (the
// decode dots at 1 row per expert, the sgemm chunks past 16), never an
// expansion of the whole stack.
//
//===----------------------------------------------------------------------===//

#include "Conformance.h"
#include "IntWeightCases.h"
#include "Nf4WeightCases.h"
#include "QuantizedActivations.h"

#include <algorithm>
#include <limits>

namespace llmc::test {
namespace {

/// x [M, K] routed to G experts by `offsets`; each expert's weight [K, F]
/// (or [F, K] transposed).
struct Layout {
  std::string name;
  int64_t k, f;
  std::vector<int64_t> offsets; ///< [G + 1]
  int64_t rows = -1;            ///< M where it is not offsets.back()
  int64_t m() const { return rows >= 0 ? rows : offsets.back(); }
  int64_t groups() const { return static_cast<int64_t>(offsets.size()) - 1; }
  std::vector<int64_t> slice(bool tb) const {
    return tb ? std::vector<int64_t>{f, k} : std::vector<int64_t>{k, f};
  }
  std::vector<int64_t> stack(bool tb) const {
    std::vector<int64_t> s = slice(tb);
    s.insert(s.begin(), groups());
    return s;
  }
  /// Whether offsets[0] = 0, never decreasing, offsets[G] <= M.
  bool valid() const {
    if (offsets.front() != 0 || offsets.back() > m())
      return false;
    for (size_t g = 0; g + 1 < offsets.size(); ++g)
      if (offsets[g + 1] < offsets[g])
        return false;
    return true;
  }
};

/// Odd sizes; an expert with no rows; decode (1 row each) and prefill
/// (more than 16 rows) experts side by side; a tail past the last group;
/// invalid offsets.
std::vector<Layout> layouts() {
  return {
      {"decode", 64, 48, {0, 1, 2, 2, 3}},     {"mixed", 96, 40, {0, 0, 3, 23, 24}},
      {"odd", 32, 18, {0, 5, 5, 12}, 14},      {"wide", 128, 96, {0, 40, 41, 41, 60}},
      {"decreasing", 32, 16, {0, 6, 3, 8}, 8}, {"ten_blocks", 320, 30, {0, 1, 2, 3}},
  };
}

RefTensor offsetsTensor(const std::vector<int64_t> &offsets) {
  RefTensor t = RefTensor::zeros({static_cast<int64_t>(offsets.size())});
  for (size_t i = 0; i < offsets.size(); ++i) t.data[i] = static_cast<double>(offsets[i]);
  return t;
}

/// The stacked weights' reference values from each expert's.
RefTensor stacked(const std::vector<RefTensor> &experts, std::vector<int64_t> shape) {
  RefTensor w = RefTensor::zeros(std::move(shape));
  size_t at = 0;
  for (const RefTensor &e : experts)
    for (double v : e.data) w.data[at++] = v;
  return w;
}

/// Storage of G experts' [rows, cols] slices, expert after expert.
struct ExpertInts {
  std::vector<IntWeight> experts;
  Buffer codes{DType::U8, {}}, scale{DType::F32, {}}, zeroPoint{DType::I32, {}};
};

/// `from`'s elements one after the other into a flat buffer of `dtype`.
template <typename T> Buffer concat(DType dtype, const std::vector<const Buffer *> &from) {
  int64_t n = 0;
  for (const Buffer *b : from) n += b->view().numel();
  Buffer out(dtype, {n});
  T *p = out.view().as<T>();
  for (const Buffer *b : from) {
    const T *q = b->view().as<T>();
    p = std::copy(q, q + b->view().numel(), p);
  }
  return out;
}

ExpertInts randomExperts(const CodeFormat &f, const std::vector<int64_t> &slice, int64_t groups,
                         const Grouping &g, bool asymmetric, uint64_t seed) {
  ExpertInts s;
  std::vector<const Buffer *> codes, scales, zeroPoints;
  for (int64_t e = 0; e < groups; ++e)
    s.experts.push_back(randomWeight(f, slice[0], slice[1], g, asymmetric, seed + 10 * e));
  for (const IntWeight &w : s.experts) {
    codes.push_back(&w.codesBuf);
    scales.push_back(&w.scaleBuf);
    zeroPoints.push_back(&w.zeroPointBuf);
  }
  s.codes = concat<uint8_t>(DType::U8, codes);
  s.scale = concat<float>(DType::F32, scales);
  if (asymmetric)
    s.zeroPoint = concat<int32_t>(DType::I32, zeroPoints);
  return s;
}

/// Whether the CPU takes the integer dots for some expert of `l` (at most
/// 16 rows of W [N, K] in symmetric runs of whole 32s).
bool quantizesSomeExpert(const Layout &l, bool integerDots) {
  if (!integerDots || !l.valid())
    return false;
  for (int64_t g = 0; g < l.groups(); ++g) {
    const int64_t rows = l.offsets[g + 1] - l.offsets[g];
    if (rows > 0 && rows <= 16)
      return true;
  }
  return false;
}

/// The reference: each expert dequantized, then grouped_matmul in double;
/// NaN everywhere for invalid offsets.
std::vector<RefTensor> expected(const Layout &l, const RefTensor &x, const RefTensor &offsets,
                                const RefTensor &weights, bool tb) {
  if (!l.valid()) {
    RefTensor nan = RefTensor::zeros({l.m(), l.f});
    std::fill(nan.data.begin(), nan.data.end(), std::numeric_limits<double>::quiet_NaN());
    return {nan};
  }
  return {ref::groupedMatmul(x, offsets, weights, tb)};
}

void expectations(KernelCall &k, const Layout &l, bool quantizesX) {
  k.metric = k.cudaMetric = Metric::Norm;
  if (quantizesX)
    k.tolerances = k.cudaTolerances = {2e-2};
  if (!l.valid()) {
    k.keepOutputs = true;
    k.metric = k.cudaMetric = Metric::Elementwise;
  }
}

std::string label(DType dtype, const std::string &scheme, const Layout &l, bool tb) {
  return std::string(dtypeName(dtype)) + "_" + scheme + "_" + l.name + "_m" +
         std::to_string(l.m()) + "k" + std::to_string(l.k) + "f" + std::to_string(l.f) +
         (tb ? "_tb" : "");
}

ConformanceCase intCase(DType dtype, const CodeFormat &f, const Grouping &g, bool asymmetric,
                        const Layout &l, bool tb, uint64_t seed) {
  const std::string scheme = f.name() + "_" + g.name() + (asymmetric ? "_asym" : "");
  return {"grouped_matmul_int", label(dtype, scheme, l, tb), [=] {
            KernelCall k;
            const std::vector<int64_t> slice = l.slice(tb);
            ExpertInts s = randomExperts(f, slice, l.groups(), g, asymmetric, seed);
            std::vector<RefTensor> experts;
            for (const IntWeight &w : s.experts) experts.push_back(referenceWeight(w, f, slice, g));
            const RefTensor weights = stacked(experts, l.stack(tb));
            k.input(randomTensor({l.m(), l.k}, seed + 1), dtype);
            k.input(Buffer::of(offsetsTensor(l.offsets), DType::I32));
            k.input(s.codes);
            k.input(s.scale);
            if (asymmetric)
              k.input(s.zeroPoint);
            k.output(Buffer::of(randomTensor({l.m(), l.f}, seed + 2), dtype));
            k.attrs = intAttrs(f, g, l.stack(tb), tb);
            k.reference = [=](const std::vector<RefTensor> &in) {
              return expected(l, in[0], in[1], weights, tb);
            };
            const bool dots = !f.fp8 && quantizesActivations(1, l.f, l.k, g, tb, asymmetric);
            expectations(k, l, quantizesSomeExpert(l, dots));
            return k;
          }};
}

ConformanceCase nf4Case(DType dtype, int64_t block, const Layout &l, bool tb, uint64_t seed) {
  return {"grouped_matmul_nf4", label(dtype, "nf4_block" + std::to_string(block), l, tb), [=] {
            KernelCall k;
            const std::vector<int64_t> stack = l.stack(tb);
            const int64_t numel = stack[0] * stack[1] * stack[2];
            Nf4Weight w = randomWeight(numel, block, seed);
            // The stack's storage read flat: every expert's blocks in one
            // tensor, their scales per 256 blocks of the whole stack.
            const RefTensor weights =
                ref::dequantizeNf4(w.codes, w.absmaxQ, w.absmaxScale, w.mean, {numel}, block);
            RefTensor shaped = weights;
            shaped.shape = stack;
            k.input(randomTensor({l.m(), l.k}, seed + 1), dtype);
            k.input(Buffer::of(offsetsTensor(l.offsets), DType::I32));
            k.input(w.codesBuf);
            k.input(w.absmaxQBuf);
            k.input(w.scaleBuf);
            k.input(w.meanBuf);
            k.output(Buffer::of(randomTensor({l.m(), l.f}, seed + 2), dtype));
            k.attrs = nf4Attrs(block, stack, tb);
            k.reference = [=](const std::vector<RefTensor> &in) {
              return expected(l, in[0], in[1], shaped, tb);
            };
            expectations(k, l, quantizesSomeExpert(l, takesIntegerDots(1, l.k, block, tb)));
            return k;
          }};
}

/// Rows `rows` of a row-major `b` of `cols` entries a row, entries
/// [first, first + n) of each, one after the other.
template <typename T>
Buffer piecesOf(const Buffer &b, int64_t cols, const std::vector<int64_t> &rows, int64_t first,
                int64_t n) {
  Buffer out(b.dtype, {static_cast<int64_t>(rows.size()) * n});
  const T *p = b.view().as<T>();
  T *q = out.view().as<T>();
  for (int64_t r : rows) q = std::copy(p + r * cols + first, p + r * cols + first + n, q);
  return out;
}

/// Rank `rank` of `tp`'s piece of a transposed NF4 stack [G, F, K] in
/// blocks of `block`, split along each expert's rows F (`rows`: gate and
/// up under tensor parallelism) or its columns K (down): the piece's codes
/// and absmax levels, the whole stack's scales, against the whole stack's
/// values there.
ConformanceCase nf4PieceCase(bool rows, int64_t rank, int64_t tp, int64_t k, int64_t block,
                             uint64_t seed) {
  const int64_t groups = 4, f = 32;
  const std::vector<int64_t> offsets = {0, 1, 3, 3, 20};
  const int64_t pf = rows ? f / tp : f, pk = rows ? k : k / tp;
  const std::string name = std::string(rows ? "rows" : "columns") + "_rank" + std::to_string(rank) +
                           "_k" + std::to_string(k) + "_block" + std::to_string(block);
  return {"grouped_matmul_nf4", "f32_nf4_piece_" + name, [=] {
            KernelCall call;
            Nf4Weight w = randomWeight(groups * f * k, block, seed);
            const RefTensor whole = ref::dequantizeNf4(w.codes, w.absmaxQ, w.absmaxScale, w.mean,
                                                       {groups * f * k}, block);
            // The piece's rows of the view [G·F, K] and its first column.
            std::vector<int64_t> pieceRows;
            for (int64_t g = 0; g < groups; ++g)
              for (int64_t i = 0; i < pf; ++i)
                pieceRows.push_back(g * f + (rows ? rank * pf : 0) + i);
            const int64_t first = rows ? 0 : rank * pk;
            RefTensor weights = RefTensor::zeros({groups, pf, pk});
            for (size_t r = 0; r < pieceRows.size(); ++r)
              for (int64_t c = 0; c < pk; ++c)
                weights.data[r * pk + c] = whole.data[pieceRows[r] * k + first + c];
            call.input(randomTensor({offsets.back(), pk}, seed + 1), DType::F32);
            call.input(Buffer::of(offsetsTensor(offsets), DType::I32));
            call.input(piecesOf<uint8_t>(w.codesBuf, k / 2, pieceRows, first / 2, pk / 2));
            call.input(
                piecesOf<uint8_t>(w.absmaxQBuf, k / block, pieceRows, first / block, pk / block));
            call.input(w.scaleBuf);
            call.input(w.meanBuf);
            call.output(Buffer::of(randomTensor({offsets.back(), pf}, seed + 2), DType::F32));
            call.attrs = nf4Attrs(block, {groups, pf, pk}, true);
            call.attrs.setInts("whole_shape", {groups * f, k});
            call.attrs.setInts("chunks", {rows ? groups : 1, 1});
            call.attrs.setInts("piece_offset", {rows ? rank * pf : 0, first});
            const Layout l{name, pk, pf, offsets};
            call.reference = [=](const std::vector<RefTensor> &in) {
              return expected(l, in[0], in[1], weights, true);
            };
            expectations(call, l, quantizesSomeExpert(l, takesIntegerDots(1, pk, block, true)));
            return call;
          }};
}

std::vector<ConformanceCase> groupedQuantCases() {
  std::vector<ConformanceCase> cases;
  const std::vector<Grouping> groupings = {{0, -1}, {0, 0}, {0, 1}, {16, -1}, {32, -1}};
  uint64_t seed = 9100;
  for (const Layout &l : layouts())
    for (bool tb : {false, true}) {
      const int64_t cols = l.slice(tb)[1];
      for (const CodeFormat &f : allCodeFormats())
        for (const Grouping &g : groupings)
          for (bool asymmetric : {false, true}) {
            if ((g.block > 0 && cols % g.block != 0) || (f.fp8 && asymmetric))
              continue;
            cases.push_back(intCase(DType::F32, f, g, asymmetric, l, tb, seed += 40));
          }
      for (int64_t block : {16, 32})
        if (cols % block == 0)
          cases.push_back(nf4Case(DType::F32, block, l, tb, seed += 40));
    }
  // bf16 widens x and rounds y once: a few cases suffice.
  const Layout mixed = layouts()[1];
  cases.push_back(intCase(DType::BF16, {4, false}, {32, -1}, false, mixed, true, seed += 40));
  cases.push_back(intCase(DType::BF16, {8, false}, {0, 0}, false, mixed, true, seed += 40));
  cases.push_back(nf4Case(DType::BF16, 32, mixed, true, seed += 40));
  // A tensor-parallel rank's piece of a stack, along each expert's rows or
  // columns (the double-quantized scales the whole stack's).
  for (auto [k, block] : {std::pair<int64_t, int64_t>{128, 16}, {640, 32}})
    for (bool rows : {true, false})
      for (int64_t rank : {0, 1})
        cases.push_back(nf4PieceCase(rows, rank, 2, k, block, seed += 40));
  return cases;
}

LLMC_CONFORMANCE_CASES(GroupedMatmulQuant, groupedQuantCases);

/// Rows [begin, end) of x ([M, K]) as a buffer of their own.
Buffer rowsOf(const RefTensor &x, int64_t begin, int64_t end) {
  RefTensor part = RefTensor::zeros({end - begin, x.shape[1]});
  std::copy(x.data.begin() + begin * x.shape[1], x.data.begin() + end * x.shape[1],
            part.data.begin());
  return Buffer::of(part, DType::F32);
}

/// A slice [first, first + n) of a flat buffer.
template <typename T> Buffer sliceOf(const Buffer &b, int64_t first, int64_t n) {
  Buffer out(b.dtype, {n});
  const T *p = b.view().as<T>() + first;
  std::copy(p, p + n, out.view().as<T>());
  return out;
}

/// Expert g's rows of y against the dense kernel on those rows alone.
void expectDenseRows(const RefTensor &y, const Layout &l, int64_t g, const RefTensor &dense) {
  const int64_t begin = l.offsets[g];
  for (int64_t i = 0; i < dense.numel(); ++i)
    ASSERT_EQ(y.data[begin * l.f + i], dense.data[i]) << "expert " << g << " element " << i;
}

TEST(GroupedMatmulQuantKernel, ExpertsAreTheDenseProducts) {
  // Experts' decode rows read their codes in place (a stack is never
  // repacked); a dense 4-bit decode product reads a repacked copy, whose
  // sums match in place ones up to fp32 rounding (decode_gemv_test.cpp).
  // Compared bit for bit, both read in place.
  const ScopedEnv inPlace("LLMC_CPU_NO_PACK", "1");
  // Decode (one row per expert, an empty expert) and prefill (17 and 40 rows).
  const std::vector<Layout> cases = {{"decode", 64, 96, {0, 1, 1, 2, 3}},
                                     {"prefill", 64, 96, {0, 17, 17, 57, 60}}};
  const std::vector<Grouping> groupings = {{0, -1}, {0, 0}, {0, 1}, {32, -1}};
  uint64_t seed = 300;
  for (const Layout &l : cases)
    for (bool tb : {false, true}) {
      const std::vector<int64_t> slice = l.slice(tb);
      const RefTensor x = roundTo(randomTensor({l.m(), l.k}, seed += 7), DType::F32);
      Buffer xb = Buffer::of(x, DType::F32),
             offsets = Buffer::of(offsetsTensor(l.offsets), DType::I32);
      for (const CodeFormat &f : allCodeFormats())
        for (const Grouping &g : groupings)
          for (bool asymmetric : {false, true}) {
            if (f.fp8 && asymmetric)
              continue;
            SCOPED_TRACE(l.name + " " + f.name() + " " + g.name() + (asymmetric ? " asym" : "") +
                         (tb ? " transposed" : ""));
            ExpertInts s = randomExperts(f, slice, l.groups(), g, asymmetric, seed += 50);
            Buffer y(DType::F32, {l.m(), l.f});
            y.poison();
            std::vector<Buffer *> in = {&xb, &offsets, &s.codes, &s.scale};
            if (asymmetric)
              in.push_back(&s.zeroPoint);
            ASSERT_TRUE(runKernel("grouped_matmul_int", in, {&y}, intAttrs(f, g, l.stack(tb), tb)));
            const RefTensor got = y.toRef();
            for (int64_t e = 0; e < l.groups(); ++e) {
              if (l.offsets[e] == l.offsets[e + 1])
                continue;
              Buffer xe = rowsOf(x, l.offsets[e], l.offsets[e + 1]);
              Buffer ye(DType::F32, {l.offsets[e + 1] - l.offsets[e], l.f});
              ASSERT_TRUE(runKernel("matmul_int", inputsOf(xe, s.experts[e]), {&ye},
                                    intAttrs(f, g, slice, tb)));
              expectDenseRows(got, l, e, ye.toRef());
            }
          }
      for (int64_t block : {32, 16}) {
        SCOPED_TRACE(l.name + " nf4 block" + std::to_string(block) + (tb ? " transposed" : ""));
        const int64_t sliceNumel = slice[0] * slice[1];
        Nf4Weight w = randomWeight(l.groups() * sliceNumel, block, seed += 50);
        Buffer y(DType::F32, {l.m(), l.f});
        y.poison();
        ASSERT_TRUE(runKernel("grouped_matmul_nf4",
                              {&xb, &offsets, &w.codesBuf, &w.absmaxQBuf, &w.scaleBuf, &w.meanBuf},
                              {&y}, nf4Attrs(block, l.stack(tb), tb)));
        const RefTensor got = y.toRef();
        // Expert e's slice is the piece at row e · rows of the stack read
        // as [G · rows, cols]: matmul_nf4 on that piece.
        for (int64_t e = 0; e < l.groups(); ++e) {
          if (l.offsets[e] == l.offsets[e + 1])
            continue;
          Buffer codes = sliceOf<uint8_t>(w.codesBuf, e * sliceNumel / 2, sliceNumel / 2);
          Buffer absmaxQ =
              sliceOf<uint8_t>(w.absmaxQBuf, e * sliceNumel / block, sliceNumel / block);
          Buffer xe = rowsOf(x, l.offsets[e], l.offsets[e + 1]);
          Buffer ye(DType::F32, {l.offsets[e + 1] - l.offsets[e], l.f});
          KernelAttrs a = nf4Attrs(block, slice, tb);
          a.setInts("whole_shape", {l.groups() * slice[0], slice[1]});
          a.setInts("chunks", {1, 1});
          a.setInts("piece_offset", {e * slice[0], 0});
          ASSERT_TRUE(
              runKernel("matmul_nf4", {&xe, &codes, &absmaxQ, &w.scaleBuf, &w.meanBuf}, {&ye}, a));
          expectDenseRows(got, l, e, ye.toRef());
        }
      }
    }
}

TEST(GroupedMatmulQuantKernel, BindingErrorsNameTheOperandOrAttribute) {
  auto f32 = [](std::vector<int64_t> s) { return typeOnly(DType::F32, std::move(s)); };
  auto u8 = [](std::vector<int64_t> s) { return typeOnly(DType::U8, std::move(s)); };
  auto i32 = [](std::vector<int64_t> s) { return typeOnly(DType::I32, std::move(s)); };
  // Three experts [F = 8, K = 32] int4 in blocks of 32: 128 bytes and 8
  // scales each.
  const std::vector<TensorView> good = {f32({5, 32}), i32({4}), u8({384}), f32({24})};
  const KernelAttrs blocks = intAttrs({4, false}, {32, -1}, {3, 8, 32}, true);
  EXPECT_EQ(bindError("grouped_matmul_int", good, {f32({5, 8})}, blocks), "");
  const std::vector<BindErrorCase> cases = {
      {good, {f32({5, 8})}, intAttrs({4, false}, {32, -1}, {3, 8, 32, 1}, true), "three positive"},
      {{f32({5, 32}), i32({3}), u8({384}), f32({24})}, {f32({5, 8})}, blocks, "[G + 1] = [4]"},
      {{f32({5, 16}), i32({4}), u8({384}), f32({24})}, {f32({5, 8})}, blocks, "K = 32"},
      {{f32({5, 32}), i32({4}), u8({383}), f32({24})}, {f32({5, 8})}, blocks, "codes"},
      {{f32({5, 32}), i32({4}), u8({384}), f32({8})}, {f32({5, 8})}, blocks, "scale"},
      {{f32({5, 5}), i32({4}), u8({53}), f32({15})},
       {f32({5, 7})},
       intAttrs({4, false}, {0, 1}, {3, 7, 5}, true),
       "whole bytes"},
  };
  expectBindErrorsMention("grouped_matmul_int", cases);
  // NF4: blocks of 32 over 3 × 8 × 32: 384 bytes, 24 levels, one scale.
  const std::vector<TensorView> nf4 = {f32({5, 32}), i32({4}), u8({384}),
                                       u8({24}),     f32({1}), typeOnly(DType::F32, {})};
  EXPECT_EQ(bindError("grouped_matmul_nf4", nf4, {f32({5, 8})}, nf4Attrs(32, {3, 8, 32}, true)),
            "");
  expectBindErrorsMention("grouped_matmul_nf4",
                          {{nf4, {f32({5, 8})}, nf4Attrs(24, {3, 8, 32}, true), "must divide"},
                           {nf4, {f32({5, 8})}, nf4Attrs(32, {3, 8, 64}, true), "K = 64"}});
  // A piece of a stack [3, 16, 32]: each expert's 8 rows from row 8 (the
  // whole stack's one scale), or chunks of 4 rows that cut an expert.
  KernelAttrs piece = nf4Attrs(32, {3, 8, 32}, true);
  piece.setInts("whole_shape", {48, 32});
  piece.setInts("chunks", {3, 1});
  piece.setInts("piece_offset", {8, 0});
  EXPECT_EQ(bindError("grouped_matmul_nf4", nf4, {f32({5, 8})}, piece), "");
  KernelAttrs cut = piece;
  cut.setInts("chunks", {6, 1});
  cut.setInts("piece_offset", {0, 0});
  KernelAttrs partial = nf4Attrs(32, {3, 8, 32}, true);
  partial.setInts("whole_shape", {48, 32});
  expectBindErrorsMention("grouped_matmul_nf4", {{nf4, {f32({5, 8})}, cut, "whole experts' rows"},
                                                 {nf4, {f32({5, 8})}, partial, "chunks"}});
}

} // namespace
} // namespace llmc::test
