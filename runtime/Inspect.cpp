//===- Inspect.cpp - human-readable artifact summary ----------------------===//

#include "runtime/Inspect.h"
#include "common/LayerName.h"
#include "common/TransferChannel.h"
#include "runtime/StreamOrder.h"

#include "runtime/ActivationMemory.h"
#include "runtime/Artifact.h"
#include "runtime/ModelStates.h"
#include "runtime/quant/StoredWeights.h"
#include "runtime/support/Error.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

namespace llmc {

std::string formatBytes(uint64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  std::ostringstream os;
  os << std::fixed << std::setprecision(unit ? 2 : 0) << value << " " << units[unit];
  return os.str();
}

bool artifactMetadata(const std::string &path, std::map<std::string, std::string> &metadata,
                      std::string &error) {
  return catchErrors(error, [&] { metadata = loadArtifact(path).metadata; });
}

namespace {

/// --device-memory with --offloaded-layers host.
/// Whether the offloaded layers run on the host in some step (host: every
/// step; split: decoding, while prompts stream them).
bool runsLayersOnHost(const Artifact &a) {
  return a.meta("offloaded_layers") == "host" || a.meta("offloaded_layers") == "split";
}
bool splitsLayers(const Artifact &a) { return a.meta("offloaded_layers") == "split"; }

/// The KV-cache pools kept in host memory (the decode step's, each once).
uint64_t hostCacheBytes(const Artifact &a) {
  const ProgramInfo *decode = a.program("decode");
  uint64_t bytes = 0;
  std::set<std::string> seen;
  for (const BufferInfo &b : decode ? decode->buffers : std::vector<BufferInfo>{})
    if (b.host && b.category == "kv_cache" && seen.insert(b.name).second)
      bytes += b.bytes();
  return bytes;
}

void printMemoryPlan(const Artifact &a, const std::string &title, std::ostream &os) {
  auto row = [&](const std::string &name, uint64_t bytes) -> std::ostream & {
    return os << "  " << std::left << std::setw(22) << name << std::right << std::setw(12)
              << formatBytes(bytes);
  };
  os << title << ":\n";
  row("arena", a.memory.arenaBytes) << "  (planned peak; nothing else is allocated during a step)\n";
  row("persistent", a.memory.persistentBytes) << "\n";
  for (auto &[name, bytes] : a.memory.breakdown) {
    row(name, bytes);
    // A pipeline stage (or accumulation) holds several microbatches' worth.
    const auto &byMicrobatch = a.memory.activationsByMicrobatch;
    if (name == "activations" && byMicrobatch.size() > 1) {
      os << "  (" << byMicrobatch.size() << " microbatches in flight:";
      const char *separator = " ";
      for (auto &[microbatch, part] : byMicrobatch) {
        os << separator << "#" << microbatch << " " << formatBytes(part);
        separator = ", ";
      }
      os << ")";
    }
    os << "\n";
  }
  if (a.memory.hostBytes) {
    const auto &m = a.memory;
    std::string offload = a.meta("offload", "none");
    std::string why = offload != "none"    ? "--offload " + offload
                      : m.hostWeightsBytes ? "--device-memory " + a.meta("device_memory")
                                           : "--recompute budget's offloaded layers";
    row("host memory", m.hostBytes) << "  (" << why << ": beside the arena, not in it)\n";
    if (m.hostWeightsBytes && runsLayersOnHost(a)) {
      uint64_t cache = hostCacheBytes(a);
      row("  weights", m.hostWeightsBytes)
          << (splitsLayers(a) ? "  (the last layers', streamed for prefill, run on the host's "
                                "cores for decode)\n"
                              : "  (the last layers', run on the host's cores)\n");
      row("  kv_cache", cache) << "  (those layers' pools)\n";
      row("  mirrors", m.hostBytes - m.hostWeightsBytes - cache)
          << "  (of the device buffers those layers read and write)\n";
    } else if (m.hostWeightsBytes) {
      row("  weights", m.hostWeightsBytes)
          << "  (the last layers', copied to the device a layer ahead of use)\n";
    }
    if (m.hostActivationsBytes)
      row("  activations", m.hostActivationsBytes)
          << "  (saved between each layer's forward and backward)\n";
    if (m.hostOptimizerStateBytes) {
      row("  optimizer_state", m.hostOptimizerStateBytes) << "  (fp32 masters, AdamW moments)\n";
      row("  staging", m.hostBytes - m.hostOptimizerStateBytes - m.hostActivationsBytes)
          << "  (copies of what the host update reads and writes)\n";
    }
  }
}

/// Host kernels and collectives, and the bytes copied each way per run
/// (ZeRO-Offload, layers run on the host).
void printHostTraffic(const ProgramInfo &p, std::ostream &os) {
  int onHost = 0, collectives = 0;
  uint64_t down = 0, up = 0;
  for (const InstructionInfo &inst : p.instructions) {
    onHost += inst.onHost && inst.kind == InstructionKind::Kernel;
    collectives += inst.onHost && inst.kind != InstructionKind::Kernel;
    if (inst.kind == InstructionKind::Kernel && inst.kernel == "copy_to_host")
      down += p.buffers[inst.inputs[0]].bytes();
    if (inst.kind == InstructionKind::Kernel && inst.kernel == "copy_to_device")
      up += p.buffers[inst.inputs[0]].bytes();
  }
  if (onHost || down || up)
    os << "  " << std::setw(12) << "" << "  on the host: " << onHost
       << (onHost == 1 ? " kernel" : " kernels")
       << (collectives ? ", " + std::to_string(collectives) +
                             (collectives == 1 ? " collective" : " collectives")
                       : std::string())
       << "; copied " << formatBytes(down) << " to the host, " << formatBytes(up)
       << " to the device\n";
}

/// `--recompute budget`'s price per layer ("h.0=offload:1.2e-04,..."): runs
/// of layers with one mode and price on one line, in milliseconds.
void printRecomputePrice(const Artifact &a, std::ostream &os) {
  std::string text = a.meta("recompute.price");
  if (text.empty())
    return;
  struct Entry {
    std::string layer, mode;
    double seconds;
  };
  std::vector<Entry> entries;
  std::istringstream items(text);
  std::string item;
  double total = 0;
  while (std::getline(items, item, ',')) {
    size_t eq = item.find('='), colon = item.rfind(':');
    if (eq == std::string::npos || colon == std::string::npos || colon < eq)
      continue;
    entries.push_back({item.substr(0, eq), item.substr(eq + 1, colon - eq - 1),
                       std::atof(item.c_str() + colon + 1)});
    total += entries.back().seconds;
  }
  auto ms = [](double seconds) {
    std::ostringstream out;
    out << "+" << std::fixed << std::setprecision(3) << seconds * 1e3 << " ms";
    return out.str();
  };
  os << "  priced:   " << ms(total) << " per step (" << a.meta("recompute.price_basis") << ")\n";
  for (size_t i = 0; i < entries.size();) {
    size_t j = i;
    while (j + 1 < entries.size() && entries[j + 1].mode == entries[i].mode &&
           entries[j + 1].seconds == entries[i].seconds)
      ++j;
    std::string names = entries[i].layer + (j > i ? " .. " + entries[j].layer : "");
    os << "    " << std::left << std::setw(16) << names << " " << std::setw(18) << entries[i].mode
       << std::right << ms(entries[i].seconds) << (j > i ? " each" : "") << "\n";
    i = j + 1;
  }
}

/// How a training artifact trains: precision, optimizer, adapters,
/// recomputation and the default schedule.
void printTraining(const Artifact &a, std::ostream &os) {
  os << "training:   precision " << a.meta("precision");
  if (a.meta("precision", "fp32") != "fp32" && !a.meta("grad_dtype").empty())
    os << " (" << a.meta("grad_dtype") << " gradients)";
  os << ", microbatches "
     << a.meta("microbatches") << ", optimizer " << a.meta("optimizer") << " (beta1 "
     << a.meta("optimizer.beta1") << ", beta2 " << a.meta("optimizer.beta2")
     << ", weight decay " << a.meta("optimizer.weight_decay") << ", clip "
     << a.meta("optimizer.max_grad_norm") << ")\n";
  if (!a.meta("qat").empty())
    os << "qat:        " << a.meta("qat") << "\n";
  if (a.meta("precision") == "fp8")
    // Artifacts from before the option summed every product in fp32.
    os << "fp8:        " << a.meta("fp8_scaling", "current") << " scaling, fast accumulation "
       << a.meta("fp8_fast_accumulation", "none") << "\n";
  if (!a.meta("lora").empty()) {
    int adapters = 0;
    for (const ParameterInfo &p : a.parameters)
      adapters += p.name.size() > 7 && p.name.compare(p.name.size() - 7, 7, ".lora_A") == 0;
    os << "lora:       " << a.meta("lora") << " (" << adapters << " adapted matmuls"
       << (a.meta("qlora") == "1" ? ", base weights in NF4" : "")
       << (a.meta("qlora") == "1" && nf4AbsmaxFormat(a) == quant::AbsmaxFormat::Fp8E4M3
               ? " (E4M3 absmax levels)"
               : "")
       << "; every other parameter frozen)\n";
  }
  std::string recompute = a.meta("recompute", "none");
  std::string layers = a.meta("recompute.layers");
  if (recompute != "none" || !layers.empty())
    os << "recompute:  " << recompute << (layers.empty() ? "" : " (" + layers + ")") << "\n";
  printRecomputePrice(a, os);
  os << "schedule:   lr " << a.meta("schedule.lr") << " -> " << a.meta("schedule.min_lr")
     << ", " << a.meta("schedule.kind") << ", warmup " << a.meta("schedule.warmup")
     << ", steps " << a.meta("schedule.steps") << ", seed " << a.meta("seed") << "\n";
}

/// An inference artifact's steps and the KV cache they share: its shape per
/// layer and what a token of context costs (the scale pools of a cache of
/// int8 or fp8 codes included).
void printInference(const Artifact &a, std::ostream &os) {
  const ProgramInfo *decode = a.program("decode");
  if (!decode)
    return;
  // By name, each once: the pools [NB, P, KV, D] and a cache of codes'
  // scale pools [NB, P, KV].
  std::map<std::string, const BufferInfo *> pools, scales;
  for (const BufferInfo &b : decode->buffers)
    if (b.category == "kv_cache")
      (b.shape.size() == 3 ? scales : pools)[b.name] = &b;
  uint64_t total = 0, scaleBytes = 0;
  for (auto &[name, b] : pools)
    total += b->bytes();
  for (auto &[name, b] : scales)
    scaleBytes += b->bytes();
  total += scaleBytes;
  os << "inference:  @prefill " << a.meta("inference.max_batch") << " rows x "
     << a.meta("inference.chunk") << " tokens, @decode " << a.meta("inference.max_batch")
     << " rows x 1 token; max context " << a.meta("inference.max_context") << "\n";
  if (pools.empty())
    return;
  const BufferInfo &pool = *pools.begin()->second;
  int64_t layers = static_cast<int64_t>(pools.size() / 2);
  int64_t blocks = pool.shape[0], page = pool.shape[1];
  uint64_t perLayer = 2 * pool.bytes() + (scales.empty() ? 0 : 2 * scales.begin()->second->bytes());
  // The codes are stored as bytes; the artifact says which (int8,
  // fp8_e4m3; artifacts older than fp8 caches were int8).
  std::string element = scales.empty() ? dtypeName(pool.dtype) : a.meta("inference.kv", "int8");
  os << "kv cache:   " << formatBytes(total) << " on this rank: " << layers << " layers x (k + v) of ["
     << blocks << ", " << page << ", " << pool.shape[2] << ", " << pool.shape[3] << "] "
     << element;
  if (!scales.empty())
    os << " + scales [" << blocks << ", " << page << ", " << pool.shape[2] << "] f32";
  os << " = " << formatBytes(perLayer) << " per layer\n"
     << "            " << blocks << " blocks of " << page << " tokens (" << blocks * page
     << " tokens); " << formatBytes(total / static_cast<uint64_t>(blocks * page))
     << " per token (2 x layers x kv heads x ";
  if (scales.empty())
    os << "head dim x " << dtypeSize(pool.dtype) << " B)\n";
  else
    os << "(head dim x 1 B + a 4 B scale))\n";
  if (!scales.empty())
    os << "            of which scales " << formatBytes(scaleBytes) << "\n";
}

/// Weight-only quantized inference (--weight-quant): the weights kept in
/// quantized storage (`<weight>.qweight` beside its scales), their bytes
/// and bits per weight, a mixture of experts' stacks apart.
/// A quantized matrix or experts' stack: its weights on this rank and on
/// all of them, whether it is a stack of experts, and the parameters that
/// store it (its codes first, then scales and the like).
struct QuantizedMatrix {
  int64_t localWeights = 0, weights = 0;
  bool experts = false;
  std::vector<std::string> storage;
};

int64_t elements(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

/// The artifact's quantized matrices, by their codes' name: those its
/// products read in storage and QLoRA's, expanded before each use
/// (runtime/quant/StoredWeights.h). A kernel's storage operands are its
/// parameters from the codes on.
std::map<std::string, QuantizedMatrix> quantizedMatrices(const Artifact &a) {
  std::map<std::string, QuantizedMatrix> stored;
  for (const ProgramInfo &p : a.programs)
    for (const InstructionInfo &inst : p.instructions) {
      const int codes = codesInput(p, inst);
      if (codes < 0)
        continue;
      QuantizedMatrix matrix;
      for (size_t i = codes; i < inst.inputs.size(); ++i)
        if (p.buffers[inst.inputs[i]].category == "param")
          matrix.storage.push_back(p.buffers[inst.inputs[i]].name);
      const bool expanded = inst.kernel == "qat_dequantize_nf4";
      const std::vector<int64_t> local =
          expanded ? p.buffers[inst.outputs[0]].shape : inst.attrs.getInts("weight_shape");
      matrix.localWeights = elements(local);
      matrix.weights = elements(storedWeightShape(p, inst, codes, a.mesh));
      matrix.experts = local.size() == 3;
      stored[matrix.storage.front()] = std::move(matrix);
    }
  return stored;
}

/// Each storage parameter of `stored` and the codes' name of its matrix.
std::map<std::string, std::string>
storageOwners(const std::map<std::string, QuantizedMatrix> &stored) {
  std::map<std::string, std::string> owners;
  for (const auto &[codes, matrix] : stored)
    for (const std::string &name : matrix.storage) owners[name] = codes;
  return owners;
}

void printQuantizedWeights(const Artifact &a, std::ostream &os) {
  const std::map<std::string, QuantizedMatrix> stored = quantizedMatrices(a);
  if (stored.empty())
    return;
  const std::map<std::string, std::string> owners = storageOwners(stored);
  int64_t weights[2] = {0, 0}, tensors[2] = {0, 0};
  uint64_t bytes[2] = {0, 0};
  for (const auto &[name, s] : stored) weights[s.experts] += s.localWeights, ++tensors[s.experts];
  for (const ParameterInfo &param : a.parameters) {
    auto it = owners.find(param.name);
    if (it != owners.end())
      bytes[stored.at(it->second).experts] += param.numel() * dtypeSize(param.dtype);
  }
  auto bits = [&](int i) {
    std::ostringstream b;
    b << std::fixed << std::setprecision(2) << 8.0 * bytes[i] / std::max<int64_t>(1, weights[i]);
    return b.str();
  };
  os << "quantized:  ";
  if (tensors[0] > 0)
    os << tensors[0] << " matrices, " << formatBytes(bytes[0]) << " (" << bits(0)
       << " bits per weight)" << (tensors[1] > 0 ? "; " : "");
  if (tensors[1] > 0)
    os << "experts: " << tensors[1] << " stacks, " << formatBytes(bytes[1]) << " (" << bits(1)
       << " bits per weight)";
  os << "\n";
}

/// Under --device-memory: each layer's weights on the device and in host
/// memory (runs of equal layers on one line), and whether the layers in
/// host memory are streamed or run there.
void printWeightsPerLayer(const Artifact &a, std::ostream &os) {
  const ProgramInfo *decode = a.program("decode");
  if (!decode || !a.memory.hostWeightsBytes)
    return;
  std::map<std::string, std::pair<uint64_t, uint64_t>> bytes; // layer -> device, host
  std::vector<std::string> order;
  std::set<std::string> seen;
  for (const BufferInfo &b : decode->buffers) {
    std::string layer(layerOfParameter(b.name));
    if (b.category != "param" || layer.empty() || !seen.insert(b.name).second)
      continue;
    if (!bytes.count(layer))
      order.push_back(layer);
    (b.host ? bytes[layer].second : bytes[layer].first) += b.bytes();
  }
  std::stable_sort(order.begin(), order.end(), [](const std::string &x, const std::string &y) {
    return layerIndex(x) < layerIndex(y);
  });
  os << "weights by layer (--device-memory " << a.meta("device_memory") << "):\n";
  for (size_t i = 0; i < order.size();) {
    size_t j = i + 1;
    while (j < order.size() && bytes[order[j]] == bytes[order[i]]) ++j;
    auto [device, host] = bytes[order[i]];
    std::string name = j - i == 1 ? order[i] : order[i] + " .. " + order[j - 1];
    os << "  " << std::left << std::setw(22) << name << std::right << " device " << std::setw(10)
       << formatBytes(device) << "   host " << std::setw(10) << formatBytes(host)
       << (!host                 ? ""
           : splitsLayers(a)     ? "  (streamed for prefill, run on the host for decode)"
           : runsLayersOnHost(a) ? "  (run on the host)"
                                 : "  (streamed)")
       << "\n";
    i = j;
  }
  if (std::string why = a.meta("offloaded_layers.why"); !why.empty())
    os << "  chosen by --offloaded-layers auto: " << a.meta("offloaded_layers") << " (" << why
       << ")\n";
}

/// What each layer keeps for its backward, beside Korthikanti et al.'s
/// count for the same layout (runs of equal layers on one line).
void printActivationsPerLayer(const Artifact &a, const std::string &title, std::ostream &os) {
  const auto &layers = a.memory.savedPerLayer;
  if (layers.empty())
    return;
  ActivationShape shape = activationShape(a);
  std::map<std::string, std::string> modes = recomputeModes(a);
  bool known = shape.s > 0 && shape.b > 0 && shape.h > 0 && shape.a > 0;
  os << title;
  if (known)
    os << " (s=" << shape.s << " b=" << shape.b << " h=" << shape.h << " a=" << shape.a
       << " t=" << shape.t << (shape.sequenceParallel ? " sp" : "") << ", "
       << shape.elementBytes << "-byte activations)";
  os << ":\n";
  for (size_t i = 0; i < layers.size();) {
    size_t j = i;
    while (j + 1 < layers.size() && layers[j + 1].second == layers[i].second &&
           modes[layers[j + 1].first] == modes[layers[i].first])
      ++j;
    std::string names = layers[i].first + (j > i ? " .. " + layers[j].first : "");
    const std::string &mode = modes[layers[i].first];
    os << "  " << std::left << std::setw(16) << names << " " << std::setw(10) << mode << std::right
       << std::setw(12) << formatBytes(layers[i].second);
    if (known) {
      os << " = " << std::fixed << std::setprecision(2) << layers[i].second / shape.sbh()
         << " sbh" << std::defaultfloat;
      if (shape.gptLayer)
        os << "   Korthikanti " << korthikantiFormula(shape, mode) << " = " << std::fixed
           << std::setprecision(2) << korthikantiBytes(shape, mode) / shape.sbh() << " sbh = "
           << std::defaultfloat
           << formatBytes(static_cast<uint64_t>(korthikantiBytes(shape, mode) + 0.5))
           << " at 16 bits";
    }
    os << "\n";
    i = j + 1;
  }
}

/// Whether output `i` of `inst` is an attention kernel's planned workspace
/// (its last output, a 1-D u8 workspace buffer: kernels/contracts/
/// AttentionWorkspace.h).
bool isAttentionWorkspace(const ProgramInfo &p, const InstructionInfo &inst, size_t i) {
  const BufferInfo &b = p.buffers[inst.outputs[i]];
  return inst.kind == InstructionKind::Kernel && inst.kernel.rfind("attention", 0) == 0 &&
         i + 1 == inst.outputs.size() && b.category == "workspace" && b.dtype == DType::U8 &&
         b.shape.size() == 1;
}

/// The workspaces planned for cuDNN attention, per program: how many
/// kernels of each name and size (a cuda artifact's bf16/f16 attention).
void printAttentionWorkspaces(const Artifact &a, std::ostream &os) {
  bool any = false;
  for (const ProgramInfo &p : a.programs) {
    std::map<std::pair<std::string, uint64_t>, int> counts;
    for (const InstructionInfo &inst : p.instructions)
      for (size_t i = 0; i < inst.outputs.size(); ++i)
        if (isAttentionWorkspace(p, inst, i))
          counts[{inst.kernel, p.buffers[inst.outputs[i]].bytes()}]++;
    if (counts.empty())
      continue;
    if (!any)
      os << "attention workspaces (cuDNN; each live only during its kernel):\n";
    any = true;
    os << "  " << std::left << std::setw(12) << p.name << std::right;
    const char *separator = "";
    for (auto &[kernel, count] : counts) {
      os << separator << count << " " << kernel.first << " x " << formatBytes(kernel.second);
      separator = ", ";
    }
    os << "\n";
  }
}

/// The ranks of `a`'s mesh that differ only in `axes`.
int64_t groupSize(const Artifact &a, const std::vector<std::string> &axes) {
  int64_t n = 1;
  for (const auto &[axis, size] : a.mesh)
    if (std::find(axes.begin(), axes.end(), axis) != axes.end())
      n *= size;
  return n;
}

/// Expert parallelism's exchanges: the bytes each rank's all-to-alls send
/// to other ranks per run (a buffer's (P-1)/P; its own chunk stays). The
/// buffers are sized for the worst case dropless routing allows, so this
/// is what moves whatever the routing.
void printAllToAllBytes(const Artifact &a, const ProgramInfo &p, std::ostream &os) {
  size_t count = 0;
  uint64_t sent = 0;
  for (const InstructionInfo &inst : p.instructions) {
    if (inst.kind != InstructionKind::AllToAll)
      continue;
    const int64_t ranks = std::max<int64_t>(1, groupSize(a, inst.group));
    ++count;
    sent += p.buffers[inst.inputs.at(0)].bytes() / ranks * (ranks - 1);
  }
  if (count > 0)
    os << "  " << std::left << std::setw(12) << "" << std::right << std::setw(6) << count
       << " all-to-alls sending " << formatBytes(sent) << " to other ranks per run\n";
}

/// Per program: the instructions a step launches and the bytes its kernels
/// move, counting every input read and every output written once — what
/// fusion reduces. Attention workspaces are capacity, not traffic: left out.
void printProgramWork(const Artifact &a, std::ostream &os) {
  os << "work per run (this rank; kernel bytes = inputs read + outputs written):\n";
  for (const ProgramInfo &p : a.programs) {
    size_t kernels = 0, communication = 0;
    uint64_t bytes = 0;
    for (const InstructionInfo &inst : p.instructions) {
      if (inst.kind == InstructionKind::RecordEvent || inst.kind == InstructionKind::WaitEvent)
        continue;
      if (inst.kind != InstructionKind::Kernel) {
        ++communication;
        continue;
      }
      ++kernels;
      for (uint32_t b : inst.inputs) bytes += p.buffers[b].bytes();
      for (size_t i = 0; i < inst.outputs.size(); ++i)
        if (!isAttentionWorkspace(p, inst, i)) bytes += p.buffers[inst.outputs[i]].bytes();
    }
    os << "  " << std::left << std::setw(12) << p.name << std::right << std::setw(6) << kernels
       << " kernels " << std::setw(12) << formatBytes(bytes) << "   " << communication
       << " communication instructions\n";
    printAllToAllBytes(a, p, os);
  }
}

std::string rankList(const std::vector<int> &ranks) {
  std::string text;
  for (int r : ranks) text += (text.empty() ? "" : " ") + std::to_string(r);
  return text;
}

/// Throws, naming the role and program, if a program's events leave a race
/// between its streams (StreamOrder.h).
void checkStreams(const Artifact &a) {
  std::string role = "rank " + std::to_string(a.ranks.empty() ? 0 : a.ranks.front());
  for (const ProgramInfo &program : a.programs)
    checkStreamOrder(program, [&](size_t i) {
      return role + ", program '" + program.name + "', instruction " + std::to_string(i);
    });
}

/// Which stream and communicator each pipeline transfer channel of a
/// program uses, with its transfers (nothing without transfers).
void printTransferChannels(const ProgramInfo &program, std::ostream &os) {
  std::map<int, std::pair<int, int>> transfers; // channel → sends, receives
  for (const InstructionInfo &inst : program.instructions)
    if (inst.kind == InstructionKind::Send)
      ++transfers[inst.channel].first;
    else if (inst.kind == InstructionKind::Recv)
      ++transfers[inst.channel].second;
  if (transfers.empty())
    return;
  os << "channels:  ";
  const char *separator = "";
  for (auto &[channel, counts] : transfers) {
    os << separator << " " << channelName(channel) << " (channel " << channel << ") on stream "
       << streamOfChannel(channel) << ": " << counts.first << " sends, " << counts.second
       << " receives";
    separator = ";";
  }
  os << " in " << program.name << "\n";
}

/// The artifact's file, format, backend and mesh, and how its train or
/// decode step uses streams.
void printHeader(const Artifact &a, const std::string &path, std::ostream &os) {
  os << "artifact:   " << path << "\n"
     << "format:     schema " << a.schemaVersion / 100 << "." << a.schemaVersion % 100
     << ", content hash 0x" << std::hex << a.contentHash << std::dec << ", producer "
     << a.producer << "\n"
     << "backend:    " << a.backend << ", world size " << a.worldSize;
  if (!a.mesh.empty()) {
    os << ", mesh";
    for (auto &[axis, size] : a.mesh) os << " " << axis << "=" << size;
  }
  os << "\n";
  const ProgramInfo *step = a.program("train_step");
  if (!step)
    step = a.program("decode");
  if (!step || !usesStreams(*step))
    return;
  size_t events = 0;
  bool copies = false;
  for (const InstructionInfo &inst : step->instructions) {
    events += inst.kind == InstructionKind::RecordEvent;
    copies = copies || inst.stream == kCopyStream;
  }
  os << "streams:    kernels on stream 0, communication on stream 1"
     << (copies ? ", copies to and from host memory on stream " + std::to_string(kCopyStream) : "")
     << " (" << events << " events in " << step->name << ")\n";
  printTransferChannels(*step, os);
}

/// The model's family and shape; a mixture of experts' routing; a padded
/// vocabulary.
void printModel(const Artifact &a, bool inference, std::ostream &os) {
  os << "model:      " << a.meta("model.family", "(from .mlir)");
  for (const char *key : {"vocab_size", "n_layer", "n_head", "n_embd", "seq_len"}) {
    std::string v = a.meta(std::string("model.") + key);
    if (!v.empty()) os << " " << key << "=" << v;
  }
  os << "\n";
  // A mixture of experts: how each token is routed (dropless, or up to a
  // capacity) and, under expert parallelism, how many experts each rank
  // keeps.
  if (std::string experts = a.meta("model.num_experts"); !experts.empty()) {
    std::string capacity = a.meta("model.moe_capacity_factor");
    os << "experts:    " << experts << " per MoE layer, each token routed to its top "
       << a.meta("model.experts_per_token", "?")
       << (capacity.empty() ? " (dropless)"
                            : " (capacity factor " + capacity + ": at most ⌈" + capacity +
                                  "·N·k/E⌉ of a batch's N·k copies per expert)");
    // A generation step's ranks share the tokens: nothing is exchanged,
    // each computes its experts' rows and an all-reduce adds them.
    if (int64_t ep = groupSize(a, {"ep"}); ep > 1)
      os << "; " << std::stoll(experts) / ep << " on each of the " << ep << " ranks of ep, "
         << (inference ? "each rank computing its experts' rows of every token, added by all-reduce"
                       : "rows exchanged by all-to-all");
    os << "\n";
  }
  if (std::string padded = a.meta("model.padded_vocab_size"); !padded.empty())
    os << "vocabulary: padded to " << padded << " classes inside the artifact (--vocab-multiple "
       << a.meta("vocab_multiple", "?")
       << "); parameters, checkpoints and weight files hold the real ones\n";
}

/// The whole model: every pipeline stage's parameters, each once (a tied
/// embedding/head lives on the first and the last stage), at global shape.
/// A quantized matrix counts as its weights, one tensor, not as the codes
/// and scales that store it.
void printParameterCount(const Artifact &a, const std::vector<Artifact> &stages, std::ostream &os) {
  int64_t total = 0, trainable = 0;
  std::set<std::string> counted;
  auto count = [&](const Artifact &role) {
    const std::map<std::string, QuantizedMatrix> quantized = quantizedMatrices(role);
    const std::map<std::string, std::string> owners = storageOwners(quantized);
    for (const ParameterInfo &p : role.parameters) {
      auto matrix = quantized.find(p.name);
      const bool codes = matrix != quantized.end();
      if ((!codes && owners.count(p.name)) || !counted.insert(p.name).second)
        continue;
      const int64_t n = codes ? matrix->second.weights
                              : elements(p.shard.sharded() ? p.shard.globalShape : p.shape);
      total += n;
      if (p.trainable)
        trainable += n;
    }
  };
  count(a);
  for (const Artifact &stage : stages) count(stage);
  os << "parameters: " << total << " in " << counted.size() << " tensors (" << trainable
     << " trainable)" << (stages.empty() ? "" : ", over all pipeline stages") << "\n";
}

/// A pipelined artifact's schedule, its expected bubble and microbatches
/// in flight.
void printPipeline(const Artifact &a, std::ostream &os) {
  std::string schedule = a.meta("pipeline.schedule");
  if (schedule.empty())
    return;
  std::string inFlight = a.meta("pipeline.in_flight");
  for (char &c : inFlight)
    if (c == ';')
      c = ' ';
  os << "pipeline:   " << schedule << ", " << a.meta("pipeline.stages") << " stages";
  if (a.meta("pipeline.virtual_stages") != "1")
    os << " x " << a.meta("pipeline.virtual_stages") << " chunks";
  os << ", " << a.meta("pipeline.microbatches") << " microbatches, layers "
     << a.meta("pipeline.layout") << "\n"
     << "            expected bubble " << std::fixed << std::setprecision(1)
     << 100.0 * a.metaNumber("pipeline.bubble", 0) << "% (textbook "
     << 100.0 * a.metaNumber("pipeline.analytic_bubble", 0)
     << "%), microbatches in flight per stage: " << inFlight << "\n"
     << std::defaultfloat;
}

/// Each role's memory plan and the activations its layers keep.
void printMemoryPlans(const Artifact &a, const std::vector<Artifact> &stages, std::ostream &os) {
  if (stages.empty()) {
    printMemoryPlan(a, "memory plan (rank " + std::to_string(a.ranks.empty() ? 0 : a.ranks.front()) + ")", os);
    printActivationsPerLayer(a, "activations kept per layer and microbatch", os);
    printAttentionWorkspaces(a, os);
    return;
  }
  printMemoryPlan(a, "memory plan (stage 0: ranks " + rankList(a.ranks) + ")", os);
  for (size_t i = 0; i < stages.size(); ++i)
    printMemoryPlan(stages[i],
                    "memory plan (stage " + std::to_string(i + 1) + ": ranks " +
                        rankList(stages[i].ranks) + ")",
                    os);
  printActivationsPerLayer(a, "activations kept per layer and microbatch, stage 0", os);
  for (size_t i = 0; i < stages.size(); ++i)
    printActivationsPerLayer(
        stages[i], "activations kept per layer and microbatch, stage " + std::to_string(i + 1), os);
}

/// |bytes|, to the nearest byte.
uint64_t roundedBytes(double bytes) { return static_cast<uint64_t>(std::llround(std::abs(bytes))); }

/// The planned parameters, gradients and optimizer state beside ZeRO's
/// formula (Rajbhandari et al.), and what the plan holds beyond it.
void printModelStates(const Artifact &a, std::ostream &os) {
  ModelStates m = modelStates(a);
  if (m.psi <= 0)
    return;
  auto row = [&](const char *name, uint64_t planned, double formula, const std::string &text) {
    double difference = static_cast<double>(planned) - formula;
    os << "  " << std::left << std::setw(15) << name << std::right << std::setw(12)
       << formatBytes(planned) << "   " << std::left << std::setw(12) << text << std::right
       << std::setw(12) << formatBytes(roundedBytes(formula));
    if (std::abs(difference) >= 0.5)
      os << "   " << (difference < 0 ? "-" : "+") << formatBytes(roundedBytes(difference));
    os << "\n";
  };
  auto term = [](int bytes, bool sharded) {
    return std::to_string(bytes) + (sharded ? "Ψ/N" : "Ψ");
  };
  os << "model states (ZeRO stage " << m.stage << ", N = " << m.groupSize << ", Ψ = " << m.psi
     << " trainable parameters per model-parallel rank)\n"
     << "  formula: " << m.policy << "\n"
     << "                      planned   formula                 planned - formula\n";
  row("parameters", m.plannedParams, m.formulaParams(), term(m.paramBytes, m.stage >= 3));
  row("gradients", m.plannedGradients, m.formulaGradients(), term(m.gradBytes, m.stage >= 2));
  row("optimizer", m.plannedOptimizer, m.formulaOptimizer(), term(m.optimizerBytes, m.stage >= 1));
  row("total", m.plannedParams + m.plannedGradients + m.plannedOptimizer,
      m.formulaParams() + m.formulaGradients() + m.formulaOptimizer(), m.formula());
  bool any = false;
  auto item = [&](const std::string &state, double bytes, const std::string &what) {
    if (!any)
      os << "  planned beyond the formula, term by term:\n";
    any = true;
    os << "    " << std::left << std::setw(11) << state << std::right << std::setw(12)
       << (bytes < 0 ? "-" : "+") + formatBytes(roundedBytes(bytes)) << "  " << what << "\n";
  };
  for (const ModelStates::Extra &e : m.extras) item(e.state, e.bytes, e.what);
  for (const char *state : {"parameters", "gradients", "optimizer"})
    if (double rest = m.unexplained(state); std::abs(rest) >= 1024)
      item(state, rest, "not itemized");
  if (m.plannedFrozen)
    os << "  " << std::left << std::setw(15) << "frozen params" << std::right << std::setw(12)
       << formatBytes(m.plannedFrozen) << "   (not trained: outside Ψ)\n";
}

/// Each program's instructions, buffers and transient peak.
void printPrograms(const Artifact &a, std::ostream &os) {
  os << "programs:\n";
  for (const ProgramInfo &p : a.programs) {
    std::map<std::string, int> kinds;
    for (const InstructionInfo &inst : p.instructions)
      kinds[inst.kind == InstructionKind::Kernel ? "kernels" : "communication"]++;
    os << "  " << std::left << std::setw(12) << p.name << std::right << std::setw(6)
       << p.instructions.size() << " instructions (" << kinds["kernels"] << " kernels, "
       << kinds["communication"] << " communication), " << p.buffers.size()
       << " buffers, transient peak " << formatBytes(p.peakBytes);
    if (p.liveBytesBound)
      os << " (live-bytes bound " << formatBytes(p.liveBytesBound) << ")";
    os << "\n";
    printHostTraffic(p, os);
  }
}

} // namespace

bool inspectArtifact(const std::string &path, std::ostream &os, std::string &error) {
  Artifact a;
  std::vector<Artifact> stages; // pipeline: every other role, for its plan
  try {
    a = loadArtifact(path);
    for (size_t i = 1; i < a.roles.size(); ++i)
      stages.push_back(loadArtifact(path, a.roles[i].ranks.front()));
    // Every role's programs are proven race-free, as llmc-run does before
    // running them (here also for a GPU artifact on a machine without one).
    checkStreams(a);
    for (const Artifact &stage : stages) checkStreams(stage);
  } catch (const std::exception &e) {
    error = e.what();
    return false;
  }
  const bool inference = !a.meta("inference.max_batch").empty();
  printHeader(a, path, os);
  printModel(a, inference, os);
  if (inference)
    os << "precision:  " << a.meta("precision") << "\n";
  else
    printTraining(a, os);
  printParameterCount(a, stages, os);
  printQuantizedWeights(a, os);
  printPipeline(a, os);
  printProgramWork(a, os);
  printMemoryPlans(a, stages, os);
  if (inference) {
    printInference(a, os);
    printWeightsPerLayer(a, os);
  } else {
    printModelStates(a, os);
  }
  printPrograms(a, os);
  return true;
}

} // namespace llmc
