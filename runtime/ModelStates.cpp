//===- ModelStates.cpp - ZeRO's model-state accounting of a plan ----------===//

#include "runtime/ModelStates.h"

#include <algorithm>
#include <map>
#include <sstream>

namespace llmc {
namespace {

int64_t product(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text;
  for (int64_t d : shape) text += (text.empty() ? "" : "x") + std::to_string(d);
  return text;
}

/// "wte.weight [50257x768]" for the first few, "and 3 more".
std::string tensorList(const std::vector<std::string> &names) {
  std::string text;
  for (size_t i = 0; i < names.size() && i < 3; ++i) text += (i ? ", " : "") + names[i];
  if (names.size() > 3) text += " and " + std::to_string(names.size() - 3) + " more";
  return text;
}

} // namespace

double ModelStates::formulaParams() const {
  return static_cast<double>(paramBytes) * psi / (stage >= 3 ? groupSize : 1);
}
double ModelStates::formulaGradients() const {
  return static_cast<double>(gradBytes) * psi / (stage >= 2 ? groupSize : 1);
}
double ModelStates::formulaOptimizer() const {
  return static_cast<double>(optimizerBytes) * psi / (stage >= 1 ? groupSize : 1);
}

std::string ModelStates::formula() const {
  int whole = paramBytes * (stage < 3) + gradBytes * (stage < 2) + optimizerBytes * (stage < 1);
  int sharded = paramBytes + gradBytes + optimizerBytes - whole;
  std::ostringstream os;
  if (whole) os << whole << "Ψ";
  if (whole && sharded) os << " + ";
  if (sharded) os << sharded << "Ψ/N";
  return os.str();
}

double ModelStates::unexplained(const std::string &state) const {
  double planned = state == "parameters" ? plannedParams
                   : state == "gradients" ? plannedGradients
                                          : plannedOptimizer;
  double formula = state == "parameters" ? formulaParams()
                   : state == "gradients" ? formulaGradients()
                                          : formulaOptimizer();
  double rest = planned - formula;
  for (const Extra &e : extras)
    if (e.state == state) rest -= e.bytes;
  return rest;
}

namespace {

/// A trainable parameter and its count Ψ contributes per model-parallel rank.
struct Trained {
  const ParameterInfo *info;
  int64_t count;    ///< per model-parallel rank
  bool zeroSharded; ///< the parameter itself split over the ZeRO axes
};

/// The persistent bytes the plan holds, per parameter name.
struct PlannedBytes {
  std::map<std::string, uint64_t> optimizer, absmax, param;
};

/// The bytes planned for `name` (0 when none).
double bytesFor(const std::map<std::string, uint64_t> &bytes, const std::string &name) {
  auto it = bytes.find(name);
  return it == bytes.end() ? 0.0 : static_cast<double>(it->second);
}

/// The published p, g, K for the artifact's precision and optimizer.
void setPublishedConstants(ModelStates &m, const Artifact &artifact) {
  const std::string precision = artifact.meta("precision");
  bool mixed = precision == "bf16" || precision == "fp16" || precision == "fp8";
  bool eightBit = artifact.meta("optimizer") == "adamw8bit";
  m.paramBytes = m.gradBytes = mixed ? 2 : 4;
  // Artifacts from before --grad-dtype kept gradients in the compute type.
  m.heldGradBytes = mixed && artifact.meta("grad_dtype") == "fp32" ? 4 : m.gradBytes;
  m.optimizerBytes = (eightBit ? 2 : 8) + (mixed ? 4 : 0);
  if (eightBit)
    m.policy = std::string("8-bit AdamW (Dettmers et al.), not in the ZeRO paper: K = 2 for the "
                           "8-bit m and v") +
               (mixed ? " + 4 for the fp32 master" : "") + "; block maxima itemized";
  else if (mixed)
    m.policy = "mixed-precision AdamW as published (Rajbhandari et al.): p = 2, g = 2, K = 12 "
               "(fp32 master, m, v)";
  else
    m.policy = "fp32 AdamW, not in the ZeRO paper's table: the same accounting with p = 4, "
               "g = 4, K = 8 (m, v; no master copy)";
}

/// Ψ per model-parallel rank: each trainable parameter's global size,
/// divided by the splits that are not ZeRO's (tensor parallelism).
std::vector<Trained> countPsi(ModelStates &m, const Artifact &artifact,
                              const std::vector<std::string> &zeroAxes) {
  auto isZeroAxis = [&](const std::string &a) {
    return std::find(zeroAxes.begin(), zeroAxes.end(), a) != zeroAxes.end();
  };
  std::vector<Trained> trained;
  for (const ParameterInfo &p : artifact.parameters) {
    if (!p.trainable)
      continue;
    int64_t n = p.shard.sharded() ? product(p.shard.globalShape) : p.numel();
    bool zeroSharded = false;
    for (const ShardLevel &level : p.shard.levels) {
      if (std::any_of(level.axes.begin(), level.axes.end(), isZeroAxis)) {
        zeroSharded = true;
        continue;
      }
      int64_t parts = 1;
      for (const std::string &axis : level.axes)
        for (auto &[name, size] : artifact.mesh)
          if (name == axis)
            parts *= size;
      n /= parts;
    }
    m.psi += n;
    trained.push_back({&p, n, zeroSharded});
  }
  return trained;
}

/// Persistent state, by category, once each; optimizer state per parameter.
PlannedBytes planPersistent(ModelStates &m, const Artifact &artifact) {
  PlannedBytes planned;
  std::vector<std::string> seen;
  for (const ProgramInfo &program : artifact.programs)
    for (const BufferInfo &b : program.buffers) {
      if (b.name.empty() || (b.category != "param" && b.category != "optim") ||
          std::find(seen.begin(), seen.end(), b.name) != seen.end())
        continue;
      seen.push_back(b.name);
      if (b.category == "param") {
        bool frozen =
            std::any_of(artifact.parameters.begin(), artifact.parameters.end(),
                        [&](const ParameterInfo &p) { return p.name == b.name && !p.trainable; });
        (frozen ? m.plannedFrozen : m.plannedParams) += b.bytes();
        planned.param[b.name] += b.bytes();
        continue;
      }
      m.plannedOptimizer += b.bytes();
      size_t slash = b.name.find('/');
      std::string param = slash == std::string::npos ? b.name : b.name.substr(slash + 1);
      (b.name.find("absmax/") != std::string::npos ? planned.absmax : planned.optimizer)[param] +=
          b.bytes();
    }
  return planned;
}

/// State held beyond its 1/N share: whole (not split over the N ranks), or
/// padded to a multiple of N.
void addShardingExtras(ModelStates &m, const char *state, const std::vector<std::string> &whole,
                       double wholeBytes, const std::vector<std::string> &padded, double padding) {
  if (!whole.empty())
    m.extras.push_back({state, "not sharded over the N ranks: " + tensorList(whole), wholeBytes});
  if (!padded.empty())
    m.extras.push_back({state,
                        "padding: dimension 0 padded to a multiple of " +
                            std::to_string(m.groupSize) + " to shard it: " + tensorList(padded),
                        padding});
}

void addOptimizerExtras(ModelStates &m, const std::vector<Trained> &trained,
                        const PlannedBytes &planned) {
  double n = static_cast<double>(m.groupSize);
  std::vector<std::string> names, padded;
  double bytes = 0, padding = 0;
  for (const Trained &t : trained) {
    double expected = m.optimizerBytes * static_cast<double>(t.count) / n;
    double held = bytesFor(planned.optimizer, t.info->name);
    std::string shape =
        shapeText(t.info->shard.sharded() ? t.info->shard.globalShape : t.info->shape);
    // Whole on this rank: about N times the share the formula gives it;
    // a little more than the share: padded to a multiple of N.
    if (held > expected * 1.5) {
      names.push_back(t.info->name + " [" + shape + "]");
      bytes += held - expected;
    } else if (held > expected + 0.5) {
      padded.push_back(t.info->name + " [" + shape + "]");
      padding += held - expected;
    }
  }
  addShardingExtras(m, "optimizer", names, bytes, padded, padding);
}

void addParameterExtras(ModelStates &m, const std::vector<Trained> &trained,
                        const PlannedBytes &planned) {
  double n = static_cast<double>(m.groupSize);
  std::vector<std::string> names, padded;
  double bytes = 0, padding = 0;
  for (const Trained &t : trained) {
    double held = bytesFor(planned.param, t.info->name);
    if (!t.zeroSharded) {
      names.push_back(t.info->name);
      bytes += held * (1.0 - 1.0 / n);
    } else if (double expected = m.paramBytes * static_cast<double>(t.count) / n;
               held > expected + 0.5) {
      padded.push_back(t.info->name);
      padding += held - expected;
    }
  }
  addShardingExtras(m, "parameters", names, bytes, padded, padding);
}

/// Gradient bytes of tensors the N ranks do not divide, whole on every rank
/// from stage 2 (added as an extra; returned for the rest's account).
double addUnshardedGradients(ModelStates &m, const std::vector<Trained> &trained,
                             const PlannedBytes &planned) {
  if (m.groupSize <= 1 || m.stage < 2)
    return 0;
  double n = static_cast<double>(m.groupSize), unsharded = 0;
  std::vector<std::string> names;
  for (const Trained &t : trained) {
    double held = bytesFor(planned.optimizer, t.info->name);
    if (held > 1.5 * m.optimizerBytes * static_cast<double>(t.count) / n) {
      names.push_back(t.info->name);
      unsharded += m.heldGradBytes * static_cast<double>(t.count) * (1.0 - 1.0 / n);
    }
  }
  if (!names.empty())
    m.extras.push_back(
        {"gradients", "not sharded over the N ranks: " + tensorList(names), unsharded});
  return unsharded;
}

/// The rest against the formula, which holds every gradient once and all at
/// once: below it, the update consumed some before the peak; above it, a
/// gradient's value is held twice for a while — contributions beside the
/// sum they join, a whole gradient beside its reduce-scattered shard,
/// gradients beside the bucket they are copied into.
void addGradientRest(ModelStates &m, const std::map<std::string, uint64_t> &parts,
                     double accounted) {
  auto part = [&](const char *kind) { return bytesFor(parts, kind); };
  double rest = part("gradients") + part("buckets") + part("partial sums") +
                part("awaiting reduce-scatter") + part("awaiting widening") + part("shards") -
                accounted - m.formulaGradients();
  static const std::pair<const char *, const char *> twice[] = {
      {"partial sums",
       "partial sums beside their sum (a tied embedding/head's second use, microbatches)"},
      {"awaiting reduce-scatter", "whole gradients beside their reduce-scattered shards"},
      {"buckets", "gradients beside the bucket they are copied into (--grad-bucket-mb)"},
      {"awaiting widening", "a bf16/fp16 gradient beside the fp32 gradient it is widened into"},
  };
  std::string held;
  for (auto [kind, text] : twice)
    if (part(kind) > 0)
      held += (held.empty() ? "" : "; ") + std::string(text);
  if (rest <= -1024 && m.stage < 2 && part("shards") > 0)
    m.extras.push_back({"gradients",
                        "gradients not held whole at the peak: reduce-scattered to the shard "
                        "this rank updates (as stage 2 does) or already consumed by the update",
                        rest});
  else if (rest <= -1024)
    m.extras.push_back({"gradients",
                        "gradients the update consumed before the gradient peak (the formula "
                        "holds all at once)",
                        rest});
  else if (rest >= 1024 && !held.empty())
    m.extras.push_back({"gradients", "held twice for a while: " + held, rest});
}

/// Gradients: the most gradient bytes the plan holds at once, and what they
/// are at that moment.
void addGradientExtras(ModelStates &m, const Artifact &artifact,
                       const std::vector<Trained> &trained, const PlannedBytes &planned) {
  auto peak = artifact.memory.categoryPeaks.find("grad");
  if (peak != artifact.memory.categoryPeaks.end())
    m.plannedGradients = peak->second;
  const std::map<std::string, uint64_t> &parts = artifact.memory.gradientPeakParts;
  auto part = [&](const char *kind) { return bytesFor(parts, kind); };
  // fp32 gradients under mixed precision: the formula keeps the paper's
  // g = 2, and the other 2 bytes per gradient are an item of their own.
  double fp32Gradients = (m.heldGradBytes - m.gradBytes) * static_cast<double>(m.psi) /
                         (m.stage >= 2 ? m.groupSize : 1);
  if (fp32Gradients > 0)
    m.extras.push_back({"gradients",
                        "fp32 gradients (--grad-dtype fp32): +" +
                            std::to_string(m.heldGradBytes - m.gradBytes) +
                            (m.stage >= 2 ? "Ψ/N" : "Ψ") + " over the paper's " +
                            std::to_string(m.gradBytes) + "-byte gradients",
                        fp32Gradients});
  if (part("fp32 copies") > 0)
    m.extras.push_back(
        {"gradients", "fp32 copies of bf16/fp16 gradients for the update", part("fp32 copies")});
  if (part("padded copies") > 0)
    m.extras.push_back({"gradients",
                        "padded copies (a gradient padded to its parameter's shape, e.g. the "
                        "position embedding's from seq_len to the table's rows)",
                        part("padded copies")});
  double unsharded = addUnshardedGradients(m, trained, planned);
  addGradientRest(m, parts, unsharded + fp32Gradients);
}

} // namespace

ModelStates modelStates(const Artifact &artifact) {
  ModelStates m;
  m.stage = static_cast<int>(artifact.metaNumber("zero", 0));
  std::vector<std::string> zeroAxes = artifact.metaList("zero_axes");
  for (auto &[axis, size] : artifact.mesh)
    if (std::find(zeroAxes.begin(), zeroAxes.end(), axis) != zeroAxes.end())
      m.groupSize *= size;
  setPublishedConstants(m, artifact);
  std::vector<Trained> trained = countPsi(m, artifact, zeroAxes);
  PlannedBytes planned = planPersistent(m, artifact);
  if (m.groupSize > 1 && m.stage >= 1)
    addOptimizerExtras(m, trained, planned);
  if (m.groupSize > 1 && m.stage >= 3)
    addParameterExtras(m, trained, planned);
  if (artifact.meta("optimizer") == "adamw8bit") {
    double bytes = 0;
    for (auto &[param, b] : planned.absmax) bytes += static_cast<double>(b);
    if (bytes > 0)
      m.extras.push_back(
          {"optimizer", "8-bit AdamW block maxima (one fp32 per 2048 values)", bytes});
  }
  addGradientExtras(m, artifact, trained, planned);
  return m;
}

} // namespace llmc
