//===- ArtifactFuzz.cpp - mutated artifacts give clean errors, never crashes -===//
//
//   llmc-fuzz-artifact <seed.llmc> [--iterations N] [--seed S] [--run-every K]
//
// Starting from a valid artifact, each iteration applies one to three
// mutations — a scalar field of the FlatBuffer set to an extreme or nearby
// value (buffer offsets, shapes and dtypes, instruction kinds, operand
// indices, attributes, rank offsets, collective fields, the memory plan,
// the mesh, parameters), random bytes flipped, the file truncated — and
// usually recomputes the content hash so the mutant reaches the checks
// behind it. The mutant is then loaded, every program bound to a CPU arena
// and, every K-th mutant that binds, its programs run once. Each must
// either work or fail with a RuntimeError; anything else (a crash, an
// abort, a sanitizer report when built with -fsanitize) is a defect. The
// summary counts where mutants were stopped.
//
//===----------------------------------------------------------------------===//

#include "runtime/Artifact.h"
#include "common/ArtifactFormat.h"
#include "common/schema/artifact_generated.h"
#include "runtime/ExecutionDevice.h"
#include "runtime/Executor.h"
#include "runtime/comm/Communicator.h"
#include "runtime/support/Error.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

using namespace llmc;

namespace {

using Bytes = std::vector<uint8_t>;

class Mutator {
public:
  explicit Mutator(uint64_t seed) : rng(seed) {}

  /// Applies one mutation; returns what it did ("buffer.offset", ...).
  std::string mutate(Bytes &bytes) {
    switch (pick(10)) {
    case 0: return flipBytes(bytes);
    case 1: return truncate(bytes);
    default: {
      std::string what = mutateField(bytes);
      return what.empty() ? flipBytes(bytes) : what;
    }
    }
  }

  bool chance(double p) { return std::uniform_real_distribution<>(0, 1)(rng) < p; }

private:
  size_t pick(size_t n) { return n ? std::uniform_int_distribution<size_t>(0, n - 1)(rng) : 0; }

  /// Extreme and nearby values of a signed field.
  int64_t value(int64_t original) {
    static const int64_t extremes[] = {0,
                                       1,
                                       -1,
                                       2,
                                       7,
                                       4096,
                                       std::numeric_limits<int32_t>::max(),
                                       std::numeric_limits<int32_t>::min(),
                                       std::numeric_limits<int64_t>::max(),
                                       std::numeric_limits<int64_t>::min(),
                                       int64_t(1) << 40};
    // Wrapping arithmetic: the mutator itself must not overflow.
    auto wrap = [](uint64_t v) { return static_cast<int64_t>(v); };
    uint64_t u = static_cast<uint64_t>(original);
    switch (pick(4)) {
    case 0: return extremes[pick(std::size(extremes))];
    case 1: return wrap(u + 1);
    case 2: return wrap(u - 1);
    default: return wrap(u * 2 + 1);
    }
  }

  std::string flipBytes(Bytes &bytes) {
    for (size_t i = 0, n = 1 + pick(8); i < n && !bytes.empty(); ++i)
      bytes[pick(bytes.size())] ^= static_cast<uint8_t>(1 + pick(255));
    return "bytes";
  }

  std::string truncate(Bytes &bytes) {
    bytes.resize(pick(bytes.size()));
    return "truncate";
  }

  template <typename T> T *element(flatbuffers::Vector<flatbuffers::Offset<T>> *v) {
    return v && v->size() ? v->GetMutableObject(static_cast<flatbuffers::uoffset_t>(pick(v->size())))
                          : nullptr;
  }
  template <typename T, typename V> bool mutateVector(flatbuffers::Vector<V> *v) {
    if (!v || !v->size())
      return false;
    auto i = static_cast<flatbuffers::uoffset_t>(pick(v->size()));
    v->Mutate(i, static_cast<V>(value(static_cast<int64_t>(v->Get(i)))));
    return true;
  }

  std::string mutateField(Bytes &bytes) {
    flatbuffers::Verifier verifier(bytes.data(), bytes.size());
    if (bytes.size() < 8 || !fb::VerifyArtifactBuffer(verifier))
      return "";
    fb::Artifact *art = fb::GetMutableArtifact(bytes.data());
    switch (pick(6)) {
    case 0:
      if (pick(2))
        return art->mutate_world_size(static_cast<int32_t>(value(art->world_size()))) ? "world_size" : "";
      if (auto *axis = element(art->mutable_mesh()))
        return axis->mutate_size(static_cast<int32_t>(value(axis->size()))) ? "mesh.size" : "";
      return "";
    case 1: {
      fb::Role *role = element(art->mutable_roles());
      fb::MemoryPlan *plan = role ? role->mutable_memory() : nullptr;
      if (!plan)
        return "";
      if (pick(2))
        return plan->mutate_arena_bytes(static_cast<uint64_t>(value(int64_t(plan->arena_bytes()))))
                   ? "memory.arena_bytes" : "";
      return plan->mutate_persistent_bytes(static_cast<uint64_t>(value(int64_t(plan->persistent_bytes()))))
                 ? "memory.persistent_bytes" : "";
    }
    case 2: {
      fb::Role *role = element(art->mutable_roles());
      fb::Parameter *p = role ? element(role->mutable_parameters()) : nullptr;
      if (!p)
        return "";
      switch (pick(4)) {
      case 0: return p->mutate_offset(static_cast<uint64_t>(value(int64_t(p->offset())))) ? "parameter.offset" : "";
      case 1: return mutateVector<int64_t>(p->mutable_shape()) ? "parameter.shape" : "";
      case 2: return p->mutate_dtype(static_cast<fb::DType>(pick(9))) ? "parameter.dtype" : "";
      default: return mutateVector<int64_t>(p->mutable_global_shape()) ? "parameter.global_shape" : "";
      }
    }
    case 3: {
      fb::Role *role = element(art->mutable_roles());
      fb::Program *program = role ? element(role->mutable_programs()) : nullptr;
      fb::Buffer *b = program ? element(program->mutable_buffers()) : nullptr;
      if (!b)
        return "";
      switch (pick(5)) {
      case 0: return b->mutate_offset(static_cast<uint64_t>(value(int64_t(b->offset())))) ? "buffer.offset" : "";
      case 1: return mutateVector<int64_t>(b->mutable_shape()) ? "buffer.shape" : "";
      case 2: return b->mutate_dtype(static_cast<fb::DType>(pick(9))) ? "buffer.dtype" : "";
      case 3: return mutateVector<int64_t>(b->mutable_global_shape()) ? "buffer.global_shape" : "";
      default: {
        fb::ShardLevel *level = element(b->mutable_shard_levels());
        if (!level)
          return "";
        return (pick(2) ? level->mutate_dim(static_cast<int32_t>(value(level->dim())))
                        : level->mutate_blocks(static_cast<int32_t>(value(level->blocks()))))
                   ? "buffer.shard_level" : "";
      }
      }
    }
    default: {
      fb::Role *role = element(art->mutable_roles());
      fb::Program *program = role ? element(role->mutable_programs()) : nullptr;
      fb::Instruction *in = program ? element(program->mutable_instructions()) : nullptr;
      if (!in)
        return "";
      switch (pick(12)) {
      case 0: return in->mutate_kind(static_cast<fb::OpKind>(pick(14))) ? "instruction.kind" : "";
      case 1: return mutateVector<uint32_t>(in->mutable_inputs()) ? "instruction.inputs" : "";
      case 2: return mutateVector<uint32_t>(in->mutable_outputs()) ? "instruction.outputs" : "";
      case 3: {
        fb::IntAttr *a = element(in->mutable_ints());
        return a && a->mutate_value(value(a->value())) ? "instruction.int_attr" : "";
      }
      case 4: {
        fb::FloatAttr *a = element(in->mutable_floats());
        static const double specials[] = {0.0, -1.0, 1e300, -1e300,
                                          std::numeric_limits<double>::quiet_NaN(),
                                          std::numeric_limits<double>::infinity()};
        return a && a->mutate_value(specials[pick(std::size(specials))]) ? "instruction.float_attr" : "";
      }
      case 5: {
        fb::IntsAttr *a = element(in->mutable_arrays());
        return a && mutateVector<int64_t>(a->mutable_values()) ? "instruction.ints_attr" : "";
      }
      case 6: {
        fb::RankOffset *r = element(in->mutable_rank_offsets());
        if (!r)
          return "";
        return (pick(2) ? r->mutate_index(static_cast<int32_t>(value(r->index())))
                        : r->mutate_stride(value(r->stride())))
                   ? "instruction.rank_offset" : "";
      }
      case 7: return in->mutate_root(value(in->root())) ? "instruction.root" : "";
      case 8: return in->mutate_shift(value(in->shift())) ? "instruction.shift" : "";
      case 9: return in->mutate_tag(value(in->tag())) ? "instruction.tag" : "";
      case 10: return in->mutate_event(value(in->event())) ? "instruction.event" : "";
      default: return in->mutate_stream(static_cast<int32_t>(value(in->stream()))) ? "instruction.stream" : "";
      }
    }
    }
  }

  std::mt19937_64 rng;
};

void rehash(Bytes &bytes) {
  flatbuffers::Verifier verifier(bytes.data(), bytes.size());
  if (bytes.size() < 8 || !fb::VerifyArtifactBuffer(verifier))
    return;
  fb::Artifact *art = fb::GetMutableArtifact(bytes.data());
  if (!art->mutate_content_hash(0))
    return;
  art->mutate_content_hash(fnv1a64(bytes.data(), bytes.size()));
}

/// Loads, binds and (when `run`) runs the artifact at `path`; returns the
/// stage that rejected it, or "accepted".
std::string exercise(const std::string &path, bool run) {
  std::string stage = "load";
  try {
    Artifact artifact = loadArtifact(path, 0);
    stage = "bind";
    auto device = makeCpuDevice(artifact.memory.arenaBytes);
    auto comm = makeSingleRankCommunicator();
    std::vector<std::unique_ptr<BoundProgram>> programs;
    for (const ProgramInfo &program : artifact.programs)
      programs.push_back(std::make_unique<BoundProgram>(program, *device, *comm, 0));
    if (run) {
      stage = "run";
      for (auto &program : programs)
        program->run(StepContext{1});
    }
    return "accepted";
  } catch (const RuntimeError &) {
    return "rejected at " + stage;
  }
}

Bytes readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    fail("cannot open '", path, "'");
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void writeFile(const std::string &path, const Bytes &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char *>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out)
    fail("cannot write '", path, "'");
}

} // namespace

int main(int argc, char **argv) {
  std::string seedPath;
  int64_t iterations = 1000, runEvery = 10;
  uint64_t seed = 1;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "llmc-fuzz-artifact: " << arg << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--iterations") iterations = std::atoll(next().c_str());
    else if (arg == "--seed") seed = std::strtoull(next().c_str(), nullptr, 10);
    else if (arg == "--run-every") runEvery = std::atoll(next().c_str());
    else if (seedPath.empty() && arg[0] != '-') seedPath = arg;
    else {
      std::cerr << "usage: llmc-fuzz-artifact <seed.llmc> [--iterations N] [--seed S] [--run-every K]\n";
      return 2;
    }
  }
  if (seedPath.empty() || iterations < 1 || runEvery < 1) {
    std::cerr << "usage: llmc-fuzz-artifact <seed.llmc> [--iterations N] [--seed S] [--run-every K]\n";
    return 2;
  }
  try {
    Bytes original = readFile(seedPath);
    std::string path = seedPath + ".mutant." + std::to_string(::getpid());
    if (exercise(seedPath, true) != "accepted")
      fail("the seed artifact itself does not load, bind and run");
    Mutator mutator(seed);
    std::map<std::string, int64_t> outcomes, mutations;
    int64_t bound = 0;
    for (int64_t i = 0; i < iterations; ++i) {
      Bytes bytes = original;
      for (int m = 0, n = 1 + static_cast<int>(mutator.chance(0.3)) + static_cast<int>(mutator.chance(0.2)); m < n; ++m)
        ++mutations[mutator.mutate(bytes)];
      if (mutator.chance(0.9))
        rehash(bytes);
      writeFile(path, bytes);
      bool run = false;
      // Run only some of the mutants that bind: a step costs far more than a load.
      if (exercise(path, false) == "accepted" && ++bound % runEvery == 0)
        run = true;
      ++outcomes[run ? exercise(path, true) : exercise(path, false)];
    }
    std::remove(path.c_str());
    std::cout << "mutants: " << iterations << " (seed " << seed << ")\n";
    for (auto &[what, n] : mutations)
      std::cout << "  mutation " << what << ": " << n << "\n";
    for (auto &[outcome, n] : outcomes)
      std::cout << "  " << outcome << ": " << n << "\n";
    std::cout << "no crash\n";
  } catch (const RuntimeError &e) {
    std::cerr << "llmc-fuzz-artifact: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
