//===- QATScheme.h - qat schemes: the kernel encoding and --qat specs -*- C++ -*-===//
//
// A #qat.scheme as the kernels take it (common/QuantScheme.h), and the
// user's `--qat` spec parsed into the schemes and sites the llmc-qat pass
// quantizes.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_PASSES_LIB_QATSCHEME_H
#define LLMC_PASSES_LIB_QATSCHEME_H

#include "common/QuantScheme.h"
#include "dialects/QAT/QATDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/StringSet.h"

#include <optional>
#include <string>
#include <vector>

namespace llmc {

/// The kernels' encoding of `scheme`.
quant::Scheme kernelScheme(qat::SchemeAttr scheme);

/// The kernels' integer for string attribute `name` = `value` of an llm or
/// qat op (absmax_format: quant::AbsmaxFormat; score: RouterScore), or
/// nullopt for a string no
/// kernel reads (which ops verify before lowering).
std::optional<int64_t> kernelStringAttr(llvm::StringRef name, llvm::StringRef value);

/// Whether `v` becomes a mixture of experts' router logits (read by
/// llm.moe_route, through casts and reshapes): the values that pick the
/// experts, which quantization leaves in full precision.
bool feedsRouter(mlir::Value v);

/// Whether `skip=` entries exclude site `op` of `forward` (reading parameter
/// `weight`, or null): `head` (the matmul feeding the loss), `embedding`, a
/// layer, a parameter or dotted prefix. Adds the entries that match to
/// `matched`, so entries matching nothing can be reported.
bool skipMatches(mlir::func::FuncOp forward, mlir::Operation *op, mlir::BlockArgument weight,
                 llvm::ArrayRef<std::string> skip, llvm::StringSet<> &matched);

/// One side of a --qat spec: a scheme whose channel axis may be left to the
/// site (a weight's output channel, an activation's last dimension).
struct QATSchemeSpec {
  std::string format;
  std::string granularity = "tensor";
  std::optional<int64_t> axis; ///< channel: unset = the site's default
  int64_t block = 0;
  bool symmetric = true;
  std::string observer = "minmax";
  double momentum = 0.99;
  double outlier = 0.0; ///< outlier-column threshold (activations only); 0: none
  int64_t history = 1024;  ///< delayed: amax history length (Transformer Engine's default)
  int64_t margin = 0;      ///< delayed: scale = (fmax / amax) / 2^margin
  std::string algo = "max"; ///< delayed: the history's max or its most_recent amax

  /// The attribute for a site whose default channel axis is `defaultAxis`.
  qat::SchemeAttr attr(mlir::MLIRContext *context, int64_t defaultAxis) const;
};

/// `weights=int4:block64:sym, activations=int8:tensor:asym:ema, ops=matmul,
/// skip=embedding,head`; `activations=int8:outlier6` keeps outlier columns;
/// `gradients=fp8_e5m2` fake-quantizes the gradient of each weight matmul's
/// output (per tensor, this step's range: fp8 training's dY).
struct QATSpec {
  std::optional<QATSchemeSpec> weights, activations, gradients;
  std::vector<std::string> ops{"matmul"}; ///< matmul, embedding
  std::vector<std::string> skip;          ///< head, embedding, layers, parameters
};

/// A stored weight scheme with `fp8` spelled `fp8_e4m3` (fp8 weights are
/// E4M3: E5M2's two mantissa bits are for gradients) and a bare `nf4` as
/// QLoRA's blocks of 64, so `llmc quantize` and `--weight-quant` read the
/// same scheme from the same words.
std::string canonicalWeightScheme(llvm::StringRef text);

/// Parses the value of `--double-quant` (`llmc quantize`, `llmc compile`
/// and the passes' options): `int8` (the default) or `fp8` (OCP E4M3,
/// QLoRA's 8-bit floats), the format of NF4's absmax levels; on error
/// returns nullopt with `error` quoting the value and saying what is
/// expected (for the caller to prefix with the option's name).
std::optional<quant::AbsmaxFormat> parseDoubleQuant(llvm::StringRef text, std::string &error);

/// Parses a --weight-quant scheme (one --qat weight scheme): int8 or int4
/// at any granularity and symmetry, fp8 (E4M3; `fp8` or `fp8_e4m3`)
/// symmetric at any granularity, or nf4 in blocks (`nf4` alone: blocks of
/// 64); on error returns nullopt with `error` set to a one-line reason.
std::optional<QATSchemeSpec> parseWeightOnlyScheme(llvm::StringRef text, std::string &error);

/// The scheme fields `--fp8-scaling current|delayed[,history=N,margin=M,
/// algo=max|most_recent]` appends to each scheme of --precision fp8's
/// recipe: "" for current scaling, else ":delayed<N>:margin<M>:<algo>"
/// (defaults: Transformer Engine's DelayedScaling, 1024, 0, max). On error
/// returns nullopt with `error` set to a one-line reason.
std::optional<std::string> fp8ScalingSuffix(llvm::StringRef text, std::string &error);

/// Parses a --qat spec; on error returns nullopt with `error` set to a
/// one-line reason quoting the offending part.
std::optional<QATSpec> parseQATSpec(llvm::StringRef text, std::string &error);

} // namespace llmc

#endif
