//===- QATScheme.cpp - qat schemes: the kernel encoding and --qat specs ---===//

#include "passes/lib/QATScheme.h"

#include "common/RouterScore.h"
#include "dialects/LLM/LLMDialect.h"
#include "passes/lib/Parameters.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"

#include <cmath>

using namespace mlir;

namespace llmc {

bool feedsRouter(Value v) {
  SmallVector<Value> values{v};
  while (!values.empty()) {
    Value next = values.pop_back_val();
    for (Operation *user : next.getUsers()) {
      if (isa<llm::MoERouteOp>(user))
        return true;
      if (isa<llm::CastOp, llm::ReshapeOp>(user))
        values.push_back(user->getResult(0));
    }
  }
  return false;
}

bool skipMatches(func::FuncOp forward, Operation *op, BlockArgument weight,
                 llvm::ArrayRef<std::string> skip, llvm::StringSet<> &matched) {
  bool hit = false;
  auto match = [&](StringRef entry, bool matches) {
    if (matches) {
      matched.insert(entry);
      hit = true;
    }
  };
  auto block = op->getParentOfType<llm::BlockOp>();
  for (const std::string &entry : skip) {
    StringRef e(entry);
    match(e, e == "head" && isa<llm::MatmulOp>(op) && feedsLoss(op->getResult(0)));
    match(e, e == "embedding" && isa<llm::EmbeddingOp>(op));
    match(e, e == "router" && isa<llm::MatmulOp>(op) && feedsRouter(op->getResult(0)));
    match(e, block && block.getName() == e);
    if (weight)
      match(e, namesParameter(llm::getParamAttr(forward, weight.getArgNumber()).getName(), e));
  }
  return hit;
}

quant::Scheme kernelScheme(qat::SchemeAttr scheme) {
  quant::Scheme s;
  s.format = llvm::StringSwitch<quant::Format>(scheme.getFormat())
                 .Case("int4", quant::Format::Int4)
                 .Case("int3", quant::Format::Int3)
                 .Case("fp8_e4m3", quant::Format::Fp8E4M3)
                 .Case("fp8_e5m2", quant::Format::Fp8E5M2)
                 .Case("nf4", quant::Format::Nf4)
                 .Default(quant::Format::Int8);
  s.granularity = llvm::StringSwitch<quant::Granularity>(scheme.getGranularity())
                      .Case("channel", quant::Granularity::Channel)
                      .Case("block", quant::Granularity::Block)
                      .Default(quant::Granularity::Tensor);
  s.axis = scheme.getAxis();
  s.block = scheme.getBlock();
  s.symmetric = scheme.getSymmetric();
  s.outlier = scheme.getOutlier().convertToDouble();
  return s;
}

std::optional<int64_t> kernelStringAttr(llvm::StringRef name, llvm::StringRef value) {
  quant::AbsmaxFormat format;
  if (name == "absmax_format" && quant::parseAbsmaxFormat(value.str(), format))
    return static_cast<int64_t>(format);
  if (name == "score")
    if (std::optional<RouterScore> score = parseRouterScore(value.str()))
      return static_cast<int64_t>(*score);
  return std::nullopt;
}

qat::SchemeAttr QATSchemeSpec::attr(MLIRContext *context, int64_t defaultAxis) const {
  int64_t channelAxis = granularity == "channel" ? axis.value_or(defaultAxis) : 0;
  bool delayed = observer == "delayed";
  return qat::SchemeAttr::get(context, format, granularity, channelAxis, block, symmetric, observer,
                              llvm::APFloat(momentum), llvm::APFloat(outlier),
                              delayed ? history : 0, delayed ? margin : 0,
                              delayed ? algo : "max");
}

namespace {

/// `int4:block64:sym`, `int8:tensor:asym:ema0.9`, `fp8_e4m3:channel1`,
/// `int8:outlier6`, `fp8_e4m3:delayed16:margin1:most_recent`.
std::optional<QATSchemeSpec> parseScheme(llvm::StringRef text, std::string &error) {
  QATSchemeSpec spec;
  std::string delayedField; // a field that only delayed scaling reads
  auto bad = [&](const llvm::Twine &why) {
    error = ("bad scheme '" + text + "': " + why).str();
    return std::nullopt;
  };
  for (llvm::StringRef field : llvm::split(text, ':')) {
    field = field.trim();
    int64_t number;
    double real;
    if (field == "int8" || field == "int4" || field == "int3" || field == "fp8_e4m3" ||
        field == "fp8_e5m2" || field == "nf4") {
      if (!spec.format.empty())
        return bad("two formats ('" + spec.format + "' and '" + field + "')");
      spec.format = field.str();
    } else if (field == "tensor") {
      spec.granularity = "tensor";
    } else if (field.consume_front("channel")) {
      spec.granularity = "channel";
      if (!field.empty()) {
        if (field.getAsInteger(10, number) || number < 0)
          return bad("channel axis '" + field + "' is not a dimension number");
        spec.axis = number;
      }
    } else if (field.consume_front("block")) {
      if (field.getAsInteger(10, number) || number < 1)
        return bad("block size '" + field + "' (write e.g. block64)");
      spec.granularity = "block";
      spec.block = number;
    } else if (field == "sym") {
      spec.symmetric = true;
    } else if (field == "asym") {
      spec.symmetric = false;
    } else if (field == "minmax") {
      spec.observer = "minmax";
    } else if (field.consume_front("ema")) {
      spec.observer = "ema";
      if (!field.empty()) {
        if (field.getAsDouble(real) || !(real > 0 && real < 1))
          return bad("ema momentum '" + field + "' must be in (0, 1) (write e.g. ema0.99)");
        spec.momentum = real;
      }
    } else if (field.consume_front("delayed")) {
      spec.observer = "delayed";
      if (!field.empty()) {
        if (field.getAsInteger(10, number) || number < 1)
          return bad("amax history length '" + field +
                     "' must be an integer >= 1 (write e.g. delayed1024)");
        spec.history = number;
      }
    } else if (field.consume_front("margin")) {
      if (field.getAsInteger(10, number) || number < 0)
        return bad("margin '" + field + "' must be an integer >= 0 (write e.g. margin0)");
      spec.margin = number;
      delayedField = "margin";
    } else if (field == "max" || field == "most_recent") {
      spec.algo = field.str();
      delayedField = field.str();
    } else if (field.consume_front("outlier")) {
      // LLM.int8()'s threshold by default.
      spec.outlier = 6.0;
      if (!field.empty()) {
        if (field.getAsDouble(real) || !(real > 0 && std::isfinite(real)))
          return bad("outlier threshold '" + field +
                     "' must be a positive number (write e.g. outlier6)");
        spec.outlier = real;
      }
    } else {
      return bad("unknown field '" + field +
                 "' (formats int8 int4 int3 fp8_e4m3 fp8_e5m2 nf4; tensor, channel[<axis>], "
                 "block<size>; sym, asym; minmax, ema[<momentum>], delayed[<history>] with "
                 "margin<M>, max or most_recent; outlier[<threshold>])");
    }
  }
  if (spec.format.empty())
    return bad("no format (int8, int4, fp8_e4m3, fp8_e5m2 or nf4)");
  if (!spec.symmetric && spec.format != "int8" && spec.format != "int4")
    return bad("format '" + spec.format + "' is symmetric only");
  if (spec.observer == "delayed") {
    if (spec.format != "fp8_e4m3" && spec.format != "fp8_e5m2")
      return bad("delayed scaling needs an fp8 format (fp8_e4m3 or fp8_e5m2), got '" +
                 spec.format + "'");
    if (spec.granularity != "tensor")
      return bad("delayed scaling is per tensor (one amax history per tensor)");
  } else if (!delayedField.empty()) {
    return bad("'" + delayedField + "' needs the delayed observer (write e.g. delayed1024:" +
               delayedField + ")");
  }
  if (spec.outlier > 0) {
    if (spec.format != "int8" && spec.format != "int4")
      return bad("outlier columns need an integer format (int8 or int4), got '" + spec.format +
                 "'");
    if (spec.granularity == "block")
      return bad("outlier columns need tensor or channel granularity");
    // The kept columns change from step to step; a running average of
    // ranges over different column sets is not the range of anything.
    if (spec.observer == "ema")
      return bad("outlier columns need the minmax observer (which columns are kept is "
                 "decided on every step)");
  }
  return spec;
}

} // namespace

std::string canonicalWeightScheme(llvm::StringRef text) {
  if (text.trim() == "nf4")
    return "nf4:block" + std::to_string(quant::kNf4Block);
  llvm::SmallVector<llvm::StringRef> fields;
  text.split(fields, ':');
  std::string canonical;
  for (llvm::StringRef field : fields)
    canonical +=
        (canonical.empty() ? "" : ":") + (field.trim() == "fp8" ? "fp8_e4m3" : field.str());
  return canonical;
}

std::optional<quant::AbsmaxFormat> parseDoubleQuant(llvm::StringRef text, std::string &error) {
  if (text == "int8")
    return quant::AbsmaxFormat::Int8;
  if (text == "fp8")
    return quant::AbsmaxFormat::Fp8E4M3;
  error = ("'" + text + "' (expected int8 or fp8: the format of NF4's absmax levels)").str();
  return std::nullopt;
}

std::optional<QATSchemeSpec> parseWeightOnlyScheme(llvm::StringRef text, std::string &error) {
  std::optional<QATSchemeSpec> spec = parseScheme(canonicalWeightScheme(text), error);
  if (!spec)
    return std::nullopt;
  auto bad = [&](const llvm::Twine &why) {
    error = ("scheme '" + text + "': " + why).str();
    return std::nullopt;
  };
  if (spec->format == "nf4") {
    // QLoRA's storage: blocks, double-quantized absmax.
    if (spec->granularity != "block")
      return bad("NF4 weights are stored in blocks (nf4:block<N>)");
  } else if (spec->format == "fp8_e5m2") {
    return bad("fp8 weights are stored as fp8_e4m3 (fp8); E5M2 keeps two mantissa bits, for "
               "gradients");
  } else if (spec->format != "int8" && spec->format != "int4" && spec->format != "fp8_e4m3") {
    return bad("weight-only inference stores int8, int4, fp8 (E4M3) or nf4 weights, not " +
               spec->format);
  }
  if (spec->observer != "minmax" || spec->outlier > 0)
    return bad("an observer or outlier columns have no meaning for stored weights");
  if (spec->axis && *spec->axis > 1)
    return bad("channel axis " + llvm::Twine(*spec->axis) + " of a 2-D weight (0 or 1)");
  return spec;
}

std::optional<QATSpec> parseQATSpec(llvm::StringRef text, std::string &error) {
  QATSpec spec;
  bool opsGiven = false;
  std::vector<std::string> *list = nullptr; // a list key continues over commas
  for (llvm::StringRef item : llvm::split(text, ',')) {
    item = item.trim();
    if (item.empty())
      continue;
    auto [key, value] = item.split('=');
    key = key.trim();
    value = value.trim();
    if (!item.contains('=')) {
      if (!list) {
        error = "bad --qat entry '" + item.str() + "' (expected key=value)";
        return std::nullopt;
      }
      list->push_back(item.str());
      continue;
    }
    list = nullptr;
    if (key == "weights" || key == "activations") {
      std::optional<QATSchemeSpec> scheme = parseScheme(value, error);
      if (!scheme)
        return std::nullopt;
      if (key == "weights" && scheme->outlier > 0) {
        error = "bad scheme '" + value.str() +
                "': outlier columns are for activations= only (they are an activation's "
                "features)";
        return std::nullopt;
      }
      (key == "weights" ? spec.weights : spec.activations) = *scheme;
    } else if (key == "gradients") {
      std::optional<QATSchemeSpec> scheme = parseScheme(value, error);
      if (!scheme)
        return std::nullopt;
      // quantize_grad observes each gradient whole, on every step.
      if (scheme->granularity != "tensor" || scheme->observer == "ema" || !scheme->symmetric ||
          scheme->outlier > 0) {
        error = "bad scheme '" + value.str() +
                "': gradients= is per tensor, symmetric, with the minmax or delayed observer "
                "(each step's dY)";
        return std::nullopt;
      }
      spec.gradients = *scheme;
    } else if (key == "ops") {
      if (!opsGiven)
        spec.ops.clear();
      opsGiven = true;
      spec.ops.push_back(value.str());
      list = &spec.ops;
    } else if (key == "skip") {
      spec.skip.push_back(value.str());
      list = &spec.skip;
    } else {
      error = "unknown --qat key '" + key.str() +
              "' (expected weights, activations, gradients, ops or skip)";
      return std::nullopt;
    }
  }
  for (const std::string &op : spec.ops)
    if (op != "matmul" && op != "embedding") {
      error = "unknown --qat op '" + op + "' (expected matmul or embedding)";
      return std::nullopt;
    }
  if (!spec.weights && !spec.activations && !spec.gradients) {
    error = "--qat names none of weights=<scheme>, activations=<scheme>, gradients=<scheme>";
    return std::nullopt;
  }
  return spec;
}

std::optional<std::string> fp8ScalingSuffix(llvm::StringRef text, std::string &error) {
  auto bad = [&](const llvm::Twine &why) {
    error = ("bad --fp8-scaling '" + text + "': " + why).str();
    return std::nullopt;
  };
  llvm::SmallVector<llvm::StringRef> items;
  text.split(items, ',');
  llvm::StringRef kind = items.front().trim();
  if (kind == "current") {
    if (items.size() > 1)
      return bad("current scaling takes no parameters (history=, margin= and algo= are "
                 "delayed scaling's)");
    return std::string();
  }
  if (kind != "delayed")
    return bad("expected current or delayed[,history=N,margin=M,algo=max|most_recent]");
  int64_t history = 1024, margin = 0;
  std::string algo = "max";
  for (llvm::StringRef item : llvm::drop_begin(items)) {
    auto [key, value] = item.trim().split('=');
    key = key.trim();
    value = value.trim();
    if (key == "history") {
      if (value.getAsInteger(10, history) || history < 1)
        return bad("history '" + value + "' must be an integer >= 1");
    } else if (key == "margin") {
      if (value.getAsInteger(10, margin) || margin < 0)
        return bad("margin '" + value + "' must be an integer >= 0");
    } else if (key == "algo") {
      if (value != "max" && value != "most_recent")
        return bad("unknown algo '" + value + "' (expected max or most_recent)");
      algo = value.str();
    } else {
      return bad("unknown parameter '" + item.trim() + "' (expected history=, margin= or algo=)");
    }
  }
  return (":delayed" + llvm::Twine(history) + ":margin" + llvm::Twine(margin) + ":" + algo).str();
}

} // namespace llmc
