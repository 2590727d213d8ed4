//===- GptqCalibration.cpp - GPTQ over a compiled model -------------------===//
//
// A weight site is a `matmul` instruction of @eval whose second operand is
// the parameter's buffer; its first operand, [..., K] (never transposed in
// a forward), is the layer input. The weight is [K, N] (transpose_b = 0,
// input dimension 0) or [N, K] (transpose_b = 1, input dimension 1). A
// weight read by several matmuls gets one H over all their inputs.
//
// A mixture of experts' stacked weight is the third operand of a
// `grouped_matmul` ([G, K, F], or [G, F, K] with transpose_b): its first
// operand holds the routed rows, expert after expert, as its second, the
// offsets, says at this very run; each expert gets its own H from its own
// rows (runtime/quant/GptqExperts.h). A dense weight is the one-expert
// case of the same bookkeeping.
//
//===----------------------------------------------------------------------===//

#include "runtime/quant/GptqCalibration.h"

#include "runtime/quant/GptqExperts.h"

#include "runtime/Artifact.h"
#include "runtime/ExecutionDevice.h"
#include "runtime/Executor.h"
#include "runtime/checkpoint/Weights.h"
#include "runtime/comm/Communicator.h"
#include "runtime/data/DataLoader.h"
#include "runtime/data/Dataset.h"
#include "runtime/data/Packing.h"
#include "runtime/support/Error.h"

#include <algorithm>
#include <set>
#include <sstream>

namespace llmc {
namespace {

constexpr uint32_t kNoOffsets = UINT32_MAX;

struct Site {
  size_t instruction = 0;
  uint32_t input = 0;            ///< buffer of the layer input X
  uint32_t offsets = kNoOffsets; ///< a grouped matmul's offsets buffer
  int64_t inputAxis = 0;         ///< within an expert's slice for a stack
};

struct Weight {
  const GptqRequest::Tensor *want = nullptr;
  const ParameterInfo *param = nullptr;
  std::vector<Site> sites;
  bool experts() const { return !sites.empty() && sites.front().offsets != kNoOffsets; }
};

/// The offsets of a grouped matmul, whatever their index type.
std::vector<int64_t> offsetsOf(const TensorView &v) {
  std::vector<int64_t> out(v.numel());
  for (int64_t i = 0; i < v.numel(); ++i)
    out[i] = v.dtype == DType::I64 ? v.as<int64_t>()[i] : v.as<int32_t>()[i];
  return out;
}

/// The real shape of a whole 2-D parameter whose buffer starts with it: the
/// buffer's own, or the real rows of a vocabulary padded along dimension 0
/// (llmc-pad-vocab: the padded rows follow the real ones). Empty for any
/// other layout.
std::vector<int64_t> wholeShape(const ParameterInfo &p) {
  if (p.shape.size() != 2)
    return {};
  if (!p.shard.sharded())
    return p.shape;
  if (p.shard.levels.size() != 1 || !p.shard.levels[0].pads() || p.shard.levels[0].dim != 0)
    return {};
  return p.shard.globalShape;
}

/// The layer's output error tr(D H Dᵀ) / 2 of D = W − Q (work layout: rows
/// the outputs), per calibration sample.
double outputError(const float *w, const float *q, const std::vector<int64_t> &shape,
                   int64_t inputAxis, const std::vector<double> &H) {
  const int64_t K = shape[inputAxis], R = shape[1 - inputAxis];
  std::vector<double> d(K);
  double total = 0.0;
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t k = 0; k < K; ++k) {
      int64_t at = inputAxis == 0 ? k * R + r : r * K + k;
      d[k] = static_cast<double>(w[at]) - q[at];
    }
    for (int64_t i = 0; i < K; ++i) {
      double row = 0.0;
      for (int64_t j = 0; j < K; ++j) row += H[i * K + j] * d[j];
      total += d[i] * row;
    }
  }
  return total / 2.0;
}

/// One H per expert over every matmul reading the weight (their inputs'
/// mean, each input weighted by its rows).
quant::ExpertHessians meanHessians(const std::map<uint32_t, quant::ExpertHessians> &byInput) {
  quant::ExpertHessians mean;
  for (const auto &[buffer, h] : byInput) {
    if (mean.H.empty()) {
      mean.H.assign(h.H.size(), std::vector<double>(h.H.front().size(), 0.0));
      mean.samples.assign(h.H.size(), 0);
    }
    for (size_t e = 0; e < h.H.size(); ++e) {
      for (size_t i = 0; i < h.H[e].size(); ++i)
        mean.H[e][i] += h.H[e][i] * static_cast<double>(h.samples[e]);
      mean.samples[e] += h.samples[e];
    }
  }
  for (size_t e = 0; e < mean.H.size(); ++e)
    for (double &v : mean.H[e]) v /= static_cast<double>(std::max<int64_t>(mean.samples[e], 1));
  return mean;
}

/// GPTQ of a dense weight against H (one expert's worth of Hessians).
quant::QuantizedTensor quantizeDense(const GptqRequest &request, const std::string &name,
                                     const Weight &w, const quant::ExpertHessians &h,
                                     const float *values, GptqTensorReport &report) {
  const std::vector<int64_t> shape = wholeShape(*w.param); // a padded head's real rows
  const std::vector<double> &H = h.H.front();
  std::vector<float> original(values, values + shape[0] * shape[1]);
  int64_t inputAxis = w.sites.front().inputAxis;
  quant::GptqStats stats;
  quant::QuantizedTensor q, nearest;
  std::string why = quant::gptqQuantize(original.data(), shape, inputAxis, H, w.want->scheme,
                                        w.want->storage, request.options, q, &stats);
  if (!why.empty())
    fail("'", name, "' ", shapeList(shape), ": ", why);
  quant::quantize(original.data(), shape, w.want->scheme, w.want->storage, nearest);
  report.name = name;
  report.inputs = shape[inputAxis];
  report.samples = h.samples.front();
  report.deadColumns = stats.deadColumns;
  report.rtnError =
      outputError(original.data(), quant::dequantize(nearest).data(), shape, inputAxis, H);
  report.gptqError = outputError(original.data(), quant::dequantize(q).data(), shape, inputAxis, H);
  return q;
}

/// GPTQ of a stack of experts, each against its own H; the errors are per
/// routed row (each expert's weighted by the rows it received).
quant::QuantizedTensor quantizeExperts(const GptqRequest &request, const std::string &name,
                                       const Weight &w, const quant::ExpertHessians &h,
                                       const float *values, GptqTensorReport &report) {
  const std::vector<int64_t> &shape = w.param->shape;
  const int64_t G = shape[0], slice = shape[1] * shape[2];
  if (static_cast<int64_t>(h.H.size()) != G)
    fail("'", name, "' ", shapeList(shape), " stacks ", G, " experts, but its grouped matmul has ",
         h.H.size());
  std::vector<float> original(values, values + G * slice);
  int64_t inputAxis = w.sites.front().inputAxis;
  quant::GptqExpertStats stats;
  quant::QuantizedTensor q, nearest;
  std::string why = quant::gptqQuantizeExperts(original.data(), shape, inputAxis, h, w.want->scheme,
                                               w.want->storage, request.options, q, &stats);
  if (!why.empty())
    fail("'", name, "' ", shapeList(shape), ": ", why);
  quant::quantize(original.data(), shape, w.want->scheme, w.want->storage, nearest);
  std::vector<float> gptq = quant::dequantize(q), rtn = quant::dequantize(nearest);
  const std::vector<int64_t> sliceShape{shape[1], shape[2]};
  report.name = name;
  report.inputs = sliceShape[inputAxis];
  report.expertRows = h.samples;
  report.fallbacks = stats.fallbacks;
  for (int64_t e = 0; e < G; ++e) {
    if (h.samples[e] == 0)
      continue;
    const double rows = static_cast<double>(h.samples[e]);
    const float *we = original.data() + e * slice;
    report.samples += h.samples[e];
    report.deadColumns += stats.experts[e].deadColumns;
    report.rtnError +=
        rows * outputError(we, rtn.data() + e * slice, sliceShape, inputAxis, h.H[e]);
    report.gptqError +=
        rows * outputError(we, gptq.data() + e * slice, sliceShape, inputAxis, h.H[e]);
  }
  const double total = static_cast<double>(std::max<int64_t>(report.samples, 1));
  report.rtnError /= total;
  report.gptqError /= total;
  return q;
}

using Weights = std::map<std::string, Weight>;

/// The requested weights and the matmuls of @eval that read them.
Weights findWeightSites(const GptqRequest &request, const Artifact &artifact,
                        const ProgramInfo &eval) {
  Weights weights;
  for (const GptqRequest::Tensor &t : request.tensors) weights[t.name].want = &t;
  for (const ParameterInfo &p : artifact.parameters)
    if (auto it = weights.find(p.name); it != weights.end()) it->second.param = &p;
  for (size_t i = 0; i < eval.instructions.size(); ++i) {
    const InstructionInfo &inst = eval.instructions[i];
    const bool grouped = inst.kernel == "grouped_matmul";
    if (inst.kind != InstructionKind::Kernel || (inst.kernel != "matmul" && !grouped) ||
        inst.inputs.size() < (grouped ? 3u : 2u))
      continue;
    auto it = weights.find(eval.buffers[inst.inputs[grouped ? 2 : 1]].name);
    if (it == weights.end())
      continue;
    const BufferInfo &x = eval.buffers[inst.inputs[0]];
    if ((inst.attrs.hasInt("transpose_a") && inst.attrs.getInt("transpose_a")) ||
        x.dtype != DType::F32)
      fail(request.artifact, ": eval instruction ", i, " (", inst.location,
           "): the input of the matmul reading '", it->first,
           "' is not an fp32 [..., K] tensor; compile the model in fp32");
    int64_t transposeB = inst.attrs.hasInt("transpose_b") ? inst.attrs.getInt("transpose_b") : 0;
    it->second.sites.push_back(
        {i, inst.inputs[0], grouped ? inst.inputs[1] : kNoOffsets, transposeB ? 1 : 0});
  }
  return weights;
}

/// Each weight is a whole fp32 matrix (or stack of experts' matrices) read
/// by matmuls of one kind and one orientation.
void checkWeights(const GptqRequest &request, const Weights &weights) {
  for (auto &[name, w] : weights) {
    if (!w.param || w.sites.empty())
      fail("'", name, "' is not the weight of a matmul in ", request.artifact, "'s eval program");
    for (const Site &s : w.sites)
      if ((s.offsets == kNoOffsets) != !w.experts())
        fail("'", name, "' is read both as a dense matmul's weight and as experts' weights");
    if (w.experts() ? w.param->shape.size() != 3 || w.param->shard.sharded()
                    : wholeShape(*w.param).empty())
      fail("'", name,
           "': GPTQ quantizes whole 2-D fp32 weights and whole stacks of experts' "
           "[G, K, F] weights");
    if (w.param->dtype != DType::F32)
      fail("'", name, "': GPTQ quantizes fp32 weights; compile the model in fp32");
    if (w.experts() && !w.want->scheme.stacked)
      fail("'", name, "' holds experts' stacked weights: its scheme must be a stacked one");
    for (const Site &s : w.sites)
      if (s.inputAxis != w.sites.front().inputAxis)
        fail("'", name, "' is read by matmuls in two orientations");
  }
}

/// Stages: the weights whose matmuls read the same inputs, in program
/// order (a stage is calibrated on what the stages before it made of
/// their weights).
std::vector<std::vector<std::string>> stagesOf(const Weights &weights) {
  std::map<std::vector<uint32_t>, std::vector<std::string>> byInputs;
  std::vector<std::pair<size_t, std::vector<uint32_t>>> order;
  for (auto &[name, w] : weights) {
    std::vector<uint32_t> inputs;
    for (const Site &s : w.sites) inputs.push_back(s.input);
    std::sort(inputs.begin(), inputs.end());
    auto [it, fresh] = byInputs.try_emplace(inputs);
    it->second.push_back(name);
    if (fresh) order.push_back({w.sites.front().instruction, inputs});
  }
  std::sort(order.begin(), order.end());
  std::vector<std::vector<std::string>> stages;
  for (const auto &[first, inputs] : order) stages.push_back(byInputs.at(inputs));
  return stages;
}

/// The model bound to a CPU device with its weights, and the calibration
/// data (the training part of it, split as llmc-run splits --data, so
/// validation stays unseen).
struct Calibration {
  std::unique_ptr<ExecutionDevice> device;
  std::unique_ptr<Communicator> comm;
  std::unique_ptr<BoundProgram> program;
  TensorView tokens, targets;
  int64_t rows = 0;
  Dataset data;
  std::unique_ptr<DataLoader> loader; ///< reads `data`

  Calibration(const GptqRequest &request, const Artifact &artifact, const ProgramInfo &eval) {
    device = makeCpuDevice(artifact.memory.arenaBytes);
    comm = makeSingleRankCommunicator();
    uint64_t seed = static_cast<uint64_t>(artifact.metaNumber("seed", 1337));
    initializeFromWeights(request.weights, artifact, device->hostArena(), seed, 0);
    program = std::make_unique<BoundProgram>(eval, *device, *comm, 0);
    tokens = program->view("tokens"), targets = program->view("targets");
    const int64_t T = tokens.dim(-1);
    rows = tokens.numel() / T;
    data = openDataset(request.calibration);
    if (data.shards.size() > 1)
      holdOutShards(data, 1, request.calibration);
    else
      holdOutTail(data, T);
    int64_t vocab = static_cast<int64_t>(artifact.metaNumber("model.vocab_size", 0));
    if (vocab)
      checkVocabulary(data, vocab);
    loader = std::make_unique<DataLoader>(data, T, seed, vocab);
  }

  float *values(const ParameterInfo &p) const {
    return reinterpret_cast<float *>(device->hostArena().base() + p.offset);
  }
};

/// Runs the calibration batches and returns H per input buffer of the
/// stage's matmuls (every weight of a stage reads the same ones), one per
/// expert; a dense input is one expert holding every row.
std::map<uint32_t, quant::ExpertHessians>
collectHessians(const GptqRequest &request, const Artifact &artifact, const Weights &weights,
                const std::vector<std::string> &names, Calibration &c) {
  std::map<uint32_t, quant::ExpertHessians> hessians;
  // An input read by several matmuls of the stage (q, k and v; gate and
  // up) counts its rows once per batch.
  std::map<size_t, const Site *> watched;
  std::set<uint32_t> seen;
  for (const std::string &n : names)
    for (const Site &s : weights.at(n).sites) watched[s.instruction] = &s;
  BoundProgram &program = *c.program;
  program.setInstructionObserver([&](size_t i) {
    auto it = watched.find(i);
    if (it == watched.end() || !seen.insert(it->second->input).second)
      return;
    const Site &site = *it->second;
    TensorView x = program.bufferView(site.input);
    const int64_t K = x.dim(-1), rows = x.numel() / K;
    std::vector<int64_t> offsets{0, rows};
    if (site.offsets != kNoOffsets)
      offsets = offsetsOf(program.bufferView(site.offsets));
    std::string why =
        quant::accumulateExpertHessians(x.as<float>(), rows, K, offsets, hessians[site.input]);
    if (!why.empty())
      fail(request.artifact, ": eval instruction ", i, ": ", why);
  });
  for (int64_t b = 0; b < request.batches; ++b) {
    c.loader->fill(b, c.rows, 0, c.rows, c.tokens.as<int32_t>(), c.targets.as<int32_t>());
    fillPackedInputs(program, c.tokens, docSeparator(artifact));
    seen.clear();
    program.run(StepContext{});
  }
  program.setInstructionObserver({});
  return hessians;
}

void run(const GptqRequest &request, GptqResult &result) {
  if (request.batches <= 0)
    fail("--batches must be at least 1 (got ", request.batches, ")");
  Artifact artifact = loadArtifact(request.artifact, 0);
  if (artifact.worldSize != 1 || artifact.backend != "cpu")
    fail(request.artifact, ": GPTQ calibration runs a one-rank CPU artifact");
  const ProgramInfo *eval = artifact.program("eval");
  if (!eval)
    fail(request.artifact, ": has no eval program to run calibration batches through");
  const Weights weights = findWeightSites(request, artifact, *eval);
  checkWeights(request, weights);
  const std::vector<std::vector<std::string>> stages = stagesOf(weights);
  result.stages = static_cast<int64_t>(stages.size());
  Calibration calibration(request, artifact, *eval);
  result.tokens = request.batches * calibration.rows * calibration.tokens.dim(-1);
  for (size_t stage = 0; stage < stages.size(); ++stage) {
    const std::vector<std::string> &names = stages[stage];
    if (request.progress) {
      std::ostringstream line;
      line << "stage " << stage + 1 << "/" << stages.size() << ":";
      for (const std::string &n : names) line << " " << n;
      request.progress(line.str());
    }
    std::map<uint32_t, quant::ExpertHessians> hessians =
        collectHessians(request, artifact, weights, names, calibration);
    for (const std::string &n : names) {
      const Weight &w = weights.at(n);
      float *values = calibration.values(*w.param);
      if (hessians.empty())
        fail("'", n, "': the matmul reading it did not run in ", request.artifact,
             "'s eval program");
      GptqTensorReport report;
      quant::QuantizedTensor q =
          w.experts() ? quantizeExperts(request, n, w, meanHessians(hessians), values, report)
                      : quantizeDense(request, n, w, meanHessians(hessians), values, report);
      result.reports.push_back(report);
      // Later stages see this weight quantized.
      std::vector<float> dequantized = quant::dequantize(q);
      std::copy(dequantized.begin(), dequantized.end(), values);
      result.tensors[n] = std::move(q);
    }
  }
}

} // namespace

bool runGptq(const GptqRequest &request, GptqResult &result, std::string &error) {
  return catchErrors(error, [&] { run(request, result); });
}

} // namespace llmc
