//===- MergeLoRA.cpp - adapters folded into their base weights ------------===//

#include "runtime/quant/MergeLoRA.h"

#include "runtime/Artifact.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/checkpoint/CheckpointReader.h"
#include "runtime/quant/QuantizedTensor.h"
#include "runtime/support/Error.h"
#include "runtime/support/Strings.h"

#include <cstring>
#include <map>
#include <set>

namespace llmc {
namespace {

/// A parameter read whole at full precision, widened to fp32.
std::vector<float> readFloats(CheckpointReader &reader, const std::string &name,
                              std::vector<int64_t> *shape = nullptr) {
  GlobalTensor t = reader.readParameter(name);
  if (shape)
    *shape = t.shape;
  return floatValues(t, name);
}

/// QLoRA's NF4 storage of `base` (shape `shape`), expanded.
std::vector<float> expandNf4(CheckpointReader &reader, const std::string &base,
                             const std::vector<int64_t> &shape, int64_t block) {
  quant::QuantizedTensor q;
  q.scheme = quant::makeScheme(quant::Format::Nf4, quant::Granularity::Block, 0, block);
  q.shape = shape;
  // The levels' format is the checkpoint's (its index records it).
  q.doubleQuant = quant::doubleQuantOf(reader.absmaxFormat(base + ".absmax_q"));
  q.codes = reader.read(base + ".qweight").bytes;
  q.absmaxCodes = reader.read(base + ".absmax_q").bytes;
  q.absmaxScales = readFloats(reader, base + ".absmax_scale");
  std::vector<float> mean = readFloats(reader, base + ".absmax_mean");
  if (mean.size() != 1)
    fail("'", base, ".absmax_mean' must hold one value");
  q.absmaxMean = mean[0];
  if (std::string why = quant::validate(q); !why.empty())
    fail("'", base, "' (NF4): ", why);
  return quant::dequantize(q);
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text;
  for (int64_t d : shape) text += (text.empty() ? "" : "x") + std::to_string(d);
  return text;
}

/// w[k][n] += scale · Σ_j A[k][j] B[j][n] (transposed: w[n][k] += scale ·
/// Σ_j B[n][j] A[j][k]), summed in double.
void addProduct(float *w, const float *a, const float *b, int64_t K, int64_t N, int64_t r,
                bool transposed, double scale) {
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) {
      double sum = 0.0;
      for (int64_t j = 0; j < r; ++j)
        sum += transposed ? static_cast<double>(b[n * r + j]) * a[j * K + k]
                          : static_cast<double>(a[k * r + j]) * b[j * N + n];
      float &dst = transposed ? w[n * K + k] : w[k * N + n];
      dst = static_cast<float>(dst + scale * sum);
    }
}

MergeReport merge(const std::string &ckptDir, const Artifact &artifact,
                  const std::string &output) {
  std::string scaleText = artifact.meta("lora.scale");
  if (scaleText.empty())
    fail(artifact.path, ": not compiled with --lora; nothing to merge");
  const double scale = std::stod(scaleText);
  const int64_t block = static_cast<int64_t>(artifact.metaNumber("qlora.block", quant::kNf4Block));
  CheckpointReader reader(ckptDir);

  MergeReport report;
  std::vector<std::string> names;
  std::map<std::string, std::vector<int64_t>> shapes;
  std::map<std::string, std::vector<float>> merged; // fp32 results
  std::map<std::string, GlobalTensor> copied;       // everything else, as stored
  // Every parameter the checkpoint holds (every pipeline stage's), in its
  // order: each adapted weight is merged where it (QLoRA: its .qweight
  // storage) stands; everything else is copied, at full precision.
  std::vector<std::string> parameters = reader.parameterNames();
  std::set<std::string> adapted;
  for (const std::string &name : parameters)
    if (endsWith(name, ".lora_A"))
      adapted.insert(name.substr(0, name.size() - 7));
  for (const std::string &name : parameters) {
    std::string base = endsWith(name, ".qweight") ? name.substr(0, name.size() - 8) : name;
    if (isAdapterTensor(name) || endsWith(name, ".absmax_q") ||
        endsWith(name, ".absmax_scale") || endsWith(name, ".absmax_mean"))
      continue; // read with their weight
    if (!adapted.count(base)) {
      names.push_back(name);
      copied[name] = reader.readParameter(name);
      ++report.copied;
      continue;
    }
    if (lookupReads(artifact, base))
      fail("'", base, "' is a tied head's table, which the embedding lookup also reads: merging "
           "the head's adapters into it would change the lookup too, and the merged model would "
           "not be the fine-tuned one; keep the adapters, or fine-tune without the head in "
           "--lora targets=");
    const std::string aName = base + ".lora_A";
    std::vector<int64_t> aShape, bShape;
    std::vector<float> a = readFloats(reader, aName, &aShape);
    std::vector<float> b = readFloats(reader, base + ".lora_B", &bShape);
    // A mixture of experts' stacked weights [G, ·, ·] have stacked
    // adapters: each expert's pair merges into its own slice.
    const bool stacked = aShape.size() == 3;
    if (aShape.size() != bShape.size() || (aShape.size() != 2 && !stacked) ||
        (stacked && aShape[0] != bShape[0]))
      fail("'", base, "': adapters must be matrices, or stacks of as many matrices");
    const int64_t groups = stacked ? aShape[0] : 1;
    if (stacked) {
      aShape.erase(aShape.begin());
      bShape.erase(bShape.begin());
    }
    // W [K, N]: A [K, r], B [r, N]. Transposed W [N, K]: A [r, K], B [N, r].
    // The rank is below both of W's dimensions, so A's smaller side is r.
    bool transposed = aShape[0] < aShape[1];
    int64_t r = transposed ? aShape[0] : aShape[1];
    int64_t K = transposed ? aShape[1] : aShape[0];
    int64_t N = transposed ? bShape[0] : bShape[1];
    if ((transposed ? bShape[1] : bShape[0]) != r)
      fail("'", base, "': lora_A ", aShape[0], "x", aShape[1], " and lora_B ", bShape[0], "x",
           bShape[1], " do not share a rank");
    std::vector<int64_t> shape = transposed ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N};
    if (stacked)
      shape.insert(shape.begin(), groups);
    std::vector<float> w;
    if (reader.has(base)) {
      std::vector<int64_t> stored;
      w = readFloats(reader, base, &stored);
      if (stored != shape)
        fail("'", base, "' does not have the shape its adapters imply (", shapeText(shape), ")");
    } else if (reader.has(base + ".qweight")) {
      w = expandNf4(reader, base, shape, block);
      ++report.expanded;
    } else {
      fail(ckptDir, ": no base weight '", base, "' (plain or .qweight) for its adapters");
    }
    for (int64_t g = 0; g < groups; ++g)
      addProduct(w.data() + g * K * N, a.data() + g * K * r, b.data() + g * r * N, K, N, r,
                 transposed, scale);
    names.push_back(base);
    shapes[base] = shape;
    merged[base] = std::move(w);
    ++report.merged;
  }

  std::vector<SafeTensor> tensors;
  for (const std::string &name : names) {
    if (auto it = merged.find(name); it != merged.end()) {
      tensors.push_back({name, DType::F32, shapes[name], it->second.data(), it->second.size() * 4});
    } else {
      const GlobalTensor &t = copied[name];
      tensors.push_back({name, t.dtype, t.shape, t.bytes.data(), t.bytes.size()});
    }
  }
  writeSafetensors(output, tensors, {{"format", "llmc-merged-lora"}});
  return report;
}

} // namespace

bool mergeLoRA(const std::string &ckptDir, const std::string &artifactPath,
               const std::string &output, MergeReport &report, std::string &error) {
  return catchErrors(error, [&] { report = merge(ckptDir, loadArtifact(artifactPath), output); });
}

} // namespace llmc
