//===- Export.cpp - a checkpoint's parameters to one weights file ---------===//

#include "runtime/quant/Export.h"

#include "runtime/checkpoint/CheckpointReader.h"
#include "runtime/quant/QuantizedFile.h"
#include "runtime/support/Error.h"

#include <cstring>
#include <set>

namespace llmc {
namespace {

void run(const ExportRequest &request, ExportReport &report) {
  CheckpointReader checkpoint(request.ckptDir);
  report.stepDir = checkpoint.stepDir();
  report.step = checkpoint.step();
  // Every tensor is held until the write (the file points into them).
  std::vector<GlobalTensor> plain(request.tensors.size());
  std::vector<quant::QuantizedTensor> quantized(request.tensors.size());
  std::vector<SafeTensor> tensors;
  std::map<std::string, std::string> metadata;
  for (size_t i = 0; i < request.tensors.size(); ++i) {
    const ExportRequest::Tensor &want = request.tensors[i];
    if (!checkpoint.has(want.name))
      fail(checkpoint.stepDir(), ": checkpoint has no tensor '", want.name,
           "' (a parameter of the model)");
    GlobalTensor &t = plain[i];
    t = checkpoint.readParameter(want.name);
    if (t.shape != want.shape)
      fail(checkpoint.stepDir(), ": tensor '", want.name, "' is ", shapeList(t.shape),
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
        why = quant::quantize(values.data(), t.shape, want.scheme, want.doubleQuant, q);
      if (!why.empty())
        fail("'", want.name, "' ", shapeList(t.shape), ": ", why);
      row.scheme = quant::schemeString(q.scheme) + (q.doubleQuant ? "+dq" : "");
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
  std::vector<std::string> observerNames;
  for (const std::string &name : checkpoint.names())
    if (name.rfind("qat_state/", 0) == 0)
      observerNames.push_back(name);
  std::vector<GlobalTensor> observers(observerNames.size());
  for (size_t i = 0; i < observerNames.size(); ++i) {
    observers[i] = checkpoint.read(observerNames[i]);
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
