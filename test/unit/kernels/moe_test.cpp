//===- moe_test.cpp - mixture-of-experts routing, dispatch and combine ----===//
//
// The five mixture-of-experts kernels are conformance cases (Conformance.h)
// against the float64 references of kernels/reference/moe.cpp:
//  - moe_route: experts, positions, offsets and counts exactly (experts are
//    picked by logit, the order of the exact probabilities; ties, which
//    bf16 logits make common, go to the lower index on both sides), the
//    weights and the sums over tokens (prob_sum, z_sum: positive terms)
//    elementwise to 1e-5, on CUDA too (its exp differs, not its order of
//    summation);
//  - moe_dispatch: copies exactly, scaled copies rounded once (exactly
//    between backends: one fp32 product each);
//  - moe_combine, moe_combine_weight_grad, moe_route_grad: sums, norm
//    metric.
// Sigmoid routers (DeepSeek-V3) the same way: with and without a bias on
// the choice (random, so the biased choice differs from the logits' order),
// with and without normalisation, scaled by 2.5; their gradient too.
// Shapes: one token and one expert up to Mixtral's (E = 8, k = 2) and
// DeepSeek-like (E = 64, k = 6) routings over thousands of tokens, k = 1
// and k = E, an expert no token chooses, positions out of range or
// repeated (NaN where an output depends on one). Here also: the binding
// errors with their messages.

#include "Conformance.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <utility>

namespace llmc::test {
namespace {

struct RouteShape {
  int64_t tokens, experts, topK;
};

const std::vector<RouteShape> kRouteShapes = {
    {1, 1, 1},   {5, 4, 1},    {7, 4, 2},    {3, 5, 5},     {33, 8, 2},
    {130, 8, 8}, {200, 16, 4}, {4096, 8, 2}, {1500, 64, 6}, {129, 60, 4},
};

std::string routeLabel(DType dtype, const RouteShape &s) {
  return std::string(dtypeName(dtype)) + "_N" + std::to_string(s.tokens) + "_E" +
         std::to_string(s.experts) + "_k" + std::to_string(s.topK);
}

/// How a case's router logits are drawn.
enum class Logits {
  Random,     ///< normal, σ = 2
  Ties,       ///< integers in [0, 3): most rows have equal logits
  IdleExpert, ///< random, expert 1 far below the rest: no token picks it
};

RefTensor routeLogits(const RouteShape &s, Logits kind, uint64_t seed) {
  if (kind == Logits::Ties)
    return randomIds({s.tokens, s.experts}, seed, 0, 3);
  RefTensor logits = randomTensor({s.tokens, s.experts}, seed, 2.0);
  if (kind == Logits::IdleExpert)
    for (int64_t n = 0; n < s.tokens; ++n) logits.data[n * s.experts + 1] -= 40.0;
  return logits;
}

KernelAttrs routeAttrs(int64_t topK, bool normalize) {
  return attrs({}, {{"top_k", topK}, {"normalize", normalize ? 1 : 0}});
}

/// moe_route's seven outputs for shape `s`: weights, experts, positions
/// [N, k], offsets [E + 1], prob_sum, counts [E], z_sum.
void addRouteOutputs(KernelCall &k, const RouteShape &s) {
  const int64_t n = s.tokens, e = s.experts, topK = s.topK;
  k.output(DType::F32, {n, topK});
  k.output(DType::I32, {n, topK});
  k.output(DType::I32, {n, topK});
  k.output(DType::I32, {e + 1});
  k.output(DType::F32, {e});
  k.output(DType::F32, {e});
  k.output(DType::F32, {});
}

/// Exact for the integer outputs and counts, 1e-5 for the weights and
/// the sums of positive terms.
const std::vector<double> kRouteTolerances = {1e-5, 0.0, 0.0, 0.0, 1e-5, 0.0, 1e-5};

ConformanceCase routeCase(DType dtype, const RouteShape &s, bool normalize, Logits kind,
                          uint64_t seed) {
  std::string label = routeLabel(dtype, s) + (normalize ? "_normalize" : "");
  if (kind == Logits::Ties)
    label += "_ties";
  if (kind == Logits::IdleExpert)
    label += "_idle_expert";
  return {"moe_route", label, [=] {
            KernelCall k;
            k.input(routeLogits(s, kind, seed), dtype);
            const int64_t topK = s.topK;
            addRouteOutputs(k, s);
            k.attrs = routeAttrs(topK, normalize);
            k.reference = [topK, normalize](const std::vector<RefTensor> &in) {
              return ref::moeRoute(in[0], topK, normalize);
            };
            k.tolerances = k.cudaTolerances = kRouteTolerances;
            if (kind == Logits::IdleExpert)
              k.check = [](const std::vector<RefTensor> &, const std::vector<RefTensor> &out,
                           const std::vector<RefTensor> &) {
                if (out[5].data[1] != 0.0 || out[3].data[1] != out[3].data[2])
                  return ::testing::AssertionFailure() << "expert 1 received copies";
                return ::testing::AssertionSuccess();
              };
            return k;
          }};
}

/// A sigmoid router's attributes (common/RouterScore.h's encoding).
KernelAttrs sigmoidAttrs(int64_t topK, bool normalize, double scale) {
  return attrs({{"scale", scale}},
               {{"top_k", topK}, {"normalize", normalize ? 1 : 0}, {"score", 1}});
}

const std::vector<RouteShape> kSigmoidShapes = {{1, 1, 1},    {7, 4, 2},    {33, 8, 2},
                                                {200, 16, 4}, {129, 60, 4}, {1500, 64, 6}};

ConformanceCase sigmoidRouteCase(DType dtype, const RouteShape &s, bool normalize, bool biased,
                                 uint64_t seed) {
  std::string label =
      routeLabel(dtype, s) + "_sigmoid" + (normalize ? "_normalize" : "") + (biased ? "_bias" : "");
  return {"moe_route", label, [=] {
            KernelCall k;
            k.input(routeLogits(s, Logits::Random, seed), dtype);
            if (biased)
              k.input(randomTensor({s.experts}, seed + 1, 0.3), DType::F32);
            const int64_t topK = s.topK;
            addRouteOutputs(k, s);
            k.attrs = sigmoidAttrs(topK, normalize, 2.5);
            k.reference = [topK, normalize, biased](const std::vector<RefTensor> &in) {
              return ref::moeRoute(in[0], topK, normalize, {true, 2.5, biased ? &in[1] : nullptr});
            };
            k.tolerances = k.cudaTolerances = kRouteTolerances;
            return k;
          }};
}

std::vector<ConformanceCase> routeCases() {
  std::vector<ConformanceCase> cases;
  uint64_t seed = 15000;
  for (DType dtype : kFloatTypes)
    for (const RouteShape &s : kRouteShapes)
      for (bool normalize : {false, true})
        cases.push_back(routeCase(dtype, s, normalize, Logits::Random, ++seed));
  for (DType dtype : {DType::F32, DType::BF16})
    for (const RouteShape &s : {RouteShape{9, 4, 2}, RouteShape{300, 8, 3}, RouteShape{65, 6, 6}})
      for (bool normalize : {false, true}) {
        cases.push_back(routeCase(dtype, s, normalize, Logits::Ties, ++seed));
        if (s.topK < s.experts)
          cases.push_back(routeCase(dtype, s, normalize, Logits::IdleExpert, ++seed));
      }
  for (DType dtype : {DType::F32, DType::BF16})
    for (const RouteShape &s : kSigmoidShapes)
      for (bool normalize : {false, true})
        for (bool biased : {false, true})
          cases.push_back(sigmoidRouteCase(dtype, s, normalize, biased, seed += 2));
  return cases;
}

/// `values` with the entries of `bad` replaced by `fill`.
RefTensor replaced(RefTensor values, const std::vector<int64_t> &bad, double fill) {
  for (int64_t i : bad) values.data[i] = fill;
  return values;
}

/// Rows [N, width] of `out` set to NaN for each token in `tokens`.
void nanRows(RefTensor &out, const std::vector<int64_t> &tokens) {
  const int64_t width = out.shape[1];
  for (int64_t n : tokens)
    std::fill(out.data.begin() + n * width, out.data.begin() + (n + 1) * width, std::nan(""));
}

/// Entries of ids [N, k] outside [0, bound).
std::vector<int64_t> outOfRange(const RefTensor &ids, int64_t bound) {
  std::vector<int64_t> bad;
  for (int64_t i = 0; i < ids.numel(); ++i)
    if (ids.data[i] < 0 || ids.data[i] >= bound)
      bad.push_back(i);
  return bad;
}

/// The tokens (rows of [N, k]) that hold one of `entries`.
std::vector<int64_t> tokensOf(const std::vector<int64_t> &entries, int64_t topK) {
  std::vector<int64_t> tokens;
  for (int64_t i : entries) tokens.push_back(i / topK);
  return tokens;
}

std::vector<ConformanceCase> routeGradCases() {
  std::vector<ConformanceCase> cases;
  uint64_t seed = 15500;
  auto add = [&](DType dtype, const RouteShape &s, bool normalize, DType idType, bool badExperts) {
    std::string label = routeLabel(dtype, s) + (normalize ? "_normalize" : "") + "_experts_" +
                        dtypeName(idType) + (badExperts ? "_bad_experts" : "");
    cases.push_back({"moe_route_grad", label, [=, caseSeed = seed += 5] {
                       KernelCall k;
                       // The forward's choices on the stored logits.
                       RefTensor logits = roundTo(routeLogits(s, Logits::Random, caseSeed), dtype);
                       RefTensor experts = ref::moeRoute(logits, s.topK, normalize)[1];
                       if (badExperts) {
                         experts.data[0] = static_cast<double>(s.experts);
                         experts.data[experts.numel() - 1] = -1;
                       }
                       k.input(logits, dtype);
                       k.input(experts, idType);
                       k.input(randomTensor({s.tokens, s.topK}, caseSeed + 1), DType::F32);
                       k.input(randomTensor({s.experts}, caseSeed + 2), DType::F32);
                       k.input(randomTensor({}, caseSeed + 3), DType::F32);
                       k.output(dtype, {s.tokens, s.experts});
                       k.attrs = routeAttrs(s.topK, normalize);
                       k.reference = [s, normalize](const std::vector<RefTensor> &in) {
                         const std::vector<int64_t> bad = outOfRange(in[1], s.experts);
                         RefTensor dl = ref::moeRouteGrad(in[0], replaced(in[1], bad, 0), in[2],
                                                          in[3], in[4].data[0], normalize);
                         nanRows(dl, tokensOf(bad, s.topK));
                         return std::vector<RefTensor>{dl};
                       };
                       k.metric = k.cudaMetric = Metric::Norm;
                       return k;
                     }});
  };
  for (DType dtype : kFloatTypes)
    for (const RouteShape &s : kRouteShapes)
      for (bool normalize : {false, true}) add(dtype, s, normalize, DType::I32, false);
  // Sigmoid routers: the experts a biased choice made (so not the logits'
  // top-k), the weights scaled by 2.5.
  for (DType dtype : {DType::F32, DType::BF16})
    for (const RouteShape &s : kSigmoidShapes)
      for (bool normalize : {false, true})
        cases.push_back(
            {"moe_route_grad", routeLabel(dtype, s) + "_sigmoid" + (normalize ? "_normalize" : ""),
             [=, caseSeed = seed += 5] {
               KernelCall k;
               RefTensor logits = roundTo(routeLogits(s, Logits::Random, caseSeed), dtype);
               const RefTensor bias = randomTensor({s.experts}, caseSeed + 4, 0.3);
               k.input(logits, dtype);
               k.input(ref::moeRoute(logits, s.topK, normalize, {true, 2.5, &bias})[1], DType::I32);
               k.input(randomTensor({s.tokens, s.topK}, caseSeed + 1), DType::F32);
               k.input(randomTensor({s.experts}, caseSeed + 2), DType::F32);
               k.input(randomTensor({}, caseSeed + 3), DType::F32);
               k.output(dtype, {s.tokens, s.experts});
               k.attrs = sigmoidAttrs(s.topK, normalize, 2.5);
               k.reference = [normalize](const std::vector<RefTensor> &in) {
                 return std::vector<RefTensor>{ref::moeRouteGrad(
                     in[0], in[1], in[2], in[3], in[4].data[0], normalize, {true, 2.5, nullptr})};
               };
               k.metric = k.cudaMetric = Metric::Norm;
               return k;
             }});
  add(DType::F32, {33, 8, 2}, true, DType::I64, false);
  add(DType::F32, {33, 8, 2}, true, DType::I32, true);
  add(DType::BF16, {200, 16, 4}, false, DType::I64, true);
  return cases;
}

/// A random permutation of the N·k rows as positions [N, k].
RefTensor permutedPositions(int64_t tokens, int64_t topK, uint64_t seed) {
  std::vector<int64_t> rows(static_cast<size_t>(tokens * topK));
  std::iota(rows.begin(), rows.end(), 0);
  std::shuffle(rows.begin(), rows.end(), std::mt19937_64(seed));
  RefTensor positions = RefTensor::zeros({tokens, topK});
  for (size_t i = 0; i < rows.size(); ++i) positions.data[i] = static_cast<double>(rows[i]);
  return positions;
}

struct RowsShape {
  int64_t tokens, topK, width;
};

const std::vector<RowsShape> kRowsShapes = {{1, 1, 1},      {5, 1, 3},    {7, 2, 33},
                                            {33, 4, 7},     {64, 2, 128}, {100, 8, 64},
                                            {1000, 2, 257}, {512, 6, 96}};

/// How a case's positions are drawn.
enum class Positions {
  Permutation, ///< a permutation of the N·k rows
  OutOfRange,  ///< one past N·k, one negative
  Repeated,    ///< one out of range and one row landed on twice (dispatch)
};

RefTensor routingPositions(const RowsShape &s, Positions kind, uint64_t seed) {
  RefTensor positions = permutedPositions(s.tokens, s.topK, seed);
  const int64_t last = positions.numel() - 1;
  if (kind != Positions::Permutation)
    positions.data[last] = static_cast<double>(last + 1);
  if (kind == Positions::OutOfRange)
    positions.data[0] = -1;
  if (kind == Positions::Repeated)
    positions.data[0] = positions.data[last / 2];
  return positions;
}

std::string rowsLabel(DType dtype, const RowsShape &s, bool weighted, DType idType,
                      Positions kind) {
  std::string label = std::string(dtypeName(dtype)) + "_N" + std::to_string(s.tokens) + "_k" +
                      std::to_string(s.topK) + "_C" + std::to_string(s.width) +
                      (weighted ? "_weighted" : "") + "_positions_" + dtypeName(idType);
  if (kind == Positions::OutOfRange)
    label += "_out_of_range";
  if (kind == Positions::Repeated)
    label += "_repeated";
  return label;
}

/// moe_dispatch where rows that not exactly one copy lands on are NaN:
/// the reference's rows for the others.
RefTensor dispatchWithInvalid(const RefTensor &x, const RefTensor &positions,
                              const RefTensor *weights) {
  const int64_t copies = positions.numel();
  auto inRange = [&](double row) { return row >= 0 && row < static_cast<double>(copies); };
  std::vector<int64_t> landed(static_cast<size_t>(copies), 0);
  for (double row : positions.data)
    if (inRange(row))
      ++landed[static_cast<size_t>(row)];
  // The reference on a permutation: each copy that is not alone on its row
  // moves to one of the rows that will be NaN.
  std::vector<int64_t> invalidRows;
  for (int64_t row = 0; row < copies; ++row)
    if (landed[row] != 1)
      invalidRows.push_back(row);
  RefTensor repaired = positions;
  size_t next = 0;
  for (double &row : repaired.data)
    if (!inRange(row) || landed[static_cast<size_t>(row)] != 1)
      row = static_cast<double>(invalidRows[next++]);
  RefTensor out = ref::moeDispatch(x, repaired, weights);
  nanRows(out, invalidRows);
  return out;
}

std::vector<ConformanceCase> dispatchCases() {
  std::vector<ConformanceCase> cases;
  uint64_t seed = 16000;
  auto add = [&](DType dtype, const RowsShape &s, bool weighted, DType idType, Positions kind) {
    cases.push_back(
        {"moe_dispatch", rowsLabel(dtype, s, weighted, idType, kind), [=, caseSeed = seed += 3] {
           KernelCall k;
           k.input(randomTensor({s.tokens, s.width}, caseSeed), dtype);
           k.input(routingPositions(s, kind, caseSeed + 1), idType);
           if (weighted)
             k.input(randomTensor({s.tokens, s.topK}, caseSeed + 2), DType::F32);
           k.output(dtype, {s.tokens * s.topK, s.width});
           k.reference = [](const std::vector<RefTensor> &in) {
             return std::vector<RefTensor>{
                 dispatchWithInvalid(in[0], in[1], in.size() > 2 ? &in[2] : nullptr)};
           };
           // Copies are exact; a scaled copy is one fp32 product rounded
           // once, the same on both backends.
           if (!weighted)
             k.tolerances = {0.0};
           k.cudaTolerances = {0.0};
           return k;
         }});
  };
  for (DType dtype : kFloatTypes)
    for (const RowsShape &s : kRowsShapes)
      for (bool weighted : {false, true})
        add(dtype, s, weighted, DType::I32, Positions::Permutation);
  add(DType::F32, {33, 4, 7}, true, DType::I64, Positions::Permutation);
  add(DType::F32, {33, 4, 7}, false, DType::I32, Positions::OutOfRange);
  add(DType::BF16, {64, 2, 128}, true, DType::I64, Positions::Repeated);
  return cases;
}

/// The reference's result with the tokens of out-of-range positions NaN
/// (their rows of [N, C] for combine, their entries for the weight grad).
template <typename RefFn>
RefTensor withInvalidPositions(const RefTensor &positions, bool perEntry, RefFn fn) {
  const std::vector<int64_t> bad = outOfRange(positions, positions.numel());
  RefTensor out = fn(replaced(positions, bad, 0));
  if (perEntry)
    for (int64_t i : bad) out.data[i] = std::nan("");
  else
    nanRows(out, tokensOf(bad, positions.shape[1]));
  return out;
}

std::vector<ConformanceCase> combineCases() {
  std::vector<ConformanceCase> cases;
  uint64_t seed = 16500;
  auto add = [&](DType dtype, const RowsShape &s, bool weighted, DType idType, Positions kind) {
    const std::string label = rowsLabel(dtype, s, weighted, idType, kind);
    cases.push_back({"moe_combine", label, [=, caseSeed = seed += 4] {
                       KernelCall k;
                       k.input(randomTensor({s.tokens * s.topK, s.width}, caseSeed), dtype);
                       k.input(routingPositions(s, kind, caseSeed + 1), idType);
                       if (weighted)
                         k.input(randomTensor({s.tokens, s.topK}, caseSeed + 2), DType::F32);
                       k.output(dtype, {s.tokens, s.width});
                       k.reference = [](const std::vector<RefTensor> &in) {
                         const RefTensor *w = in.size() > 2 ? &in[2] : nullptr;
                         return std::vector<RefTensor>{
                             withInvalidPositions(in[1], false, [&](const RefTensor &pos) {
                               return ref::moeCombine(in[0], pos, w);
                             })};
                       };
                       k.metric = k.cudaMetric = Metric::Norm;
                       return k;
                     }});
    if (weighted)
      return; // the weight gradient's cases: one per shape
    cases.push_back({"moe_combine_weight_grad", label, [=, caseSeed = seed += 4] {
                       KernelCall k;
                       k.input(randomTensor({s.tokens * s.topK, s.width}, caseSeed), dtype);
                       k.input(routingPositions(s, kind, caseSeed + 1), idType);
                       k.input(randomTensor({s.tokens, s.width}, caseSeed + 2), dtype);
                       k.output(DType::F32, {s.tokens, s.topK});
                       k.reference = [](const std::vector<RefTensor> &in) {
                         return std::vector<RefTensor>{
                             withInvalidPositions(in[1], true, [&](const RefTensor &pos) {
                               return ref::moeCombineWeightGrad(in[0], pos, in[2]);
                             })};
                       };
                       k.metric = k.cudaMetric = Metric::Norm;
                       return k;
                     }});
  };
  for (DType dtype : kFloatTypes)
    for (const RowsShape &s : kRowsShapes)
      for (bool weighted : {false, true})
        add(dtype, s, weighted, DType::I32, Positions::Permutation);
  add(DType::F32, {33, 4, 7}, false, DType::I64, Positions::Permutation);
  add(DType::F32, {33, 4, 7}, false, DType::I32, Positions::OutOfRange);
  add(DType::BF16, {64, 2, 128}, true, DType::I64, Positions::OutOfRange);
  return cases;
}

/// router_loss: E products and a scalar; both backends add in double, in
/// order, and round once, so they agree exactly.
std::vector<ConformanceCase> routerLossCases() {
  std::vector<ConformanceCase> cases;
  uint64_t seed = 16100;
  for (int64_t experts : {1, 8, 60})
    for (double zScale : {0.0, 1e-3}) {
      std::string label = "E" + std::to_string(experts) + (zScale > 0 ? "_z" : "");
      cases.push_back(
          {"router_loss", label, [=, caseSeed = seed += 3] {
             KernelCall k;
             k.input(randomTensor({experts}, caseSeed), DType::F32);
             k.input(randomIds({experts}, caseSeed + 1, 0, 50), DType::F32);
             k.input(randomTensor({}, caseSeed + 2), DType::F32);
             k.output(DType::F32, {});
             k.attrs =
                 attrs({{"aux_scale", 0.02 * double(experts) / 4096.0}, {"z_scale", zScale}}, {});
             k.reference = [=](const std::vector<RefTensor> &in) {
               return std::vector<RefTensor>{ref::routerLoss(
                   in[0], in[1], in[2].data[0], 0.02 * double(experts) / 4096.0, zScale)};
             };
             return k;
           }});
    }
  return cases;
}

LLMC_CONFORMANCE_CASES(MoeRoute, routeCases);
LLMC_CONFORMANCE_CASES(RouterLoss, routerLossCases);
LLMC_CONFORMANCE_CASES(MoeRouteGrad, routeGradCases);
LLMC_CONFORMANCE_CASES(MoeDispatch, dispatchCases);
LLMC_CONFORMANCE_CASES(MoeCombine, combineCases);

/// The routed copies are sorted by expert, then token, then j; a round trip
/// through dispatch and an unweighted combine gives back k·x.
TEST(MoeKernels, DispatchThenCombineRoundTrips) {
  const int64_t n = 37, e = 5, topK = 3, c = 11;
  Buffer logits = Buffer::of(randomTensor({n, e}, 17001), DType::F32);
  Buffer weights(DType::F32, {n, topK}), experts(DType::I32, {n, topK}),
      positions(DType::I32, {n, topK}), offsets(DType::I32, {e + 1}), probSum(DType::F32, {e}),
      counts(DType::F32, {e}), zSum(DType::F32, {});
  ASSERT_TRUE(runKernel("moe_route", {&logits},
                        {&weights, &experts, &positions, &offsets, &probSum, &counts, &zSum},
                        routeAttrs(topK, true)));
  RefTensor ex = experts.toRef(), pos = positions.toRef(), off = offsets.toRef();
  for (int64_t copy = 0; copy < n * topK; ++copy) {
    const int64_t expert = static_cast<int64_t>(ex.data[copy]);
    EXPECT_GE(pos.data[copy], off.data[expert]);
    EXPECT_LT(pos.data[copy], off.data[expert + 1]);
  }
  RefTensor x = randomTensor({n, c}, 17002);
  Buffer xb = Buffer::of(x, DType::F32), xs(DType::F32, {n * topK, c}), y(DType::F32, {n, c});
  ASSERT_TRUE(runKernel("moe_dispatch", {&xb, &positions}, {&xs}));
  ASSERT_TRUE(runKernel("moe_combine", {&xs, &positions}, {&y}));
  RefTensor got = y.toRef();
  for (int64_t i = 0; i < n * c; ++i) EXPECT_FLOAT_EQ(got.data[i], topK * x.data[i]);
}

TEST(MoeKernels, BindErrorsNameTheOperand) {
  const TensorView logits = typeOnly(DType::F32, {4, 3}), w = typeOnly(DType::F32, {4, 2}),
                   ids = typeOnly(DType::I32, {4, 2}), off = typeOnly(DType::I32, {4}),
                   perExpert = typeOnly(DType::F32, {3}), scalar = typeOnly(DType::F32, {});
  const std::vector<TensorView> routeOut = {w, ids, ids, off, perExpert, perExpert, scalar};
  auto routeWith = [&](size_t i, TensorView replacement) {
    std::vector<TensorView> out = routeOut;
    out[i] = std::move(replacement);
    return out;
  };
  const KernelAttrs top2 = routeAttrs(2, false);
  EXPECT_EQ(bindError("moe_route", {logits}, routeOut, top2), "");
  EXPECT_EQ(bindError("moe_route", {typeOnly(DType::I32, {4, 3})}, routeOut, top2),
            "moe_route: logits must be f32, bf16 or f16, got i32[4x3]");
  EXPECT_EQ(bindError("moe_route", {typeOnly(DType::F32, {2, 2, 3})}, routeOut, top2),
            "moe_route: logits must have rank 2, got f32[2x2x3]");
  EXPECT_EQ(bindError("moe_route", {logits}, routeOut), "moe_route: missing int attribute 'top_k'");
  EXPECT_EQ(bindError("moe_route", {logits}, routeOut, routeAttrs(4, false)),
            "moe_route: attribute 'top_k' must be in [1, 3] for 3 experts, got 4");
  EXPECT_EQ(bindError("moe_route", {logits}, routeOut, attrs({}, {{"top_k", 2}, {"normalize", 2}})),
            "moe_route: attribute 'normalize' must be 0 or 1, got 2");
  EXPECT_EQ(bindError("moe_route", {logits}, routeWith(1, typeOnly(DType::I64, {4, 2})), top2),
            "moe_route: experts must be i32[4x2], got i64[4x2]");
  EXPECT_EQ(bindError("moe_route", {logits}, routeWith(3, typeOnly(DType::I32, {3})), top2),
            "moe_route: offsets must be i32[4], got i32[3]");
  EXPECT_EQ(bindError("moe_route", {logits}, routeWith(6, perExpert), top2),
            "moe_route: z_sum must be an f32 scalar, got f32[3]");
  EXPECT_EQ(bindError("moe_route", {logits}, {w, ids}, top2),
            "moe_route: expected 7 outputs, got 2");
  // Sigmoid routers: the score's encoding, the scale, the bias.
  const TensorView bias = perExpert;
  EXPECT_EQ(bindError("moe_route", {logits, bias}, routeOut, sigmoidAttrs(2, true, 2.5)), "");
  EXPECT_EQ(bindError("moe_route", {logits, bias}, routeOut, top2),
            "moe_route: a bias needs attribute 'score' = 1 (sigmoid)");
  EXPECT_EQ(bindError("moe_route", {logits, typeOnly(DType::F32, {4})}, routeOut,
                      sigmoidAttrs(2, true, 1.0)),
            "moe_route: bias must be f32[3], got f32[4]");
  EXPECT_EQ(bindError("moe_route", {logits}, routeOut, attrs({}, {{"top_k", 2}, {"score", 2}})),
            "moe_route: attribute 'score' must be 0 (softmax) or 1 (sigmoid), got 2");
  EXPECT_EQ(bindError("moe_route", {logits}, routeOut, sigmoidAttrs(2, true, -1.0)),
            "moe_route: attribute 'scale' must be a finite number > 0, got -1.000000");

  const std::vector<TensorView> gradIn = {logits, ids, w, perExpert, scalar};
  auto gradWith = [&](size_t i, TensorView replacement) {
    std::vector<TensorView> in = gradIn;
    in[i] = std::move(replacement);
    return in;
  };
  EXPECT_EQ(bindError("moe_route_grad", gradIn, {logits}), "");
  EXPECT_EQ(bindError("moe_route_grad", gradWith(1, typeOnly(DType::I32, {5, 2})), {logits}),
            "moe_route_grad: experts must be i32[4x2], got i32[5x2]");
  EXPECT_EQ(bindError("moe_route_grad", gradWith(2, typeOnly(DType::BF16, {4, 2})), {logits}),
            "moe_route_grad: dweights must be f32[4x2], got bf16[4x2]");
  EXPECT_EQ(bindError("moe_route_grad", gradWith(3, typeOnly(DType::F32, {4})), {logits}),
            "moe_route_grad: dprob_sum must be f32[3], got f32[4]");
  EXPECT_EQ(bindError("moe_route_grad", gradIn, {typeOnly(DType::BF16, {4, 3})}),
            "moe_route_grad: dlogits must be f32[4x3], got bf16[4x3]");

  const TensorView x = typeOnly(DType::F32, {4, 5}), xs = typeOnly(DType::F32, {8, 5});
  EXPECT_EQ(bindError("moe_dispatch", {x, ids, w}, {xs}), "");
  EXPECT_EQ(bindError("moe_dispatch", {x, typeOnly(DType::F32, {4, 2})}, {xs}),
            "moe_dispatch: positions must be i32 or i64, got f32[4x2]");
  EXPECT_EQ(bindError("moe_dispatch", {x, ids, typeOnly(DType::BF16, {4, 2})}, {xs}),
            "moe_dispatch: weights must be f32[4x2], got bf16[4x2]");
  EXPECT_EQ(bindError("moe_dispatch", {x, ids}, {typeOnly(DType::BF16, {8, 5})}),
            "moe_dispatch: out must be f32[8x5], got bf16[8x5]");
  EXPECT_EQ(bindError("moe_dispatch", {x, ids, w, w}, {xs}),
            "moe_dispatch: expected 2 to 3 inputs, got 4");

  EXPECT_EQ(bindError("moe_combine", {xs, ids, w}, {x}), "");
  EXPECT_EQ(bindError("moe_combine", {typeOnly(DType::F32, {7, 5}), ids}, {x}),
            "moe_combine: ys must be f32[8x5], got f32[7x5]");
  EXPECT_EQ(bindError("moe_combine", {xs, ids, typeOnly(DType::F32, {4, 3})}, {x}),
            "moe_combine: weights must be f32[4x2], got f32[4x3]");
  EXPECT_EQ(bindError("moe_combine", {xs, ids}, {typeOnly(DType::F32, {4, 6})}),
            "moe_combine: y must be f32[4x5], got f32[4x6]");

  EXPECT_EQ(bindError("moe_combine_weight_grad", {xs, ids, x}, {w}), "");
  EXPECT_EQ(bindError("moe_combine_weight_grad", {xs, ids, typeOnly(DType::BF16, {4, 5})}, {w}),
            "moe_combine_weight_grad: dy must be f32[4x5], got bf16[4x5]");
  EXPECT_EQ(bindError("moe_combine_weight_grad", {xs, ids, x}, {typeOnly(DType::BF16, {4, 2})}),
            "moe_combine_weight_grad: dweights must be f32[4x2], got bf16[4x2]");
}

} // namespace
} // namespace llmc::test
