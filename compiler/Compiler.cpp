//===- Compiler.cpp - the staged llmc driver ------------------------------===//

#include "compiler/Compiler.h"

#include "compiler/ArtifactWriter.h"
#include "compiler/RecomputeBudget.h"
#include "dialects/Annotations/Annotations.h"
#include "dialects/Registration.h"
#include "models/Models.h"
#include "passes/lib/EntryPoints.h"
#include "passes/lib/LoRASpec.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <charconv>
#include <sstream>

using namespace mlir;

namespace llmc {

void prepareContext(MLIRContext &context) {
  DialectRegistry registry;
  registerDialects(registry);
  context.appendDialectRegistry(registry);
  context.loadAllAvailableDialects();
  // Errors name the op and its location; a dump of the op's generic form
  // adds noise, not information, for users.
  context.printOpOnDiagnostic(false);
}

struct ToolDiagnostics::Impl {
  Impl(MLIRContext &context, llvm::SourceMgr &sourceMgr, StringRef tool)
      : files(sourceMgr, &context),
        plain(&context, [tool = tool.str()](Diagnostic &diag) -> LogicalResult {
          if (isa<FileLineColLoc>(diag.getLocation()))
            return failure(); // the SourceMgr handler quotes the line
          // Ops of built-in models carry names ("gpt2.h.0.attention").
          std::string where;
          if (auto name = dyn_cast<NameLoc>(diag.getLocation()))
            where = name.getName().str() + ": ";
          llvm::WithColor::error(llvm::errs(), tool) << where << diag.str() << "\n";
          for (Diagnostic &note : diag.getNotes())
            llvm::WithColor::note(llvm::errs(), tool) << note.str() << "\n";
          return success();
        }) {}
  SourceMgrDiagnosticHandler files;
  ScopedDiagnosticHandler plain;
};

ToolDiagnostics::ToolDiagnostics(MLIRContext &context, llvm::SourceMgr &sourceMgr,
                                 StringRef tool)
    : impl(std::make_unique<Impl>(context, sourceMgr, tool)) {}
ToolDiagnostics::~ToolDiagnostics() = default;

OwningOpRef<ModuleOp> loadModel(MLIRContext &context, const ModelSource &source,
                                llvm::SourceMgr &sourceMgr, ModelConfig *configOut,
                                const std::function<void(ModelConfig &)> &adjust) {
  OwningOpRef<ModuleOp> module;
  if (!source.inputFile.empty()) {
    std::string error;
    auto file = openInputFile(source.inputFile, &error);
    if (!file) {
      emitError(UnknownLoc::get(&context)) << "cannot open '" << source.inputFile
                                           << "': " << error;
      return nullptr;
    }
    sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
    module = parseSourceFile<ModuleOp>(sourceMgr, &context);
    if (!module)
      return nullptr;
  } else {
    // Without --model, config.json's model_type names the family.
    std::string family = source.family;
    if (family.empty() && !source.configJson.empty()) {
      llvm::Expected<std::string> named = configFamily(source.configJson);
      if (!named) {
        emitError(UnknownLoc::get(&context)) << llvm::toString(named.takeError());
        return nullptr;
      }
      family = *named;
    }
    llvm::Expected<ModelConfig> config = presetConfig(family, source.preset);
    if (!config) {
      emitError(UnknownLoc::get(&context)) << llvm::toString(config.takeError());
      return nullptr;
    }
    if (!source.configJson.empty())
      if (llvm::Error e = applyConfigJson(*config, source.configJson)) {
        emitError(UnknownLoc::get(&context)) << llvm::toString(std::move(e));
        return nullptr;
      }
    for (const std::string &assignment : source.overrides)
      if (llvm::Error e = applyOverride(*config, assignment)) {
        emitError(UnknownLoc::get(&context)) << llvm::toString(std::move(e));
        return nullptr;
      }
    if (adjust)
      adjust(*config);
    if (llvm::Error e = config->validate()) {
      emitError(UnknownLoc::get(&context))
          << "invalid " << family << " config: " << llvm::toString(std::move(e));
      return nullptr;
    }
    module = buildModel(&context, *config);
    if (configOut)
      *configOut = *config;
  }
  if (failed(verify(*module)))
    return nullptr;
  return module;
}

namespace {

/// Rows of the forward graph's `tokens` input (one microbatch, all
/// data-parallel ranks together), or 0.
int64_t globalBatchRows(ModuleOp forward) {
  func::FuncOp f = lookupFunc(forward, "forward");
  if (!f)
    return 0;
  for (BlockArgument arg : f.getArguments())
    if (auto name = f.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kNameAttr);
        name && name.getValue() == "tokens")
      if (auto type = dyn_cast<RankedTensorType>(arg.getType()); type && type.getRank() == 2)
        return type.getDimSize(0);
  return 0;
}

/// The shortest decimal that reads back as `value` exactly (1e-05, not
/// 1.0000000000000001e-05), so metadata compares equal to config files.
std::string shortestDecimal(double value) {
  char text[32];
  return std::string(text, std::to_chars(text, text + sizeof(text), value).ptr);
}

} // namespace

std::map<std::string, std::string>
detail::collectMetadata(ModuleOp module, const CompileRequest &options, int64_t batchRows) {
  std::map<std::string, std::string> meta;
  auto put = [&](const std::string &key, auto value) {
    std::ostringstream os;
    os << value;
    meta[key] = os.str();
  };
  if (auto model = module->getAttrOfType<DictionaryAttr>(kModelAttr))
    for (NamedAttribute entry : model) {
      if (auto s = dyn_cast<StringAttr>(entry.getValue()))
        put("model." + entry.getName().str(), s.getValue().str());
      else if (auto i = dyn_cast<IntegerAttr>(entry.getValue()))
        put("model." + entry.getName().str(), i.getInt());
      else if (auto f = dyn_cast<FloatAttr>(entry.getValue()))
        put("model." + entry.getName().str(), shortestDecimal(f.getValueAsDouble()));
    }
  if (auto layout = module->getAttrOfType<DictionaryAttr>(kLayoutAttr)) {
    std::string axes;
    if (auto batch = layout.getAs<ArrayAttr>("batch_axes"))
      for (StringRef axis : batch.getAsValueRange<StringAttr>())
        axes += (axes.empty() ? "" : ",") + axis.str();
    put("data_parallel_axes", axes);
    if (auto zero = layout.getAs<IntegerAttr>("zero"))
      put("zero", zero.getInt());
    std::string zeroAxes;
    if (auto zero = layout.getAs<ArrayAttr>("zero_axes"))
      for (StringRef axis : zero.getAsValueRange<StringAttr>())
        zeroAxes += (zeroAxes.empty() ? "" : ",") + axis.str();
    put("zero_axes", zeroAxes);
  }
  // The pipeline schedule and what it is expected to cost.
  if (auto pipeline = module->getAttrOfType<DictionaryAttr>(kPipelineAttr)) {
    for (NamedAttribute entry : pipeline) {
      std::string key = "pipeline." + entry.getName().str();
      Attribute value = entry.getValue();
      if (auto text = dyn_cast<StringAttr>(value)) {
        put(key, text.getValue().str());
      } else if (auto i = dyn_cast<IntegerAttr>(value)) {
        put(key, i.getInt());
      } else if (auto f = dyn_cast<FloatAttr>(value)) {
        put(key, f.getValueAsDouble());
      } else if (auto list = dyn_cast<ArrayAttr>(value)) {
        // Stage lists: "a;b;c".
        std::string joined;
        for (Attribute item : list) {
          joined += joined.empty() ? "" : ";";
          if (auto t = dyn_cast<StringAttr>(item))
            joined += t.getValue().str();
          else if (auto n = dyn_cast<IntegerAttr>(item))
            joined += std::to_string(n.getInt());
        }
        put(key, joined);
      }
    }
  }
  for (auto &[key, value] : optionMetadata(options.pipeline, options.schedule))
    meta.emplace(key, value); // what the module says (layout, pipeline) wins
  put("model.batch_size", batchRows);
  // What merging adapters into their weights needs (llmc merge-lora).
  std::string loraError;
  if (std::optional<LoRASpec> lora = parseLoRASpec(options.pipeline.lora, loraError);
      lora && !options.pipeline.lora.empty())
    put("lora.scale", lora->scale());
  if (options.pipeline.qlora)
    put("qlora.block", options.pipeline.qloraBlock);
  return meta;
}

int detail::reportFailure(llvm::StringRef tool, const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), tool) << message << "\n";
  return 1;
}

using detail::reportFailure;

int compile(const CompileRequest &options, llvm::StringRef tool) {
  static const char *stages[] = {"graph", "train", "exec", "artifact"};
  if (!llvm::is_contained(stages, options.emit))
    return reportFailure(tool, "unknown --emit '" + options.emit +
                                   "' (expected graph, train, exec or artifact)");
  CompileOptions pipeline = options.pipeline;
  if (std::string error = resolveOptions(pipeline); !error.empty())
    return reportFailure(tool, error);
  if (std::string error = resolveOptions(options.schedule); !error.empty())
    return reportFailure(tool, error);
  if (!pipeline.inference.empty()) {
    CompileRequest resolved = options;
    resolved.pipeline = pipeline; // with what resolveOptions derived (--weight-quant's block)
    return compileInference(resolved, tool);
  }

  MLIRContext context;
  prepareContext(context);
  llvm::SourceMgr sourceMgr;
  ToolDiagnostics diagnostics(context, sourceMgr, tool);
  OwningOpRef<ModuleOp> module = loadModel(context, options.source, sourceMgr);
  if (!module)
    return 1;

  int64_t batchRows = globalBatchRows(*module);
  const std::string recomputeMode = pipeline.recompute; // before a budget picks layers
  if (pipeline.recompute == "budget") {
    RecomputeChoice priced;
    FailureOr<std::string> layers = chooseRecompute(*module, pipeline, tool, &priced);
    if (failed(layers))
      return 1;
    pipeline.recompute = "none";
    pipeline.recomputeLayers = *layers;
    pipeline.recomputePrice = priced.price;
    pipeline.recomputePriceBasis = priced.basis;
  }
  pipeline.emit = options.emit == "artifact" ? "exec" : options.emit;
  PassManager pm(&context);
  pm.enableVerifier(true);
  if (failed(buildTrainingPipeline(pm, pipeline, [&](const llvm::Twine &message) {
        reportFailure(tool, message);
      })))
    return 1;
  if (failed(pm.run(*module)))
    return 1;

  if (options.emit != "artifact")
    return detail::writeOutput(*module, options, {}, tool);
  CompileRequest chosen = options;
  chosen.pipeline = pipeline;
  chosen.pipeline.recompute = recomputeMode;
  return detail::writeOutput(*module, options, detail::collectMetadata(*module, chosen, batchRows),
                             tool);
}

int detail::writeOutput(ModuleOp module, const CompileRequest &options,
                        const std::map<std::string, std::string> &meta, llvm::StringRef tool) {
  if (options.emit != "artifact") {
    std::string error;
    auto out = openOutputFile(options.output, &error);
    if (!out)
      return reportFailure(tool, "cannot write '" + options.output + "': " + error);
    module->print(out->os());
    out->os() << "\n";
    out->keep();
    return 0;
  }
  FailureOr<std::vector<uint8_t>> bytes = writeArtifact(module, meta);
  if (failed(bytes))
    return 1;
  if (options.output == "-")
    return reportFailure(tool, "an artifact is binary: give -o <file>.llmc");
  // writeToOutput writes a temporary file and renames it over the target,
  // so an existing artifact survives a failed write.
  if (llvm::Error e = llvm::writeToOutput(options.output, [&](llvm::raw_ostream &os) {
        os.write(reinterpret_cast<const char *>(bytes->data()), bytes->size());
        return llvm::Error::success();
      }))
    return reportFailure(tool, "cannot write '" + options.output +
                                   "': " + llvm::toString(std::move(e)));
  return 0;
}

} // namespace llmc
