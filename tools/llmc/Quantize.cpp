//===- Quantize.cpp - `llmc quantize`: post-training weight export --------===//
//
// The weights are found the way llmc-qat finds them (passes/QAT.cpp): a
// matmul whose right operand is, through casts, a parameter of @forward
// (its output channel is the dimension not contracted), an embedding's
// table (output channel = its rows), with the same `skip=` entries. A
// parameter is one tensor however many ops read it, so it is quantized
// only when every op reading it is a chosen, unskipped weight site: GPT-2's
// tied embedding table, read by the head and by the token lookup, stays in
// full precision unless --ops includes embedding (noted in the report).
//
//===----------------------------------------------------------------------===//

#include "tools/llmc/Quantize.h"

#include "compiler/Compiler.h"
#include "dialects/Dist/DistDialect.h"
#include "dialects/LLM/LLMDialect.h"
#include "passes/lib/EntryPoints.h"
#include "passes/lib/Parameters.h"
#include "passes/lib/QATScheme.h"
#include "passes/lib/WeightSites.h"
#include "runtime/checkpoint/HuggingFace.h"
#include "runtime/quant/Export.h"
#include "runtime/quant/GptqCalibration.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <iomanip>
#include <sstream>

using namespace llvm;
using namespace mlir;

namespace llmc {

cl::SubCommand quantizeCommand("quantize",
                               "Quantize a checkpoint's weights into a safetensors file "
                               "(post-training quantization)");

cl::OptionCategory &quantizeCategory() {
  static cl::OptionCategory category("llmc quantize options");
  return category;
}

namespace {

cl::opt<std::string> ckptDir(cl::Positional, cl::desc("<ckpt-dir | hf-dir | weights.safetensors>"),
                             cl::Required, cl::sub(quantizeCommand), cl::cat(quantizeCategory()));
cl::opt<std::string> graphFile(cl::Positional, cl::desc("[<graph.mlir>]"), cl::init(""),
                               cl::sub(quantizeCommand), cl::cat(quantizeCategory()));
cl::opt<std::string> modelFamily("model", cl::desc("Built-in model family instead of a file"),
                                 cl::sub(quantizeCommand), cl::cat(quantizeCategory()));
cl::opt<std::string> modelPreset("preset", cl::desc("Preset name"), cl::init("tiny"),
                                 cl::sub(quantizeCommand), cl::cat(quantizeCategory()));
cl::list<std::string> modelSet("set", cl::desc("Override a config key (key=value)"),
                               cl::sub(quantizeCommand), cl::cat(quantizeCategory()));
cl::opt<std::string> modelConfig("config", cl::desc("Hugging Face style config.json"),
                                 cl::sub(quantizeCommand), cl::cat(quantizeCategory()));
cl::opt<std::string> schemeText("scheme",
                                cl::desc("Weight scheme, e.g. int8:channel, int4:block64, "
                                         "fp8:channel (E4M3), nf4:block64 "
                                         "(docs/quantization.md); none: export "
                                         "the parameters unquantized"),
                                cl::Required, cl::sub(quantizeCommand),
                                cl::cat(quantizeCategory()));
cl::list<std::string> skipList("skip",
                               cl::desc("Keep in full precision: head, embedding, a layer "
                                        "(h.3), a parameter or dotted prefix"),
                               cl::CommaSeparated, cl::sub(quantizeCommand),
                               cl::cat(quantizeCategory()));
cl::list<std::string> opsList("ops", cl::desc("Weights of: matmul (default), embedding"),
                              cl::CommaSeparated, cl::sub(quantizeCommand),
                              cl::cat(quantizeCategory()));
cl::opt<bool> noDoubleQuant("no-double-quant",
                            cl::desc("nf4 blocks: keep each block's absmax in fp32 instead of "
                                     "8 bits (QLoRA's double quantization)"),
                            cl::sub(quantizeCommand), cl::cat(quantizeCategory()));
cl::opt<std::string> doubleQuantText(
    "double-quant",
    cl::desc("nf4 blocks: the 8-bit levels of each block's absmax, int8 (default) | fp8 "
             "(OCP E4M3, QLoRA's 8-bit floats); compile the model with the same --double-quant"),
    cl::init(""), cl::sub(quantizeCommand), cl::cat(quantizeCategory()));
cl::opt<std::string> scaleDtype(
    "scale-dtype",
    cl::desc("Per-group scales: f32 (default) | f16 (each rounded to fp16 before the codes are "
             "chosen, stored as F16: 4.5 bits a weight for int4:block32, as GGUF's Q4_0)"),
    cl::init("f32"), cl::sub(quantizeCommand), cl::cat(quantizeCategory()));
cl::opt<std::string> output("o", cl::desc("Output safetensors file"), cl::Required,
                            cl::sub(quantizeCommand), cl::cat(quantizeCategory()));
cl::opt<std::string> method("method",
                            cl::desc("rtn (default): round each weight to nearest; gptq: GPTQ "
                                     "with Hessians from calibration data"),
                            cl::init("rtn"), cl::sub(quantizeCommand),
                            cl::cat(quantizeCategory()));
cl::opt<std::string> calibrationData(
    "calibration",
    cl::desc("GPTQ calibration data, as llmc-run --data takes it (bundled, a text file, .bin "
             "shards); its validation part is held out as llmc-run holds it out"),
    cl::sub(quantizeCommand), cl::cat(quantizeCategory()));
cl::opt<int64_t> calibrationBatches("batches",
                                    cl::desc("GPTQ calibration batches (the model's batch shape)"),
                                    cl::init(0), cl::sub(quantizeCommand),
                                    cl::cat(quantizeCategory()));
cl::opt<bool> actOrder("act-order",
                       cl::desc("GPTQ: quantize input columns in order of descending Hessian "
                                "diagonal"),
                       cl::sub(quantizeCommand), cl::cat(quantizeCategory()));
cl::opt<double> dampening("damp",
                          cl::desc("GPTQ: add this fraction of the mean Hessian diagonal to it"),
                          cl::init(0.01), cl::sub(quantizeCommand), cl::cat(quantizeCategory()));
cl::opt<int64_t> lazyBatch("gptq-block-size",
                           cl::desc("GPTQ: columns per lazy batch update"), cl::init(128),
                           cl::sub(quantizeCommand), cl::cat(quantizeCategory()));

constexpr const char *kTool = "llmc quantize";

int failWith(const Twine &message) {
  WithColor::error(errs(), kTool) << message << "\n";
  return 1;
}

/// One op reading a parameter as a weight.
/// One op reading a parameter (through casts).
struct Use {
  std::string what; ///< "matmul", "head", "experts", "router", "embedding lookup", or the op's name
  bool chosen = false; ///< a matmul weight or embedding table of an op kind in --ops
  bool skipped = false;
  int64_t outputAxis = 0; ///< experts: within each expert's slice
};

struct Param {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<Use> uses;

  /// A mixture of experts' stacked weights [G, ...], each expert quantized
  /// on its own (a `:stacked` scheme).
  bool experts() const { return !uses.empty() && uses.front().what == "experts"; }
  /// Every reader is a chosen, unskipped weight site (a tensor read
  /// elsewhere too would change that reader's numbers as well).
  bool quantized() const {
    return !uses.empty() && llvm::all_of(uses, [](const Use &u) { return u.chosen && !u.skipped; });
  }
  /// Some reader, but not every one, would have it quantized.
  const Use *blocker() const {
    if (llvm::none_of(uses, [](const Use &u) { return u.chosen && !u.skipped; }))
      return nullptr;
    for (const Use &u : uses)
      if (!u.chosen || u.skipped)
        return &u;
    return nullptr;
  }
};

/// The parameters of @forward and the weight uses of each.
class ParamUses {
public:
  ParamUses(func::FuncOp forward, const std::vector<std::string> &ops,
            const std::vector<std::string> &skip)
      : forward(forward), skip(skip) {
    for (BlockArgument arg : forward.getArguments())
      if (auto param = llm::getParamAttr(forward, arg.getArgNumber())) {
        auto type = cast<RankedTensorType>(arg.getType());
        index[arg.getArgNumber()] = params.size();
        params.push_back({param.getName().str(), type.getShape().vec(), {}});
      }
    bool matmuls = llvm::is_contained(ops, "matmul"),
         embeddings = llvm::is_contained(ops, "embedding");
    for (const WeightSite &site : findWeightSites(forward)) {
      if (!site.weight)
        continue;
      if (site.embedding)
        addUse(site.op, site.weight, "embedding lookup", embeddings, site.outputAxis);
      else if (feedsRouter(site.op->getResult(0)))
        // The router's logits pick the experts: it stays in full precision,
        // as --weight-quant keeps it.
        params[index.at(site.weight.getArgNumber())].uses.push_back({"router", false, false, 0});
      else
        addUse(site.op, site.weight, site.head ? "head" : "matmul", matmuls, site.outputAxis);
    }
    // A mixture of experts' stacked weights, each expert's output channel
    // within its slice.
    forward.walk([&](llm::GroupedMatmulOp g) {
      if (BlockArgument weight = parameterRead(forward, g.getWeights()))
        addUse(g, weight, "experts", matmuls, g.getTransposeB() ? 0 : 1);
    });
    for (BlockArgument arg : forward.getArguments())
      if (auto it = index.find(arg.getArgNumber()); it != index.end())
        addOtherReaders(arg, it->second);
  }

  std::vector<Param> params;
  llvm::StringSet<> matchedSkips;

private:
  void addUse(Operation *op, BlockArgument weight, const char *what, bool chosen, int64_t axis) {
    Use use{what, chosen, chosen && skipped(op, weight), axis};
    params[index.at(weight.getArgNumber())].uses.push_back(use);
  }

  /// Ops reading `v` (through casts) other than as a matmul's weight or an
  /// embedding's table.
  void addOtherReaders(Value v, size_t param) {
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (isa<llm::CastOp>(user))
        addOtherReaders(user->getResult(0), param);
      else if (!(isa<llm::MatmulOp>(user) && use.getOperandNumber() == 1) &&
               !(isa<llm::EmbeddingOp>(user) && use.getOperandNumber() == 0) &&
               !(isa<llm::GroupedMatmulOp>(user) && use.getOperandNumber() == 2))
        params[param].uses.push_back({user->getName().getStringRef().str(), false, false, 0});
    }
  }

  /// Whether `op` is excluded by --skip, recording the entries that match.
  bool skipped(Operation *op, BlockArgument weight) {
    return skipMatches(forward, op, weight, skip, matchedSkips);
  }

  func::FuncOp forward;
  std::vector<std::string> skip;
  std::map<unsigned, size_t> index; ///< argument number → params
};

/// The table: one row per quantized tensor, then totals.
std::string formatReport(const ExportReport &report, const std::string &output) {
  std::ostringstream os;
  os << "quantized " << report.source;
  if (report.step >= 0)
    os << " (step " << report.step << ")";
  os << " -> " << output << "\n";
  os << "  " << std::left << std::setw(28) << "tensor" << std::setw(12) << "shape"
     << std::setw(22) << "scheme" << std::right << std::setw(12) << "bytes" << std::setw(12)
     << "stored" << std::setw(12) << "bits/param" << "\n";
  auto bits = [](int64_t bytes, int64_t params) {
    std::ostringstream b;
    b << std::fixed << std::setprecision(3) << (params ? 8.0 * bytes / params : 0.0);
    return b.str();
  };
  int64_t count = 0, params = 0, before = 0, after = 0;
  int64_t keptCount = 0, keptParams = 0, keptBytes = 0;
  for (const ExportedTensor &t : report.tensors) {
    if (t.scheme.empty()) {
      ++keptCount;
      keptParams += t.numel;
      keptBytes += t.bytesBefore;
      continue;
    }
    ++count;
    params += t.numel;
    before += t.bytesBefore;
    after += t.bytesAfter;
    os << "  " << std::left << std::setw(28) << t.name << std::setw(12) << shapeString(t.shape)
       << std::setw(22) << t.scheme << std::right << std::setw(12) << t.bytesBefore
       << std::setw(12) << t.bytesAfter << std::setw(12) << bits(t.bytesAfter, t.numel) << "\n";
  }
  os << "quantized: " << count << " tensors, " << withCommas(params) << " parameters, "
     << withCommas(before) << " -> " << withCommas(after) << " bytes, " << bits(after, params)
     << " bits per parameter\n";
  os << "kept:      " << keptCount << " tensors, " << withCommas(keptParams) << " parameters, "
     << withCommas(keptBytes) << " bytes as stored\n";
  os << "total:     " << count + keptCount << " tensors, " << withCommas(params + keptParams)
     << " parameters, " << withCommas(before + keptBytes) << " -> "
     << withCommas(after + keptBytes) << " bytes, " << bits(after + keptBytes, params + keptParams)
     << " bits per parameter\n";
  if (report.observers)
    os << "observers: " << report.observers
       << " activation ranges (qat_state/*) copied from the checkpoint\n";
  return os.str();
}

/// Why the GPTQ options do not fit, or empty.
std::string checkMethod(bool exportPlain) {
  bool gptq = method == "gptq";
  if (!gptq && method != "rtn")
    return "unknown --method '" + method + "' (expected rtn or gptq)";
  if (!gptq) {
    if (!calibrationData.empty() || calibrationBatches.getNumOccurrences() ||
        actOrder.getNumOccurrences() || dampening.getNumOccurrences() ||
        lazyBatch.getNumOccurrences())
      return "--calibration, --batches, --act-order, --damp and --gptq-block-size are options "
             "of --method gptq";
    return "";
  }
  if (exportPlain)
    return "--method gptq needs a scheme to quantize to, not 'none'";
  if (calibrationData.empty())
    return "--method gptq needs calibration data: --calibration <data> (bundled, a text file, "
           ".bin token shards or a directory of them)";
  if (calibrationBatches < 1)
    return "--method gptq needs --batches N with N >= 1 (got " +
           std::to_string(calibrationBatches) + ")";
  if (!(dampening >= 0.0))
    return "--damp must be >= 0";
  if (lazyBatch < 1)
    return "--gptq-block-size must be at least 1";
  return "";
}

/// One note per reason for the experts of `r` left to round-to-nearest,
/// naming them ("experts 1, 3 received no calibration rows").
std::string formatFallbacks(const GptqTensorReport &r) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> byReason;
  for (const quant::ExpertFallback &f : r.fallbacks) {
    auto it = llvm::find_if(byReason, [&](const auto &b) { return b.first == f.why; });
    if (it == byReason.end())
      it = byReason.insert(byReason.end(), {f.why, {}});
    it->second.push_back(f.expert);
  }
  std::ostringstream os;
  for (const auto &[why, experts] : byReason) {
    os << "note: " << r.name << (experts.size() > 1 ? " experts " : " expert ");
    for (size_t i = 0; i < experts.size(); ++i) os << (i ? ", " : "") << experts[i];
    os << " " << why << ": rounded to nearest instead of GPTQ\n";
  }
  return os.str();
}

/// GPTQ's per-weight lines: the layer output error on the calibration
/// inputs, round-to-nearest against GPTQ.
std::string formatGptqReport(const GptqResult &result) {
  std::ostringstream os;
  os << "gptq: " << result.reports.size() << " weights in " << result.stages << " stages, "
     << calibrationBatches << " calibration batches (" << withCommas(result.tokens)
     << " tokens), damp " << dampening << ", block " << lazyBatch
     << (actOrder ? ", act-order" : "") << "\n";
  os << "  " << std::left << std::setw(28) << "tensor" << std::right << std::setw(8) << "inputs"
     << std::setw(6) << "dead" << std::setw(14) << "rtn error" << std::setw(14) << "gptq error"
     << std::setw(8) << "ratio" << "\n";
  for (const GptqTensorReport &r : result.reports) {
    os << "  " << std::left << std::setw(28) << r.name << std::right << std::setw(8) << r.inputs
       << std::setw(6) << r.deadColumns << std::scientific << std::setprecision(3)
       << std::setw(14) << r.rtnError << std::setw(14) << r.gptqError << std::fixed
       << std::setprecision(3) << std::setw(8) << (r.rtnError > 0 ? r.gptqError / r.rtnError : 0.0)
       << "\n";
  }
  os << std::defaultfloat;
  // Experts: the calibration rows the router sent to each, and those left
  // to round-to-nearest.
  for (const GptqTensorReport &r : result.reports) {
    if (r.expertRows.empty())
      continue;
    os << "experts " << r.name << ": calibration rows";
    for (int64_t rows : r.expertRows) os << " " << rows;
    os << "\n";
  }
  for (const GptqTensorReport &r : result.reports) os << formatFallbacks(r);
  return os.str();
}

/// Runs GPTQ for the tensors of `request` marked for quantization: the
/// model compiled in-process to an artifact, the checkpoint's parameters
/// written plain beside it, both in a temporary directory. Fills `result`
/// and points each tensor of `request` at its quantized form.
bool runGptqFor(const ModelSource &source, ExportRequest &request, GptqResult &result,
                std::string &error) {
  SmallString<128> dir;
  if (std::error_code ec = sys::fs::createUniqueDirectory("llmc-gptq", dir)) {
    error = "cannot create a temporary directory: " + ec.message();
    return false;
  }
  llvm::scope_exit cleanup([&] { sys::fs::remove_directories(dir); });
  SmallString<128> artifactPath(dir), plainPath(dir);
  sys::path::append(artifactPath, "model.llmc");
  sys::path::append(plainPath, "weights.safetensors");
  CompileRequest compileRequest;
  compileRequest.source = source;
  compileRequest.emit = "artifact";
  compileRequest.output = artifactPath.str().str();
  // Calibration observes the input of every matmul that reads a weight,
  // the head's too: no fused kernel may hide one.
  compileRequest.pipeline.fuse = "none";
  if (compile(compileRequest, kTool) != 0) {
    error = "the model did not compile for calibration";
    return false;
  }
  GptqRequest gptq;
  gptq.artifact = artifactPath.str().str();
  // A Hugging Face directory loads into the model compiled from its own
  // config.json as it is (mapped, each tensor converted in place); other
  // sources are first written plain, the tensors @forward reads.
  if (sys::fs::exists(request.source + "/config.json")) {
    gptq.weights = request.source;
  } else {
    ExportRequest plain = request;
    plain.output = plainPath.str().str();
    for (ExportRequest::Tensor &t : plain.tensors) t.quantize = false;
    ExportReport plainReport;
    if (!exportWeights(plain, plainReport, error))
      return false;
    gptq.weights = plainPath.str().str();
  }
  gptq.calibration = calibrationData;
  gptq.batches = calibrationBatches;
  gptq.options.actOrder = actOrder;
  gptq.options.dampening = dampening;
  gptq.options.blockSize = lazyBatch;
  for (const ExportRequest::Tensor &t : request.tensors)
    if (t.quantize)
      gptq.tensors.push_back({t.name, t.scheme, t.storage});
  gptq.progress = [](const std::string &line) { errs() << "gptq " << line << "\n"; };
  if (!runGptq(gptq, result, error))
    return false;
  for (ExportRequest::Tensor &t : request.tensors)
    if (t.quantize) t.given = &result.tensors.at(t.name);
  return true;
}

/// How NF4 blocks store their absmax (--double-quant, --no-double-quant):
/// None for a scheme without them, or nullopt with `error` set when the
/// options conflict, name no format, or are given for such a scheme.
std::optional<quant::DoubleQuant> chooseDoubleQuant(const QATSchemeSpec &weights,
                                                    std::string &error) {
  const bool given = doubleQuantText.getNumOccurrences() > 0;
  if (given && noDoubleQuant) {
    error = "--double-quant and --no-double-quant exclude each other (the absmax of NF4 "
            "blocks is stored in 8 bits or in fp32)";
    return std::nullopt;
  }
  const bool nf4Blocks =
      schemeText != "none" && weights.format == "nf4" && weights.granularity == "block";
  if ((given || noDoubleQuant) && !nf4Blocks) {
    error = std::string(given ? "--double-quant" : "--no-double-quant") +
            " applies to NF4 blocks' absmax (--scheme nf4:block<N>), not to '" + schemeText + "'";
    return std::nullopt;
  }
  if (noDoubleQuant || !nf4Blocks)
    return quant::DoubleQuant::None;
  std::optional<quant::AbsmaxFormat> format =
      parseDoubleQuant(given ? doubleQuantText.getValue() : "int8", error);
  if (!format) {
    error = "bad --double-quant " + error;
    return std::nullopt;
  }
  return quant::doubleQuantOf(*format);
}

/// What every quantized weight stores beside its codes: NF4 blocks' double
/// quantization and the scales' format (--scale-dtype), or nullopt with
/// `error` set (chooseDoubleQuant's errors; an unknown dtype; fp16 scales
/// where the scheme stores none: none, double-quantized NF4 blocks).
std::optional<quant::StorageFormat> chooseStorage(const QATSchemeSpec &weights, bool exportPlain,
                                                  std::string &error) {
  std::optional<quant::DoubleQuant> doubleQuant = chooseDoubleQuant(weights, error);
  if (!doubleQuant)
    return std::nullopt;
  if (scaleDtype != "f32" && scaleDtype != "f16") {
    error = "bad --scale-dtype '" + scaleDtype + "' (expected f32 or f16)";
    return std::nullopt;
  }
  if (scaleDtype == "f32")
    return quant::StorageFormat(*doubleQuant, quant::ScaleFormat::F32);
  if (exportPlain) {
    error = "--scale-dtype applies to a quantizing --scheme, not to 'none'";
    return std::nullopt;
  }
  if (*doubleQuant != quant::DoubleQuant::None) {
    error = "--scale-dtype f16 needs --no-double-quant with nf4 blocks (QLoRA's double "
            "quantization stores each block's absmax in 8 bits, not as a scale)";
    return std::nullopt;
  }
  return quant::StorageFormat(quant::DoubleQuant::None, quant::ScaleFormat::F16);
}

/// A Hugging Face directory describes its model: its config.json and
/// model_type stand in for --config and --model when those are not given.
bool modelFromHuggingFace(std::string &error) {
  if (!sys::fs::is_directory(ckptDir) || !sys::fs::exists(ckptDir + "/config.json") ||
      !graphFile.empty())
    return true;
  if (modelConfig.empty())
    modelConfig = ckptDir + "/config.json";
  if (!modelFamily.empty())
    return true;
  std::string family;
  if (!huggingFaceFamily(ckptDir, family, error))
    return false;
  modelFamily = family;
  return true;
}

int run() {
  std::string error;
  if (!modelFromHuggingFace(error))
    return failWith(error);
  if (!graphFile.empty() && !modelFamily.empty())
    return failWith("give either a graph file or --model, not both");
  if (graphFile.empty() && modelFamily.empty())
    return failWith("no model: give <graph.mlir> or --model <family> (a Hugging Face "
                    "directory names its own)");

  // The scheme, in --qat's spelling; the channel axis may be left to each
  // weight (its output channel). "none" exports the parameters as they are.
  bool exportPlain = schemeText == "none";
  if (StringRef(schemeText).contains(','))
    return failWith("bad scheme '" + schemeText + "': one scheme, not a list");
  std::string weightsSpec =
      "weights=" + (exportPlain ? std::string("int8") : canonicalWeightScheme(schemeText));
  std::optional<QATSpec> spec = parseQATSpec(weightsSpec, error);
  if (!spec)
    return failWith(error);
  const QATSchemeSpec &weights = *spec->weights;
  if (weights.observer != "minmax")
    return failWith("bad scheme '" + schemeText +
                    "': an observer has no meaning here (each tensor's own min/max is its range)");
  if (std::string why = checkMethod(exportPlain); !why.empty())
    return failWith(why);
  std::optional<quant::StorageFormat> storage = chooseStorage(weights, exportPlain, error);
  if (!storage)
    return failWith(error);
  std::vector<std::string> ops(opsList.begin(), opsList.end());
  if (ops.empty())
    ops = {"matmul"};
  for (const std::string &op : ops)
    if (op != "matmul" && op != "embedding")
      return failWith("unknown --ops entry '" + op + "' (expected matmul or embedding)");

  MLIRContext context;
  prepareContext(context);
  ModelSource source{graphFile, modelFamily, modelPreset, modelConfig,
                     std::vector<std::string>(modelSet.begin(), modelSet.end())};
  SourceMgr sourceMgr;
  ToolDiagnostics diagnostics(context, sourceMgr, kTool);
  OwningOpRef<ModuleOp> module = loadModel(context, source, sourceMgr);
  if (!module)
    return 1;
  func::FuncOp forward = lookupFunc(*module, "forward");
  if (!forward)
    return failWith("the model has no @forward");
  std::vector<std::string> skip(skipList.begin(), skipList.end());
  ParamUses sites(forward, ops, skip);
  for (const std::string &entry : skip)
    if (!sites.matchedSkips.contains(entry))
      return failWith("skip '" + entry +
                      "' matches no layer, parameter, head or embedding of @forward");

  ExportRequest request;
  request.source = ckptDir;
  request.output = output;
  std::vector<std::string> notes;
  for (const Param &p : sites.params) {
    ExportRequest::Tensor t;
    t.name = p.name;
    t.shape = p.shape;
    t.quantize = p.quantized() && !exportPlain;
    if (t.quantize) {
      int64_t axis = p.uses.front().outputAxis;
      for (const Use &u : p.uses)
        if (u.outputAxis != axis && weights.granularity == "channel" && !weights.axis)
          return failWith("'" + p.name + "' is read with output channels along dimensions " +
                          std::to_string(axis) + " and " + std::to_string(u.outputAxis) +
                          "; give the axis (channel<N>) or skip it");
      t.scheme = kernelScheme(weights.attr(&context, axis));
      if (p.experts()) {
        // Each expert quantized on its own (GPTQ: against the Hessian of
        // its own routed rows); its channel axis is within its slice, one
        // further in the stack.
        t.scheme.stacked = true;
        if (t.scheme.granularity == quant::Granularity::Channel)
          t.scheme.axis += 1;
      }
      t.storage = *storage;
    }
    if (const Use *u = p.blocker(); u && !exportPlain) {
      std::string why = u->skipped ? "the " + u->what + " reading it is skipped"
                        : u->what == "embedding lookup"
                            ? "it is also read by an embedding lookup, which --ops leaves out "
                              "(--ops matmul,embedding quantizes it for both)"
                        : u->what == "matmul" || u->what == "head"
                            ? "it is also read by a " + u->what + ", which --ops leaves out"
                            : "it is also read by " + u->what;
      notes.push_back(p.name + " is kept in full precision: " + why);
    }
    request.tensors.push_back(t);
  }
  GptqResult gptq;
  if (method == "gptq" && !runGptqFor(source, request, gptq, error))
    return failWith(error);
  ExportReport report;
  if (!exportWeights(request, report, error))
    return failWith(error);
  std::string text = formatReport(report, output);
  if (method == "gptq")
    text += formatGptqReport(gptq);
  for (const std::string &note : notes)
    text += "note: " + note + "\n";
  outs() << text;
  return 0;
}

} // namespace

int runQuantize() { return run(); }

std::string withCommas(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return out;
}

} // namespace llmc
