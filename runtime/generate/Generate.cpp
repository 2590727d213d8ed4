//===- Generate.cpp - llmc generate: text from an inference artifact ------===//
//
// Part of llmc: see Generate.h.
//
//===----------------------------------------------------------------------===//

#include "runtime/generate/Generate.h"

#include "common/Half.h"
#include "runtime/Init.h"
#include "runtime/Inspect.h"
#include "runtime/RankRuntime.h"
#include "runtime/checkpoint/Safetensors.h"
#include "runtime/checkpoint/Weights.h"
#include "runtime/data/ByteTokenizer.h"
#include "runtime/data/Tokenizer.h"
#include "runtime/generate/RequestScheduler.h"
#include "runtime/support/Error.h"

#include <chrono>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>

namespace llmc {
namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// The step shapes the artifact was compiled with (llmc compile --inference).
struct InferenceShape {
  int64_t maxBatch = 0, maxContext = 0, page = 0, chunk = 0, blocks = 0, maxBlocks = 0;
};

InferenceShape inferenceShape(const Artifact &artifact, const std::string &path) {
  auto get = [&](const char *key) {
    std::string text = artifact.meta(std::string("inference.") + key);
    if (text.empty())
      fail(path, ": not an inference artifact (compile it with llmc compile --inference "
                 "max-batch=N,max-context=N)");
    return static_cast<int64_t>(std::stoll(text));
  };
  InferenceShape s;
  s.maxBatch = get("max_batch");
  s.maxContext = get("max_context");
  s.page = get("page");
  s.chunk = get("chunk");
  s.blocks = get("blocks");
  s.maxBlocks = get("max_blocks");
  return s;
}

/// One inference program with its host-side inputs and logits.
class Step {
public:
  Step(std::unique_ptr<BoundProgram> program, const std::string &name, const std::string &path,
       int64_t rows)
      : program_(std::move(program)), rows_(rows) {
    if (!program_)
      fail(path, ": has no ", name, " program (compile it with llmc compile --inference)");
    for (const char *input : {"tokens", "positions", "cache_positions", "block_table"}) {
      TensorView v = program_->view(input);
      if (v.dtype != DType::I32)
        fail(path, ": ", name, " input '", input, "' is ", dtypeName(v.dtype), ", expected i32");
    }
    logits_ = program_->view("logits");
  }

  /// Logits per row. The buffer holds [rows, V] row-major, but under
  /// tensor parallelism it is named in the shape its gather wrote it
  /// ([rows, 1, ranks, V / ranks], or for one row [V]): count its
  /// elements, read no dimension.
  int64_t vocab() const { return logits_.numel() / rows_; }
  void prepare() { program_->prepare(); }

  /// Runs the program on `batch`; returns its logits [rows, V] in fp32.
  const float *run(const Batch &batch) {
    set("tokens", batch.tokens);
    set("positions", batch.positions);
    set("cache_positions", batch.cachePositions);
    set("block_table", batch.blockTable);
    program_->run(StepContext{});
    program_->toHost(logits_);
    if (logits_.dtype == DType::F32)
      return logits_.as<float>();
    widened_.resize(logits_.numel());
    const uint16_t *src = logits_.as<uint16_t>();
    for (size_t i = 0; i < widened_.size(); ++i)
      widened_[i] = logits_.dtype == DType::BF16 ? bf16ToFloat(src[i]) : half::toFloat(src[i]);
    return widened_.data();
  }

private:
  void set(const char *name, const std::vector<int32_t> &values) {
    TensorView v = program_->view(name);
    if (static_cast<size_t>(v.numel()) != values.size())
      fail("internal: ", name, " has ", v.numel(), " elements, the batch ", values.size());
    std::memcpy(v.data, values.data(), values.size() * sizeof(int32_t));
    program_->toDevice(v);
  }

  std::unique_ptr<BoundProgram> program_;
  TensorView logits_;
  int64_t rows_; ///< the artifact's max-batch: the logits' rows
  std::vector<float> widened_;
};

/// The tokenizer prompts and output go through: --tokenizer; else that of
/// a Hugging Face --weights directory, when it has one; else the byte
/// tokenizer for a vocabulary of 256; else none (prompts as token ids,
/// output printed as ids).
std::unique_ptr<Tokenizer> chooseTokenizer(const GenerateOptions &opt, int64_t vocab) {
  auto hasTokenizer = [](const std::string &dir) {
    return std::ifstream(dir + "/tokenizer.json") || std::ifstream(dir + "/vocab.json");
  };
  std::unique_ptr<Tokenizer> tokenizer;
  if (!opt.tokenizer.empty())
    tokenizer = loadTokenizer(opt.tokenizer);
  else if (!opt.weights.empty() && std::ifstream(opt.weights + "/config.json") &&
           hasTokenizer(opt.weights))
    tokenizer = loadTokenizer(opt.weights);
  else if (vocab == ByteTokenizer::kVocabSize)
    tokenizer = makeByteTokenizer();
  if (tokenizer && tokenizer->vocabSize() > vocab)
    fail("the tokenizer has ", tokenizer->vocabSize(), " tokens but the model only ", vocab,
         " (--tokenizer names another model's?)");
  return tokenizer;
}

std::string formatRate(double tokens, double seconds) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(1) << (seconds > 0 ? tokens / seconds : 0.0);
  return os.str();
}

class Generator {
public:
  explicit Generator(const GenerateOptions &options) : opt(options) {}

  int run() {
    RankRuntimeOptions runtimeOptions;
    runtimeOptions.comm.timeoutSeconds = opt.commTimeout;
    runtimeOptions.cuda = opt.cuda;
    rt = openRankRuntime(opt.artifact, runtimeOptions);
    shape = inferenceShape(rt.artifact, opt.artifact);
    // Parameters first: a program binds to where each one lives, which a
    // parameter read in place from its file decides.
    loadParameters();
    Step prefill(rt.bind("prefill"), "prefill", opt.artifact, shape.maxBatch);
    Step decode(rt.bind("decode"), "decode", opt.artifact, shape.maxBatch);
    // What kernels derive from the weights (repacked 4-bit decode weights)
    // is made now, not in the first step's time.
    prefill.prepare();
    decode.prepare();
    lead = rt.rank == 0;

    int64_t vocab = decode.vocab();
    tokenizer = chooseTokenizer(opt, vocab);
    std::vector<std::vector<int32_t>> prompts = opt.promptTokens;
    if (!opt.prompts.empty() && !tokenizer)
      fail("--prompt: no tokenizer for this model's ", vocab,
           " tokens; give --tokenizer <hf-dir> or the prompt as --prompt-tokens");
    for (const std::string &text : opt.prompts) {
      std::vector<int32_t> ids = tokenizer->encode(text);
      if (tokenizer->bosId) // as transformers' add_special_tokens=True
        ids.insert(ids.begin(), *tokenizer->bosId);
      prompts.push_back(std::move(ids));
    }
    if (prompts.empty())
      fail("no prompt: give --prompt, --prompts or --prompt-tokens");
    for (size_t i = 0; i < prompts.size(); ++i)
      for (int32_t id : prompts[i])
        if (id >= vocab)
          fail("prompt ", i, ": token ", id, " is outside the model's vocabulary of ", vocab);

    RequestSchedulerOptions so;
    so.maxBatch = shape.maxBatch;
    so.chunk = shape.chunk;
    so.vocab = vocab;
    so.stopToken = opt.stopToken >= 0                           ? opt.stopToken
                   : opt.stopToken == -1 && tokenizer && tokenizer->eosId ? *tokenizer->eosId
                                                                            : -1;
    so.sampling = opt.sampling;
    RequestScheduler scheduler(so, BlockAllocator(shape.blocks, shape.page, shape.maxBlocks));
    for (size_t i = 0; i < prompts.size(); ++i)
      scheduler.submit({static_cast<int64_t>(i), prompts[i], opt.maxNewTokens});

    bool streaming = prompts.size() == 1 && lead;
    if (streaming && !opt.quiet)
      std::cout << show(prompts[0]) << std::flush;
    std::map<int64_t, std::vector<float>> dumped; // request -> logits rows
    double prefillSeconds = 0, decodeSeconds = 0;
    int64_t prefillTokens = 0, decodeTokens = 0;
    const float *lastLogits = nullptr;
    const Batch *lastBatch = nullptr;
    auto model = [&](const Batch &batch) -> const float * {
      double start = now();
      bool isPrefill = batch.kind == Batch::Kind::Prefill;
      lastLogits = (isPrefill ? prefill : decode).run(batch);
      lastBatch = &batch;
      double seconds = now() - start;
      int64_t fed = 0;
      for (int32_t p : batch.cachePositions)
        fed += p >= 0;
      (isPrefill ? prefillSeconds : decodeSeconds) += seconds;
      (isPrefill ? prefillTokens : decodeTokens) += fed;
      return lastLogits;
    };
    auto onToken = [&](const GeneratedToken &t) {
      if (!opt.dumpLogits.empty())
        for (int64_t row = 0; row < lastBatch->rows; ++row)
          if (lastBatch->requests[row] == t.request) {
            std::vector<float> &rows = dumped[t.request];
            rows.insert(rows.end(), lastLogits + row * vocab, lastLogits + (row + 1) * vocab);
          }
      if (streaming) {
        std::cout << show({t.token}) << std::flush;
        if (t.finished)
          std::cout << "\n";
      }
    };
    double start = now();
    GenerationStats stats = scheduler.run(model, onToken);
    double total = now() - start;

    if (lead && !streaming)
      for (const GenerationResult &r : sortedResults(scheduler))
        std::cout << "[" << r.id << "] " << (opt.quiet ? "" : show(prompts[r.id]))
                  << show(r.tokens) << "\n";
    if (lead && !opt.dumpLogits.empty())
      writeDump(scheduler, dumped, vocab);
    if (lead && !opt.quiet)
      std::cerr << "prefill: " << prefillTokens << " tokens in " << std::fixed
                << std::setprecision(3) << prefillSeconds << " s ("
                << formatRate(static_cast<double>(prefillTokens), prefillSeconds)
                << " tok/s, " << stats.prefillCalls << " calls)\n"
                << "decode:  " << decodeTokens << " tokens in " << decodeSeconds << " s ("
                << formatRate(static_cast<double>(decodeTokens), decodeSeconds) << " tok/s, "
                << stats.decodeCalls << " calls of up to " << shape.maxBatch << " rows)\n"
                << "total:   " << stats.generatedTokens << " tokens generated for "
                << stats.finishedRequests << " prompts in " << total << " s\n"
                << std::defaultfloat;
    return 0;
  }

private:
  void loadParameters() {
    uint64_t seed = static_cast<uint64_t>(rt.artifact.metaNumber("seed", 1337));
    Arena &arena = rt.device->hostArena();
    if (!opt.weights.empty()) {
      // On the CPU the programs read the arena itself, so parameters the
      // file holds as the arena would are read from the mapping.
      bool readInPlace = !opt.copyWeights && rt.device->kernelBase() == arena.base();
      WeightsLoaded loaded = initializeFromWeights(opt.weights, rt.artifact, arena, seed, rt.rank,
                                                   readInPlace ? &inPlace : nullptr);
      inPlace.placeIn(arena);
      if (rt.rank == 0 && !opt.quiet)
        std::cerr << "weights: " << loaded.tensors << " parameters from " << opt.weights
                  << (inPlace.ranges.empty()
                          ? std::string()
                          : " (" + std::to_string(inPlace.ranges.size()) + " read in place, " +
                                formatBytes(arena.bytesOutside()) + ")")
                  << "\n";
    } else {
      initializeParameters(rt.artifact, arena, seed, rt.rank);
      if (rt.rank == 0 && !opt.quiet)
        std::cerr << "weights: none given (--weights); generating from random initialisation\n";
    }
    rt.device->toDevice(0, rt.artifact.memory.persistentBytes);
  }

  static std::vector<GenerationResult> sortedResults(const RequestScheduler &scheduler) {
    std::vector<GenerationResult> results = scheduler.results();
    std::sort(results.begin(), results.end(),
              [](const GenerationResult &a, const GenerationResult &b) { return a.id < b.id; });
    return results;
  }

  void writeDump(const RequestScheduler &scheduler, const std::map<int64_t, std::vector<float>> &dumped,
                 int64_t vocab) {
    std::vector<GenerationResult> results = sortedResults(scheduler);
    std::vector<SafeTensor> tensors;
    for (const GenerationResult &r : results) {
      int64_t n = static_cast<int64_t>(r.tokens.size());
      tensors.push_back({"tokens." + std::to_string(r.id), DType::I32, {n}, r.tokens.data(),
                         r.tokens.size() * sizeof(int32_t)});
      const std::vector<float> &rows = dumped.at(r.id);
      tensors.push_back({"logits." + std::to_string(r.id), DType::F32, {n, vocab}, rows.data(),
                         rows.size() * sizeof(float)});
    }
    writeSafetensors(opt.dumpLogits, tensors);
  }

  /// Text, or token ids without a tokenizer.
  std::string show(const std::vector<int32_t> &ids) const {
    if (tokenizer)
      return tokenizer->decode(ids);
    std::string text;
    for (int32_t id : ids)
      text += " " + std::to_string(id);
    return text;
  }

  GenerateOptions opt;
  RankRuntime rt;
  /// Parameters read from the weights' mapping; it outlives the programs.
  WeightsInPlace inPlace;
  InferenceShape shape;
  std::unique_ptr<Tokenizer> tokenizer; ///< null: prompts and output are token ids
  bool lead = true;
};

} // namespace

int runGeneration(const GenerateOptions &options) {
  try {
    return Generator(options).run();
  } catch (const std::exception &e) {
    std::cerr << options.tool << ": error: " << e.what() << "\n";
    return 1;
  }
}

} // namespace llmc
