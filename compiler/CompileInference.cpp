//===- CompileInference.cpp - llmc compile --inference --------------------===//
//
// A generation artifact holds two steps over one paged KV cache: @prefill,
// the model at [max-batch, chunk] (prompt chunks, compute bound), and
// @decode, the model at [max-batch, 1] (one new token per sequence, memory
// bound). Graph shapes are static, so the model is built once per step
// shape; the same passes (precision, tensor parallelism, @logits, the KV
// cache) run on each; the two steps are merged into one module, which is
// lowered once, so the cache and the weights are one set of persistent
// buffers both programs address.
//
//===----------------------------------------------------------------------===//

#include "compiler/Compiler.h"
#include "compiler/OffloadChoice.h"

#include "passes/lib/EntryPoints.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir;

namespace llmc {
namespace {

using detail::reportFailure;

/// `--inference max-batch=8,max-context=2048,page=16,chunk=256,blocks=1024,kv=int8`.
struct InferenceSpec {
  int64_t maxBatch = 0, maxContext = 0, page = 16, chunk = 0, blocks = 0;
  /// The cache's element type (f32, bf16, f16, int8, fp8_e4m3); empty: the
  /// compute type.
  std::string kv;

  int64_t maxBlocks() const { return (maxContext + page - 1) / page; }
};

/// The cache type `kv=` names, by its canonical name (llmc-kv-cache's
/// `cache-type`, the artifact's `inference.kv`), or "" with `error` set.
std::string parseCacheType(StringRef value, std::string &error) {
  StringRef kv = value.trim();
  if (kv == "fp8" || kv == "fp8_e4m3")
    return "fp8_e4m3";
  if (kv == "int8" || kv == "bf16" || kv == "f16" || kv == "f32")
    return kv.str();
  const std::string accepted = "int8, fp8 (or fp8_e4m3), bf16, f16 or f32";
  if (kv == "fp8_e5m2")
    error = "--inference: kv=fp8_e5m2 is not supported (a cache keeps E4M3's 3 mantissa bits; "
            "its scales make E5M2's range unnecessary): kv must be " +
            accepted;
  else
    error = "--inference: kv must be " + accepted + ", got '" + value.str() + "'";
  return "";
}

std::string parseSpec(StringRef text, InferenceSpec &spec) {
  SmallVector<StringRef> items;
  text.split(items, ',', -1, /*KeepEmpty=*/false);
  for (StringRef item : items) {
    auto [key, value] = item.split('=');
    key = key.trim();
    if (key == "kv") {
      std::string error;
      spec.kv = parseCacheType(value, error);
      if (!error.empty())
        return error;
      continue;
    }
    int64_t *field = llvm::StringSwitch<int64_t *>(key)
                         .Case("max-batch", &spec.maxBatch)
                         .Case("max-context", &spec.maxContext)
                         .Case("page", &spec.page)
                         .Case("chunk", &spec.chunk)
                         .Case("blocks", &spec.blocks)
                         .Default(nullptr);
    if (!field)
      return "--inference: unknown key '" + key.str() +
             "' (expected max-batch, max-context, page, chunk, blocks or kv)";
    if (value.trim().getAsInteger(10, *field) || *field <= 0)
      return "--inference: " + key.str() + " must be a positive integer, got '" +
             value.str() + "'";
  }
  if (!spec.maxBatch || !spec.maxContext)
    return "--inference needs max-batch=N and max-context=N (e.g. "
           "max-batch=8,max-context=2048)";
  if (!spec.chunk)
    spec.chunk = std::min<int64_t>(spec.maxContext, 256);
  if (spec.chunk > spec.maxContext)
    return "--inference: chunk (" + std::to_string(spec.chunk) + ") exceeds max-context (" +
           std::to_string(spec.maxContext) + ")";
  // Enough blocks for every row at its longest unless told otherwise.
  if (!spec.blocks)
    spec.blocks = spec.maxBatch * spec.maxBlocks();
  return "";
}

/// What inference cannot take from the training flags, or "".
std::string unsupported(const CompileRequest &options) {
  const CompileOptions &p = options.pipeline;
  if (!options.source.inputFile.empty())
    return "--inference builds the model at its step shapes: give --model (a preset or "
           "--config), not a .mlir graph";
  for (StringRef axis : llvm::split(p.mesh, ','))
    if (StringRef name = axis.split('=').first.trim();
        !axis.empty() && name != "tp" && name != "ep")
      return "--inference: only tensor and expert parallelism (--mesh tp=N,ep=M) apply to a "
             "generation step, got --mesh " +
             p.mesh;
  if (p.sequenceParallel)
    return "--inference: --sp splits sequences a decode step does not have";
  if (p.zero != 0)
    return "--inference: --zero shards training state; generation has none";
  if (!p.qat.empty() || !p.lora.empty() || p.qlora)
    return "--inference: --qat, --lora and --qlora change training; quantize the weights "
           "with `llmc quantize` instead";
  if (p.recompute != "none" || !p.recomputeLayers.empty() || !p.memoryBudget.empty())
    return "--inference: recomputation and --memory-budget apply to training (a generation "
           "step's budget is --device-memory)";
  if (!p.insertPass.empty())
    return "--inference: --insert-pass is not supported with --inference";
  if (p.precision == "fp8")
    return "--inference: --precision fp8 is a training recipe; use bf16 or fp32";
  if (p.precision == "fp16")
    return "--inference: --precision fp16 is for training with loss scaling; use bf16 or fp32";
  return "";
}

/// The cache's element type checked against the compute type: a float
/// cache wider than the keys, or another 16-bit float than bf16's, would
/// round or waste without a gain. Returns "" or the error.
std::string checkCacheType(InferenceSpec &spec, StringRef precision) {
  std::string compute = precision == "bf16" ? "bf16" : "f32";
  if (spec.kv.empty())
    spec.kv = compute;
  if (compute == "bf16" && (spec.kv == "f32" || spec.kv == "f16"))
    return "--inference: kv=" + spec.kv +
           " under --precision bf16: the keys are bf16, so the "
           "cache is bf16, int8 or fp8";
  return "";
}

/// `merged` lowered with `options`, or null with the first error in `error`
/// (diagnostics are kept, not printed: a refused choice is not a failure).
OwningOpRef<ModuleOp> lowerQuietly(ModuleOp merged, const CompileOptions &options,
                                   std::string &error) {
  OwningOpRef<ModuleOp> lowered(cast<ModuleOp>(merged->clone()));
  ScopedDiagnosticHandler quiet(merged.getContext(), [&](Diagnostic &d) {
    if (d.getSeverity() == DiagnosticSeverity::Error && error.empty())
      error = d.str();
    return success();
  });
  PassManager pm(merged.getContext());
  pm.enableVerifier(true);
  buildInferenceLowering(pm, options);
  if (failed(pm.run(*lowered)))
    return nullptr;
  return lowered;
}

bool movesLayers(ModuleOp lowered) {
  for (ModuleOp role : programModules(lowered))
    if (auto host = role->getAttrOfType<IntegerAttr>(exec::kHostBytesAttr); host && host.getInt())
      return true;
  return false;
}

/// The request's priced seconds with `lowered`'s steps (the slowest
/// rank's); `form` says which steps stream their layers (their copies
/// overlap the kernels on a GPU's copy stream).
double priceRequest(ModuleOp lowered, const CompileOptions &options, const InferenceSpec &spec,
                    const RequestShape &request, StringRef form) {
  plan::Cluster device = plan::targetDevice(options.target, options.hostBw);
  const plan::MeshShape mesh = plan::MeshShape::parse(options.mesh);
  const double fp32Scale = plan::fp32MatmulScaleOf(options.target);
  StepPrice steps[2];
  for (ModuleOp role : programModules(lowered))
    for (auto program : role.getOps<exec::ProgramOp>()) {
      bool prefill = program.getSymName() == "prefill";
      bool streamed = form == "stream" || (form == "split" && prefill);
      StepPrice price = priceStep(program, device, mesh, fp32Scale);
      price.overlapped = streamed && device.overlap;
      if (price.seconds() > steps[prefill ? 0 : 1].seconds())
        steps[prefill ? 0 : 1] = price;
    }
  return requestSeconds(steps[0], steps[1], spec.chunk, request);
}

/// One way of offloading the layers, lowered (or why not) and priced.
struct OffloadForm {
  const char *name;
  OwningOpRef<ModuleOp> lowered;
  std::string error;
  double seconds = 0;
};

/// Resolves `--offloaded-layers auto` by lowering `merged` every way
/// (stream, host, split) and pricing one request with each
/// (compiler/OffloadChoice.h); `options` gets the choice, `why` its
/// reason. Returns the chosen lowering, or null after reporting an error.
OwningOpRef<ModuleOp> lowerWithChosenLayers(ModuleOp merged, CompileOptions &options,
                                            const InferenceSpec &spec, std::string &why,
                                            StringRef tool) {
  RequestShape request;
  if (std::string error = parseRequest(options.request, spec.maxContext, request); !error.empty()) {
    reportFailure(tool, error);
    return nullptr;
  }
  OffloadForm forms[] = {{"stream"}, {"host"}, {"split"}};
  for (OffloadForm &form : forms) {
    CompileOptions formOptions = options;
    formOptions.offloadedLayers = form.name;
    form.lowered = lowerQuietly(merged, formOptions, form.error);
    if (&form == &forms[0] && form.lowered && !movesLayers(*form.lowered)) {
      options.offloadedLayers = "stream";
      why = "every layer fits in --device-memory";
      return std::move(form.lowered);
    }
  }
  OffloadForm *best = nullptr;
  std::ostringstream os, refused;
  os.precision(4);
  os << "request of " << request.promptTokens << " prompt and " << request.newTokens
     << " new tokens, " << options.target << " target: ";
  std::string separator;
  for (OffloadForm &form : forms) {
    if (!form.lowered) {
      refused << "; " << form.name << " refused (" << form.error << ")";
      continue;
    }
    form.seconds = priceRequest(*form.lowered, options, spec, request, form.name);
    os << separator << form.name << " " << form.seconds * 1e3 << " ms";
    separator = ", ";
    if (!best || form.seconds < best->seconds)
      best = &form;
  }
  if (!best) {
    reportFailure(tool, std::string("--offloaded-layers auto: no form compiles; streamed: ") +
                            forms[0].error + "; run on the host: " + forms[1].error +
                            "; split: " + forms[2].error);
    return nullptr;
  }
  options.offloadedLayers = best->name;
  why = os.str() + refused.str();
  return std::move(best->lowered);
}

} // namespace

int compileInference(const CompileRequest &options, StringRef tool) {
  InferenceSpec spec;
  if (std::string error = parseSpec(options.pipeline.inference, spec); !error.empty())
    return reportFailure(tool, error);
  if (std::string error = unsupported(options); !error.empty())
    return reportFailure(tool, error);
  if (std::string error = checkCacheType(spec, options.pipeline.precision); !error.empty())
    return reportFailure(tool, error);
  if (options.emit == "train")
    return reportFailure(tool, "--emit train: an inference artifact has no training step "
                               "(use graph, exec or artifact)");

  MLIRContext context;
  prepareContext(context);
  llvm::SourceMgr sourceMgr;
  ToolDiagnostics diagnostics(context, sourceMgr, tool);

  struct Step {
    const char *program;
    int64_t rows;
  };
  OwningOpRef<ModuleOp> merged;
  ModelConfig config;
  for (Step step : {Step{"prefill", spec.chunk}, Step{"decode", 1}}) {
    OwningOpRef<ModuleOp> module =
        loadModel(context, options.source, sourceMgr, &config, [&](ModelConfig &c) {
          c.batchSize = spec.maxBatch;
          // A context beyond GPT-2's learned positions is reported below,
          // by its name, not as a bad sequence length.
          c.seqLen = c.family == "gpt2" ? std::min(step.rows, c.maxPositions) : step.rows;
          c.positionInputs = true;
          c.dropout = 0;
        });
    if (!module)
      return 1;
    if (config.packed())
      return reportFailure(tool, "--inference: a packed model (doc_separator) generates one "
                                 "sequence per row; compile it without doc_separator");
    if (config.family == "gpt2" && spec.maxContext > config.maxPositions)
      return reportFailure(tool, "--inference: max-context " + std::to_string(spec.maxContext) +
                                     " exceeds the model's " +
                                     std::to_string(config.maxPositions) +
                                     " learned positions (max_positions)");
    KvCacheOptions cache;
    cache.program = step.program;
    cache.page = spec.page;
    cache.blocks = spec.blocks;
    cache.maxBlocks = spec.maxBlocks();
    cache.cacheType = spec.kv;
    PassManager pm(&context);
    pm.enableVerifier(true);
    buildInferencePipeline(pm, options.pipeline, cache);
    if (failed(pm.run(*module)))
      return 1;
    if (!merged) {
      merged = std::move(module);
      continue;
    }
    // The decode step joins the prefill module; the mesh and everything
    // else at module level is the same in both.
    func::FuncOp decode = lookupFunc(*module, step.program);
    decode->moveBefore(merged->getBody(), merged->getBody()->end());
  }

  if (options.emit == "graph")
    return detail::writeOutput(*merged, options, {}, tool);
  CompileRequest chosen = options;
  std::string why;
  if (chosen.pipeline.deviceMemoryBytes > 0 && chosen.pipeline.offloadedLayers == "auto") {
    merged = lowerWithChosenLayers(*merged, chosen.pipeline, spec, why, tool);
    if (!merged)
      return 1;
  } else {
    PassManager pm(&context);
    pm.enableVerifier(true);
    buildInferenceLowering(pm, chosen.pipeline);
    if (failed(pm.run(*merged)))
      return 1;
  }
  std::map<std::string, std::string> meta = detail::collectMetadata(*merged, chosen, spec.maxBatch);
  if (!why.empty())
    meta["offloaded_layers.why"] = why;
  meta["inference.max_batch"] = std::to_string(spec.maxBatch);
  meta["inference.max_context"] = std::to_string(spec.maxContext);
  meta["inference.page"] = std::to_string(spec.page);
  meta["inference.chunk"] = std::to_string(spec.chunk);
  meta["inference.blocks"] = std::to_string(spec.blocks);
  meta["inference.max_blocks"] = std::to_string(spec.maxBlocks());
  meta["inference.kv"] = spec.kv;
  return detail::writeOutput(*merged, chosen, meta, tool);
}

} // namespace llmc
