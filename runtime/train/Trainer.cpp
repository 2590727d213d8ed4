//===- Trainer.cpp - the training loop of llmc-run ------------------------===//
//
// Everything decided at compile time lives in the artifact; this loop only
// feeds data, computes the learning rate, runs the train_step program and
// reports. Step k (1-based) always consumes global batch k−1 and the
// schedule's lr(k), so a resumed run repeats exactly what an uninterrupted
// one does.
//
// A step whose loss or gradient norm is not finite is skipped: the compiled
// update leaves parameters and optimizer state as they were (the norm is
// every AdamW kernel's verdict, the same on every rank), and this loop
// reports it and counts it. Too many in a row stop the run with a
// checkpoint of the last good state.
//
// fp16 artifacts take the loss scale as an input (LossScaler.h): each step
// is fed the current scale, and a skipped step there is an overflow that
// halves it. Such skips are expected and do not count towards
// --max-nonfinite-steps until the scale has reached its minimum.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/Trainer.h"

#include "common/Half.h"
#include "runtime/Artifact.h"
#include "runtime/Executor.h"
#include "runtime/Init.h"
#include "runtime/StreamOrder.h"
#include "runtime/Inspect.h"
#include "runtime/RankRuntime.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/checkpoint/Weights.h"
#include "runtime/comm/MpiCommunicator.h"
#include "runtime/train/Trace.h"
#include "runtime/data/ByteTokenizer.h"
#include "runtime/data/DataLoader.h"
#include "runtime/data/Dataset.h"
#include "runtime/data/Packing.h"
#include "runtime/generate/Sampler.h"
#include "runtime/support/Error.h"
#include "runtime/train/LRSchedule.h"
#include "runtime/train/LossScaler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>
#include <unistd.h>

namespace llmc {
namespace {

std::atomic<bool> interrupted{false};
void onInterrupt(int) { interrupted = true; }

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Entropy (nats) of the token frequencies: what a model that ignores context
/// can reach at best. Estimated from the first 16M tokens, so a banner never
/// reads a large dataset whole.
double unigramEntropy(const Dataset &data) {
  std::map<uint32_t, double> counts;
  double n = 0;
  for (const TokenSpan &s : data.shards)
    for (int64_t i = 0; i < s.count && n < (1 << 24); ++i, ++n) counts[s.at(i)] += 1;
  double h = 0;
  for (auto &[token, c] : counts) h -= (c / n) * std::log(c / n);
  return h;
}

struct Input {
  TensorView tokens, targets;
  int64_t rows = 0, T = 0;
};

/// The (tokens, targets) inputs of a program, viewed as [rows, T].
Input batchInput(const BoundProgram &program, bool needTargets) {
  Input in;
  in.tokens = program.view("tokens");
  if (in.tokens.dtype != DType::I32 || in.tokens.rank() < 2)
    fail("program '", program.info().name, "': input 'tokens' must be i32 [..., T], got ",
         in.tokens.describe());
  in.T = in.tokens.dim(-1);
  in.rows = in.tokens.numel() / in.T;
  if (needTargets) {
    in.targets = program.view("targets");
    if (in.targets.shape != in.tokens.shape || in.targets.dtype != DType::I32)
      fail("program '", program.info().name, "': 'targets' must match 'tokens'");
  }
  return in;
}

float scalar(const BoundProgram &program, const std::string &name) {
  TensorView v = program.view(name);
  if (v.dtype != DType::F32 || v.numel() != 1)
    fail("program '", program.info().name, "': '", name, "' must be an f32 scalar");
  program.toHost(v);
  return *v.as<float>();
}

void setScalar(const BoundProgram &program, const std::string &name, float value) {
  TensorView v = program.view(name);
  if (v.dtype != DType::F32 || v.numel() != 1)
    fail("program '", program.info().name, "': input '", name, "' must be an f32 scalar");
  *v.as<float>() = value;
  program.toDevice(v);
}

/// µs and count per name (kernel or part), with its parts on a GPU.
using TimeTable = std::map<std::string, std::pair<double, int64_t>>;

/// The --profile table: kernels by time; on a GPU, under a kernel whose
/// device work has named parts (cuBLASLt GEMMs), each part and the rest,
/// with their share of the kernel's time.
void printProfile(const TimeTable &profile, const std::map<std::string, TimeTable> &parts,
                  bool gpu) {
  std::vector<std::pair<std::string, std::pair<double, int64_t>>> rows(profile.begin(),
                                                                      profile.end());
  std::sort(rows.begin(), rows.end(),
            [](auto &a, auto &b) { return a.second.first > b.second.first; });
  double total = 0;
  for (auto &r : rows) total += r.second.first;
  std::cout << "profile (train_step, all steps after the first):\n";
  if (gpu)
    std::cout << "  device times from CUDA events around each launch, steps run eagerly\n";
  for (auto &[name, entry] : rows) {
    std::cout << "  " << std::left << std::setw(20) << name << std::right << std::fixed
              << std::setprecision(1) << std::setw(10) << entry.first / 1000.0 << " ms "
              << std::setw(6) << 100.0 * entry.first / total << " %  " << entry.second
              << " calls\n";
    auto it = parts.find(name);
    if (it == parts.end())
      continue;
    double inParts = 0;
    auto part = [&](const std::string &label, double micros, const std::string &tail) {
      std::cout << "    . " << std::left << std::setw(16) << label << std::right << std::setw(10)
                << micros / 1000.0 << " ms " << std::setw(6)
                << (entry.first > 0 ? 100.0 * micros / entry.first : 0.0) << " % of it" << tail
                << "\n";
    };
    for (auto &[label, timed] : it->second) {
      inParts += timed.first;
      part(label, timed.first, ", " + std::to_string(timed.second) + " launches");
    }
    part("the rest", std::max(0.0, entry.first - inParts), "");
  }
}

/// How far the training loop got: the step it started after, the last step
/// done, the steps of this run skipped for a non-finite loss or norm, the
/// first and last finite training loss, and the seconds spent in steps.
struct Progress {
  int64_t start = 0, lastStep = 0, skipped = 0;
  double firstLoss = NAN, lastLoss = NAN, trainSeconds = 0;
};

/// A JSON number, or null for inf and NaN (which JSON cannot spell).
std::string jsonNumber(double x, int precision) {
  if (!std::isfinite(x))
    return "null";
  std::ostringstream out;
  out << std::setprecision(precision) << x;
  return out.str();
}

class Trainer {
public:
  explicit Trainer(const TrainOptions &options) : opt(options) {}
  /// setup, the starting state, optional calibration and gradient dump,
  /// the training loop, then the final checkpoint and report. Returns the
  /// exit code: 0, or 130 when interrupted.
  int run();

private:
  /// The rank's runtime and programs, the run's settings, its data.
  void setup();
  /// The artifact on this rank: its communicators, device and programs,
  /// and its place among the data-parallel replicas; refuses flags the
  /// artifact cannot honour.
  void openRuntime();
  /// Seed, steps, the learning-rate schedule and loss scaling: flags
  /// first, else what the artifact was compiled with.
  void configureSchedule();
  /// --data and the validation split (--val-data; else the last
  /// --val-shards shards of --data; else its last shard when it has
  /// several, or the last 10% of a single one), rows of T tokens.
  void openData(int64_t T);
  /// A fresh start: parameters initialised, then overwritten from --weights
  /// if given; copied to the device.
  void initialize();
  /// --resume: the state of the checkpoint in --ckpt-dir, on the device.
  /// Returns the step it was saved at.
  int64_t resume();
  void openMetrics(int64_t start);
  /// --dump-grads: parameters and gradients of training batch `batch`.
  void writeGradientDump(int64_t batch);
  /// --dump-logits: the logits program's output on training batch 0.
  void writeLogitsDump();
  void printBanner();
  /// Steps progress.start + 1 onwards, to --stop-at or the last step.
  /// Returns false when interrupted (after saving a checkpoint and the
  /// trace).
  bool trainSteps(Progress &progress);
  /// Feeds batch step − 1, sets lr and step, runs train_step; returns its
  /// wall time in ms.
  double runStep(int64_t step, double lr, const Input &in);
  /// Adds the last step's per-instruction times to `profile`.
  void addToProfile();
  void drawProgressBar(int64_t step);
  /// Whether any rank was interrupted (collective on a multi-rank run, so
  /// the ranks stop together).
  bool stopRequested();
  /// The checkpoint and trace of a finished loop, then (unless --quiet) the
  /// final evaluation, sample and summary.
  void finish(const Progress &progress);
  void printSummary(const Progress &progress, double valLoss, const std::string &text);
  /// --trace: every rank's step timeline (collective).
  void writeTrace();
  double evaluate();
  /// Runs @calibrate over `batches` training batches: observers move,
  /// weights do not.
  void calibrate(int64_t batches);
  std::string sample();
  /// A checkpoint of the current state as that after `step`, of which
  /// `skipped` steps were skipped.
  void save(int64_t step, double loss, int64_t skipped);
  /// Too many consecutive skipped steps: saves the state (that after the
  /// last good step, as nothing was applied since) and throws.
  [[noreturn]] void stopOnNonFinite(const Progress &progress, int64_t step);
  void fillBatch(const BoundProgram &program, DataLoader &loader, int64_t batchIndex,
                 const Input &in);
  /// The persistent state (parameters, optimizer state, observers) between
  /// the host arena, where initialisation and checkpoints work, and the
  /// device.
  void persistentToDevice() { device->toDevice(0, artifact.memory.persistentBytes); }
  void persistentToHost() { device->toHost(0, artifact.memory.persistentBytes); }
  /// `scale`: the loss scale the step ran with (0: none); `next` the one
  /// after it.
  void log(int64_t step, double loss, double lr, double norm, double ms, bool skipped,
           double scale, double next);

  TrainOptions opt;
  Artifact artifact;
  std::unique_ptr<ExecutionDevice> device;
  Arena *arena = nullptr;                   ///< the device's host arena
  std::unique_ptr<Communicator> comm;       ///< host values; MPI, TCP or one rank
  std::unique_ptr<Communicator> deviceComm; ///< the programs' on a GPU (NCCL)
  int rank = 0;
  int64_t dataIndex = 0, dataReplicas = 1; ///< this rank's data-parallel slice
  std::vector<std::string> dataAxes, allAxes;
  bool lead = true;                         ///< rank 0: metrics
  bool chatty = true;                       ///< lead and not --quiet: prints
  std::unique_ptr<BoundProgram> train, eval, logits, grad, calibration;
  Dataset trainData, valData;
  std::unique_ptr<DataLoader> trainLoader, valLoader;
  int64_t separator = -1; ///< packed rows: the token opening a document
  LRSchedule schedule;
  uint64_t seed = 0;
  int64_t totalSteps = 0, vocab = 0;
  /// Skipped steps since the start of training (resumed ones included),
  /// and how many of the latest steps were skipped in a row.
  int64_t skippedSteps = 0, badStreak = 0;
  /// The latest skipped steps in a row that count towards
  /// --max-nonfinite-steps: all of badStreak, except fp16 overflows the
  /// loss scale could still back off from.
  int64_t divergedStreak = 0;
  bool scalesLoss = false;
  LossScaler scaler;
  std::ofstream metrics;
  bool tty = false;
  StepTrace trace;
  TimeTable profile;                            ///< kernel -> (µs, calls)
  std::map<std::string, TimeTable> profileParts; ///< kernel -> part -> (µs, launches)
};

void Trainer::setup() {
  openRuntime();
  configureSchedule();
  Input in = batchInput(*train, true);
  vocab = static_cast<int64_t>(artifact.metaNumber("model.vocab_size", 0));
  separator = docSeparator(artifact);
  if (!vocab && logits)
    vocab = logits->view("logits").dim(-1);
  openData(in.T);
  tty = isatty(STDERR_FILENO) && chatty;
}

void Trainer::openRuntime() {
  RankRuntimeOptions runtimeOptions;
  runtimeOptions.comm.timeoutSeconds = opt.commTimeout;
  runtimeOptions.comm.debugMaxDelayMs = opt.debugCollectiveDelayMs;
  runtimeOptions.cuda = opt.cuda;
  runtimeOptions.streamDelayMicros = opt.debugStreamDelayMicros;
  RankRuntime opened = openRankRuntime(opt.artifact, runtimeOptions);
  rank = opened.rank;
  artifact = std::move(opened.artifact);
  comm = std::move(opened.comm);
  device = std::move(opened.device);
  deviceComm = std::move(opened.deviceComm);
  bool mpi = opened.mpi, gpu = artifact.backend == "cuda";
  // This rank's place among the data-parallel replicas.
  std::vector<int> coords = meshCoordinates(artifact.mesh, rank);
  std::vector<std::string> dpAxes = artifact.metaList("data_parallel_axes");
  for (size_t i = 0; i < artifact.mesh.size(); ++i)
    if (std::find(dpAxes.begin(), dpAxes.end(), artifact.mesh[i].first) != dpAxes.end()) {
      dataIndex = dataIndex * artifact.mesh[i].second + coords[i];
      dataReplicas *= artifact.mesh[i].second;
      dataAxes.push_back(artifact.mesh[i].first);
    }
  for (auto &[axis, size] : artifact.mesh)
    allAxes.push_back(axis);
  lead = rank == 0;
  // Every rank takes the same decisions (collectives must match); only the
  // first one talks.
  chatty = lead && !opt.quiet;
  arena = &device->hostArena();
  Communicator &programComm = gpu ? *deviceComm : *comm;
  auto bind = [&](const char *name) {
    return bindProgram(artifact, name, *device, programComm, rank, comm.get());
  };
  train = bind("train_step");
  eval = bind("eval");
  logits = bind("logits");
  grad = bind("grad");
  calibration = bind("calibrate");
  // A GPU's choices (which attention each op got) are never silent.
  for (const std::string &note : device->bindingNotes())
    if (chatty)
      std::cout << note << "\n";
  if (!train)
    fail(opt.artifact, ": has no train_step program");
  if (mpi)
    for (const BoundProgram *program :
         {train.get(), eval.get(), logits.get(), grad.get(), calibration.get()})
      if (program)
        checkMpiThreads(program->info(), gpu, opt.artifact);
  if (!opt.injectNonFinite.empty() &&
      (opt.injectRank < 0 || opt.injectRank >= artifact.worldSize))
    fail("--inject-nonfinite: rank ", opt.injectRank, " is not one of the artifact's ",
         artifact.worldSize, " ranks");

  // Checked now rather than when sampling after the last step.
  if (opt.sampleTokens > 0 && std::isinf(opt.temperature))
    fail("--temperature must be finite");
}

void Trainer::configureSchedule() {
  seed = opt.seed >= 0 ? static_cast<uint64_t>(opt.seed)
                       : static_cast<uint64_t>(artifact.metaNumber("seed", 1337));
  totalSteps = opt.steps >= 0 ? opt.steps
                              : static_cast<int64_t>(artifact.metaNumber("schedule.steps", 100));
  schedule.maxLr = opt.lr >= 0 ? opt.lr : artifact.metaNumber("schedule.lr", 1e-3);
  schedule.minLr = opt.minLr >= 0 ? opt.minLr : artifact.metaNumber("schedule.min_lr", 0.0);
  schedule.warmupSteps = opt.warmup >= 0
                             ? opt.warmup
                             : static_cast<int64_t>(artifact.metaNumber("schedule.warmup", 0));
  schedule.totalSteps = std::max<int64_t>(totalSteps, 1);
  schedule.kind = !opt.schedule.empty() ? opt.schedule : artifact.meta("schedule.kind", "cosine");
  scalesLoss = train->has("loss_scale");
  if (scalesLoss) {
    auto pick = [&](double flag, const char *key, double fallback) {
      return flag >= 0 ? flag : artifact.metaNumber(key, fallback);
    };
    LossScaleConfig c;
    c.initial = pick(opt.lossScale, "loss_scale.initial", c.initial);
    c.backoff = pick(opt.lossScaleBackoff, "loss_scale.backoff", c.backoff);
    c.minimum = pick(opt.minLossScale, "loss_scale.min", c.minimum);
    c.growthInterval = static_cast<int64_t>(pick(static_cast<double>(opt.lossScaleGrowthInterval),
                                                 "loss_scale.growth_interval",
                                                 static_cast<double>(c.growthInterval)));
    if (!(c.initial > 0) || !(c.minimum > 0) || !(c.backoff > 0 && c.backoff < 1) ||
        c.growthInterval < 1)
      fail("loss scaling needs --loss-scale > 0, --min-loss-scale > 0, --loss-scale-backoff in "
           "(0, 1) and --loss-scale-growth-interval >= 1");
    scaler = LossScaler(c);
  }
  if (schedule.kind != "cosine" && schedule.kind != "linear" && schedule.kind != "constant")
    fail("unknown --lr-schedule '", schedule.kind, "' (expected cosine, linear or constant)");
}

void Trainer::openData(int64_t T) {
  trainData = openDataset(opt.data);
  if (!opt.valData.empty()) {
    if (opt.valShards >= 0)
      fail("give --val-data or --val-shards, not both");
    valData = openDataset(opt.valData);
  } else if (opt.valShards >= 0 || trainData.shards.size() > 1) {
    valData = holdOutShards(trainData, opt.valShards >= 0 ? opt.valShards : 1, opt.data);
  } else {
    valData = holdOutTail(trainData, T);
  }
  if (vocab) {
    checkVocabulary(trainData, vocab);
    checkVocabulary(valData, vocab);
  }
  trainLoader = std::make_unique<DataLoader>(trainData, T, seed, vocab);
  valLoader = std::make_unique<DataLoader>(valData, T, seed + 1, vocab);
}

void Trainer::fillBatch(const BoundProgram &program, DataLoader &loader, int64_t batchIndex,
                        const Input &in) {
  // [M, rows, T] or [rows, T]: M microbatches of this rank's rows.
  int64_t M = in.tokens.rank() == 3 ? in.tokens.dim(0) : 1;
  int64_t local = in.rows / M, global = local * dataReplicas;
  for (int64_t m = 0; m < M; ++m)
    loader.fill(batchIndex, M * global, m * global + dataIndex * local, local,
                in.tokens.as<int32_t>() + m * local * in.T,
                in.targets.as<int32_t>() + m * local * in.T);
  program.toDevice(in.tokens);
  program.toDevice(in.targets);
  fillPackedInputs(program, in.tokens, separator);
}

void Trainer::calibrate(int64_t batches) {
  if (!calibration)
    fail(opt.artifact, ": has no observers to calibrate (compile with --qat and an ema "
                       "observer, e.g. activations=int8:ema; not with pipeline parallelism)");
  Input in = batchInput(*calibration, true);
  for (int64_t b = 0; b < batches; ++b) {
    fillBatch(*calibration, *trainLoader, b, in);
    calibration->run(StepContext{});
  }
  if (chatty)
    std::cout << "calibrated: " << batches << " batches of observer updates (weights unchanged)\n";
}

double Trainer::evaluate() {
  if (!eval)
    return NAN;
  Input in = batchInput(*eval, true);
  double sum = 0;
  for (int64_t b = 0; b < opt.evalBatches; ++b) {
    fillBatch(*eval, *valLoader, b, in);
    eval->run(StepContext{});
    sum += scalar(*eval, "loss");
  }
  // Each replica evaluated its own rows; the mean over replicas is the loss
  // of the whole batch.
  float mean = static_cast<float>(sum / static_cast<double>(opt.evalBatches));
  if (dataReplicas > 1)
    comm->group(dataAxes).allReduce(&mean, &mean, 1, DType::F32, Reduction::Mean);
  return mean;
}

std::string Trainer::sample() {
  if (!logits)
    return "";
  Input in = batchInput(*logits, false);
  TensorView out = logits->view("logits");
  int64_t V = out.dim(-1);
  std::vector<uint16_t> context = ByteTokenizer::encode(opt.prompt);
  std::vector<uint16_t> generated;
  // --temperature ≤ 0 has always meant greedy and --top-k ≤ 0 the single
  // most likely token; Sampler reads only temperature 0 as greedy and
  // top-k ≤ 0 as no limit.
  SamplingOptions sampling;
  sampling.temperature = opt.temperature > 0 ? opt.temperature : 0.0;
  sampling.topK = std::clamp<int64_t>(opt.topK, 1, V);
  sampling.seed = seed;
  Sampler sampler(sampling);
  for (int64_t n = 0; n < opt.sampleTokens; ++n) {
    // Row 0 holds the last T tokens; causal attention makes padding after
    // them irrelevant to the logits we read.
    size_t start = context.size() > static_cast<size_t>(in.T) ? context.size() - in.T : 0;
    int64_t len = static_cast<int64_t>(context.size() - start);
    int32_t *tok = in.tokens.as<int32_t>();
    std::fill(tok, tok + in.rows * in.T, 0);
    for (int64_t t = 0; t < len; ++t) tok[t] = context[start + t];
    logits->toDevice(in.tokens);
    fillPackedInputs(*logits, in.tokens, separator);
    logits->run(StepContext{});
    logits->toHost(out);
    const float *row = nullptr;
    std::vector<float> converted;
    if (out.dtype == DType::F32) {
      row = out.as<float>() + (len - 1) * V;
    } else {
      converted.resize(V);
      const uint16_t *src = out.as<uint16_t>() + (len - 1) * V;
      for (int64_t v = 0; v < V; ++v)
        converted[v] = out.dtype == DType::BF16 ? bf16ToFloat(src[v]) : half::toFloat(src[v]);
      row = converted.data();
    }
    int32_t next = sampler.next(row, V);
    context.push_back(static_cast<uint16_t>(next));
    generated.push_back(static_cast<uint16_t>(next));
  }
  return ByteTokenizer::decode(generated);
}

void Trainer::save(int64_t step, double loss, int64_t skipped) {
  if (opt.ckptDir.empty())
    return;
  TrainState state;
  state.step = step;
  state.seed = seed;
  state.loss = loss;
  state.skippedSteps = skipped;
  if (scalesLoss) {
    state.lossScale = scaler.scale();
    state.lossScaleCleanSteps = scaler.cleanSteps();
  }
  persistentToHost();
  saveCheckpoint(opt.ckptDir, artifact, *arena, state, rank, *comm, opt.retention);
  if (chatty)
    std::cout << "checkpoint: step " << step << " saved to " << opt.ckptDir << "\n";
}

void Trainer::log(int64_t step, double loss, double lr, double norm, double ms, bool skipped,
                  double scale, double next) {
  int64_t tokensPerStep =
      batchInput(*train, false).rows * batchInput(*train, false).T * dataReplicas;
  double tps = tokensPerStep / (ms / 1000.0);
  if (metrics.is_open())
    metrics << "{\"step\": " << step << ", \"loss\": " << jsonNumber(loss, 9)
            << ", \"lr\": " << jsonNumber(lr, 9) << ", \"grad_norm\": " << jsonNumber(norm, 9)
            << ", \"skipped\": " << (skipped ? "true" : "false")
            << ", \"skipped_total\": " << skippedSteps
            << (scale > 0 ? ", \"loss_scale\": " + jsonNumber(scale, 9) : std::string())
            << ", \"tokens_per_s\": " << jsonNumber(tps, 6) << ", \"ms\": " << jsonNumber(ms, 6)
            << "}\n"
            << std::flush;
  // A skipped step is always shown, whatever --log-every says.
  if (!chatty || (!skipped && step % opt.logEvery != 0 && step != totalSteps))
    return;
  if (tty)
    std::cerr << "\r\033[K";
  std::ostringstream line;
  line << "step " << std::setw(5) << step << "/" << totalSteps << " | loss " << std::fixed
       << std::setprecision(4) << loss << " | lr " << std::scientific << std::setprecision(2)
       << lr << " | norm " << std::fixed << std::setprecision(3) << norm << " | "
       << std::setprecision(0) << tps << " tok/s | " << std::setprecision(1) << ms << " ms";
  if (scale > 0)
    line << " | scale " << std::setprecision(0) << scale;
  if (skipped && scale > 0 && next < scale)
    line << " | skipped: gradient overflow, loss scale " << std::setprecision(0) << scale
         << " -> " << next << " (" << skippedSteps << " skipped in all)";
  else if (skipped)
    line << " | skipped: non-finite loss or gradient norm (" << badStreak << " in a row, "
         << skippedSteps << " in all)";
  std::cout << line.str() << std::endl;
}

int Trainer::run() {
  setup();
  int64_t start = 0;
  if (opt.resume)
    start = resume();
  else
    initialize();
  if (opt.calibrateBatches < 0)
    fail("--calibrate needs a number of batches >= 0");
  if (opt.calibrateBatches > 0)
    calibrate(opt.calibrateBatches);
  openMetrics(start);
  if (!opt.dumpGrads.empty())
    writeGradientDump(start);
  if (!opt.dumpLogits.empty())
    writeLogitsDump();
  if (chatty)
    printBanner();
  Progress progress;
  progress.start = progress.lastStep = start;
  if (!trainSteps(progress))
    return 130;
  finish(progress);
  return 0;
}

int64_t Trainer::resume() {
  if (opt.ckptDir.empty())
    fail("--resume needs --ckpt-dir");
  if (!opt.weights.empty())
    fail("--weights and --resume both set the parameters; give one");
  // Initialised first: tensors a checkpoint may lack (LoRA adapters of a
  // base-model checkpoint) keep their initial values.
  initializeParameters(artifact, *arena, seed, rank);
  TrainState state = loadCheckpoint(opt.ckptDir, artifact, *arena, rank);
  if (state.seed != seed)
    fail("checkpoint was trained with seed ", state.seed, " but this run uses ", seed);
  skippedSteps = state.skippedSteps;
  // A checkpoint without a scale (from another precision) starts afresh.
  if (scalesLoss && state.lossScale > 0)
    scaler.restore(state.lossScale, state.lossScaleCleanSteps);
  if (chatty)
    std::cout << "resumed from step " << state.step << " (" << opt.ckptDir << ")"
              << (state.freshObservers
                      ? "; " + std::to_string(state.freshObservers) +
                            " fake-quantization observers start fresh (not in the checkpoint)"
                      : std::string())
              << (state.freshAdapters
                      ? "; " + std::to_string(state.freshAdapters) +
                            " LoRA adapter tensors start fresh (not in the checkpoint)"
                      : std::string())
              << "\n";
  persistentToDevice();
  return state.step;
}

void Trainer::initialize() {
  if (opt.weights.empty())
    initializeParameters(artifact, *arena, seed, rank);
  else {
    WeightsLoaded loaded = initializeFromWeights(opt.weights, artifact, *arena, seed, rank);
    if (chatty)
      std::cout << "weights: " << loaded.tensors << " parameters from " << opt.weights
                << (loaded.dequantized
                        ? " (" + std::to_string(loaded.dequantized) + " dequantized)"
                        : std::string())
                << (loaded.observers
                        ? "; " + std::to_string(loaded.observers) + " observer ranges"
                        : std::string())
                << (loaded.freshAdapters
                        ? "; " + std::to_string(loaded.freshAdapters) +
                              " LoRA adapter tensors start fresh (not in the file)"
                        : std::string())
                << "\n";
  }
  persistentToDevice();
}

void Trainer::openMetrics(int64_t start) {
  if (opt.metrics.empty() || !lead)
    return;
  metrics.open(opt.metrics, start > 0 ? std::ios::app : std::ios::trunc);
  if (!metrics)
    fail("cannot write metrics file '", opt.metrics, "'");
}

void Trainer::writeGradientDump(int64_t batch) {
  if (!grad)
    fail(opt.artifact, ": has no grad program to dump gradients from");
  Input in = batchInput(*grad, true);
  if (artifact.worldSize != 1)
    fail("--dump-grads needs a single-rank artifact");
  fillBatch(*grad, *trainLoader, batch, in);
  std::vector<int32_t> tokens(in.tokens.as<int32_t>(), in.tokens.as<int32_t>() + in.tokens.numel());
  std::vector<int32_t> targets(in.targets.as<int32_t>(),
                               in.targets.as<int32_t>() + in.targets.numel());
  grad->run(StepContext{batch + 1});
  device->toHost(0, artifact.memory.arenaBytes);
  std::vector<SafeTensor> tensors = {
      {"tokens", DType::I32, in.tokens.shape, tokens.data(), tokens.size() * 4},
      {"targets", DType::I32, in.targets.shape, targets.data(), targets.size() * 4}};
  dumpGradients(opt.dumpGrads, artifact, *arena, *grad, tensors);
  if (chatty)
    std::cout << "gradients of batch " << batch << " (loss " << scalar(*grad, "loss")
              << ") written to " << opt.dumpGrads << "\n";
}

void Trainer::writeLogitsDump() {
  if (!logits)
    fail(opt.artifact, ": has no logits program to dump logits from");
  if (artifact.worldSize != 1)
    fail("--dump-logits needs a single-rank artifact");
  // The logits program reads no targets; the dump keeps them for a loss.
  Input in = batchInput(*logits, false);
  std::vector<int32_t> tokens(in.tokens.numel()), targets(in.tokens.numel());
  trainLoader->fill(0, in.rows, 0, in.rows, tokens.data(), targets.data());
  std::copy(tokens.begin(), tokens.end(), in.tokens.as<int32_t>());
  logits->toDevice(in.tokens);
  fillPackedInputs(*logits, in.tokens, separator); // packed rows: their segments and positions
  logits->run(StepContext{});
  TensorView out = logits->view("logits");
  logits->toHost(out);
  std::vector<int64_t> shape = {in.rows, in.T};
  writeSafetensors(opt.dumpLogits,
                   {{"tokens", DType::I32, shape, tokens.data(), tokens.size() * 4},
                    {"targets", DType::I32, shape, targets.data(), targets.size() * 4},
                    {"logits", out.dtype, out.shape, out.data, out.bytes()}});
  if (chatty)
    std::cout << "logits of batch 0 (" << out.describe() << ") written to " << opt.dumpLogits
              << "\n";
}

void Trainer::printBanner() {
  Input in = batchInput(*train, false);
  std::cout << "llmc-run: " << opt.artifact << " | " << artifact.meta("model.family", "model")
            << " | arena " << formatBytes(artifact.memory.arenaBytes) << " | "
            << in.rows * dataReplicas << "x" << in.T << " tokens per step";
  if (artifact.worldSize > 1)
    std::cout << " on " << artifact.worldSize << " ranks";
  std::cout << " | data " << opt.data << " (" << trainData.tokens() << " train / "
            << valData.tokens() << " validation tokens";
  if (trainData.shards.size() + valData.shards.size() > 2)
    std::cout << " in " << trainData.shards.size() << " + " << valData.shards.size()
              << " shards";
  std::cout << ", unigram entropy " << std::fixed << std::setprecision(3)
            << unigramEntropy(trainData) << " nats)";
  if (separator >= 0)
    std::cout << " | packed: documents open at token " << separator;
  std::cout << "\n";
}

bool Trainer::trainSteps(Progress &p) {
  train->setProfiling(opt.profile || !opt.trace.empty());
  std::signal(SIGINT, onInterrupt);
  Input in = batchInput(*train, true);
  bool hasNorm = train->has("grad_norm");
  int64_t lastToRun = opt.stopAt >= 0 ? std::min(opt.stopAt, totalSteps) : totalSteps;
  for (int64_t step = p.start + 1; step <= lastToRun; ++step) {
    double lr = schedule.at(step);
    double ms = runStep(step, lr, in);
    if (!opt.trace.empty())
      trace.record(*train, step);
    if (opt.profile && step > p.start + 1) // the first step pays one-time costs
      addToProfile();
    p.trainSeconds += ms / 1000.0;
    double loss = scalar(*train, "loss"), norm = hasNorm ? scalar(*train, "grad_norm") : NAN;
    // With loss scaling the program's norm is that of the scaled gradients.
    double scale = scalesLoss ? scaler.scale() : 0.0;
    if (scalesLoss)
      norm /= scale;
    // The program skipped the update when the norm is not finite; a
    // non-finite loss makes the gradients so through backward. Both are the
    // same on every rank, so the ranks agree without a collective.
    bool skipped = !std::isfinite(loss) || (hasNorm && !std::isfinite(norm));
    if (skipped && hasNorm && std::isfinite(norm))
      fail("step ", step, ": loss is ", loss, " but the gradient norm (", norm,
           ") is finite, so the update was applied (diverged); lower --lr or check the data");
    // An fp16 overflow backs the scale off; it counts as divergence only
    // when the scale is already at its minimum.
    bool diverged = scalesLoss ? !scaler.update(skipped) : skipped;
    if (skipped) {
      ++skippedSteps, ++badStreak, ++p.skipped;
      divergedStreak = diverged ? divergedStreak + 1 : 0;
    } else {
      badStreak = divergedStreak = 0;
      p.lastLoss = loss;
      if (std::isnan(p.firstLoss))
        p.firstLoss = loss;
    }
    log(step, loss, lr, norm, ms, skipped, scale, scalesLoss ? scaler.scale() : 0.0);
    p.lastStep = step;
    if (opt.maxNonFiniteSteps > 0 && divergedStreak >= opt.maxNonFiniteSteps)
      stopOnNonFinite(p, step);
    if (tty)
      drawProgressBar(step);
    if (opt.evalEvery > 0 && step % opt.evalEvery == 0 && !opt.quiet) {
      double val = evaluate(); // collective: every rank evaluates
      if (chatty)
        std::cout << "eval  " << std::setw(5) << step << " | val loss " << std::fixed
                  << std::setprecision(4) << val << "\n";
    }
    if (opt.ckptEvery > 0 && step % opt.ckptEvery == 0 && step != lastToRun)
      save(step, p.lastLoss, skippedSteps);
    if (stopRequested()) {
      if (tty) std::cerr << "\r\033[K";
      if (lead)
        std::cout << "interrupted at step " << step << "\n";
      save(step, p.lastLoss, skippedSteps);
      writeTrace();
      return false;
    }
  }
  return true;
}

void Trainer::stopOnNonFinite(const Progress &p, int64_t step) {
  if (tty)
    std::cerr << "\r\033[K";
  // Nothing was applied since the last good step: the state is the one
  // after it, saved as that step so --resume starts right after it.
  int64_t good = step - badStreak;
  save(good, p.lastLoss, skippedSteps - badStreak); // collective
  writeTrace();                                     // collective
  std::ostringstream where;
  if (!opt.ckptDir.empty())
    where << " (checkpoint of step " << good << " in " << opt.ckptDir << ")";
  fail("stopped: ", badStreak, " consecutive steps (", good + 1, " to ", step,
       ") had a non-finite loss or gradient norm and were skipped (--max-nonfinite-steps ",
       opt.maxNonFiniteSteps, ")", scalesLoss ? " at the minimum loss scale" : "",
       "; parameters and optimizer state are those after step ", good, where.str(),
       "; lower --lr or check the data");
}

double Trainer::runStep(int64_t step, double lr, const Input &in) {
  double t0 = now();
  fillBatch(*train, *trainLoader, step - 1, in);
  setScalar(*train, "lr", static_cast<float>(lr));
  // AdamW's bias correction counts the updates applied, this one included:
  // a skipped step is one the optimizer never saw.
  setScalar(*train, "step", static_cast<float>(step - skippedSteps));
  if (scalesLoss)
    setScalar(*train, "loss_scale", static_cast<float>(scaler.scale()));
  if (rank == opt.injectRank && std::find(opt.injectNonFinite.begin(), opt.injectNonFinite.end(),
                                          step) != opt.injectNonFinite.end())
    train->poisonNextRun();
  train->run(StepContext{step});
  return (now() - t0) * 1000.0;
}

void Trainer::addToProfile() {
  for (size_t i = 0; i < train->instructionMicros().size(); ++i) {
    const InstructionInfo &inst = train->info().instructions[i];
    const std::string name =
        inst.kind == InstructionKind::Kernel ? inst.kernel : instructionKindName(inst.kind);
    auto &entry = profile[name];
    entry.first += train->instructionMicros()[i];
    entry.second += 1;
    for (const TimedPart &part : train->instructionParts()[i]) {
      auto &timed = profileParts[name][part.name];
      timed.first += part.micros;
      timed.second += part.count;
    }
  }
}

void Trainer::drawProgressBar(int64_t step) {
  int width = 30, done = static_cast<int>(width * step / std::max<int64_t>(totalSteps, 1));
  std::cerr << "\r[" << std::string(done, '#') << std::string(width - done, '.') << "] "
            << step << "/" << totalSteps << std::flush;
}

bool Trainer::stopRequested() {
  // Ranks stop together: a signal reaches them at slightly different
  // moments, so they agree on it after every step.
  bool stop = interrupted;
  if (artifact.worldSize > 1) {
    float flag = stop ? 1.0f : 0.0f;
    comm->group(allAxes).allReduce(&flag, &flag, 1, DType::F32, Reduction::Max);
    stop = flag > 0;
  }
  return stop;
}

void Trainer::finish(const Progress &p) {
  if (tty)
    std::cerr << "\r\033[K";
  // Calibrated observers are worth saving even when nothing trained, and so
  // are weights from a file (`--weights hf_dir/ --steps 0 --ckpt-dir ck`
  // turns them into a checkpoint of this layout).
  if (p.lastStep > p.start || opt.calibrateBatches > 0 || !opt.weights.empty())
    save(p.lastStep, p.lastLoss, skippedSteps);
  writeTrace(); // collective
  if (opt.quiet)
    return;
  double valLoss = evaluate();                             // collective
  std::string text = opt.sampleTokens > 0 ? sample() : ""; // collective under ZeRO-3
  if (chatty)
    printSummary(p, valLoss, text);
}

void Trainer::printSummary(const Progress &p, double valLoss, const std::string &text) {
  Input in = batchInput(*train, false);
  int64_t steps = p.lastStep - p.start;
  std::cout << "done: " << steps << " steps in " << std::fixed << std::setprecision(1)
            << p.trainSeconds << " s (" << std::setprecision(0)
            << (steps > 0 ? steps * in.rows * dataReplicas * in.T / p.trainSeconds : 0.0)
            << " tok/s)";
  if (p.skipped > 0)
    std::cout << " (" << p.skipped << " skipped: non-finite loss or gradient norm)";
  if (steps > p.skipped)
    std::cout << " | train loss " << std::setprecision(4) << p.firstLoss << " -> " << p.lastLoss;
  if (!std::isnan(valLoss))
    std::cout << " | val loss " << std::setprecision(4) << valLoss;
  std::cout << "\n";
  if (opt.sampleTokens > 0)
    std::cout << "sample: " << opt.prompt << text << "\n";
  // The plan against what the run wrote: the arena's high-water mark.
  size_t used = device->highWaterMark(), planned = artifact.memory.arenaBytes;
  std::cout << "memory: rank " << rank << " wrote " << used << " of its " << planned
            << " planned arena bytes ("
            << (used + 64 > planned ? "the plan's peak, to its 64-byte alignment"
                                    : "the plan reserves more than the run used")
            << ")\n";
  if (std::string facts = device->describe(); !facts.empty())
    std::cout << "device: " << facts << "\n";
  if (opt.profile)
    printProfile(profile, profileParts, device->backend() == Backend::CUDA);
}

void Trainer::writeTrace() {
  if (opt.trace.empty())
    return;
  std::string pipeline = artifact.meta("pipeline.schedule");
  std::string label = "rank " + std::to_string(rank);
  if (!pipeline.empty())
    label += " (" + pipeline + ")";
  trace.write(opt.trace, rank, artifact.worldSize, label, *comm);
}

} // namespace

int runTraining(const TrainOptions &options) {
  try {
    Trainer trainer(options);
    return trainer.run();
  } catch (const std::exception &e) {
    std::cout << std::flush;
    std::cerr << "llmc-run: error: " << e.what() << "\n";
    return 1;
  }
}

} // namespace llmc
