//===- Weights.cpp - parameters from a safetensors file -------------------===//

#include "runtime/checkpoint/Weights.h"
#include "common/Half.h"

#include "runtime/Init.h"
#include "runtime/Sharding.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/checkpoint/CheckpointReader.h"
#include "runtime/checkpoint/HuggingFace.h"
#include "runtime/checkpoint/Safetensors.h"
#include "runtime/quant/QuantizedFile.h"
#include "runtime/quant/StoredWeights.h"
#include "runtime/support/Error.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <set>

namespace llmc {
namespace {

/// Writes `n` values, value(i) for i < n, into `data` as `dtype`, on
/// every thread (value reads a mapped file or a tensor, never writes).
template <typename Value>
void convertInto(Value value, int64_t n, void *data, DType dtype, const std::string &name) {
  switch (dtype) {
  case DType::F32:
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) static_cast<float *>(data)[i] = value(i);
    break;
  case DType::BF16:
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) static_cast<uint16_t *>(data)[i] = floatToBf16(value(i));
    break;
  case DType::F16:
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) static_cast<uint16_t *>(data)[i] = half::fromFloat(value(i));
    break;
  case DType::F64:
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) static_cast<double *>(data)[i] = value(i);
    break;
  case DType::U8: // quantized storage's codes, read back exactly
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i)
      static_cast<uint8_t *>(data)[i] = static_cast<uint8_t>(value(i));
    break;
  case DType::I32: // zero points (levels of at most 8 bits): exact in fp32
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i)
      static_cast<int32_t *>(data)[i] = static_cast<int32_t>(value(i));
    break;
  default: fail("parameter '", name, "': cannot load dtype ", dtypeName(dtype));
  }
}

/// Calls `body` with a function giving element i of `count` stored values
/// of `dtype` at `bytes` as fp32: floats widened (f64 rounded), quantized
/// storage's u8 codes and i32 zero points exactly (convertInto narrows
/// them back). The bytes need not be aligned.
template <typename Body>
void withStoredValues(const uint8_t *bytes, DType dtype, const std::string &where, Body body) {
  auto load = [bytes](auto type, int64_t i) {
    decltype(type) v;
    std::memcpy(&v, bytes + sizeof(v) * i, sizeof(v));
    return v;
  };
  switch (dtype) {
  case DType::F32: return body([&](int64_t i) { return load(float{}, i); });
  case DType::BF16: return body([&](int64_t i) { return bf16ToFloat(load(uint16_t{}, i)); });
  case DType::F16: return body([&](int64_t i) { return half::toFloat(load(uint16_t{}, i)); });
  case DType::F64: return body([&](int64_t i) { return static_cast<float>(load(double{}, i)); });
  case DType::U8: return body([&](int64_t i) { return static_cast<float>(bytes[i]); });
  case DType::I32: return body([&](int64_t i) { return static_cast<float>(load(int32_t{}, i)); });
  default:
    fail(where, " is ", safetensorsDType(dtype),
         "; parameters load from F32, BF16, F16, F64, U8 or I32");
  }
}

/// Writes this rank's piece of a global tensor, whose element g is
/// global(g), into `data`: only the piece's elements are read.
template <typename Global>
void fillPieceWith(Global global, void *data, DType dtype, const ShardMap &map, int rank,
                   const std::string &name) {
  // A whole tensor: the piece is the tensor.
  if (map.parts().empty())
    return convertInto(global, map.localNumel(), data, dtype, name);
  std::vector<int> positions = map.positions(rank);
  // Padding (past the end of a padded split) holds zero.
  convertInto(
      [&](int64_t i) -> float {
        int64_t g = map.toGlobal(positions, i);
        return g < 0 ? 0.0f : global(g);
      },
      map.localNumel(), data, dtype, name);
}

/// Writes this rank's piece of the global tensor `global` into `data`.
void fillPiece(const FloatTensor &global, void *data, DType dtype, const ShardMap &map, int rank,
               const std::string &name) {
  fillPieceWith([&](int64_t g) { return global.data[g]; }, data, dtype, map, rank, name);
}

/// Writes this rank's piece of the tensor `stored` views in a mapped file
/// into `data`, converting element by element: the rank reads only its
/// piece's pages of the file.
void fillPieceFromView(const SafeTensor &stored, const std::string &where, void *data, DType dtype,
                       const ShardMap &map, int rank, const std::string &name) {
  withStoredValues(static_cast<const uint8_t *>(stored.data), stored.dtype, where,
                   [&](auto value) { fillPieceWith(value, data, dtype, map, rank, name); });
}

/// `record` with its shape read as the 2-D view its storage is: a stack of
/// experts' matrices [G, A, B], quantized expert after expert, is the bytes
/// of [G · A, B], so a file's record of either shape fits either.
std::string storageView(const std::string &record) {
  const size_t at = record.find(" shape=");
  if (at == std::string::npos)
    return record;
  const size_t begin = at + 7, end = std::min(record.find(' ', begin), record.size());
  std::vector<std::string> dims;
  for (size_t i = begin; i < end;) {
    size_t x = std::min(record.find('x', i), end);
    dims.push_back(record.substr(i, x - i));
    i = x + 1;
  }
  if (dims.size() <= 2)
    return record;
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < dims.size(); ++d) rows *= std::atoll(dims[d].c_str());
  return record.substr(0, begin) + std::to_string(rows) + "x" + dims.back() + record.substr(end);
}

/// The scheme of the storage kernel `inst` reads: a mixture of experts'
/// stacked (each expert's channel axis, within its slice, one further in
/// the stack).
quant::Scheme storedScheme(const InstructionInfo &inst) {
  const KernelAttrs &a = inst.attrs;
  int64_t block = a.getInt("block", 0);
  if (!readsIntStorage(inst.kernel))
    return quant::makeScheme(quant::Format::Nf4, quant::Granularity::Block, 0, block);
  quant::Format format = a.getInt("fp8", 0) != 0 ? quant::Format::Fp8E4M3
                         : a.getInt("bits") == 8 ? quant::Format::Int8
                                                 : quant::Format::Int4;
  const bool experts = readsExperts(inst.kernel);
  int64_t axis = a.getInt("channel_axis", -1);
  quant::Scheme s =
      quant::makeScheme(format,
                        block > 0   ? quant::Granularity::Block
                        : axis >= 0 ? quant::Granularity::Channel
                                    : quant::Granularity::Tensor,
                        std::max<int64_t>(axis, 0) + (experts && axis >= 0 ? 1 : 0), block,
                        /*symmetric=*/inst.inputs.size() < (experts ? 5u : 4u));
  s.stacked = experts;
  return s;
}

/// For each weight the programs read in quantized storage (matmul_int,
/// matmul_nf4, their grouped forms over experts and QLoRA's
/// qat_dequantize_nf4, through `<weight>.qweight`),
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
      q.shape = storedWeightShape(program, inst, codes, artifact.mesh);
      q.scheme = storedScheme(inst);
      q.doubleQuant = readsIntStorage(inst.kernel)
                          ? quant::DoubleQuant::None
                          : quant::doubleQuantOf(static_cast<quant::AbsmaxFormat>(
                                inst.attrs.getInt("absmax_format", 0)));
      const std::string &name = program.buffers[inst.inputs[codes]].name;
      schemes[name.substr(0, name.size() - std::strlen(".qweight"))] = quantizedRecord(q);
    }
  return schemes;
}

/// Where `buffers`' one buffer starts in `view`, in elements, when it can
/// be read in place: a parameter (not a master copy beside it, not
/// optimizer state) in the file's dtype, the whole tensor in the file, at
/// an address aligned to its element, whose piece (`map`, `rank`) is one
/// run of the tensor: held whole, or split along its leading dimensions
/// only (column-parallel rows, a vocabulary-parallel table); else -1.
int64_t inPlaceStart(const SafeTensor &view, std::initializer_list<const BufferInfo *> buffers,
                     const ShardMap &map, int rank) {
  const BufferInfo &b = **buffers.begin();
  if (buffers.size() > 1 && *(buffers.begin() + 1))
    return -1;
  const size_t element = dtypeSize(b.dtype);
  int64_t wholeNumel = 1;
  for (int64_t d : map.globalShape()) wholeNumel *= d;
  if (b.category != "param" || view.dtype != b.dtype ||
      view.bytes != static_cast<size_t>(wholeNumel) * element ||
      reinterpret_cast<uintptr_t>(view.data) % element != 0)
    return -1;
  if (!b.shard.sharded())
    return 0;
  // A piece's elements, in order, are increasing indices of the whole
  // (a block of a row-major array): one run when its ends are n − 1 apart
  // and no padding ends it (toGlobal −1). Inner points are checked too.
  const int64_t n = map.localNumel();
  if (n <= 0 || static_cast<size_t>(n) * element != b.bytes())
    return -1;
  const std::vector<int> at = map.positions(rank);
  const int64_t first = map.toGlobal(at, 0);
  for (int64_t i : {n - 1, n / 2, n / 4, 3 * (n / 4)})
    if (first < 0 || map.toGlobal(at, i) != first + i)
      return -1;
  return first;
}

/// A mixture of experts' stacked parameter `name` of global shape `shape`
/// from a Hugging Face directory's per-expert tensors (expertSliceNames):
/// assembled in memory, one parameter at a time, and handed to `fill` as
/// one tensor. False for any other parameter, or when the directory has no
/// slice of it; throws naming a missing slice, or one of another shape or
/// dtype.
template <typename Fill>
bool loadExpertSlices(const HuggingFaceModel &hf, const std::string &name,
                      const std::vector<int64_t> &shape, Fill fill) {
  std::vector<std::string> slices =
      expertSliceNames(hf.family(), name, shape.empty() ? 0 : shape[0]);
  if (slices.empty() || !hf.findTensor(slices[0]))
    return false;
  const std::vector<int64_t> sliceShape(shape.begin() + 1, shape.end());
  SafeTensor whole{name, DType::F32, shape, nullptr, 0};
  std::vector<uint8_t> bytes;
  for (size_t e = 0; e < slices.size(); ++e) {
    const std::string &slice = slices[e];
    const SafetensorsFile *file = hf.findTensor(slice);
    if (!file)
      fail("--weights: no tensor '", slice, "' (expert ", e, " of '", name, "')");
    const SafeTensor *view = file->find(slice);
    if (view->shape != sliceShape)
      fail(file->path(), ": tensor '", slice, "' is ", shapeList(view->shape),
           " but the model needs ", shapeList(sliceShape), " for each expert of '", name, "'");
    if (view->e4m3)
      fail(file->path(), ": tensor '", slice,
           "' is F8_E4M3; parameters load from F32, BF16, F16 or F64");
    if (e == 0)
      whole.dtype = view->dtype;
    else if (view->dtype != whole.dtype)
      fail(file->path(), ": tensor '", slice, "' is ", dtypeName(view->dtype), ", expert 0 of '",
           name, "' ", dtypeName(whole.dtype));
    const auto *data = static_cast<const uint8_t *>(view->data);
    bytes.insert(bytes.end(), data, data + view->bytes);
    file->release(*view);
  }
  whole.data = bytes.data();
  whole.bytes = bytes.size();
  fill(whole, "--weights: the experts of '" + name + "'");
  return true;
}

/// Loads one source of weights into a rank's arena: an llmc checkpoint
/// (a directory with a `latest` step and no config.json: its latest step,
/// saved under any layout), a Hugging Face model (a directory: tensors under
/// HF's names) or one safetensors file.
class WeightsLoader {
public:
  WeightsLoader(const std::string &path, const Artifact &artifact, const Arena &arena, int rank,
                WeightsInPlace *inPlace)
      : path(path), artifact(artifact), arena(arena), rank(rank), inPlace(inPlace),
        absmaxFormat(nf4AbsmaxFormat(artifact)), schemes(storedSchemes(artifact)) {
    if (isDirectory(path) && !std::ifstream(path + "/config.json") &&
        std::ifstream(path + "/latest"))
      checkpoint = std::make_unique<CheckpointReader>(path);
    else if (isDirectory(path))
      hf = std::make_unique<HuggingFaceModel>(path, artifact);
    else
      plain = std::make_unique<SafetensorsFile>(path);
    for (const BufferInfo *b : persistentBuffers(artifact, "optim"))
      if (b->name.rfind("master/", 0) == 0)
        masters[b->name.substr(7)] = b;
  }

  WeightsLoaded run() {
    WeightsLoaded loaded;
    if (checkpoint)
      refuseForeignCheckpoint();
    loadParameters(loaded);
    // Observer states (activation ranges) come along when the file has them.
    for (const BufferInfo *b : persistentBuffers(artifact, "optim")) {
      bool dequantized = false;
      if (b->name.rfind("qat_state/", 0) == 0 && load(b->name, {b}, dequantized))
        ++loaded.observers;
    }
    if (inPlace && !inPlace->ranges.empty()) {
      if (hf)
        inPlace->files.push_back(std::shared_ptr<const void>(std::move(hf)));
      if (plain)
        inPlace->files.push_back(std::shared_ptr<const void>(std::move(plain)));
    }
    return loaded;
  }

private:
  using Buffers = std::initializer_list<const BufferInfo *>;

  ShardMap pieceMap(const BufferInfo &b) const { return ShardMap(b.shard, b.shape, artifact.mesh); }

  /// NF4 absmax levels load as bytes, in the model's format; no other
  /// tensor may be stored as E4M3.
  void checkE4m3(const SafeTensor &view, const std::string &file, const std::string &name) const {
    const bool levels = isNf4AbsmaxLevels(name);
    if (view.e4m3 && !levels)
      fail(file, ": tensor '", view.name,
           "' is F8_E4M3, which llmc reads only as NF4's absmax levels ('<weight>.absmax_q')");
    if (levels)
      checkAbsmaxFormat(view.e4m3 ? quant::AbsmaxFormat::Fp8E4M3 : quant::AbsmaxFormat::Int8,
                        absmaxFormat, file, view.name);
  }

  /// A checkpoint's pieces are gathered per buffer from the saved pieces
  /// that hold them: a rank reads its own rows of the files, nothing else.
  void fillFromCheckpoint(const std::string &name, const BufferInfo &b) const {
    std::string source = checkpoint->parameterSource(name);
    DType dtype = DType::F32;
    std::vector<int64_t> saved;
    checkpoint->describe(source, dtype, saved);
    if (!storedShapeFits(name, saved, globalShapeOf(b)))
      fail(checkpoint->stepDir(), ": tensor '", name, "' is ", shapeList(saved),
           " but the model needs ", shapeList(globalShapeOf(b)));
    const bool codes = isQuantizedStorage(name) && (dtype == DType::U8 || dtype == DType::I32);
    if (!codes && dtype != DType::F32 && dtype != DType::BF16 && dtype != DType::F16)
      fail("checkpoint tensor '", source, "' is ", dtypeName(dtype), ", not a float tensor");
    if (isNf4AbsmaxLevels(name))
      checkAbsmaxFormat(checkpoint->absmaxFormat(source), absmaxFormat, checkpoint->stepDir(),
                        source);
    ShardMap map = pieceMap(b);
    std::vector<uint8_t> piece = checkpoint->readPiece(source, saved, map, map.positions(rank));
    withStoredValues(
        piece.data(), dtype, checkpoint->stepDir() + ": tensor '" + source + "'", [&](auto value) {
          convertInto(value, map.localNumel(), arena.base() + b.offset, b.dtype, b.name);
        });
  }

  /// Fills `buffers` (a parameter and, where mixed precision keeps one,
  /// its fp32 master copy; null entries skipped) with tensor `name`, each
  /// with this rank's piece; false when the source lacks it.
  bool load(const std::string &name, Buffers buffers, bool &dequantized) {
    dequantized = false;
    if (checkpoint) {
      if (!checkpoint->has(name))
        return false;
      for (const BufferInfo *b : buffers)
        if (b)
          fillFromCheckpoint(name, *b);
      return true;
    }
    const std::vector<int64_t> shape = globalShapeOf(**buffers.begin());
    if (hf &&
        loadExpertSlices(*hf, name, shape, [&](const SafeTensor &whole, const std::string &where) {
          for (const BufferInfo *b : buffers)
            if (b)
              fillPieceFromView(whole, where, arena.base() + b->offset, b->dtype, pieceMap(*b),
                                rank, b->name);
        }))
      return true;
    std::string stored = name;
    const SafetensorsFile *file = hf ? hf->find(name, stored) : plain.get();
    return file && loadFromFile(*file, name, stored, buffers, dequantized);
  }

  /// load() from one safetensors file holding `name` as `stored`. A plain
  /// tensor is converted from the mapping straight into each buffer's
  /// piece (or used in place); one stored quantized is dequantized whole.
  bool loadFromFile(const SafetensorsFile &file, const std::string &name, const std::string &stored,
                    Buffers buffers, bool &dequantized) {
    const std::vector<int64_t> shape = globalShapeOf(**buffers.begin());
    // Quantized storage is flat in the file and may be shaped after its
    // weight in the model (split by tensor parallelism).
    auto checkShape = [&](const std::vector<int64_t> &have) {
      if (!storedShapeFits(name, have, shape))
        fail(file.path(), ": tensor '", stored, "' is ", shapeList(have), " but the model needs ",
             shapeList(shape), " for '", name, "'");
    };
    if (file.find(stored + ".qweight")) {
      FloatTensor t;
      readFloatTensor(file, stored, t);
      checkShape(t.shape);
      for (const BufferInfo *b : buffers)
        if (b)
          fillPiece(t, arena.base() + b->offset, b->dtype, pieceMap(*b), rank, b->name);
      dequantized = true;
      return true;
    }
    const SafeTensor *view = file.find(stored);
    if (!view)
      return false;
    checkShape(view->shape);
    checkE4m3(*view, file.path(), name);
    if (inPlace) {
      const BufferInfo &b = **buffers.begin();
      const int64_t first = inPlaceStart(*view, buffers, pieceMap(b), rank);
      if (first >= 0) {
        const auto *data = static_cast<const uint8_t *>(view->data) + first * dtypeSize(b.dtype);
        inPlace->ranges.push_back({b.offset, b.bytes(), data});
        return true; // its pages stay mapped; a rank touches only its piece's
      }
    }
    for (const BufferInfo *b : buffers)
      if (b)
        fillPieceFromView(*view, file.path() + ": tensor '" + stored + "'",
                          arena.base() + b->offset, b->dtype, pieceMap(*b), rank, b->name);
    file.release(*view);
    return true;
  }

  /// The scheme a weight the model keeps quantized (--weight-quant,
  /// --qlora) is stored in; its storage tensors load only from a file
  /// quantized with the same scheme.
  std::string schemeOf(const std::string &weight) const {
    auto it = schemes.find(weight);
    std::string record = it == schemes.end() ? "" : it->second;
    return record.substr(0, record.find(' '));
  }

  /// The `llmc quantize` line that writes what the model reads. A tied
  /// head's table is quantized only when the lookup's reads count.
  std::string quantizeHint(const std::string &weight) const {
    auto it = schemes.find(weight);
    const bool fp8 =
        it != schemes.end() && it->second.find("double_quant=fp8") != std::string::npos;
    return "llmc quantize <ckpt> --model ... --scheme " + schemeOf(weight) +
           (fp8 ? " --double-quant fp8" : "") +
           (lookupReads(artifact, weight) ? " --ops matmul,embedding" : "") + " -o q.safetensors";
  }

  [[noreturn]] void refuseFullPrecision(const std::string &weight) const {
    fail(path, ": tensor '", weight, "' is in full precision, but the model stores it quantized (",
         schemeOf(weight), "); quantize the weights first: ", quantizeHint(weight));
  }

  /// A quantized weight's record in the file's metadata must be the
  /// model's scheme.
  void checkScheme(const std::string &weight) const {
    auto expected = schemes.find(weight);
    if (expected == schemes.end())
      return;
    auto record = plain->metadata().find(weight);
    if (record == plain->metadata().end())
      fail(path, ": tensor '", weight, ".qweight' has no record of its scheme in the metadata");
    // Records that differ only in their absmax levels' format name the flag.
    auto levelsOf = [](const std::string &text) {
      return text.find("double_quant=fp8") != std::string::npos ? "fp8" : "int8";
    };
    auto rest = [](const std::string &text) { return text.substr(0, text.find(" double_quant=")); };
    const std::string compileHint =
        rest(record->second) == rest(expected->second)
            ? std::string("compile with --double-quant ") + levelsOf(record->second)
            : "compile with the file's scheme";
    if (storageView(record->second) != storageView(expected->second))
      fail(path, ": '", weight, "' is stored as ", record->second, ", but the model reads it as ",
           expected->second, " (", compileHint, ", or ", quantizeHint(weight), ")");
  }

  /// A checkpoint of another model (more layers, other names) is refused
  /// rather than loaded in part. The model is every role's parameters: a
  /// pipeline stage reads its own from a checkpoint of them all.
  void refuseForeignCheckpoint() const {
    const std::map<std::string, std::vector<int64_t>> parameters = modelParameters(artifact);
    for (const std::string &name : checkpoint->parameterNames())
      if (!parameters.count(name)) {
        if (parameters.count(name + ".qweight"))
          refuseFullPrecision(name);
        fail(checkpoint->stepDir(), ": tensor '", name,
             "' is not a parameter of this model (a checkpoint of another model?)");
      }
  }

  /// Every parameter, one tensor at a time.
  void loadParameters(WeightsLoaded &loaded) {
    const std::string suffix = ".qweight";
    for (const BufferInfo *p : persistentBuffers(artifact, "param")) {
      const bool storage =
          p->name.size() > suffix.size() &&
          p->name.compare(p->name.size() - suffix.size(), suffix.size(), suffix) == 0;
      const std::string weight = storage ? p->name.substr(0, p->name.size() - suffix.size()) : "";
      // The scheme first: storage of another scheme is also of other sizes.
      if (storage && plain && plain->find(p->name))
        checkScheme(weight);
      auto master = masters.find(p->name);
      bool dequantized = false;
      if (!load(p->name, {p, master == masters.end() ? nullptr : master->second}, dequantized)) {
        if (storage && plain && plain->find(weight))
          refuseFullPrecision(weight);
        // A LoRA adapter a base model's file lacks keeps its initial value,
        // as checkpoint restore does.
        if (!isAdapterTensor(p->name))
          fail(path, ": no tensor '", hf ? huggingFaceName(hf->family(), p->name) : p->name,
               "' (a parameter of the model)");
        ++loaded.freshAdapters;
        continue;
      }
      ++loaded.tensors;
      loaded.dequantized += dequantized ? 1 : 0;
    }
  }

  const std::string &path;
  const Artifact &artifact;
  const Arena &arena;
  const int rank;
  WeightsInPlace *inPlace;
  const quant::AbsmaxFormat absmaxFormat;
  const std::map<std::string, std::string> schemes; ///< weight → stored scheme record
  std::map<std::string, const BufferInfo *> masters; ///< parameter → its fp32 master
  std::unique_ptr<HuggingFaceModel> hf;
  std::unique_ptr<CheckpointReader> checkpoint;
  std::unique_ptr<SafetensorsFile> plain;
};

} // namespace

WeightsLoaded loadWeights(const std::string &path, const Artifact &artifact, const Arena &arena,
                          int rank, WeightsInPlace *inPlace) {
  if (!std::ifstream(path))
    fail("--weights: cannot open '", path, "'");
  return WeightsLoader(path, artifact, arena, rank, inPlace).run();
}

void WeightsInPlace::placeIn(Arena &arena) const {
  for (const Range &r : ranges) arena.placeOutside(r.offset, r.bytes, r.data);
}

WeightsLoaded initializeFromWeights(const std::string &path, const Artifact &artifact,
                                    const Arena &arena, uint64_t seed, int rank,
                                    WeightsInPlace *inPlace) {
  initializeParameters(artifact, arena, seed, rank, isAdapterTensor);
  return loadWeights(path, artifact, arena, rank, inPlace);
}

} // namespace llmc
