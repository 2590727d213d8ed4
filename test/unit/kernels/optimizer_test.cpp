//===- optimizer_test.cpp - global_norm, adamw and multi_tensor_adamw -----===//
//
// global_norm, adamw and multi_tensor_adamw are conformance cases
// (Conformance.h). adamw: p' and v' (a sum of positive terms) use the
// elementwise metric; m' = β1·m + (1−β1)·g can cancel, so norm metric. A
// non-finite norm skips the step: the outputs are the inputs, bit for bit.
// multi_tensor_adamw must be, bit for bit, the adamw kernel on each tensor
// (after the cast kernel widening a bf16 gradient) and the cast kernel on
// each updated master: the fusion changes no number of a training run.

#include "Conformance.h"

#include <algorithm>
#include <limits>
#include <optional>

namespace llmc::test {
namespace {

/// global_norm over one or many inputs of one dtype or mixed, sizes below,
/// at and across the CUDA kernel's 64K chunk, an empty input and
/// GPT-2-sized parameters, as the norm and as `squared`. Both backends sum
/// squares in double and round once: 1e-6 on the scalar.
std::vector<ConformanceCase> globalNormCases() {
  using Operand = std::pair<std::vector<int64_t>, DType>;
  struct Inputs {
    std::string label;
    std::vector<Operand> operands;
  };
  std::vector<Inputs> sets;
  for (DType dtype : kFloatTypes) {
    std::string name = dtypeName(dtype);
    sets.push_back({name + "_one", {{{1}, dtype}}});
    sets.push_back({name + "_three", {{{7}, dtype}, {{13, 33}, dtype}, {{300, 301}, dtype}}});
  }
  sets.push_back({"mixed_small", {{{5}, DType::F32}, {{9}, DType::BF16}, {{11}, DType::F16}}});
  sets.push_back({"mixed_chunks",
                  {{{7}, DType::F32},
                   {{37, 129}, DType::BF16},
                   {{1 << 16}, DType::F32},
                   {{(1 << 16) + 1}, DType::BF16},
                   {{0}, DType::F32},
                   {{768, 3072}, DType::F32},
                   {{50257, 768}, DType::BF16},
                   {{3, 1000}, DType::F16},
                   {{1}, DType::BF16}}});
  std::vector<ConformanceCase> cases;
  uint64_t seed = 800;
  for (const Inputs &set : sets)
    for (int squared = 0; squared < 2; ++squared) {
      cases.push_back(
          {"global_norm", set.label + (squared ? "_squared" : ""), [=, caseSeed = seed += 16] {
             KernelCall k;
             uint64_t s = caseSeed;
             for (const auto &[shape, dtype] : set.operands)
               k.input(randomTensor(shape, ++s, 0.02), dtype);
             k.output(DType::F32, {});
             k.attrs = attrs({}, {{"squared", squared}});
             k.reference = [squared](const std::vector<RefTensor> &in) {
               RefTensor norm = ref::globalNorm(in);
               if (squared)
                 norm.data[0] *= norm.data[0];
               return std::vector<RefTensor>{norm};
             };
             k.tolerances = k.cudaTolerances = {1e-6};
             return k;
           }});
    }
  return cases;
}

LLMC_CONFORMANCE_CASES(GlobalNorm, globalNormCases);

TEST(GlobalNormKernel, SquaredAndSqrtCombineShards) {
  // Σ‖shard‖² over two "ranks", then √: the norm of the whole.
  RefTensor a = randomTensor({64}, 821), b = randomTensor({64}, 822);
  Buffer ab = Buffer::of(a, DType::F32), bb = Buffer::of(b, DType::F32);
  Buffer sa(DType::F32, {}), sb(DType::F32, {}), root(DType::F32, {});
  KernelAttrs squared;
  squared.setInt("squared", 1);
  ASSERT_TRUE(runKernel("global_norm", {&ab}, {&sa}, squared));
  ASSERT_TRUE(runKernel("global_norm", {&bb}, {&sb}, squared));
  Buffer total = Buffer::of(RefTensor{{}, {sa.toRef().data[0] + sb.toRef().data[0]}}, DType::F32);
  ASSERT_TRUE(runKernel("sqrt", {&total}, {&root}));
  EXPECT_CLOSE(root.toRef(), ref::globalNorm({a, b}), Metric::Elementwise, 1e-6);
}

/// One adamw call: the parameter's shape and the state's scales (v is
/// positive: a square, or a magnitude), the step's scalars, whether a norm
/// is given (`norm` < 0: the gradient's own) and whether p, m, v are
/// updated in place.
struct AdamWSetting {
  std::vector<int64_t> shape;
  double lr, step, beta2, maxGradNorm;
  bool withNorm;
  double norm;
  bool inPlace;
  double mScale, vScale;
  bool vSquared;
};

/// p' is a map of well-conditioned terms and v' a sum of positive ones
/// (elementwise metric); m' = β1·m + (1−β1)·g can cancel (norm metric),
/// all at the dtype's tolerance against the reference. Both backends run
/// the same float operations per element (AdamWStep.cuh mirrors the CPU's
/// fused multiply-adds), so CUDA's p', m', v' agree with the CPU's to the
/// rounding of the step constants: elementwise, the dtype's tolerance.
ConformanceCase adamwCase(DType dtype, const AdamWSetting &s, uint64_t seed) {
  std::string label = std::string(dtypeName(dtype)) + "_" + shapeLabel(s.shape) + "_step" +
                      std::to_string(static_cast<int>(s.step)) + "_clip" +
                      std::to_string(static_cast<int>(s.maxGradNorm)) +
                      (s.withNorm ? "_norm" : "") + (s.inPlace ? "_in_place" : "") + "_b" +
                      std::to_string(static_cast<int>(s.beta2 * 1000));
  return {
      "adamw", label, [=] {
        KernelCall k;
        RefTensor g = roundTo(randomTensor(s.shape, seed + 2, 0.3), dtype);
        RefTensor v = randomTensor(s.shape, seed + 4, s.vScale);
        for (double &x : v.data) x = s.vSquared ? x * x : std::abs(x);
        size_t p = k.input(randomTensor(s.shape, seed + 1), dtype);
        k.input(g, dtype);
        size_t m = k.input(randomTensor(s.shape, seed + 3, s.mScale), dtype);
        size_t vi = k.input(v, dtype);
        k.input(RefTensor{{}, {s.lr}}, DType::F32);
        k.input(RefTensor{{}, {s.step}}, DType::F32);
        if (s.withNorm) // the kernel sees an f32 scalar
          k.input(RefTensor{{}, {s.norm < 0 ? ref::globalNorm({g}).data[0] : s.norm}}, DType::F32);
        if (s.inPlace)
          k.outputs.insert(k.outputs.end(), {p, m, vi});
        else
          for (int i = 0; i < 3; ++i) k.output(dtype, s.shape);
        k.attrs = attrs({{"beta1", 0.9},
                         {"beta2", s.beta2},
                         {"epsilon", 1e-8},
                         {"weight_decay", 0.1},
                         {"max_grad_norm", s.maxGradNorm}});
        k.reference = [s](const std::vector<RefTensor> &in) {
          double norm = s.withNorm ? in[6].data[0] : 0.0;
          return ref::adamw(in[0], in[1], in[2], in[3], in[4].data[0], in[5].data[0],
                            s.withNorm ? &norm : nullptr, 0.9, s.beta2, 1e-8, 0.1, s.maxGradNorm);
        };
        k.metrics = {Metric::Elementwise, Metric::Norm, Metric::Elementwise};
        return k;
      }};
}

/// Clipping on, off and not binding (a norm below max_grad_norm), with and
/// without a norm input, first and later steps, in place and not, on a
/// small parameter; then GPT-2-like state (β2 = 0.999, small moments) on
/// sizes across the CUDA kernel's blocks, up to an MLP weight.
std::vector<ConformanceCase> adamwCases() {
  std::vector<ConformanceCase> cases;
  const std::vector<AdamWSetting> small = {
      {{33, 7}, 3e-3, 1, 0.95, 1.0, true, -1, false, 0.1, 0.1, true},
      {{33, 7}, 3e-3, 10, 0.95, 1.0, true, -1, true, 0.1, 0.1, true},
      {{33, 7}, 3e-3, 3, 0.95, 0.0, true, -1, false, 0.1, 0.1, true},
      {{33, 7}, 3e-3, 7, 0.95, 1.0, false, -1, true, 0.1, 0.1, true},
      {{33, 7}, 3e-3, 2, 0.95, 100.0, true, -1, false, 0.1, 0.1, true}};
  uint64_t seed = 820;
  for (DType dtype : kFloatTypes)
    for (const AdamWSetting &s : small) cases.push_back(adamwCase(dtype, s, seed += 8));
  const std::vector<std::vector<int64_t>> shapes = {{1},    {7},        {3, 129},   {2047},
                                                    {2049}, {37, 1000}, {768, 3072}};
  seed = 10300;
  for (DType dtype : kFloatTypes)
    for (const auto &shape : shapes) {
      AdamWSetting plain = {shape, 3e-4, 17, 0.999, 0.0, false, 0, false, 0.03, 1e-3, false};
      AdamWSetting clipped = plain, inPlace = plain;
      clipped.step = 1, clipped.maxGradNorm = 1.0, clipped.withNorm = true, clipped.norm = 4.5;
      inPlace.inPlace = true;
      for (const AdamWSetting &s : {plain, clipped, inPlace})
        cases.push_back(adamwCase(dtype, s, seed += 8));
    }
  return cases;
}

LLMC_CONFORMANCE_CASES(AdamW, adamwCases);

TEST(AdamWKernel, NonFiniteNormKeepsEveryValueBitForBit) {
  const std::vector<int64_t> shape = {33, 7};
  const double bad[] = {std::numeric_limits<double>::quiet_NaN(),
                        std::numeric_limits<double>::infinity()};
  for (DType dtype : kFloatTypes)
    for (double norm : bad)
      for (double maxGradNorm : {1.0, 0.0}) // clipping on or off: the verdict is the same
        for (bool inPlace : {false, true}) {
          SCOPED_TRACE(std::string(dtypeName(dtype)) + " norm " + std::to_string(norm) +
                       " max_grad_norm " + std::to_string(maxGradNorm) +
                       (inPlace ? " in place" : ""));
          Buffer pb = Buffer::of(randomTensor(shape, 901), dtype),
                 gb = Buffer::of(randomTensor(shape, 902, 0.3), dtype),
                 mb = Buffer::of(randomTensor(shape, 903, 0.1), dtype),
                 root = Buffer::of(randomTensor(shape, 904, 0.1), dtype);
          Buffer vb = Buffer::of(ref::mul(root.toRef(), root.toRef()), dtype);
          const std::vector<uint64_t> p0 = pb.storage, m0 = mb.storage, v0 = vb.storage;
          Buffer lrb = Buffer::of(RefTensor{{}, {1e-3}}, DType::F32),
                 stepb = Buffer::of(RefTensor{{}, {5}}, DType::F32),
                 normb = Buffer::of(RefTensor{{}, {norm}}, DType::F32);
          Buffer p1(dtype, shape), m1(dtype, shape), v1(dtype, shape);
          p1.poison(), m1.poison(), v1.poison();
          std::vector<Buffer *> outputs =
              inPlace ? std::vector<Buffer *>{&pb, &mb, &vb} : std::vector<Buffer *>{&p1, &m1, &v1};
          ASSERT_TRUE(runKernel("adamw", {&pb, &gb, &mb, &vb, &lrb, &stepb, &normb}, outputs,
                                attrs({{"beta1", 0.9},
                                       {"beta2", 0.95},
                                       {"epsilon", 1e-8},
                                       {"weight_decay", 0.1},
                                       {"max_grad_norm", maxGradNorm}})));
          EXPECT_EQ(outputs[0]->storage, p0);
          EXPECT_EQ(outputs[1]->storage, m0);
          EXPECT_EQ(outputs[2]->storage, v0);
        }
}

// fp16 loss scaling: gradients and their norm scaled by a power of two S,
// unscaled by the loss_scale input, give the unscaled step bit for bit
// (dividing a power of two out of the clip factor is exact).
TEST(AdamWKernel, LossScaleUnscalesExactly) {
  const std::vector<int64_t> shape = {33, 7};
  for (double maxGradNorm : {1.0, 100.0, 0.0})
    for (double scale : {1.0, 1024.0, 65536.0}) {
      SCOPED_TRACE("max_grad_norm " + std::to_string(maxGradNorm) + " scale " +
                   std::to_string(scale));
      RefTensor g = roundTo(randomTensor(shape, 912, 0.3), DType::F32);
      RefTensor scaled = ref::scale(g, scale);
      double norm = static_cast<float>(ref::globalNorm({g}).data[0]);
      auto step = [&](const RefTensor &grad, double gradNorm, const double *lossScale) {
        Buffer pb = Buffer::of(randomTensor(shape, 911), DType::F32),
               gb = Buffer::of(grad, DType::F32),
               mb = Buffer::of(randomTensor(shape, 913, 0.1), DType::F32),
               vb = Buffer::of(ref::mul(randomTensor(shape, 914, 0.1),
                                        randomTensor(shape, 914, 0.1)),
                               DType::F32);
        Buffer lrb = Buffer::of(RefTensor{{}, {1e-3}}, DType::F32),
               stepb = Buffer::of(RefTensor{{}, {3}}, DType::F32),
               normb = Buffer::of(RefTensor{{}, {gradNorm}}, DType::F32),
               scaleb = Buffer::of(RefTensor{{}, {lossScale ? *lossScale : 1.0}}, DType::F32);
        std::vector<Buffer *> inputs = {&pb, &gb, &mb, &vb, &lrb, &stepb, &normb};
        if (lossScale) inputs.push_back(&scaleb);
        EXPECT_TRUE(runKernel("adamw", inputs, {&pb, &mb, &vb},
                              attrs({{"beta1", 0.9},
                                     {"beta2", 0.95},
                                     {"epsilon", 1e-8},
                                     {"weight_decay", 0.1},
                                     {"max_grad_norm", maxGradNorm}})));
        return std::vector<std::vector<uint64_t>>{pb.storage, mb.storage, vb.storage};
      };
      auto plain = step(g, norm, nullptr);
      auto unscaled = step(scaled, norm * scale, &scale);
      EXPECT_EQ(unscaled, plain);
      // The reference agrees on the unscaling.
      std::vector<RefTensor> a = ref::adamw(g, g, g, ref::mul(g, g), 1e-3, 3, &norm, 0.9, 0.95,
                                            1e-8, 0.1, maxGradNorm);
      double scaledNorm = norm * scale;
      std::vector<RefTensor> b = ref::adamw(g, scaled, g, ref::mul(g, g), 1e-3, 3, &scaledNorm,
                                            0.9, 0.95, 1e-8, 0.1, maxGradNorm, scale);
      EXPECT_CLOSE(b[0], a[0], Metric::Elementwise, 1e-12);
    }
}

/// One tensor of a multi_tensor_adamw test call.
struct TensorSpec {
  std::vector<int64_t> shape;
  DType param, grad;
  std::optional<DType> castTo; ///< the master's cast, if any
  bool decay;
};

/// Sizes across multi_tensor_adamw's chunks (the CPU's are 2^15 elements):
/// a scalar-sized one, odd ones, one of several chunks, and every dtype
/// combination the optimizer makes (fp32 masters cast to bf16 or f16, bf16
/// gradients widened, bf16 parameters without masters).
const std::vector<TensorSpec> kMultiSpecs = {
    {{1}, DType::F32, DType::F32, DType::BF16, false},
    {{33, 7}, DType::F32, DType::BF16, DType::BF16, true},
    {{70001}, DType::F32, DType::F32, std::nullopt, true},
    {{5, 2049}, DType::F32, DType::F16, DType::F16, true},
    {{129}, DType::BF16, DType::BF16, std::nullopt, false},
    {{3, 3}, DType::F16, DType::F16, std::nullopt, true},
};

/// The inputs and outputs of one multi_tensor_adamw call over `specs`,
/// with its per-tensor twins' buffers.
struct MultiCall {
  std::vector<Buffer> p, g, m, v, p1, m1, v1, casts;
  Buffer lr = Buffer::of(RefTensor{{}, {2e-3}}, DType::F32);
  Buffer step = Buffer::of(RefTensor{{}, {4}}, DType::F32);
  Buffer norm = Buffer::of(RefTensor{{}, {3.5}}, DType::F32);
  Buffer lossScale = Buffer::of(RefTensor{{}, {1024}}, DType::F32);
  KernelAttrs attrs;

  MultiCall(const std::vector<TensorSpec> &specs, uint64_t seed, double maxGradNorm) {
    std::vector<int64_t> decay, castOf;
    for (size_t i = 0; i < specs.size(); ++i) {
      const TensorSpec &t = specs[i];
      RefTensor root = randomTensor(t.shape, ++seed, 0.1);
      p.push_back(Buffer::of(randomTensor(t.shape, ++seed), t.param));
      g.push_back(Buffer::of(randomTensor(t.shape, ++seed, 30.0), t.grad));
      m.push_back(Buffer::of(randomTensor(t.shape, ++seed, 0.1), t.param));
      v.push_back(Buffer::of(ref::mul(root, root), t.param));
      p1.emplace_back(t.param, t.shape), m1.emplace_back(t.param, t.shape);
      v1.emplace_back(t.param, t.shape);
      p1.back().poison(), m1.back().poison(), v1.back().poison();
      decay.push_back(t.decay ? 1 : 0);
      if (t.castTo) {
        castOf.push_back(static_cast<int64_t>(i));
        casts.emplace_back(*t.castTo, t.shape);
        casts.back().poison();
      }
    }
    attrs = ::llmc::test::attrs({{"beta1", 0.9},
                                 {"beta2", 0.95},
                                 {"epsilon", 1e-8},
                                 {"weight_decay", 0.1},
                                 {"max_grad_norm", maxGradNorm}});
    attrs.setInts("decay", decay);
    attrs.setInts("cast_of", castOf);
  }

  /// The kernel's inputs (with the norm and the loss scale when asked) and
  /// its outputs (in place over p, m, v when asked).
  std::vector<Buffer *> inputs(bool withNorm, bool withScale) {
    std::vector<Buffer *> in;
    for (auto *list : {&p, &g, &m, &v})
      for (Buffer &b : *list) in.push_back(&b);
    in.push_back(&lr), in.push_back(&step);
    if (withNorm) in.push_back(&norm);
    if (withScale) in.push_back(&lossScale);
    const int64_t n = static_cast<int64_t>(p.size());
    attrs.setInts("operand_segments", {n, n, n, n, 1, 1, withNorm ? 1 : 0, withScale ? 1 : 0});
    return in;
  }
  std::vector<Buffer *> outputs(bool inPlace) {
    std::vector<Buffer *> out;
    for (auto *list : inPlace ? std::vector<std::vector<Buffer> *>{&p, &m, &v}
                              : std::vector<std::vector<Buffer> *>{&p1, &m1, &v1})
      for (Buffer &b : *list) out.push_back(&b);
    for (Buffer &b : casts) out.push_back(&b);
    return out;
  }
};

/// Runs the unfused kernels tensor by tensor on `call`'s inputs: cast (a
/// bf16/f16 gradient to f32), adamw, cast (the master to its working type).
/// Returns every result's bytes in the fused kernel's output order.
std::vector<std::vector<uint64_t>> unfused(const std::vector<TensorSpec> &specs, MultiCall &call,
                                           bool withNorm, bool withScale) {
  std::vector<std::vector<uint64_t>> ps, ms, vs, casts;
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorSpec &t = specs[i];
    Buffer p = call.p[i], m = call.m[i], v = call.v[i], g = call.g[i];
    if (t.grad != t.param) {
      Buffer wide(t.param, t.shape);
      EXPECT_TRUE(runKernel("cast", {&g}, {&wide}));
      g = wide;
    }
    std::vector<Buffer *> in = {&p, &g, &m, &v, &call.lr, &call.step};
    if (withNorm) in.push_back(&call.norm);
    if (withScale) in.push_back(&call.lossScale);
    KernelAttrs a = call.attrs;
    a.setFloat("weight_decay", t.decay ? 0.1 : 0.0);
    EXPECT_TRUE(runKernel("adamw", in, {&p, &m, &v}, a));
    ps.push_back(p.storage), ms.push_back(m.storage), vs.push_back(v.storage);
    if (t.castTo) {
      Buffer low(*t.castTo, t.shape);
      EXPECT_TRUE(runKernel("cast", {&p}, {&low}));
      casts.push_back(low.storage);
    }
  }
  std::vector<std::vector<uint64_t>> all = ps;
  all.insert(all.end(), ms.begin(), ms.end());
  all.insert(all.end(), vs.begin(), vs.end());
  all.insert(all.end(), casts.begin(), casts.end());
  return all;
}

std::vector<std::vector<uint64_t>> bytesOf(const std::vector<Buffer *> &buffers) {
  std::vector<std::vector<uint64_t>> bytes;
  for (Buffer *b : buffers) bytes.push_back(b->storage);
  return bytes;
}

TEST(MultiTensorAdamWKernel, IsAdamWAndCastPerTensorBitForBit) {
  for (double maxGradNorm : {1.0, 0.0})
    for (int variant = 0; variant < 4; ++variant) { // norm, no norm, loss scale, in place
      SCOPED_TRACE("max_grad_norm " + std::to_string(maxGradNorm) + " variant " +
                   std::to_string(variant));
      const bool withNorm = variant != 1, withScale = variant == 2, inPlace = variant == 3;
      MultiCall call(kMultiSpecs, 1200, maxGradNorm);
      const auto expected = unfused(kMultiSpecs, call, withNorm, withScale);
      std::vector<Buffer *> outputs = call.outputs(inPlace);
      ASSERT_TRUE(runKernel("multi_tensor_adamw", call.inputs(withNorm, withScale), outputs,
                            call.attrs));
      EXPECT_EQ(bytesOf(outputs), expected);
    }
}

/// Sizes across the CUDA kernel's chunks (16·256 elements) as well: a
/// GPT-2 MLP weight among the dtype combinations.
const std::vector<TensorSpec> kChunkSpecs = {
    {{1}, DType::F32, DType::F32, DType::BF16, false},
    {{33, 7}, DType::F32, DType::BF16, DType::BF16, true},
    {{4097}, DType::F32, DType::F32, std::nullopt, true},
    {{768, 3072}, DType::F32, DType::F32, DType::BF16, true},
    {{5, 2049}, DType::F32, DType::F16, DType::F16, true},
    {{129}, DType::BF16, DType::BF16, std::nullopt, false},
    {{3, 3}, DType::F16, DType::F16, std::nullopt, true}};

/// One multi_tensor_adamw call: its tensors, the state's scales (v is
/// positive: a square, or a magnitude) and the step's scalars.
struct MultiSetting {
  std::string label;
  std::vector<TensorSpec> specs;
  double lr, step, beta2, norm, lossScale, gScale, mScale, vScale;
  bool vSquared;
};

/// As adamw's cases, per tensor: p', v' and the casts elementwise, m'
/// (which can cancel) by norm, at each output dtype's tolerance against
/// the reference; CUDA elementwise at the dtype's tolerance against the
/// CPU (the same per-element arithmetic as CUDA's adamw).
ConformanceCase multiTensorAdamwCase(const MultiSetting &s, int variant, uint64_t seed) {
  static const char *const kVariants[] = {"norm", "no_norm", "loss_scale", "in_place"};
  const bool withNorm = variant != 1, withScale = variant == 2, inPlace = variant == 3;
  return {
      "multi_tensor_adamw", s.label + "_" + kVariants[variant], [=] {
        KernelCall k;
        const size_t n = s.specs.size();
        std::vector<int64_t> decay, castOf;
        std::vector<size_t> p, m, v;
        for (size_t i = 0; i < n; ++i)
          p.push_back(k.input(randomTensor(s.specs[i].shape, seed + 4 * i + 1), s.specs[i].param));
        for (size_t i = 0; i < n; ++i)
          k.input(randomTensor(s.specs[i].shape, seed + 4 * i + 2, s.gScale), s.specs[i].grad);
        for (size_t i = 0; i < n; ++i)
          m.push_back(k.input(randomTensor(s.specs[i].shape, seed + 4 * i + 3, s.mScale),
                              s.specs[i].param));
        for (size_t i = 0; i < n; ++i) {
          RefTensor values = randomTensor(s.specs[i].shape, seed + 4 * i + 4, s.vScale);
          for (double &x : values.data) x = s.vSquared ? x * x : std::abs(x);
          v.push_back(k.input(values, s.specs[i].param));
          decay.push_back(s.specs[i].decay ? 1 : 0);
          if (s.specs[i].castTo)
            castOf.push_back(static_cast<int64_t>(i));
        }
        k.input(RefTensor{{}, {s.lr}}, DType::F32);
        k.input(RefTensor{{}, {s.step}}, DType::F32);
        if (withNorm)
          k.input(RefTensor{{}, {s.norm}}, DType::F32);
        if (withScale)
          k.input(RefTensor{{}, {s.lossScale}}, DType::F32);
        for (const std::vector<size_t> *state : {&p, &m, &v})
          for (size_t i = 0; i < n; ++i)
            k.outputMaybeInPlace(inPlace, (*state)[i], s.specs[i].param, s.specs[i].shape);
        for (const TensorSpec &t : s.specs)
          if (t.castTo)
            k.output(*t.castTo, t.shape);
        k.attrs = attrs({{"beta1", 0.9},
                         {"beta2", s.beta2},
                         {"epsilon", 1e-8},
                         {"weight_decay", 0.1},
                         {"max_grad_norm", 1.0}});
        k.attrs.setInts("decay", decay);
        k.attrs.setInts("cast_of", castOf);
        const int64_t count = static_cast<int64_t>(n);
        k.attrs.setInts("operand_segments",
                        {count, count, count, count, 1, 1, withNorm ? 1 : 0, withScale ? 1 : 0});
        k.reference = [=](const std::vector<RefTensor> &in) {
          auto list = [&](size_t first) {
            return std::vector<RefTensor>(in.begin() + first * n, in.begin() + (first + 1) * n);
          };
          double norm = withNorm ? in[4 * n + 2].data[0] : 0.0;
          double lossScale = withScale ? in[4 * n + 3].data[0] : 1.0;
          return ref::multiTensorAdamw(list(0), list(1), list(2), list(3), in[4 * n].data[0],
                                       in[4 * n + 1].data[0], withNorm ? &norm : nullptr, 0.9,
                                       s.beta2, 1e-8, 0.1, 1.0, lossScale, decay, castOf);
        };
        k.metrics.assign(k.outputs.size(), Metric::Elementwise);
        std::fill(k.metrics.begin() + n, k.metrics.begin() + 2 * n, Metric::Norm);
        return k;
      }};
}

/// Each setting with a norm, without, with a loss scale, and in place.
std::vector<ConformanceCase> multiTensorAdamwCases() {
  const std::vector<MultiSetting> settings = {
      {"cpu_chunks", kMultiSpecs, 2e-3, 4, 0.95, 3.5, 1024, 30.0, 0.1, 0.1, true},
      {"cuda_chunks", kChunkSpecs, 3e-4, 17, 0.999, 40.0, 1.0, 0.3, 0.03, 1e-3, false}};
  std::vector<ConformanceCase> cases;
  uint64_t seed = 1300;
  for (const MultiSetting &s : settings)
    for (int variant = 0; variant < 4; ++variant)
      cases.push_back(multiTensorAdamwCase(s, variant, seed += 100));
  return cases;
}

LLMC_CONFORMANCE_CASES(MultiTensorAdamW, multiTensorAdamwCases);

TEST(MultiTensorAdamWKernel, NonFiniteNormKeepsStateAndCastsTheMasters) {
  for (double bad : {std::numeric_limits<double>::quiet_NaN(),
                     std::numeric_limits<double>::infinity()})
    for (bool inPlace : {false, true}) {
      SCOPED_TRACE(std::to_string(bad) + (inPlace ? " in place" : ""));
      MultiCall call(kMultiSpecs, 1400, 1.0);
      call.norm = Buffer::of(RefTensor{{}, {bad}}, DType::F32);
      std::vector<std::vector<uint64_t>> before = bytesOf(call.outputs(true));
      const auto expected = unfused(kMultiSpecs, call, true, false);
      std::vector<Buffer *> outputs = call.outputs(inPlace);
      ASSERT_TRUE(runKernel("multi_tensor_adamw", call.inputs(true, false), outputs, call.attrs));
      std::vector<std::vector<uint64_t>> after = bytesOf(outputs);
      EXPECT_EQ(after, expected);
      // p, m and v are what they were; the casts are of the unchanged masters.
      after.resize(3 * kMultiSpecs.size());
      before.resize(3 * kMultiSpecs.size());
      EXPECT_EQ(after, before);
    }
}

TEST(MultiTensorAdamWKernel, BindErrorsNameTheTensor) {
  const std::vector<int64_t> shape = {4};
  auto f32 = [&](std::vector<int64_t> s) { return typeOnly(DType::F32, std::move(s)); };
  TensorView scalar = f32({});
  KernelAttrs good = attrs({{"beta1", 0.9},
                            {"beta2", 0.95},
                            {"epsilon", 1e-8},
                            {"weight_decay", 0.1},
                            {"max_grad_norm", 1.0}});
  good.setInts("decay", {1});
  good.setInts("cast_of", {0});
  good.setInts("operand_segments", {1, 1, 1, 1, 1, 1, 0, 0});
  std::vector<TensorView> in = {f32(shape), f32(shape), f32(shape), f32(shape), scalar, scalar};
  std::vector<TensorView> out = {f32(shape), f32(shape), f32(shape), typeOnly(DType::BF16, shape)};
  ASSERT_EQ(bindError("multi_tensor_adamw", in, out, good), "");
  auto with = [&](const char *name, std::vector<int64_t> values) {
    KernelAttrs a = good;
    a.setInts(name, std::move(values));
    return a;
  };
  std::vector<TensorView> badGrad = in, badV = in, badLr = in, bf16Param = in;
  badGrad[1] = f32({5});
  badV[3] = typeOnly(DType::BF16, shape);
  badLr[4] = f32({2});
  bf16Param[0] = typeOnly(DType::BF16, shape);
  std::vector<TensorView> bf16Out = out;
  bf16Out[0] = bf16Out[1] = bf16Out[2] = typeOnly(DType::BF16, shape);
  bf16Param[2] = bf16Param[3] = typeOnly(DType::BF16, shape);
  std::vector<TensorView> badCast = out;
  badCast[3] = typeOnly(DType::BF16, {3});
  expectBindErrorsMention(
      "multi_tensor_adamw",
      {{in, out, with("operand_segments", {1, 1, 1, 2, 1, 1, 0, 0}),
        "attribute 'operand_segments' must be [N, N, N, N, 1, 1, norm 0/1, loss_scale 0/1 (only "
        "with norm)] with N >= 1"},
       {in, out, with("operand_segments", {1, 1, 1, 1, 1, 1, 1, 0}),
        "attribute 'operand_segments' counts 7 inputs, the call has 6"},
       {in, out, with("decay", {1, 0}), "attribute 'decay' must hold one 0 or 1 per tensor (1)"},
       {in, out, with("decay", {2}), "attribute 'decay' must hold one 0 or 1 per tensor (1)"},
       {in, out, with("cast_of", {}), "expects 3 outputs (params', m', v' of 1 tensors and 0 casts), got 4"},
       {in, out, with("cast_of", {1}), "attribute 'cast_of' must list increasing tensor indices below 1"},
       {badGrad, out, good, "grad 0"},
       {badV, out, good, "v 0"},
       {badLr, out, good, "lr"},
       {bf16Param, bf16Out, good, "cast 0: only an f32 parameter (a master) is cast, tensor 0 is bf16"},
       {in, badCast, good, "cast 0"}});
}

} // namespace
} // namespace llmc::test
