//===- Export.cpp - parameters to one weights file ------------------------===//

#include "runtime/quant/Export.h"

#include "runtime/checkpoint/CheckpointReader.h"
#include "runtime/checkpoint/HuggingFace.h"
#include "runtime/quant/QuantizedFile.h"
#include "runtime/support/Error.h"

#include <cstring>
#include <fstream>
#include <memory>
#include <set>

namespace llmc {
namespace {

/// Where the parameters come from, each read whole at full precision.
class ParameterSource {
public:
  virtual ~ParameterSource() = default;
  /// The directory or file the report names.
  virtual std::string describe() const = 0;
  virtual int64_t step() const { return -1; }
  /// Parameter `name`; false when the source lacks it.
  virtual bool read(const std::string &name, GlobalTensor &out) = 0;
  /// The fake-quantization observer states (qat_state/*) the source has.
  virtual std::vector<std::string> observerNames() const { return {}; }
  /// Where a missing parameter was looked for, for the error.
  virtual std::string missing(const std::string &name) const = 0;
};

bool isObserver(const std::string &name) { return name.rfind("qat_state/", 0) == 0; }

class CheckpointSource : public ParameterSource {
public:
  explicit CheckpointSource(const std::string &dir) : reader_(dir) {}
  std::string describe() const override { return reader_.stepDir(); }
  int64_t step() const override { return reader_.step(); }
  bool read(const std::string &name, GlobalTensor &out) override {
    if (!reader_.has(name))
      return false;
    out = isObserver(name) ? reader_.read(name) : reader_.readParameter(name);
    return true;
  }
  std::vector<std::string> observerNames() const override {
    std::vector<std::string> names;
    for (const std::string &name : reader_.names())
      if (isObserver(name))
        names.push_back(name);
    return names;
  }
  std::string missing(const std::string &name) const override {
    return reader_.stepDir() + ": checkpoint has no tensor '" + name + "'";
  }

private:
  CheckpointReader reader_;
};

/// A tensor of a mapped file copied out whole; refuses quantized storage
/// (quantizing needs the full-precision weights).
GlobalTensor copyOut(const SafetensorsFile &file, const std::string &stored) {
  if (file.find(stored + ".qweight"))
    fail(file.path(), ": tensor '", stored,
         "' is stored quantized; quantize from full-precision weights");
  const SafeTensor *t = file.find(stored);
  if (t->e4m3)
    fail(file.path(), ": tensor '", stored,
         "' is F8_E4M3, which llmc reads only as NF4's absmax levels; a parameter is F32, BF16 "
         "or F16");
  const uint8_t *data = static_cast<const uint8_t *>(t->data);
  GlobalTensor out{t->dtype, t->shape, std::vector<uint8_t>(data, data + t->bytes)};
  file.release(*t);
  return out;
}

/// A Hugging Face model directory: llmc's names under HF's prefix.
class HuggingFaceSource : public ParameterSource {
public:
  explicit HuggingFaceSource(const std::string &dir)
      : dir_(dir), family_(huggingFaceFamily(dir)), files_(dir) {}
  std::string describe() const override { return dir_; }
  bool read(const std::string &name, GlobalTensor &out) override {
    std::string stored = huggingFaceName(family_, name);
    const SafetensorsFile *file = files_.find(stored);
    if (!file)
      return readExperts(name, out);
    out = copyOut(*file, stored);
    return true;
  }

  /// A mixture of experts' stacked parameter, from its per-expert tensors
  /// (expertSliceNames; as many as the directory holds, in expert order).
  bool readExperts(const std::string &name, GlobalTensor &out) {
    std::vector<uint8_t> data;
    for (int64_t e = 0;; ++e) {
      std::vector<std::string> names = expertSliceNames(family_, name, e + 1);
      const SafetensorsFile *file = names.empty() ? nullptr : files_.find(names.back());
      if (!file)
        break;
      GlobalTensor slice = copyOut(*file, names.back());
      if (e == 0) {
        out = GlobalTensor{slice.dtype, slice.shape, {}};
        out.shape.insert(out.shape.begin(), 0);
      } else if (slice.dtype != out.dtype ||
                 std::vector<int64_t>(out.shape.begin() + 1, out.shape.end()) != slice.shape) {
        fail(file->path(), ": tensor '", names.back(), "' differs in shape or dtype from expert 0");
      }
      ++out.shape[0];
      data.insert(data.end(), slice.bytes.begin(), slice.bytes.end());
    }
    if (data.empty())
      return false;
    out.bytes = std::move(data);
    return true;
  }
  std::string missing(const std::string &name) const override {
    return dir_ + ": no tensor '" + huggingFaceName(family_, name) + "'";
  }

private:
  std::string dir_, family_;
  HuggingFaceFiles files_;
};

/// An llmc weights file (plain tensors under llmc's names).
class WeightsFileSource : public ParameterSource {
public:
  explicit WeightsFileSource(const std::string &path) : file_(path) {}
  std::string describe() const override { return file_.path(); }
  bool read(const std::string &name, GlobalTensor &out) override {
    if (!file_.find(name) && !file_.find(name + ".qweight"))
      return false;
    out = copyOut(file_, name);
    return true;
  }
  std::vector<std::string> observerNames() const override {
    std::vector<std::string> names;
    for (const SafeTensor &t : file_.tensors())
      if (isObserver(t.name))
        names.push_back(t.name);
    return names;
  }
  std::string missing(const std::string &name) const override {
    return file_.path() + ": no tensor '" + name + "'";
  }

private:
  SafetensorsFile file_;
};

/// A directory with config.json is a Hugging Face model, one with
/// `latest` a checkpoint; a file is a weights file.
std::unique_ptr<ParameterSource> openSource(const std::string &path) {
  if (!isDirectory(path)) {
    if (!std::ifstream(path))
      fail(path, ": no such checkpoint directory, Hugging Face directory or weights file");
    return std::make_unique<WeightsFileSource>(path);
  }
  if (std::ifstream(path + "/config.json"))
    return std::make_unique<HuggingFaceSource>(path);
  return std::make_unique<CheckpointSource>(path);
}

void run(const ExportRequest &request, ExportReport &report) {
  std::unique_ptr<ParameterSource> source = openSource(request.source);
  report.source = source->describe();
  report.step = source->step();
  // Every tensor is held until the write (the file points into them).
  std::vector<GlobalTensor> plain(request.tensors.size());
  std::vector<quant::QuantizedTensor> quantized(request.tensors.size());
  std::vector<SafeTensor> tensors;
  std::map<std::string, std::string> metadata;
  for (size_t i = 0; i < request.tensors.size(); ++i) {
    const ExportRequest::Tensor &want = request.tensors[i];
    GlobalTensor &t = plain[i];
    if (!source->read(want.name, t))
      fail(source->missing(want.name), " (a parameter of the model)");
    if (t.shape != want.shape)
      fail(source->describe(), ": tensor '", want.name, "' is ", shapeList(t.shape),
           " but the model's parameter is ", shapeList(want.shape));
    ExportedTensor row;
    row.name = want.name;
    row.shape = t.shape;
    row.dtype = t.dtype;
    row.numel = static_cast<int64_t>(t.bytes.size() / dtypeSize(t.dtype));
    row.bytesBefore = row.bytesAfter = static_cast<int64_t>(t.bytes.size());
    if (want.quantize) {
      std::vector<float> values = floatValues(t, want.name);
      quant::QuantizedTensor &q = quantized[i];
      std::string why;
      if (want.given)
        q = *want.given;
      else
        why = quant::quantize(values.data(), t.shape, want.scheme, want.storage, q);
      if (!why.empty())
        fail("'", want.name, "' ", shapeList(t.shape), ": ", why);
      row.scheme = quant::schemeString(q.scheme) +
                   (q.doubleQuant == quant::DoubleQuant::Int8      ? "+dq"
                    : q.doubleQuant == quant::DoubleQuant::Fp8E4M3 ? "+dq_fp8"
                                                                   : "") +
                   (q.scaleFormat == quant::ScaleFormat::F16 ? "+f16" : "");
      row.bytesAfter = q.storageBytes();
      appendQuantized(want.name, q, tensors, metadata);
      std::vector<uint8_t>().swap(t.bytes); // only the quantized form is written
    } else {
      tensors.push_back({want.name, t.dtype, t.shape, t.bytes.data(), t.bytes.size()});
    }
    report.tensors.push_back(row);
  }
  // Activation ranges a QAT checkpoint's observers hold (trained, or set by
  // llmc-run --calibrate) travel with the weights, as they are.
  std::vector<std::string> observerNames = source->observerNames();
  std::vector<GlobalTensor> observers(observerNames.size());
  for (size_t i = 0; i < observerNames.size(); ++i) {
    source->read(observerNames[i], observers[i]);
    const GlobalTensor &t = observers[i];
    tensors.push_back({observerNames[i], t.dtype, t.shape, t.bytes.data(), t.bytes.size()});
  }
  report.observers = static_cast<int64_t>(observerNames.size());
  std::set<std::string> names;
  for (const SafeTensor &t : tensors)
    if (!names.insert(t.name).second)
      fail("two tensors would be named '", t.name, "' in ", request.output);
  writeSafetensors(request.output, tensors, metadata);
}

} // namespace

bool exportWeights(const ExportRequest &request, ExportReport &report, std::string &error) {
  return catchErrors(error, [&] { run(request, report); });
}

} // namespace llmc
