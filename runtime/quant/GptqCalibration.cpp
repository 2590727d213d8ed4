//===- GptqCalibration.cpp - GPTQ over a compiled model -------------------===//
//
// A weight site is a `matmul` instruction of @eval whose second operand is
// the parameter's buffer; its first operand, [..., K] (never transposed in
// a forward), is the layer input. The weight is [K, N] (transpose_b = 0,
// input dimension 0) or [N, K] (transpose_b = 1, input dimension 1). A
// weight read by several matmuls gets one H over all their inputs.
//
//===----------------------------------------------------------------------===//

#include "runtime/quant/GptqCalibration.h"

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

struct Site {
  size_t instruction = 0;
  uint32_t input = 0; ///< buffer of the layer input X
  int64_t inputAxis = 0;
};

struct Weight {
  const GptqRequest::Tensor *want = nullptr;
  const ParameterInfo *param = nullptr;
  std::vector<Site> sites;
};

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
double outputError(const std::vector<float> &w, const std::vector<float> &q,
                   const std::vector<int64_t> &shape, int64_t inputAxis,
                   const std::vector<double> &H) {
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

void run(const GptqRequest &request, GptqResult &result) {
  if (request.batches <= 0)
    fail("--batches must be at least 1 (got ", request.batches, ")");
  Artifact artifact = loadArtifact(request.artifact, 0);
  if (artifact.worldSize != 1 || artifact.backend != "cpu")
    fail(request.artifact, ": GPTQ calibration runs a one-rank CPU artifact");
  const ProgramInfo *eval = artifact.program("eval");
  if (!eval)
    fail(request.artifact, ": has no eval program to run calibration batches through");

  // The weights and the matmuls that read them.
  std::map<std::string, Weight> weights;
  for (const GptqRequest::Tensor &t : request.tensors) weights[t.name].want = &t;
  for (const ParameterInfo &p : artifact.parameters)
    if (auto it = weights.find(p.name); it != weights.end()) it->second.param = &p;
  for (size_t i = 0; i < eval->instructions.size(); ++i) {
    const InstructionInfo &inst = eval->instructions[i];
    if (inst.kind != InstructionKind::Kernel || inst.kernel != "matmul" || inst.inputs.size() < 2)
      continue;
    auto it = weights.find(eval->buffers[inst.inputs[1]].name);
    if (it == weights.end())
      continue;
    const BufferInfo &x = eval->buffers[inst.inputs[0]];
    if ((inst.attrs.hasInt("transpose_a") && inst.attrs.getInt("transpose_a")) ||
        x.dtype != DType::F32)
      fail(request.artifact, ": eval instruction ", i, " (", inst.location,
           "): the input of the matmul reading '", it->first,
           "' is not an fp32 [..., K] tensor; compile the model in fp32");
    int64_t transposeB = inst.attrs.hasInt("transpose_b") ? inst.attrs.getInt("transpose_b") : 0;
    it->second.sites.push_back({i, inst.inputs[0], transposeB ? 1 : 0});
  }
  for (auto &[name, w] : weights) {
    if (!w.param || w.sites.empty())
      fail("'", name, "' is not the weight of a matmul in ", request.artifact, "'s eval program");
    if (wholeShape(*w.param).empty() || w.param->dtype != DType::F32)
      fail("'", name, "': GPTQ quantizes whole 2-D fp32 weights");
    for (const Site &s : w.sites)
      if (s.inputAxis != w.sites.front().inputAxis)
        fail("'", name, "' is read by matmuls in two orientations");
  }

  // Stages: weights whose matmuls read the same inputs, in program order.
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
  result.stages = static_cast<int64_t>(order.size());

  // The model, its weights and the calibration data (the training part of
  // it, split as llmc-run splits --data, so validation stays unseen).
  std::unique_ptr<ExecutionDevice> device = makeCpuDevice(artifact.memory.arenaBytes);
  std::unique_ptr<Communicator> comm = makeSingleRankCommunicator();
  const Arena &arena = device->hostArena();
  uint64_t seed = static_cast<uint64_t>(artifact.metaNumber("seed", 1337));
  initializeFromWeights(request.weights, artifact, arena, seed, 0);
  BoundProgram program(*eval, *device, *comm, 0);
  TensorView tokens = program.view("tokens"), targets = program.view("targets");
  const int64_t T = tokens.dim(-1), rows = tokens.numel() / T;
  Dataset data = openDataset(request.calibration);
  if (data.shards.size() > 1)
    holdOutShards(data, 1, request.calibration);
  else
    holdOutTail(data, T);
  int64_t vocab = static_cast<int64_t>(artifact.metaNumber("model.vocab_size", 0));
  if (vocab)
    checkVocabulary(data, vocab);
  DataLoader loader(data, T, seed, vocab);
  result.tokens = request.batches * rows * T;

  auto paramData = [&](const ParameterInfo &p) {
    return reinterpret_cast<float *>(arena.base() + p.offset);
  };
  int64_t stageIndex = 0;
  for (const auto &[first, inputs] : order) {
    const std::vector<std::string> &names = byInputs.at(inputs);
    ++stageIndex;
    if (request.progress) {
      std::ostringstream line;
      line << "stage " << stageIndex << "/" << order.size() << ":";
      for (const std::string &n : names) line << " " << n;
      request.progress(line.str());
    }
    // H per input buffer (every weight of the stage reads the same ones).
    std::map<uint32_t, std::pair<std::vector<double>, int64_t>> hessians;
    std::map<size_t, uint32_t> watched;
    for (const std::string &n : names)
      for (const Site &s : weights.at(n).sites) watched[s.instruction] = s.input;
    program.setInstructionObserver([&](size_t i) {
      auto it = watched.find(i);
      if (it == watched.end())
        return;
      TensorView x = program.bufferView(it->second);
      const int64_t K = x.dim(-1);
      auto &[H, samples] = hessians[it->second];
      quant::accumulateHessian(x.as<float>(), x.numel() / K, K, H, samples);
    });
    for (int64_t b = 0; b < request.batches; ++b) {
      loader.fill(b, rows, 0, rows, tokens.as<int32_t>(), targets.as<int32_t>());
      fillPackedInputs(program, tokens, docSeparator(artifact));
      program.run(StepContext{});
    }
    program.setInstructionObserver({});

    for (const std::string &n : names) {
      const Weight &w = weights.at(n);
      // One H over every matmul reading the weight (their inputs' mean).
      std::vector<double> H;
      int64_t samples = 0;
      for (const auto &[buffer, hs] : hessians) {
        const auto &[h, count] = hs;
        if (H.empty()) H.assign(h.size(), 0.0);
        for (size_t e = 0; e < h.size(); ++e)
          H[e] += h[e] * static_cast<double>(count);
        samples += count;
      }
      for (double &v : H) v /= static_cast<double>(std::max<int64_t>(samples, 1));
      float *values = paramData(*w.param);
      const std::vector<int64_t> shape = wholeShape(*w.param); // a padded head's real rows
      std::vector<float> original(values, values + shape[0] * shape[1]);
      int64_t inputAxis = w.sites.front().inputAxis;
      quant::GptqStats stats;
      quant::QuantizedTensor q;
      std::string why = quant::gptqQuantize(original.data(), shape, inputAxis, H, w.want->scheme,
                                            w.want->doubleQuant, request.options, q, &stats);
      if (!why.empty())
        fail("'", n, "' ", shapeList(shape), ": ", why);
      std::vector<float> dequantized = quant::dequantize(q);
      quant::QuantizedTensor nearest;
      quant::quantize(original.data(), shape, w.want->scheme, w.want->doubleQuant, nearest);
      GptqTensorReport report;
      report.name = n;
      report.inputs = shape[inputAxis];
      report.samples = samples;
      report.deadColumns = stats.deadColumns;
      report.rtnError = outputError(original, quant::dequantize(nearest), shape, inputAxis, H);
      report.gptqError = outputError(original, dequantized, shape, inputAxis, H);
      result.reports.push_back(report);
      // Later stages see this weight quantized.
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
