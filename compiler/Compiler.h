//===- Compiler.h - the staged llmc driver ----------------------*- C++ -*-===//
//
// Loads a forward graph (a .mlir file or a model builder), runs the training
// pipeline up to the requested stage and writes that stage: the `llm` graph,
// the training IR, the exec IR, or the artifact.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMPILER_COMPILER_H
#define LLMC_COMPILER_COMPILER_H

#include "models/ModelConfig.h"
#include "passes/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/SourceMgr.h"

#include <functional>
#include <memory>

#include <map>
#include <string>
#include <vector>

namespace llmc {

/// Where the forward graph comes from.
struct ModelSource {
  std::string inputFile;          ///< a .mlir file, or empty
  std::string family, preset;     ///< a built-in model
  std::string configJson;         ///< HF-style config.json applied to the preset
  std::vector<std::string> overrides; ///< key=value
};

/// What `llmc compile` is asked for: where the model comes from, the
/// options of the compile (passes/lib/CompileOptions.h), the training
/// defaults the artifact records, and what to write where.
struct CompileRequest {
  ModelSource source;
  CompileOptions pipeline;
  ScheduleDefaults schedule;
  std::string emit = "artifact"; ///< graph | train | exec | artifact
  std::string output = "-";
};

/// Registers every dialect the compiler needs into `context`.
void prepareContext(mlir::MLIRContext &context);

/// Builds or parses the forward graph and verifies it. Errors are reported
/// through the context's diagnostic handler (a parsed file is added to
/// `sourceMgr` so diagnostics can quote it); `config` is filled for built-in
/// models.
/// `adjust` changes a built-in model's config before it is validated and
/// built (inference builds it at its step shapes).
mlir::OwningOpRef<mlir::ModuleOp>
loadModel(mlir::MLIRContext &context, const ModelSource &source, llvm::SourceMgr &sourceMgr,
          ModelConfig *config = nullptr,
          const std::function<void(ModelConfig &)> &adjust = nullptr);

/// Prints diagnostics as `file:line:col: error: ...` with the source line
/// when the location is in a file, else as `<tool>: error: ...`.
class ToolDiagnostics {
public:
  ToolDiagnostics(mlir::MLIRContext &context, llvm::SourceMgr &sourceMgr,
                  llvm::StringRef tool);
  ~ToolDiagnostics();

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

/// The whole `llmc compile`; returns a process exit code and prints errors
/// to stderr prefixed with `tool`.
int compile(const CompileRequest &options, llvm::StringRef tool);

/// `llmc compile --inference`: @prefill and @decode over a paged KV cache
/// (compiler/CompileInference.cpp).
int compileInference(const CompileRequest &options, llvm::StringRef tool);

namespace detail {
/// Prints `<tool>: error: message`; returns 1.
int reportFailure(llvm::StringRef tool, const llvm::Twine &message);
/// The artifact's metadata: model, layout, pipeline and options.
std::map<std::string, std::string>
collectMetadata(mlir::ModuleOp module, const CompileRequest &options, int64_t batchRows);
/// Writes `module` at `options.emit` (IR text, or the artifact with `meta`).
int writeOutput(mlir::ModuleOp module, const CompileRequest &options,
                const std::map<std::string, std::string> &meta, llvm::StringRef tool);
} // namespace detail

} // namespace llmc

#endif
