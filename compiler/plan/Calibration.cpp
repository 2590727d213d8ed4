//===- Calibration.cpp - read llmc-bench-calibrate's JSON -----------------===//

#include "compiler/plan/Calibration.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>

namespace llmc::plan {

namespace {

namespace json = llvm::json;

/// Reads fields of one JSON object, remembering the first problem as
/// "<file>: <field path>: <what>".
class Reader {
public:
  Reader(const std::string &file, std::string &error) : file(file), error(error) {}

  bool ok() const { return error.empty(); }

  bool fail(const std::string &where, const std::string &what) {
    if (error.empty())
      error = "calibration " + file + ": " + where + ": " + what;
    return false;
  }

  /// A number > 0 (>= 0 when `zeroAllowed`) at `object[key]`; `optional`
  /// leaves `out` alone when absent.
  bool number(const json::Object &object, const std::string &at, llvm::StringRef key,
              double &out, bool optional = false, bool zeroAllowed = false) {
    const json::Value *value = object.get(key);
    std::string where = at + key.str();
    if (!value)
      return optional || fail(where, "missing");
    std::optional<double> n = value->getAsNumber();
    if (!n || !std::isfinite(*n) || *n < 0 || (*n == 0 && !zeroAllowed))
      return fail(where, zeroAllowed ? "expected a number >= 0" : "expected a positive number");
    out = *n;
    return true;
  }

  /// A positive whole number at `object[key]`.
  bool count(const json::Object &object, const std::string &at, llvm::StringRef key,
             int64_t &out) {
    double n = 0;
    if (!number(object, at, key, n))
      return false;
    if (n != std::floor(n) || n > 1e15)
      return fail(at + key.str(), "expected a positive whole number");
    out = static_cast<int64_t>(n);
    return true;
  }

private:
  const std::string &file;
  std::string &error;
};

bool readTiles(Reader &read, const json::Array &tiles, std::vector<GemmTile> &out) {
  out.clear();
  for (size_t i = 0; i < tiles.size(); ++i) {
    std::string at = "gemm.tiles[" + std::to_string(i) + "]";
    const json::Array *pair = tiles[i].getAsArray();
    std::optional<int64_t> rows = pair && pair->size() == 2 ? (*pair)[0].getAsInteger() : std::nullopt;
    std::optional<int64_t> cols = pair && pair->size() == 2 ? (*pair)[1].getAsInteger() : std::nullopt;
    if (!rows || !cols || *rows <= 0 || *cols <= 0)
      return read.fail(at, "expected [rows, columns], two positive whole numbers");
    out.push_back({*rows, *cols});
  }
  if (out.empty())
    return read.fail("gemm.tiles", "expected at least one tile");
  return true;
}

bool readAttention(Reader &read, const json::Array &rates, std::vector<AttentionRate> &out) {
  out.clear();
  for (size_t i = 0; i < rates.size(); ++i) {
    std::string at = "attention[" + std::to_string(i) + "].";
    const json::Object *rate = rates[i].getAsObject();
    if (!rate)
      return read.fail(at.substr(0, at.size() - 1), "expected an object");
    AttentionRate r;
    double tflops = 0;
    if (!read.count(*rate, at, "head_dim", r.headDim) || !read.count(*rate, at, "seq", r.seq) ||
        !read.number(*rate, at, "tflops", tflops))
      return false;
    r.flopsPerSecond = tflops * 1e12;
    out.push_back(r);
  }
  if (out.empty())
    return read.fail("attention", "expected at least one measured rate");
  return true;
}

} // namespace

bool applyCalibration(const std::string &text, const std::string &path, Cluster &cluster,
                      std::string &error) {
  error.clear();
  Reader read(path, error);
  llvm::Expected<json::Value> parsed = json::parse(text);
  if (!parsed) {
    error = "calibration " + path + ": not JSON: " + llvm::toString(parsed.takeError());
    return false;
  }
  const json::Object *root = parsed->getAsObject();
  if (!root)
    return read.fail("(top level)", "expected an object");
  std::optional<llvm::StringRef> kind = root->getString("kind");
  if (!kind || *kind != "llmc-gpu-calibration")
    return read.fail("kind", "expected \"llmc-gpu-calibration\" (a file written by "
                             "llmc-bench-calibrate)");
  std::optional<int64_t> schema = root->getInteger("schema");
  if (!schema || *schema != 1)
    return read.fail("schema", "expected 1, the version this llmc reads");
  std::optional<llvm::StringRef> device = root->getString("device");
  if (!device || device->empty())
    return read.fail("device", "expected the device's name");

  Cluster c = cluster;
  Efficiency &e = c.efficiency;
  double bandwidthGBs = 0, peakTflops = 0, memoryBytes = 0, overheadUs = -1, largeTflops = 0;
  if (!read.count(*root, "", "sms", e.sms) ||
      !read.number(*root, "", "bandwidth_gbs", bandwidthGBs) ||
      !read.number(*root, "", "peak_tflops", peakTflops, /*optional=*/true) ||
      !read.number(*root, "", "memory_bytes", memoryBytes, /*optional=*/true) ||
      !read.number(*root, "", "kernel_overhead_us", overheadUs, true, /*zeroAllowed=*/true))
    return false;
  const json::Object *gemm = root->getObject("gemm");
  if (!gemm)
    return read.fail("gemm", "missing (an object with large_tflops)");
  if (!read.number(*gemm, "gemm.", "large_tflops", largeTflops))
    return false;
  if (e.tiles.empty())
    e.tiles = largeGemmTiles();
  if (const json::Value *tiles = gemm->get("tiles")) {
    const json::Array *list = tiles->getAsArray();
    if (!list)
      return read.fail("gemm.tiles", "expected a list of [rows, columns]");
    if (!readTiles(read, *list, e.tiles))
      return false;
  }
  const json::Array *attention = root->getArray("attention");
  if (!attention)
    return read.fail("attention", "missing (a list of {head_dim, seq, tflops})");
  if (!readAttention(read, *attention, e.attention))
    return false;

  e.gemmFlops = largeTflops * 1e12;
  c.memoryBandwidth = bandwidthGBs * 1e9;
  if (peakTflops > 0)
    c.peakFlops = peakTflops * 1e12;
  if (memoryBytes > 0)
    c.memoryBytes = memoryBytes;
  if (overheadUs >= 0)
    c.kernelOverhead = overheadUs * 1e-6;
  c.deviceName = device->str();
  std::optional<llvm::StringRef> date = root->getString("date");
  e.source = "calibration " + path + " (" + device->str() + (date ? ", " + date->str() : "") + ")";
  if (c.peakFlops > 0 && e.gemmFlops > c.peakFlops)
    return read.fail("gemm.large_tflops", "faster than the device's peak (" +
                                              std::to_string(c.peakFlops / 1e12) + " TFLOP/s)");
  cluster = c;
  return true;
}

bool loadCalibration(const std::string &path, Cluster &cluster, std::string &error) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file = llvm::MemoryBuffer::getFile(path);
  if (!file) {
    error = "calibration " + path + ": cannot read it: " + file.getError().message();
    return false;
  }
  return applyCalibration((*file)->getBuffer().str(), path, cluster, error);
}

} // namespace llmc::plan
