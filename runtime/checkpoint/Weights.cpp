//===- Weights.cpp - parameters from a safetensors file -------------------===//

#include "runtime/checkpoint/Weights.h"
#include "common/Half.h"

#include "runtime/Sharding.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/checkpoint/CheckpointReader.h"
#include "runtime/checkpoint/HuggingFace.h"
#include "runtime/checkpoint/Safetensors.h"
#include "runtime/quant/QuantizedFile.h"
#include "runtime/support/Error.h"

#include <cstring>
#include <fstream>
#include <map>
#include <set>

namespace llmc {
namespace {

/// Writes this rank's piece of the global tensor `global` into `data`.
void fillPiece(const FloatTensor &global, void *data, DType dtype, const ShardMap &map, int rank,
               const std::string &name) {
  std::vector<int> positions = map.positions(rank);
  const int64_t n = map.localNumel();
  // Padding (past the end of a padded split) holds zero.
  auto at = [&](int64_t i) -> float {
    int64_t g = map.toGlobal(positions, i);
    return g < 0 ? 0.0f : global.data[g];
  };
  switch (dtype) {
  case DType::F32:
    for (int64_t i = 0; i < n; ++i)
      static_cast<float *>(data)[i] = at(i);
    break;
  case DType::BF16:
    for (int64_t i = 0; i < n; ++i)
      static_cast<uint16_t *>(data)[i] = floatToBf16(at(i));
    break;
  case DType::F16:
    for (int64_t i = 0; i < n; ++i)
      static_cast<uint16_t *>(data)[i] = half::fromFloat(at(i));
    break;
  case DType::F64:
    for (int64_t i = 0; i < n; ++i)
      static_cast<double *>(data)[i] = at(i);
    break;
  case DType::U8: // quantized storage's codes, read back exactly
    for (int64_t i = 0; i < n; ++i)
      static_cast<uint8_t *>(data)[i] = static_cast<uint8_t>(at(i));
    break;
  case DType::I32: // zero points (levels of at most 8 bits): exact in fp32
    for (int64_t i = 0; i < n; ++i)
      static_cast<int32_t *>(data)[i] = static_cast<int32_t>(at(i));
    break;
  default: fail("parameter '", name, "': cannot load dtype ", dtypeName(dtype));
  }
}

/// A checkpoint tensor's values as fp32: a float tensor widened, quantized
/// storage's u8 codes and i32 zero points exactly (fillPiece narrows them
/// back).
std::vector<float> checkpointValues(const GlobalTensor &t, const std::string &name) {
  if (!isQuantizedStorage(name) || (t.dtype != DType::U8 && t.dtype != DType::I32))
    return floatValues(t, name);
  const size_t n = t.bytes.size() / dtypeSize(t.dtype);
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    int32_t level = t.bytes[i];
    if (t.dtype == DType::I32)
      std::memcpy(&level, t.bytes.data() + 4 * i, 4);
    out[i] = static_cast<float>(level);
  }
  return out;
}

/// The input of kernel `inst` that is a weight's quantized codes
/// (`<weight>.qweight`), or -1 for a kernel that reads none.
int codesInput(const ProgramInfo &program, const InstructionInfo &inst) {
  int index = -1;
  if (inst.kind == InstructionKind::Kernel &&
      (inst.kernel == "matmul_int" || inst.kernel == "matmul_nf4"))
    index = 1;
  if (inst.kind == InstructionKind::Kernel && inst.kernel == "qat_dequantize_nf4")
    index = 0;
  if (index < 0 || static_cast<int>(inst.inputs.size()) <= index)
    return -1;
  const std::string &name = program.buffers[inst.inputs[index]].name;
  const std::string suffix = ".qweight";
  if (name.size() <= suffix.size() ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return -1;
  return index;
}

/// The shape of the whole weight whose storage `inst` reads through its
/// codes, input `codes`: the file's weight.
std::vector<int64_t> storedWeightShape(const ProgramInfo &program, const InstructionInfo &inst,
                                       int codes) {
  const bool nf4 = inst.kernel != "matmul_int";
  std::vector<int64_t> shape = inst.kernel == "qat_dequantize_nf4"
                                   ? program.buffers[inst.outputs[0]].shape
                                   : inst.attrs.getInts("weight_shape"); // this rank's piece
  // Storage split by tensor parallelism is [rows, bytes per row]: the
  // whole weight's shape follows from its global shape.
  const BufferInfo &codesBuffer = program.buffers[inst.inputs[codes]];
  std::vector<int64_t> stored = globalShapeOf(codesBuffer);
  const int64_t perByte = nf4 || inst.attrs.getInt("bits", 8) == 4 ? 2 : 1;
  if (stored.size() == 2)
    return {stored[0], stored[1] * perByte};
  // NF4 codes of a head padded along its rows (llmc-pad-vocab) are the real
  // weight's, two per byte, padded at their end: the file's weight has the
  // real rows.
  if (nf4 && codesBuffer.shard.sharded() && shape.size() == 2)
    shape[0] = stored[0] * 2 / shape[1];
  return shape;
}

/// The scheme of the storage kernel `inst` reads.
quant::Scheme storedScheme(const InstructionInfo &inst) {
  const KernelAttrs &a = inst.attrs;
  int64_t block = a.getInt("block", 0);
  if (inst.kernel != "matmul_int")
    return quant::makeScheme(quant::Format::Nf4, quant::Granularity::Block, 0, block);
  quant::Format format = a.getInt("bits") == 8 ? quant::Format::Int8 : quant::Format::Int4;
  int64_t axis = a.getInt("channel_axis", -1);
  return quant::makeScheme(format,
                           block > 0   ? quant::Granularity::Block
                           : axis >= 0 ? quant::Granularity::Channel
                                       : quant::Granularity::Tensor,
                           std::max<int64_t>(axis, 0), block,
                           /*symmetric=*/inst.inputs.size() < 4);
}

/// For each weight the programs read in quantized storage (matmul_int,
/// matmul_nf4 and QLoRA's qat_dequantize_nf4, through `<weight>.qweight`),
/// the record `llmc quantize` writes for that scheme and shape
/// (runtime/quant/QuantizedFile.h).
std::map<std::string, std::string> storedSchemes(const Artifact &artifact) {
  std::map<std::string, std::string> schemes;
  for (const ProgramInfo &program : artifact.programs)
    for (const InstructionInfo &inst : program.instructions) {
      int codes = codesInput(program, inst);
      if (codes < 0)
        continue;
      quant::QuantizedTensor q;
      q.shape = storedWeightShape(program, inst, codes);
      q.scheme = storedScheme(inst);
      q.doubleQuant = inst.kernel != "matmul_int";
      const std::string &name = program.buffers[inst.inputs[codes]].name;
      schemes[name.substr(0, name.size() - std::strlen(".qweight"))] = quantizedRecord(q);
    }
  return schemes;
}

} // namespace

WeightsLoaded loadWeights(const std::string &path, const Artifact &artifact, const Arena &arena,
                          int rank) {
  if (!std::ifstream(path))
    fail("--weights: cannot open '", path, "'");
  // A directory is an llmc checkpoint when it has a `latest` step and no
  // config.json (its latest step, saved under any layout), else a Hugging
  // Face model (its tensors under HF's names).
  std::unique_ptr<HuggingFaceModel> hf;
  std::unique_ptr<CheckpointReader> checkpoint;
  std::unique_ptr<SafetensorsFile> plain;
  if (isDirectory(path) && !std::ifstream(path + "/config.json") &&
      std::ifstream(path + "/latest"))
    checkpoint = std::make_unique<CheckpointReader>(path);
  else if (isDirectory(path))
    hf = std::make_unique<HuggingFaceModel>(path, artifact);
  else
    plain = std::make_unique<SafetensorsFile>(path);
  WeightsLoaded loaded;
  // One tensor at a time: read (dequantized when stored quantized), fill
  // this rank's piece of it, and of its fp32 master copy when mixed
  // precision keeps one, then drop it.
  std::map<std::string, const BufferInfo *> masters;
  for (const BufferInfo *b : persistentBuffers(artifact, "optim"))
    if (b->name.rfind("master/", 0) == 0)
      masters[b->name.substr(7)] = b;
  auto read = [&](const std::string &name, const std::vector<int64_t> &shape, FloatTensor &t) {
    if (checkpoint) {
      if (!checkpoint->has(name))
        return false;
      GlobalTensor global = checkpoint->readParameter(name);
      t.data = checkpointValues(global, name);
      if (!storedShapeFits(name, global.shape, shape))
        fail(checkpoint->stepDir(), ": tensor '", name, "' is ", shapeList(global.shape),
             " but the model needs ", shapeList(shape));
      t.shape = shape;
      return true;
    }
    std::string stored = name;
    const SafetensorsFile *file = hf ? hf->find(name, stored) : plain.get();
    if (!file || !readFloatTensor(*file, stored, t))
      return false;
    // Quantized storage is flat in the file and may be shaped after its
    // weight in the model (split by tensor parallelism).
    if (storedShapeFits(name, t.shape, shape))
      t.shape = shape;
    if (t.shape != shape)
      fail(file->path(), ": tensor '", stored, "' is ", shapeList(t.shape),
           " but the model needs ", shapeList(shape), " for '", name, "'");
    return true;
  };
  auto fill = [&](const FloatTensor &t, const BufferInfo &b) {
    fillPiece(t, arena.base() + b.offset, b.dtype, ShardMap(b.shard, b.shape, artifact.mesh),
              rank, b.name);
  };
  // A weight the model keeps quantized (--weight-quant, --qlora) is read
  // from its storage tensors, which only a file quantized with the same
  // scheme has.
  const std::map<std::string, std::string> schemes = storedSchemes(artifact);
  auto schemeOf = [&](const std::string &weight) {
    auto it = schemes.find(weight);
    std::string record = it == schemes.end() ? "" : it->second;
    return record.substr(0, record.find(' '));
  };
  // A tied head's table is quantized only when the lookup's reads count.
  auto quantizeHint = [&](const std::string &weight) {
    return "llmc quantize <ckpt> --model ... --scheme " + schemeOf(weight) +
           (lookupReads(artifact, weight) ? " --ops matmul,embedding" : "") + " -o q.safetensors";
  };
  auto fullPrecisionRefusal = [&](const std::string &weight) {
    fail(path, ": tensor '", weight, "' is in full precision, but the model stores it quantized (",
         schemeOf(weight), "); quantize the weights first: ", quantizeHint(weight));
  };
  auto checkScheme = [&](const std::string &weight) {
    auto expected = schemes.find(weight);
    if (expected == schemes.end())
      return;
    auto record = plain->metadata().find(weight);
    if (record == plain->metadata().end())
      fail(path, ": tensor '", weight, ".qweight' has no record of its scheme in the metadata");
    if (record->second != expected->second)
      fail(path, ": '", weight, "' is stored as ", record->second, ", but the model reads it as ",
           expected->second, " (compile with the file's scheme, or ", quantizeHint(weight), ")");
  };
  // A checkpoint of another model (more layers, other names) is refused
  // rather than loaded in part.
  if (checkpoint) {
    std::set<std::string> parameters;
    for (const BufferInfo *p : persistentBuffers(artifact, "param"))
      parameters.insert(p->name);
    for (const std::string &name : checkpoint->parameterNames())
      if (!parameters.count(name)) {
        if (parameters.count(name + ".qweight"))
          fullPrecisionRefusal(name);
        fail(checkpoint->stepDir(), ": tensor '", name,
             "' is not a parameter of this model (a checkpoint of another model?)");
      }
  }
  for (const BufferInfo *p : persistentBuffers(artifact, "param")) {
    const std::string suffix = ".qweight";
    const bool storage = p->name.size() > suffix.size() &&
                         p->name.compare(p->name.size() - suffix.size(), suffix.size(), suffix) == 0;
    const std::string weight = storage ? p->name.substr(0, p->name.size() - suffix.size()) : "";
    // The scheme first: storage of another scheme is also of other sizes.
    if (storage && plain && plain->find(p->name))
      checkScheme(weight);
    FloatTensor t;
    if (!read(p->name, globalShapeOf(*p), t)) {
      if (storage && plain && plain->find(weight))
        fullPrecisionRefusal(weight);
      // A LoRA adapter a base model's file lacks keeps its initial value,
      // as checkpoint restore does.
      if (!isAdapterTensor(p->name))
        fail(path, ": no tensor '", hf ? huggingFaceName(hf->family(), p->name) : p->name,
             "' (a parameter of the model)");
      ++loaded.freshAdapters;
      continue;
    }
    ++loaded.tensors;
    loaded.dequantized += t.scheme.empty() ? 0 : 1;
    fill(t, *p);
    if (auto master = masters.find(p->name); master != masters.end())
      fill(t, *master->second);
  }
  // Observer states (activation ranges) come along when the file has them.
  for (const BufferInfo *b : persistentBuffers(artifact, "optim")) {
    FloatTensor t;
    if (b->name.rfind("qat_state/", 0) != 0 || !read(b->name, globalShapeOf(*b), t))
      continue;
    fill(t, *b);
    ++loaded.observers;
  }
  return loaded;
}

} // namespace llmc
