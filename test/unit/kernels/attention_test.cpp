//===- attention_test.cpp - fused attention and its backward --------------===//
//
// The six attention kernels' conformance cases (Attention, AttentionPacked,
// AttentionRope): the CPU kernels against the double reference (packed:
// the reference of qkv's column blocks; rope: of q and k rotated by rope's
// reference and stored), and the CUDA kernels against the CPU on CUDA
// cores, tensor cores and cuDNN where each applies. Norm metric
// throughout: outputs and gradients are weighted sums of many terms, and
// lse = m + log l can be near zero (its absolute error is what matters
// downstream, as exp(s − lse)). Shapes cover multi-head, GQA, MQA, causal
// and not, S != T, one query and key, several query and key tiles with
// ragged edges, the CUDA kernels' fast and generic head dims, GPT-2
// small's attention, and packed sequences (segment ids, i32 and i64) both
// contiguous and interleaved, with documents short and long enough that
// whole tiles are skipped. Beside the cases: the packed-qkv and rotating
// kernels give the plain ones' results bit for bit, determinism, segment
// ids read every run, the workspace operand, binding errors, and the
// cuDNN workspace formula.

#include "Conformance.h"

#include "common/AttentionWorkspace.h"
#include "kernels/cpu/SegmentTiles.h"

#include <cmath>
#include <limits>
#include <random>

namespace llmc::test {
namespace {

enum class Segments { None, Packed, Documents, Interleaved };

struct AttentionCase {
  int64_t b, t, s, h, kv, d;
  bool causal;
  Segments segments;
  DType ids = DType::I32; ///< segment ids' type
};

std::string describe(const AttentionCase &c) {
  return "B" + std::to_string(c.b) + " T" + std::to_string(c.t) + " S" + std::to_string(c.s) +
         " H" + std::to_string(c.h) + " KV" + std::to_string(c.kv) + " D" + std::to_string(c.d) +
         (c.causal ? " causal" : "") +
         (c.segments == Segments::Packed        ? " packed"
          : c.segments == Segments::Documents   ? " documents"
          : c.segments == Segments::Interleaved ? " interleaved"
                                                : "");
}

const std::vector<AttentionCase> kCases = {
    {2, 33, 33, 4, 4, 16, false, Segments::None},
    {2, 33, 33, 4, 4, 16, true, Segments::None},
    {1, 70, 70, 4, 2, 32, true, Segments::None}, // GQA, two query tiles
    {1, 70, 70, 4, 2, 32, false, Segments::None},
    {2, 13, 13, 3, 1, 8, true, Segments::None},   // MQA
    {1, 7, 130, 2, 1, 64, false, Segments::None}, // S != T, three key tiles
    {2, 67, 67, 2, 1, 16, true, Segments::Packed},
    {2, 67, 67, 4, 2, 16, false, Segments::Packed},
    {1, 40, 40, 2, 2, 24, false, Segments::Interleaved},
    {1, 40, 40, 2, 1, 24, true, Segments::Interleaved},
    {1, 150, 150, 2, 2, 64, true, Segments::None}, // three tiles each way
    {2, 300, 300, 2, 1, 16, true, Segments::Documents}, // tiles hidden by segments
    {1, 260, 260, 4, 2, 32, false, Segments::Documents},
};

RefTensor segmentIds(const AttentionCase &c, uint64_t seed) {
  RefTensor ids = RefTensor::zeros({c.b, c.t});
  std::mt19937_64 rng(seed);
  for (int64_t b = 0; b < c.b; ++b) {
    int64_t id = 0;
    for (int64_t i = 0; i < c.t; ++i) {
      if (c.segments == Segments::Packed) {
        if (i > 0 && rng() % 9 == 0)
          ++id; // runs of ~9 tokens
      } else if (c.segments == Segments::Documents) {
        if (i > 0 && rng() % 80 == 0)
          ++id; // runs of ~80 tokens, across tiles
      } else {
        id = static_cast<int64_t>(rng() % 3);
      }
      ids.data[b * c.t + i] = static_cast<double>(id);
    }
  }
  return ids;
}

/// 1/sqrt(D), the usual scale.
double scaleOf(const AttentionCase &c) { return 1.0 / std::sqrt(static_cast<double>(c.d)); }

/// A case's label: its shape, dtype and segment ids' type.
std::string labelOf(const AttentionCase &c, DType dtype) {
  std::string label = describe(c) + " " + dtypeName(dtype);
  if (c.segments != Segments::None && c.ids != DType::I32)
    label += std::string(" ids ") + dtypeName(c.ids);
  return caseLabel(label);
}

/// The CUDA kernels' shapes (beside kCases): head dims 64 and 128 (the fast
/// paths) and 7, 32, 80, 96, 256 (the generic path, with idle lanes when D
/// is not a multiple of 32); MHA, GQA (H = 4·KV) and MQA; causal and not;
/// T = 1, 17, 37, 128, 300 (one partial tile, several tiles with ragged
/// edges); S != T both ways; packed segments; i64 segment ids.
const std::vector<AttentionCase> kCudaCases = {
    {2, 1, 1, 4, 4, 64, false, Segments::None}, // one query, one key
    {2, 1, 1, 4, 4, 128, true, Segments::None},
    {2, 17, 17, 4, 4, 64, true, Segments::None}, // one partial tile
    {2, 17, 17, 8, 2, 128, false, Segments::None}, // GQA
    {2, 128, 128, 8, 2, 64, true, Segments::None}, // four full tiles
    {2, 128, 128, 4, 1, 128, true, Segments::None}, // MQA
    {2, 128, 128, 4, 4, 128, false, Segments::None},
    {2, 300, 300, 4, 4, 128, true, Segments::None}, // ragged last tile
    {2, 300, 300, 8, 2, 64, false, Segments::None},
    {2, 300, 300, 4, 1, 64, true, Segments::None},
    {2, 37, 37, 4, 2, 32, true, Segments::None}, // generic head dims
    {2, 37, 37, 2, 2, 80, true, Segments::None},
    {2, 65, 65, 4, 1, 96, false, Segments::None},
    {2, 45, 45, 2, 1, 7, false, Segments::None},
    {2, 33, 33, 2, 2, 256, true, Segments::None},
    {2, 70, 70, 4, 4, 256, false, Segments::None},
    {2, 17, 300, 4, 1, 64, false, Segments::None}, // keys other than queries
    {2, 300, 17, 4, 2, 128, false, Segments::None},
    {2, 1, 129, 8, 2, 80, false, Segments::None},
    {2, 300, 300, 4, 1, 64, true, Segments::Packed},
    {2, 128, 128, 8, 2, 128, false, Segments::Packed},
    {2, 37, 37, 2, 2, 80, true, Segments::Packed},
    {2, 17, 17, 4, 4, 64, false, Segments::Packed},
};

/// GPT-2 small's attention (T = 1024, H = 12, D = 64).
const AttentionCase kGpt2Small = {1, 1024, 1024, 12, 12, 64, true, Segments::None};

/// q, k, v, dout and segment ids of a case, stored as `dtype` (ids as the
/// case's id type).
struct Operands {
  Buffer q, k, v, dout, ids;
};

Operands operandsOf(const AttentionCase &c, DType dtype, uint64_t seed) {
  const bool hasIds = c.segments != Segments::None;
  return {Buffer::of(randomTensor({c.b, c.t, c.h, c.d}, seed), dtype),
          Buffer::of(randomTensor({c.b, c.s, c.kv, c.d}, seed + 1), dtype),
          Buffer::of(randomTensor({c.b, c.s, c.kv, c.d}, seed + 2), dtype),
          Buffer::of(randomTensor({c.b, c.t, c.h, c.d}, seed + 3), dtype),
          Buffer::of(hasIds ? segmentIds(c, seed + 4) : RefTensor::zeros({c.b, c.t}), c.ids)};
}

enum class Pass { Forward, Backward };

/// Where the CUDA half runs a case, each run pinned and checked to have
/// run there: llmc's CUDA-core kernels always; its tensor-core kernels
/// where they apply (bf16 and f16 at head dims 64 and 128); cuDNN's fused
/// attention on bf16 and f16 at head dims 64 and 128 with more than one
/// query and key and no segment ids (what its contract takes,
/// common/AttentionWorkspace.h), with the workspace `llmc compile --target
/// cuda` plans for the op, so the formula is checked against what cuDNN
/// asks for. cuDNN's lse gets 1e-3 instead of 1e-5: it computes the
/// softmax with exp2 and log2(e) folded into the scale, so its fp32 lse is
/// a few ulps from the CPU's. Its backward reads the CPU forward's lse:
/// the proof that cuDNN's Stats and llmc's lse are the same quantity.
std::vector<CudaVariant> cudaRunsOf(const AttentionCase &c, DType dtype, Pass pass, bool rope,
                                    const std::vector<double> &tolerances) {
  std::vector<CudaVariant> runs = {{AttentionImpl::CudaCores, 0, tolerances}};
  const bool half = dtype == DType::BF16 || dtype == DType::F16;
  const bool fastHeadDim = c.d == 64 || c.d == 128;
  if (!half || !fastHeadDim)
    return runs;
  runs.push_back({AttentionImpl::TensorCores, 0, tolerances});
  contracts::CudnnAttentionShape s;
  s.halfPrecision = true, s.elementBytes = static_cast<int64_t>(dtypeSize(dtype));
  s.b = c.b, s.t = c.t, s.s = c.s, s.h = c.h, s.kv = c.kv, s.d = c.d;
  s.backward = pass == Pass::Backward, s.rope = rope, s.segments = c.segments != Segments::None;
  if (c.t == 1 || c.s == 1 || !contracts::cudnnAttentionRefusal(s).empty())
    return runs;
  CudaVariant cudnn{AttentionImpl::Cudnn, contracts::cudnnAttentionWorkspaceBytes(s), tolerances};
  if (pass == Pass::Forward)
    cudnn.tolerances = {tolerances[0], 1e-3};
  runs.push_back(cudnn);
  return runs;
}

/// Forward tolerances, norm metric (outputs are weighted sums of many
/// terms): the dtype's for out (both backends round their fp32 results to
/// bf16 once, so they can differ by one step in a few elements); lse is
/// f32 in every storage type and near zero where m + log l cancels (its
/// absolute error is what matters downstream, as exp(s − lse)), so 1e-5.
void forwardTolerances(KernelCall &k, const AttentionCase &c, DType dtype, bool rope) {
  k.metric = k.cudaMetric = Metric::Norm;
  k.tolerances = k.cudaTolerances = {tolerance(dtype), 1e-5};
  k.cudaVariants = cudaRunsOf(c, dtype, Pass::Forward, rope, k.cudaTolerances);
}

/// dq and dk with a single key: the softmax is 1 whatever the scores, so
/// they are 0 up to rounding (dS = P·(dP − Drow) with dP = Drow), and
/// relative errors of rounding noise mean nothing: they must be written
/// (no NaN) and tiny.
::testing::AssertionResult singleKeyGradsAreTiny(const std::vector<RefTensor> &grads) {
  for (int i = 0; i < 2; ++i)
    for (double x : grads[i].data)
      if (!(std::abs(x) <= 1e-4))
        return ::testing::AssertionFailure() << (i == 0 ? "dq" : "dk") << " has " << x;
  return ::testing::AssertionSuccess();
}

/// Backward tolerances: the dtype's for every gradient, norm metric; with
/// one key, dq and dk by singleKeyGradsAreTiny instead.
void backwardTolerances(KernelCall &k, const AttentionCase &c, DType dtype, bool rope) {
  const double unchecked = std::numeric_limits<double>::infinity();
  k.metric = k.cudaMetric = Metric::Norm;
  k.tolerances = k.cudaTolerances = {tolerance(dtype)};
  if (c.s == 1) {
    k.tolerances = k.cudaTolerances = {unchecked, unchecked, tolerance(dtype)};
    k.check = [](const std::vector<RefTensor> &, const std::vector<RefTensor> &grads,
                 const std::vector<RefTensor> &) { return singleKeyGradsAreTiny(grads); };
    k.cudaCheck = singleKeyGradsAreTiny;
  }
  k.cudaVariants = cudaRunsOf(c, dtype, Pass::Backward, rope, k.cudaTolerances);
}

ConformanceCase forwardCase(const AttentionCase &c, DType dtype, uint64_t seed) {
  return {"attention", labelOf(c, dtype), [=] {
            KernelCall k;
            Operands x = operandsOf(c, dtype, seed);
            const bool hasIds = c.segments != Segments::None;
            k.input(std::move(x.q)), k.input(std::move(x.k)), k.input(std::move(x.v));
            if (hasIds)
              k.input(std::move(x.ids));
            k.output(dtype, {c.b, c.t, c.h, c.d});
            k.output(DType::F32, {c.b, c.h, c.t});
            k.attrs = attrs({{"scale", scaleOf(c)}}, {{"causal", c.causal}});
            k.reference = [c, hasIds](const std::vector<RefTensor> &in) {
              return ref::attention(in[0], in[1], in[2], hasIds ? &in[3] : nullptr, scaleOf(c),
                                    c.causal);
            };
            forwardTolerances(k, c, dtype, false);
            return k;
          }};
}

/// The backward consumes the CPU forward's out (in storage precision) and
/// lse, so both backends and the reference see the same inputs.
ConformanceCase backwardCase(const AttentionCase &c, DType dtype, uint64_t seed) {
  return {"attention_grad", labelOf(c, dtype), [=] {
            KernelCall k;
            Operands x = operandsOf(c, dtype, seed);
            const bool hasIds = c.segments != Segments::None;
            k.attrs = attrs({{"scale", scaleOf(c)}}, {{"causal", c.causal}});
            Buffer out(dtype, {c.b, c.t, c.h, c.d}), lse(DType::F32, {c.b, c.h, c.t});
            std::vector<Buffer *> forward = {&x.q, &x.k, &x.v};
            if (hasIds)
              forward.push_back(&x.ids);
            EXPECT_TRUE(runKernel("attention", forward, {&out, &lse}, k.attrs));
            k.input(std::move(x.q)), k.input(std::move(x.k)), k.input(std::move(x.v));
            k.input(std::move(out)), k.input(std::move(lse)), k.input(std::move(x.dout));
            if (hasIds)
              k.input(std::move(x.ids));
            k.output(dtype, {c.b, c.t, c.h, c.d});
            k.output(dtype, {c.b, c.s, c.kv, c.d});
            k.output(dtype, {c.b, c.s, c.kv, c.d});
            k.reference = [c, hasIds](const std::vector<RefTensor> &in) {
              return ref::attentionGrad(in[0], in[1], in[2], in[3], in[4], in[5],
                                        hasIds ? &in[6] : nullptr, scaleOf(c), c.causal);
            };
            backwardTolerances(k, c, dtype, false);
            return k;
          }};
}

/// Every shape of kCases and kCudaCases in f32, bf16 and f16; i64 segment
/// ids; GPT-2 small's attention.
std::vector<AttentionCase> attentionShapes() {
  std::vector<AttentionCase> shapes = kCases;
  shapes.insert(shapes.end(), kCudaCases.begin(), kCudaCases.end());
  return shapes;
}

template <typename MakeCase> std::vector<ConformanceCase> casesOf(MakeCase make, uint64_t seed) {
  std::vector<ConformanceCase> cases;
  for (DType dtype : kFloatTypes)
    for (const AttentionCase &c : attentionShapes()) cases.push_back(make(c, dtype, seed += 10));
  AttentionCase wideIds = {1, 20, 20, 2, 1, 8, true, Segments::Packed, DType::I64};
  cases.push_back(make(wideIds, DType::F32, seed += 10));
  wideIds = {2, 128, 128, 4, 2, 64, true, Segments::Packed, DType::I64};
  cases.push_back(make(wideIds, DType::F32, seed += 10));
  cases.push_back(make(wideIds, DType::BF16, seed += 10));
  for (DType dtype : kFloatTypes) cases.push_back(make(kGpt2Small, dtype, seed += 10));
  return cases;
}

std::vector<ConformanceCase> attentionCases() {
  std::vector<ConformanceCase> cases = casesOf(forwardCase, 500);
  std::vector<ConformanceCase> backward = casesOf(backwardCase, 500);
  cases.insert(cases.end(), backward.begin(), backward.end());
  return cases;
}

LLMC_CONFORMANCE_CASES(Attention, attentionCases);

/// q, k, v as the column blocks of one qkv [B, T, (H + 2·KV)·D].
RefTensor packQkv(std::vector<RefTensor> pieces) {
  for (RefTensor &piece : pieces)
    piece.shape = {piece.shape[0], piece.shape[1], piece.shape[2] * piece.shape[3]};
  return ref::concat(pieces, -1);
}

/// qkv's column blocks as q [B, T, H, D], k and v [B, T, KV, D].
std::vector<RefTensor> unpackQkv(const RefTensor &qkv, const AttentionCase &c) {
  std::vector<RefTensor> pieces;
  int64_t offset = 0;
  for (int64_t heads : {c.h, c.kv, c.kv}) {
    RefTensor piece = ref::slice(qkv, {0, 0, offset}, {c.b, c.t, heads * c.d});
    piece.shape = {c.b, c.t, heads, c.d};
    pieces.push_back(std::move(piece));
    offset += heads * c.d;
  }
  return pieces;
}

KernelAttrs packedAttrs(const AttentionCase &c) {
  return attrs({{"scale", scaleOf(c)}}, {{"causal", c.causal}, {"heads", c.h}, {"kv_heads", c.kv}});
}

/// attention_packed: the reference attention of qkv's column blocks, with
/// attention's tolerances.
ConformanceCase packedCase(const AttentionCase &c, DType dtype, uint64_t seed) {
  return {"attention_packed", labelOf(c, dtype), [=] {
            KernelCall k;
            const bool hasIds = c.segments != Segments::None;
            k.input(randomTensor({c.b, c.t, (c.h + 2 * c.kv) * c.d}, seed), dtype);
            if (hasIds)
              k.input(segmentIds(c, seed + 1), c.ids);
            k.output(dtype, {c.b, c.t, c.h, c.d});
            k.output(DType::F32, {c.b, c.h, c.t});
            k.attrs = packedAttrs(c);
            k.reference = [c, hasIds](const std::vector<RefTensor> &in) {
              std::vector<RefTensor> qkv = unpackQkv(in[0], c);
              return ref::attention(qkv[0], qkv[1], qkv[2], hasIds ? &in[1] : nullptr, scaleOf(c),
                                    c.causal);
            };
            forwardTolerances(k, c, dtype, false);
            return k;
          }};
}

/// attention_packed_grad: the reference gradients packed as dqkv, reading
/// the CPU forward's out and lse, with attention_grad's tolerance.
ConformanceCase packedBackwardCase(const AttentionCase &c, DType dtype, uint64_t seed) {
  return {"attention_packed_grad", labelOf(c, dtype), [=] {
            KernelCall k;
            const bool hasIds = c.segments != Segments::None;
            const std::vector<int64_t> qkvShape = {c.b, c.t, (c.h + 2 * c.kv) * c.d};
            Buffer qkv = Buffer::of(randomTensor(qkvShape, seed), dtype);
            Buffer ids =
                Buffer::of(hasIds ? segmentIds(c, seed + 1) : RefTensor::zeros({1}), c.ids);
            Buffer out(dtype, {c.b, c.t, c.h, c.d}), lse(DType::F32, {c.b, c.h, c.t});
            k.attrs = packedAttrs(c);
            std::vector<Buffer *> forward = {&qkv};
            if (hasIds)
              forward.push_back(&ids);
            EXPECT_TRUE(runKernel("attention_packed", forward, {&out, &lse}, k.attrs));
            k.input(std::move(qkv)), k.input(std::move(out)), k.input(std::move(lse));
            k.input(randomTensor({c.b, c.t, c.h, c.d}, seed + 2), dtype);
            if (hasIds)
              k.input(std::move(ids));
            k.output(dtype, qkvShape);
            k.reference = [c, hasIds](const std::vector<RefTensor> &in) {
              std::vector<RefTensor> qkv = unpackQkv(in[0], c);
              return std::vector<RefTensor>{
                  packQkv(ref::attentionGrad(qkv[0], qkv[1], qkv[2], in[1], in[2], in[3],
                                             hasIds ? &in[4] : nullptr, scaleOf(c), c.causal))};
            };
            k.metric = k.cudaMetric = Metric::Norm;
            k.tolerances = k.cudaTolerances = {tolerance(dtype)};
            k.cudaVariants = cudaRunsOf(c, dtype, Pass::Backward, false, k.cudaTolerances);
            return k;
          }};
}

/// The packed kernels' shapes: kCases' with S = T (one qkv holds queries
/// and keys alike), and the CUDA kernels' (one partial tile, a ragged last
/// tile, GQA, MQA at a generic head dim with segments), in f32, bf16 and
/// f16; GPT-2 small's attention.
template <typename MakeCase>
std::vector<ConformanceCase> packedCasesOf(MakeCase make, uint64_t seed) {
  std::vector<AttentionCase> shapes;
  for (const AttentionCase &c : kCases)
    if (c.s == c.t)
      shapes.push_back(c);
  for (const AttentionCase &c : {AttentionCase{2, 17, 17, 4, 4, 64, true, Segments::None},
                                 AttentionCase{2, 300, 300, 4, 4, 64, true, Segments::None},
                                 AttentionCase{2, 128, 128, 8, 2, 128, false, Segments::None},
                                 AttentionCase{2, 300, 300, 4, 1, 128, true, Segments::None},
                                 AttentionCase{2, 37, 37, 4, 1, 80, true, Segments::Packed},
                                 AttentionCase{2, 65, 65, 2, 2, 32, false, Segments::Packed}})
    shapes.push_back(c);
  std::vector<ConformanceCase> cases;
  for (DType dtype : kFloatTypes) {
    for (const AttentionCase &c : shapes) cases.push_back(make(c, dtype, seed += 10));
    cases.push_back(make(kGpt2Small, dtype, seed += 10));
  }
  return cases;
}

std::vector<ConformanceCase> packedAttentionCases() {
  std::vector<ConformanceCase> cases = packedCasesOf(packedCase, 700);
  std::vector<ConformanceCase> backward = packedCasesOf(packedBackwardCase, 700);
  cases.insert(cases.end(), backward.begin(), backward.end());
  return cases;
}

LLMC_CONFORMANCE_CASES(AttentionPacked, packedAttentionCases);

/// Positions that restart at every document (packed rows), or none.
RefTensor documentPositions(const RefTensor &segments) {
  RefTensor positions = RefTensor::zeros(segments.shape);
  const int64_t t = segments.shape[1];
  for (int64_t i = 0; i < segments.numel(); ++i)
    positions.data[i] =
        i % t > 0 && segments.data[i] == segments.data[i - 1] ? positions.data[i - 1] + 1 : 0;
  return positions;
}

/// A rotating attention case: positions (restarting at packed documents,
/// given with or without the segment ids) or none (0..T-1), and Llama
/// 3.1's scaling over `originalMax` positions (0: unscaled).
struct RopeCase {
  AttentionCase c;
  bool positions;
  int64_t originalMax;
};

std::string labelOf(const RopeCase &r, DType dtype) {
  return labelOf(r.c, dtype) + (r.positions ? "_positions" : "") +
         (r.originalMax ? "_scaled" + std::to_string(r.originalMax) : "");
}

double thetaOf(const RopeCase &r) { return r.originalMax ? 500000.0 : 10000.0; }

RopeScaling scalingOf(const RopeCase &r) {
  if (!r.originalMax)
    return {};
  return {8.0, 1.0, 4.0, r.originalMax};
}

/// The rope and attention attributes; `operands` the inputs before the
/// positions and segment ids (3 forward, 6 backward).
KernelAttrs ropeAttrs(const RopeCase &r, int64_t operands) {
  KernelAttrs a = attrs({{"scale", scaleOf(r.c)}, {"theta", thetaOf(r)}}, {{"causal", r.c.causal}});
  if (r.originalMax) {
    a.setFloat("scaling_factor", 8.0), a.setFloat("low_freq_factor", 1.0);
    a.setFloat("high_freq_factor", 4.0), a.setInt("original_max_positions", r.originalMax);
  }
  std::vector<int64_t> segments(operands, 1);
  segments.push_back(r.positions), segments.push_back(r.c.segments != Segments::None);
  a.setInts("operand_segments", segments);
  return a;
}

/// The positions and segment ids of a rope case, as its trailing inputs.
std::vector<Buffer> ropeExtras(const RopeCase &r, uint64_t seed) {
  AttentionCase documents = r.c;
  if (documents.segments == Segments::None)
    documents.segments = Segments::Packed;
  RefTensor ids = segmentIds(documents, seed);
  std::vector<Buffer> extras;
  if (r.positions)
    extras.push_back(Buffer::of(documentPositions(ids), r.c.ids));
  if (r.c.segments != Segments::None)
    extras.push_back(Buffer::of(ids, r.c.ids));
  return extras;
}

/// x rotated as the case's rope does (back, when `inverse`); `in[at]` holds
/// the positions when the case has them.
RefTensor rotated(const RopeCase &r, const RefTensor &x, const std::vector<RefTensor> &in,
                  size_t at, bool inverse) {
  return ref::rope(x, r.positions ? &in[at] : nullptr, thetaOf(r), inverse, scalingOf(r));
}

/// q or k as the fused kernels attend to it: rotated, then rounded to the
/// storage type, as rope's kernel stores it (the fused kernels give rope
/// then attention's results bit for bit; without the rounding, bf16's lse
/// is off by ~1e-4).
RefTensor rotatedStored(const RopeCase &r, DType dtype, const RefTensor &x,
                        const std::vector<RefTensor> &in, size_t at) {
  return roundTo(rotated(r, x, in, at, false), dtype);
}

/// attention_rope: the reference attention of rope(q), rope(k) and v, with
/// attention's tolerances.
ConformanceCase ropeCase(const RopeCase &r, DType dtype, uint64_t seed) {
  return {"attention_rope", labelOf(r, dtype), [=] {
            const AttentionCase &c = r.c;
            KernelCall k;
            Operands x = operandsOf(c, dtype, seed);
            k.input(std::move(x.q)), k.input(std::move(x.k)), k.input(std::move(x.v));
            for (Buffer &extra : ropeExtras(r, seed + 4)) k.input(std::move(extra));
            k.output(dtype, {c.b, c.t, c.h, c.d});
            k.output(DType::F32, {c.b, c.h, c.t});
            k.attrs = ropeAttrs(r, 3);
            k.reference = [r, dtype](const std::vector<RefTensor> &in) {
              const bool hasIds = r.c.segments != Segments::None;
              return ref::attention(
                  rotatedStored(r, dtype, in[0], in, 3), rotatedStored(r, dtype, in[1], in, 3),
                  in[2], hasIds ? &in[3 + r.positions] : nullptr, scaleOf(r.c), r.c.causal);
            };
            forwardTolerances(k, c, dtype, true);
            return k;
          }};
}

/// attention_rope_grad: the reference gradients of the rotated q and k
/// rotated back, reading the CPU forward's out and lse, with
/// attention_grad's tolerances.
ConformanceCase ropeBackwardCase(const RopeCase &r, DType dtype, uint64_t seed) {
  return {"attention_rope_grad", labelOf(r, dtype), [=] {
            const AttentionCase &c = r.c;
            KernelCall k;
            Operands x = operandsOf(c, dtype, seed);
            std::vector<Buffer> extras = ropeExtras(r, seed + 4);
            Buffer out(dtype, {c.b, c.t, c.h, c.d}), lse(DType::F32, {c.b, c.h, c.t});
            std::vector<Buffer *> forward = {&x.q, &x.k, &x.v};
            for (Buffer &extra : extras) forward.push_back(&extra);
            EXPECT_TRUE(runKernel("attention_rope", forward, {&out, &lse}, ropeAttrs(r, 3)));
            k.input(std::move(x.q)), k.input(std::move(x.k)), k.input(std::move(x.v));
            k.input(std::move(out)), k.input(std::move(lse)), k.input(std::move(x.dout));
            for (Buffer &extra : extras) k.input(std::move(extra));
            k.output(dtype, {c.b, c.t, c.h, c.d});
            k.output(dtype, {c.b, c.t, c.kv, c.d});
            k.output(dtype, {c.b, c.t, c.kv, c.d});
            k.attrs = ropeAttrs(r, 6);
            k.reference = [r, dtype](const std::vector<RefTensor> &in) {
              const bool hasIds = r.c.segments != Segments::None;
              std::vector<RefTensor> grads = ref::attentionGrad(
                  rotatedStored(r, dtype, in[0], in, 6), rotatedStored(r, dtype, in[1], in, 6),
                  in[2], in[3], in[4], in[5], hasIds ? &in[6 + r.positions] : nullptr, scaleOf(r.c),
                  r.c.causal);
              grads[0] = rotated(r, grads[0], in, 6, true);
              grads[1] = rotated(r, grads[1], in, 6, true);
              return grads;
            };
            backwardTolerances(k, c, dtype, true);
            return k;
          }};
}

/// The rotating kernels' shapes: kCases' with S = T and an even head dim
/// (positions with segment ids and in one plain case; Llama 3.1's scaling
/// over 16 positions when T is even; i64 positions and ids), and the CUDA
/// kernels' (GQA and MQA, a generic head dim whose half is not a multiple
/// of 32, D = 6), each unscaled (positions with segment ids) and scaled over
/// 64 positions (positions always, so cuDNN rotates at positions too), in
/// f32, bf16 and f16.
template <typename MakeCase>
std::vector<ConformanceCase> ropeCasesOf(MakeCase make, uint64_t seed) {
  std::vector<RopeCase> shapes;
  for (AttentionCase c : kCases) {
    if (c.s != c.t || c.d % 2 != 0)
      continue;
    const bool hasIds = c.segments != Segments::None;
    c.ids = DType::I64;
    shapes.push_back({c, hasIds || c.t == 33, c.t % 2 == 0 ? 16 : 0});
  }
  for (const AttentionCase &c : {AttentionCase{2, 17, 17, 4, 4, 64, true, Segments::None},
                                 AttentionCase{2, 300, 300, 8, 2, 64, true, Segments::Packed},
                                 AttentionCase{2, 300, 300, 8, 2, 64, true, Segments::None},
                                 AttentionCase{2, 128, 128, 4, 1, 128, false, Segments::None},
                                 AttentionCase{2, 37, 37, 4, 2, 80, true, Segments::Packed},
                                 AttentionCase{2, 45, 45, 2, 1, 6, false, Segments::None}}) {
    shapes.push_back({c, c.segments != Segments::None, 0});
    shapes.push_back({c, true, 64});
  }
  std::vector<ConformanceCase> cases;
  for (DType dtype : kFloatTypes)
    for (const RopeCase &r : shapes) cases.push_back(make(r, dtype, seed += 10));
  return cases;
}

std::vector<ConformanceCase> ropeAttentionCases() {
  std::vector<ConformanceCase> cases = ropeCasesOf(ropeCase, 800);
  std::vector<ConformanceCase> backward = ropeCasesOf(ropeBackwardCase, 800);
  cases.insert(cases.end(), backward.begin(), backward.end());
  return cases;
}

LLMC_CONFORMANCE_CASES(AttentionRope, ropeAttentionCases);

/// Reductions are ordered by construction (no atomics): binding twice and
/// running gives bit-identical gradients.
TEST(AttentionKernels, BackwardIsDeterministic) {
  RefTensor q = randomTensor({2, 100, 4, 16}, 611), k = randomTensor({2, 100, 2, 16}, 612),
            v = randomTensor({2, 100, 2, 16}, 613), dout = randomTensor({2, 100, 4, 16}, 614);
  std::vector<RefTensor> fwd = ref::attention(q, k, v, nullptr, 0.25, true);
  Buffer qb = Buffer::of(q, DType::F32), kb = Buffer::of(k, DType::F32),
         vb = Buffer::of(v, DType::F32), ob = Buffer::of(fwd[0], DType::F32),
         lb = Buffer::of(fwd[1], DType::F32), db = Buffer::of(dout, DType::F32);
  std::vector<std::vector<uint64_t>> first;
  for (int run = 0; run < 2; ++run) {
    Buffer dq(DType::F32, q.shape), dk(DType::F32, k.shape), dv(DType::F32, v.shape);
    ASSERT_TRUE(runKernel("attention_grad", {&qb, &kb, &vb, &ob, &lb, &db}, {&dq, &dk, &dv},
                          attrs({{"scale", 0.25}}, {{"causal", 1}})));
    if (run == 0)
      first = {dq.storage, dk.storage, dv.storage};
    else
      EXPECT_TRUE(first ==
                  std::vector<std::vector<uint64_t>>({dq.storage, dk.storage, dv.storage}));
  }
}

/// One kernel bound once reads each step's segment ids: the tiles it skips
/// follow the rows, not the rows of the first run.
TEST(AttentionKernels, SegmentsAreReadEveryRun) {
  AttentionCase c{1, 200, 200, 2, 1, 16, true, Segments::Documents};
  RefTensor q = randomTensor({1, 200, 2, 16}, 621), k = randomTensor({1, 200, 1, 16}, 622),
            v = randomTensor({1, 200, 1, 16}, 623);
  Buffer qb = Buffer::of(q, DType::F32), kb = Buffer::of(k, DType::F32),
         vb = Buffer::of(v, DType::F32), segb(DType::I32, {1, 200});
  Buffer out(DType::F32, q.shape), lse(DType::F32, {1, 2, 200});
  KernelArgs args;
  args.inputs = {qb.view(), kb.view(), vb.view(), segb.view()};
  args.outputs = {out.view(), lse.view()};
  args.attrs = attrs({{"scale", 0.25}}, {{"causal", 1}});
  std::string error;
  std::unique_ptr<Kernel> kernel = findKernel(Backend::CPU, "attention")(args, error);
  ASSERT_TRUE(kernel) << error;
  for (uint64_t seed : {624, 625, 626}) {
    RefTensor seg = segmentIds(c, seed);
    Buffer fresh = Buffer::of(seg, DType::I32);
    std::copy(fresh.storage.begin(), fresh.storage.end(), segb.storage.begin());
    kernel->run(StepContext{});
    EXPECT_CLOSE(out.toRef(), ref::attention(q, k, v, &seg, 0.25, true)[0], Metric::Norm, 1e-5);
  }
}

/// attention_packed and attention_packed_grad read q, k, v from qkv's rows
/// and write dq, dk, dv into dqkv's, with the same arithmetic as the
/// unpacked kernels: every output equals theirs exactly, in every storage
/// type (causal or not, GQA and MQA, T not a multiple of the 64-row tile,
/// segment ids).
TEST(AttentionKernels, PackedQkvIsBitIdenticalToSeparateTensors) {
  uint64_t seed = 700;
  for (DType dtype : kFloatTypes)
    for (const AttentionCase &c : kCases) {
      if (c.s != c.t)
        continue; // one qkv holds queries and keys alike
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + describe(c));
      RefTensor q = roundTo(randomTensor({c.b, c.t, c.h, c.d}, ++seed), dtype);
      RefTensor k = roundTo(randomTensor({c.b, c.t, c.kv, c.d}, ++seed), dtype);
      RefTensor v = roundTo(randomTensor({c.b, c.t, c.kv, c.d}, ++seed), dtype);
      RefTensor dout = roundTo(randomTensor({c.b, c.t, c.h, c.d}, ++seed), dtype);
      bool hasSegments = c.segments != Segments::None;
      Buffer qb = Buffer::of(q, dtype), kb = Buffer::of(k, dtype), vb = Buffer::of(v, dtype),
             qkv = Buffer::of(packQkv({q, k, v}), dtype), db = Buffer::of(dout, dtype),
             segb = Buffer::of(hasSegments ? segmentIds(c, ++seed) : RefTensor::zeros({1}),
                               DType::I32);
      KernelAttrs a = attrs({{"scale", 1.0 / std::sqrt(static_cast<double>(c.d))}},
                            {{"causal", c.causal}, {"heads", c.h}, {"kv_heads", c.kv}});
      auto withSegments = [&](std::vector<Buffer *> inputs) {
        if (hasSegments)
          inputs.push_back(&segb);
        return inputs;
      };

      Buffer out(dtype, q.shape), lse(DType::F32, {c.b, c.h, c.t});
      Buffer packedOut(dtype, q.shape), packedLse(DType::F32, {c.b, c.h, c.t});
      packedOut.poison(), packedLse.poison();
      ASSERT_TRUE(runKernel("attention", withSegments({&qb, &kb, &vb}), {&out, &lse}, a));
      ASSERT_TRUE(runKernel("attention_packed", withSegments({&qkv}), {&packedOut, &packedLse}, a));
      EXPECT_EQ(packedOut.storage, out.storage);
      EXPECT_EQ(packedLse.storage, lse.storage);

      Buffer dq(dtype, q.shape), dk(dtype, k.shape), dv(dtype, v.shape);
      Buffer dqkv(dtype, qkv.shape);
      dqkv.poison();
      ASSERT_TRUE(runKernel("attention_grad", withSegments({&qb, &kb, &vb, &out, &lse, &db}),
                            {&dq, &dk, &dv}, a));
      ASSERT_TRUE(
          runKernel("attention_packed_grad", withSegments({&qkv, &out, &lse, &db}), {&dqkv}, a));
      Buffer expected = Buffer::of(packQkv({dq.toRef(), dk.toRef(), dv.toRef()}), dtype);
      EXPECT_EQ(dqkv.storage, expected.storage);
    }
}

TEST(AttentionKernels, PackedBindingErrors) {
  auto f32 = [](std::vector<int64_t> shape) { return typeOnly(DType::F32, std::move(shape)); };
  KernelAttrs gqa = attrs({{"scale", 0.5}}, {{"heads", 4}, {"kv_heads", 2}});
  KernelAttrs uneven = attrs({{"scale", 0.5}}, {{"heads", 3}, {"kv_heads", 2}});
  expectBindErrorsMention(
      "attention_packed",
      {{{f32({2, 8, 64})},
        {f32({2, 8, 4, 8}), f32({2, 4, 8})},
        uneven,
        "'heads' (3) must be a positive multiple of 'kv_heads' (2)"},
       {{f32({2, 8, 60})},
        {f32({2, 8, 4, 8}), f32({2, 4, 8})},
        gqa,
        "qkv must be [B, T, (heads + 2·kv_heads)·D] with heads = 4, kv_heads = 2, got f32[2x8x60]"},
       {{f32({2, 8, 64})}, {f32({2, 8, 4, 4}), f32({2, 4, 8})}, gqa, "out"},
       {{f32({2, 8, 64}), f32({2, 8})}, {f32({2, 8, 4, 8}), f32({2, 4, 8})}, gqa, "segment_ids"}});
  expectBindErrorsMention("attention_packed_grad",
                          {{{f32({2, 8, 64}), f32({2, 8, 4, 8}), f32({2, 4, 8}), f32({2, 8, 4, 8})},
                            {f32({2, 8, 32})},
                            gqa,
                            "dqkv"},
                           {{f32({2, 8, 64}), f32({2, 8, 2, 8}), f32({2, 4, 8}), f32({2, 8, 4, 8})},
                            {f32({2, 8, 64})},
                            gqa,
                            "out"}});
}

/// attention_rope rotates q and k while loading them and its backward
/// rotates dq and dk back while storing them; every output equals rope,
/// attention, attention_grad and the inverse rope run in turn exactly, in
/// every storage type, with and without positions, segment ids and Llama
/// 3.1's scaling.
TEST(AttentionKernels, RopeIsBitIdenticalToRopeThenAttention) {
  uint64_t seed = 800;
  for (DType dtype : kFloatTypes)
    for (const AttentionCase &c : kCases) {
      if (c.s != c.t || c.d % 2 != 0)
        continue;
      const bool hasSegments = c.segments != Segments::None, scaled = c.t % 2 == 0;
      // Packed rows give positions; one plain case gives positions alone.
      const bool hasPositions = hasSegments || c.t == 33;
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + describe(c) +
                   (hasPositions ? " positions" : "") + (scaled ? " scaled" : ""));
      RefTensor q = roundTo(randomTensor({c.b, c.t, c.h, c.d}, ++seed), dtype);
      RefTensor k = roundTo(randomTensor({c.b, c.t, c.kv, c.d}, ++seed), dtype);
      RefTensor v = roundTo(randomTensor({c.b, c.t, c.kv, c.d}, ++seed), dtype);
      RefTensor dout = roundTo(randomTensor({c.b, c.t, c.h, c.d}, ++seed), dtype);
      RefTensor seg = hasSegments ? segmentIds(c, ++seed) : RefTensor::zeros({c.b, c.t});
      Buffer qb = Buffer::of(q, dtype), kb = Buffer::of(k, dtype), vb = Buffer::of(v, dtype),
             db = Buffer::of(dout, dtype), segb = Buffer::of(seg, DType::I32),
             posb = Buffer::of(documentPositions(seg), DType::I64);
      KernelAttrs rope = attrs({{"theta", 10000.0}});
      if (scaled)
        rope = attrs({{"theta", 500000.0},
                      {"scaling_factor", 8.0},
                      {"low_freq_factor", 1.0},
                      {"high_freq_factor", 4.0}},
                     {{"original_max_positions", 16}});
      KernelAttrs inverse = rope, a = rope;
      inverse.setInt("inverse", 1);
      a.setFloat("scale", 1.0 / std::sqrt(static_cast<double>(c.d)));
      a.setInt("causal", c.causal);
      KernelAttrs grad = a;
      a.setInts("operand_segments", {1, 1, 1, hasPositions, hasSegments});
      grad.setInts("operand_segments", {1, 1, 1, 1, 1, 1, hasPositions, hasSegments});
      auto rotate = [&](Buffer &x, const KernelAttrs &attrs) {
        Buffer out(dtype, x.shape);
        std::vector<Buffer *> inputs = {&x};
        if (hasPositions)
          inputs.push_back(&posb);
        EXPECT_TRUE(runKernel("rope", inputs, {&out}, attrs));
        return out;
      };
      auto extras = [&](std::vector<Buffer *> inputs) {
        if (hasPositions)
          inputs.push_back(&posb);
        if (hasSegments)
          inputs.push_back(&segb);
        return inputs;
      };

      // Unfused: rope, attention, attention_grad, inverse rope.
      Buffer qr = rotate(qb, rope), kr = rotate(kb, rope);
      Buffer out(dtype, q.shape), lse(DType::F32, {c.b, c.h, c.t});
      std::vector<Buffer *> plain = {&qr, &kr, &vb};
      if (hasSegments)
        plain.push_back(&segb);
      KernelAttrs attention =
          attrs({{"scale", 1.0 / std::sqrt(static_cast<double>(c.d))}}, {{"causal", c.causal}});
      ASSERT_TRUE(runKernel("attention", plain, {&out, &lse}, attention));
      Buffer dqr(dtype, q.shape), dkr(dtype, k.shape), dv(dtype, v.shape);
      std::vector<Buffer *> plainGrad = {&qr, &kr, &vb, &out, &lse, &db};
      if (hasSegments)
        plainGrad.push_back(&segb);
      ASSERT_TRUE(runKernel("attention_grad", plainGrad, {&dqr, &dkr, &dv}, attention));
      Buffer dq = rotate(dqr, inverse), dk = rotate(dkr, inverse);

      Buffer fusedOut(dtype, q.shape), fusedLse(DType::F32, {c.b, c.h, c.t});
      fusedOut.poison(), fusedLse.poison();
      ASSERT_TRUE(runKernel("attention_rope", extras({&qb, &kb, &vb}), {&fusedOut, &fusedLse}, a));
      EXPECT_EQ(fusedOut.storage, out.storage);
      EXPECT_EQ(fusedLse.storage, lse.storage);
      Buffer fusedDq(dtype, q.shape), fusedDk(dtype, k.shape), fusedDv(dtype, v.shape);
      fusedDq.poison(), fusedDk.poison(), fusedDv.poison();
      ASSERT_TRUE(runKernel("attention_rope_grad", extras({&qb, &kb, &vb, &out, &lse, &db}),
                            {&fusedDq, &fusedDk, &fusedDv}, grad));
      EXPECT_EQ(fusedDq.storage, dq.storage);
      EXPECT_EQ(fusedDk.storage, dk.storage);
      EXPECT_EQ(fusedDv.storage, dv.storage);
    }
}

TEST(AttentionKernels, RopeBindingErrors) {
  auto f32 = [](std::vector<int64_t> shape) { return typeOnly(DType::F32, std::move(shape)); };
  KernelAttrs a = attrs({{"scale", 0.5}, {"theta", 1e4}});
  KernelAttrs noTheta = attrs({{"scale", 0.5}});
  KernelAttrs partial = attrs({{"scale", 0.5}, {"theta", 1e4}, {"scaling_factor", 8.0}});
  KernelAttrs positionsOnly = a;
  positionsOnly.setInts("operand_segments", {1, 1, 1, 1, 0});
  const std::vector<TensorView> outs = {f32({2, 8, 4, 8}), f32({2, 4, 8})};
  expectBindErrorsMention(
      "attention_rope",
      {{{f32({2, 8, 4, 7}), f32({2, 8, 4, 7}), f32({2, 8, 4, 7})},
        {f32({2, 8, 4, 7}), f32({2, 4, 8})},
        a,
        "even head dim"},
       {{f32({2, 8, 4, 8}), f32({2, 8, 4, 8}), f32({2, 8, 4, 8})}, outs, noTheta, "theta"},
       {{f32({2, 8, 4, 8}), f32({2, 8, 4, 8}), f32({2, 8, 4, 8})}, outs, partial, "go together"},
       {{f32({2, 8, 4, 8}), f32({2, 8, 4, 8}), f32({2, 8, 4, 8}), f32({2, 8})},
        outs,
        positionsOnly,
        "positions"},
       {{f32({2, 8, 4, 8}), f32({2, 8, 4, 8}), f32({2, 8, 4, 8})},
        outs,
        positionsOnly,
        "'operand_segments' does not match the 3 inputs"}});
}

/// The cost claim: documents of 2, 1 and 3 tiles leave 3 + 1 + 6 causal
/// tile pairs of the 21 a row of 6 tiles has, i.e. Σ s_i², not (Σ s_i)².
TEST(AttentionKernels, SegmentTilesKeepOnlyEachDocumentsTiles) {
  std::vector<int32_t> ids;
  for (auto [id, tiles] : {std::pair{0, 2}, {1, 1}, {2, 3}}) ids.insert(ids.end(), tiles * 64, id);
  TensorView view;
  view.data = ids.data(), view.dtype = DType::I32, view.shape = {1, 384};
  cpu::SegmentTiles tiles;
  tiles.resize(1, 384, 64);
  tiles.update(cpu::IdView(view));
  int pairs = 0;
  for (int64_t i0 = 0; i0 < 384; i0 += 64)
    for (int64_t j0 = 0; j0 <= i0; j0 += 64) pairs += tiles.meet(0, i0, j0);
  EXPECT_EQ(pairs, 10);
  // A document that starts mid-tile shares that tile with its neighbour.
  std::fill(ids.begin() + 100, ids.begin() + 128, 1);
  tiles.update(cpu::IdView(view));
  EXPECT_TRUE(tiles.meet(0, 64, 64) && tiles.meet(0, 128, 64) && !tiles.meet(0, 192, 64));
}

/// Every attention kernel may end its outputs with a u8 workspace (planned
/// under --target cuda for cuDNN): the CPU kernels give the same bits with
/// it as without it and leave its bytes alone.
TEST(AttentionKernels, WorkspaceOutputIsAcceptedAndLeftAlone) {
  const AttentionCase c{2, 33, 33, 4, 2, 16, true, Segments::None};
  const DType dtype = DType::BF16;
  Buffer q = Buffer::of(randomTensor({c.b, c.t, c.h, c.d}, 800), dtype);
  Buffer k = Buffer::of(randomTensor({c.b, c.t, c.kv, c.d}, 801), dtype);
  Buffer v = Buffer::of(randomTensor({c.b, c.t, c.kv, c.d}, 802), dtype);
  Buffer dout = Buffer::of(randomTensor({c.b, c.t, c.h, c.d}, 803), dtype);
  Buffer qkv = Buffer::of(packQkv({q.toRef(), k.toRef(), v.toRef()}), dtype);
  KernelAttrs a =
      attrs({{"scale", 0.25}, {"theta", 1e4}}, {{"causal", 1}, {"heads", c.h}, {"kv_heads", c.kv}});
  Buffer workspace(DType::U8, {1000});
  workspace.poison();
  const std::vector<uint64_t> untouched = workspace.storage;
  using Output = std::pair<DType, std::vector<int64_t>>;
  struct Call {
    const char *kernel;
    std::vector<Buffer *> inputs;
    std::vector<Output> outputs;
  };
  Buffer out(dtype, {c.b, c.t, c.h, c.d}), lse(DType::F32, {c.b, c.h, c.t});
  ASSERT_TRUE(runKernel("attention", {&q, &k, &v}, {&out, &lse}, a));
  const Output o{dtype, {c.b, c.t, c.h, c.d}}, l{DType::F32, {c.b, c.h, c.t}},
      kv{dtype, {c.b, c.t, c.kv, c.d}};
  const std::vector<Call> calls = {
      {"attention", {&q, &k, &v}, {o, l}},
      {"attention_grad", {&q, &k, &v, &out, &lse, &dout}, {o, kv, kv}},
      {"attention_packed", {&qkv}, {o, l}},
      {"attention_packed_grad", {&qkv, &out, &lse, &dout}, {{dtype, qkv.shape}}},
      {"attention_rope", {&q, &k, &v}, {o, l}},
      {"attention_rope_grad", {&q, &k, &v, &out, &lse, &dout}, {o, kv, kv}},
  };
  for (const Call &call : calls) {
    SCOPED_TRACE(call.kernel);
    std::vector<Buffer> plain, with;
    for (const auto &[type, shape] : call.outputs)
      plain.emplace_back(type, shape), with.emplace_back(type, shape);
    std::vector<Buffer *> plainOut, withOut;
    for (Buffer &b : plain) plainOut.push_back(&b);
    for (Buffer &b : with) withOut.push_back(&b);
    withOut.push_back(&workspace);
    ASSERT_TRUE(runKernel(call.kernel, call.inputs, plainOut, a));
    ASSERT_TRUE(runKernel(call.kernel, call.inputs, withOut, a));
    for (size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(plain[i].storage, with[i].storage) << i;
    EXPECT_EQ(workspace.storage, untouched);
  }
}

TEST(AttentionKernels, WorkspaceBindingErrors) {
  auto view = [](DType t, std::vector<int64_t> shape) { return typeOnly(t, std::move(shape)); };
  auto bf16 = [&](std::vector<int64_t> shape) { return view(DType::BF16, std::move(shape)); };
  KernelAttrs a = attrs({{"scale", 0.5}}, {{"causal", 1}, {"heads", 4}, {"kv_heads", 2}});
  const std::vector<TensorView> qkv = {bf16({2, 8, 4, 8}), bf16({2, 8, 2, 8}), bf16({2, 8, 2, 8})};
  const TensorView out = bf16({2, 8, 4, 8}), lse = view(DType::F32, {2, 4, 8});
  expectBindErrorsMention("attention",
                          {{qkv,
                            {out, lse, view(DType::F32, {64})},
                            a,
                            "workspace (output 2) must be a 1-D u8 buffer, got f32[64]"},
                           {qkv,
                            {out, lse, view(DType::U8, {8, 8})},
                            a,
                            "workspace (output 2) must be a 1-D u8 buffer, got u8[8x8]"},
                           {qkv,
                            {out, lse, view(DType::U8, {8}), view(DType::U8, {8})},
                            a,
                            "expected 2 outputs, got 4"}});
  expectBindErrorsMention("attention_packed_grad",
                          {{{bf16({2, 8, 64}), out, lse, out},
                            {bf16({2, 8, 64}), view(DType::I32, {16})},
                            a,
                            "workspace (output 1) must be a 1-D u8 buffer, got i32[16]"}});
}

/// The rules and the formula the compiler plans cuDNN's workspace by
/// (common/AttentionWorkspace.h), on GPT-2 124M's attention at
/// B = 16, T = 1024 and a Llama-like GQA with rope.
TEST(AttentionWorkspace, RefusalsAndFormula) {
  contracts::CudnnAttentionShape s;
  s.halfPrecision = true, s.elementBytes = 2;
  s.b = 16, s.t = s.s = 1024, s.h = s.kv = 12, s.d = 64;
  EXPECT_EQ(contracts::cudnnAttentionRefusal(s), "");
  EXPECT_EQ(contracts::cudnnAttentionWorkspaceBytes(s), int64_t(1) << 20); // forward: the reserve
  s.backward = true;
  // dP (2·16·12·1024²) and the softmax sums (4·16·12·1024), plus the reserve.
  EXPECT_EQ(contracts::cudnnAttentionWorkspaceBytes(s), 402653184 + 786432 + 1048576);
  // T not a multiple of 128: dP's sequences are rounded up to cuDNN's tiles.
  s.t = s.s = 1000;
  EXPECT_EQ(contracts::cudnnAttentionWorkspaceBytes(s),
            contracts::alignWorkspace(2 * 16 * 12 * 1024 * 1024 + 4 * 16 * 12 * 1000) + 1048576);

  contracts::CudnnAttentionShape llama = s;
  llama.b = 2, llama.t = llama.s = 300, llama.h = 8, llama.kv = 2, llama.d = 128;
  llama.rope = true, llama.backward = false;
  const int64_t staging = contracts::alignWorkspace(2 * 300 * 8 * 128 * 2) +
                          contracts::alignWorkspace(2 * 300 * 2 * 128 * 2);
  EXPECT_EQ(contracts::cudnnRopeStagingBytes(llama), staging);
  EXPECT_EQ(contracts::cudnnAttentionWorkspaceBytes(llama), staging + 1048576);

  contracts::CudnnAttentionShape refused = s;
  refused.halfPrecision = false, refused.elementBytes = 4;
  EXPECT_EQ(contracts::cudnnAttentionRefusal(refused),
            "f32 (cuDNN's fused attention takes bf16 and f16)");
  EXPECT_EQ(contracts::cudnnAttentionWorkspaceBytes(refused), 0);
  refused = s, refused.d = 60;
  EXPECT_EQ(contracts::cudnnAttentionRefusal(refused),
            "head dim 60 (cuDNN takes multiples of 8 up to 256)");
  refused = s, refused.d = 264;
  EXPECT_NE(contracts::cudnnAttentionRefusal(refused), "");
  refused = s, refused.segments = true;
  EXPECT_EQ(contracts::cudnnAttentionRefusal(refused),
            "segment ids (packed documents run on llmc's kernels)");
  EXPECT_EQ(contracts::cudnnAttentionWorkspaceBytes(refused), 0);
  refused = s, refused.softcap = true; // Gemma 2's score cap
  EXPECT_EQ(contracts::cudnnAttentionRefusal(refused), "a score soft-cap (runs on llmc's kernels)");
  EXPECT_EQ(contracts::cudnnAttentionWorkspaceBytes(refused), 0);
}

} // namespace
} // namespace llmc::test
