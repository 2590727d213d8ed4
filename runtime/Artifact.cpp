//===- Artifact.cpp - load and verify a .llmc artifact --------------------===//

#include "runtime/Artifact.h"
#include "common/TransferChannel.h"

#include "common/ArtifactFormat.h"
#include "common/schema/artifact_generated.h"
#include "runtime/support/Error.h"

#include <algorithm>
#include <sstream>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <set>
#include <type_traits>
#include <fstream>
#include <iterator>

namespace llmc {

size_t BufferInfo::bytes() const {
  size_t n = dtypeSize(dtype);
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

int64_t ParameterInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

const char *instructionKindName(InstructionKind kind) {
  static const char *names[] = {"kernel", "all_reduce", "all_gather", "reduce_scatter",
                                "broadcast", "reduce", "all_to_all", "send", "recv",
                                "record_event", "wait_event", "all_slice"};
  return names[static_cast<int>(kind)];
}

int ProgramInfo::findBuffer(const std::string &bufferName) const {
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].name == bufferName)
      return static_cast<int>(i);
  return -1;
}

const ProgramInfo *Artifact::program(const std::string &programName) const {
  for (const ProgramInfo &p : programs)
    if (p.name == programName)
      return &p;
  return nullptr;
}

bool lookupReads(const Artifact &artifact, const std::string &weight) {
  for (const ProgramInfo &program : artifact.programs) {
    std::set<uint32_t> tables; // buffers holding the weight right now
    if (int stored = program.findBuffer(weight); stored >= 0)
      tables.insert(static_cast<uint32_t>(stored));
    for (const InstructionInfo &inst : program.instructions) {
      if (inst.kind != InstructionKind::Kernel || inst.inputs.empty())
        continue;
      const std::string &first = program.buffers[inst.inputs[0]].name;
      if (inst.kernel == "embedding" && tables.count(inst.inputs[0]))
        return true;
      for (uint32_t out : inst.outputs) // written: it holds something else now
        tables.erase(out);
      if (inst.kernel == "qat_dequantize_nf4" && first == weight + ".qweight")
        tables.insert(inst.outputs[0]);
    }
  }
  return false;
}

quant::AbsmaxFormat nf4AbsmaxFormat(const Artifact &artifact) {
  // `llmc compile --double-quant`'s spelling (passes/lib/CompileOptions.def).
  const std::string text = artifact.meta("double_quant", "int8");
  if (text == "int8")
    return quant::AbsmaxFormat::Int8;
  if (text == "fp8")
    return quant::AbsmaxFormat::Fp8E4M3;
  fail(artifact.path, ": unknown double_quant '", text, "' in the metadata (int8 or fp8)");
}

std::string Artifact::meta(const std::string &key, const std::string &fallback) const {
  auto it = metadata.find(key);
  return it == metadata.end() ? fallback : it->second;
}

std::vector<std::string> Artifact::metaList(const std::string &key) const {
  std::vector<std::string> out;
  std::stringstream list(meta(key));
  for (std::string item; std::getline(list, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

double Artifact::metaNumber(const std::string &key, double fallback) const {
  auto it = metadata.find(key);
  if (it == metadata.end())
    return fallback;
  try {
    return std::stod(it->second);
  } catch (const std::exception &) {
    fail(path, ": metadata '", key, "' is not a number: '", it->second, "'");
  }
}

namespace {

std::string str(const flatbuffers::String *s) { return s ? s->str() : std::string(); }

/// "h.2" < "h.10": digit runs compare as numbers.
bool naturalLess(const std::string &a, const std::string &b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) &&
        std::isdigit(static_cast<unsigned char>(b[j]))) {
      size_t ei = i, ej = j;
      while (ei < a.size() && std::isdigit(static_cast<unsigned char>(a[ei]))) ++ei;
      while (ej < b.size() && std::isdigit(static_cast<unsigned char>(b[ej]))) ++ej;
      unsigned long long x = std::stoull(a.substr(i, ei - i)), y = std::stoull(b.substr(j, ej - j));
      if (x != y) return x < y;
      i = ei, j = ej;
      continue;
    }
    if (a[i] != b[j]) return a[i] < b[j];
    ++i, ++j;
  }
  return a.size() - i < b.size() - j;
}

/// A vector of scalars, copied bytewise: the verifier checks the alignment
/// of a vector's length, not of its elements, so a damaged file can place
/// 8-byte elements 4 bytes off (little-endian, as FlatBuffers stores them).
template <typename T> std::vector<T> vec(const flatbuffers::Vector<T> *v) {
  static_assert(std::is_arithmetic_v<T>, "scalar vectors only");
  std::vector<T> out(v ? v->size() : 0);
  if (!out.empty())
    std::memcpy(out.data(), v->Data(), out.size() * sizeof(T));
  return out;
}

template <typename Table> ShardInfo shardOf(const Table *t, const std::vector<int64_t> &shape,
                                            const std::string &where) {
  ShardInfo info;
  info.globalShape = vec(t->global_shape());
  if (t->shard_levels())
    for (const fb::ShardLevel *l : *t->shard_levels()) {
      ShardLevel level;
      if (l->axes())
        for (const flatbuffers::String *axis : *l->axes()) level.axes.push_back(axis->str());
      level.dim = l->dim();
      level.blocks = l->blocks();
      level.padTo = l->pad_to();
      // A level splits over mesh axes or pads (no axes, one block), never both.
      const bool ok = level.pads() ? level.axes.empty() && level.blocks == 1
                                   : !level.axes.empty() && level.blocks >= 1 && level.padTo == 0;
      if (level.dim < 0 || level.dim >= static_cast<int>(shape.size()) || !ok)
        fail(where, ": bad shard level (dim ", level.dim, ", blocks ", level.blocks, ", pad_to ",
             level.padTo, ")");
      info.levels.push_back(std::move(level));
    }
  if (info.sharded() && info.globalShape.size() != shape.size())
    fail(where, ": global_shape has rank ", info.globalShape.size(), " but the buffer ",
         shape.size());
  return info;
}

DType dtypeOf(fb::DType d, const std::string &where) {
  if (static_cast<int>(d) > static_cast<int>(DType::F64))
    fail(where, ": unknown dtype ", static_cast<int>(d));
  return static_cast<DType>(d);
}

/// Checks that a tensor of `shape` and `dtype` at `offset` lies inside the
/// arena and is aligned for its elements, without overflowing on any input
/// (a corrupt shape or offset must be an error, not a wrapped-around pass).
void checkPlacement(const std::vector<int64_t> &shape, DType dtype, uint64_t offset,
                    uint64_t arenaBytes, const std::string &where) {
  uint64_t elements = 1;
  for (int64_t d : shape) {
    if (d < 0)
      fail(where, ": negative dimension ", d);
    if (__builtin_mul_overflow(elements, static_cast<uint64_t>(d), &elements))
      fail(where, ": the shape's element count overflows");
  }
  uint64_t size = dtypeSize(dtype), bytes = 0;
  if (__builtin_mul_overflow(elements, size, &bytes) || offset > arenaBytes ||
      bytes > arenaBytes - offset) {
    if (offset <= UINT64_MAX - bytes)
      fail(where, ": bytes [", offset, ", ", offset + bytes, ") lie outside the arena of ",
           arenaBytes, " bytes");
    fail(where, ": offset ", offset, " lies outside the arena of ", arenaBytes, " bytes");
  }
  if (offset % size)
    fail(where, ": offset ", offset, " is not aligned to its ", size, "-byte elements");
}

/// The fault-injection site writes a float buffer: a kernel's first output
/// or a receive's buffer (what BoundProgram::poisonNextRun overwrites).
void checkFaultSite(const InstructionInfo &inst, const ProgramInfo &program,
                    const std::string &where) {
  const std::vector<uint32_t> &written =
      inst.kind == InstructionKind::Recv ? inst.inputs : inst.outputs;
  if (inst.kind != InstructionKind::Kernel && inst.kind != InstructionKind::Recv)
    fail(where, ": only a kernel or a receive can be the fault-injection site");
  if (written.empty())
    fail(where, ": the fault-injection site writes no buffer");
  DType dtype = program.buffers[written[0]].dtype;
  if (dtype != DType::F32 && dtype != DType::BF16 && dtype != DType::F16)
    fail(where, ": the fault-injection site writes a ", dtypeName(dtype),
         " buffer; it must be f32, bf16 or f16");
}

/// A transfer's channel is one of common/TransferChannel.h's; nothing else
/// has one.
void checkChannel(const InstructionInfo &inst, const std::string &where) {
  bool transfer = inst.kind == InstructionKind::Send || inst.kind == InstructionKind::Recv;
  if (!transfer && inst.channel != kSharedChannel)
    fail(where, ": channel ", inst.channel, " on an instruction that is not a send or receive");
  if (inst.channel < 0 || inst.channel >= kTransferChannels)
    fail(where, ": channel ", inst.channel, " (transfers travel on channels 0 to ",
         kTransferChannels - 1, ")");
}

/// Host memory (ZeRO-Offload, layers run on the host): a host kernel or
/// collective reads and writes host buffers only; every other instruction
/// device buffers only, except copy_to_host (device to host) and
/// copy_to_device (host to device).
void checkMemorySpaces(const InstructionInfo &inst, const ProgramInfo &program,
                       const std::string &where) {
  bool kernel = inst.kind == InstructionKind::Kernel;
  bool transferOrEvent = inst.kind == InstructionKind::Send || inst.kind == InstructionKind::Recv ||
                         inst.kind == InstructionKind::RecordEvent ||
                         inst.kind == InstructionKind::WaitEvent;
  if (inst.onHost && transferOrEvent)
    fail(where, ": only a kernel or a collective can run on the host");
  if (inst.onHost && inst.kernel.rfind("copy_to_", 0) == 0)
    fail(where, ": '", inst.kernel, "' runs on the device, not the host");
  bool inputsHost = inst.onHost || (kernel && inst.kernel == "copy_to_device");
  bool outputsHost = inst.onHost || (kernel && inst.kernel == "copy_to_host");
  auto check = [&](const std::vector<uint32_t> &buffers, bool host, const char *what) {
    for (uint32_t index : buffers)
      if (index < program.buffers.size() && program.buffers[index].host != host)
        fail(where, ": ", what, " buffer ", index, " is in ",
             program.buffers[index].host ? "host" : "device", " memory; this instruction ",
             what == std::string("input") ? "reads " : "writes ", host ? "host" : "device",
             " memory");
  };
  check(inst.inputs, inputsHost, "input");
  check(inst.outputs, outputsHost, "output");
}

ProgramInfo decodeProgram(const fb::Program *p, const std::string &file,
                          uint64_t arenaBytes, uint64_t hostBytes) {
  ProgramInfo program;
  program.name = str(p->name());
  program.peakBytes = p->peak_bytes();
  program.liveBytesBound = p->live_bytes_bound();
  std::string where = file + ": program '" + program.name + "'";
  if (p->buffers())
    for (size_t i = 0; i < p->buffers()->size(); ++i) {
      const fb::Buffer *b = p->buffers()->Get(i);
      std::string bufWhere = where + " buffer " + std::to_string(i);
      BufferInfo info;
      info.name = str(b->name());
      info.category = str(b->category());
      info.offset = b->offset();
      info.dtype = dtypeOf(b->dtype(), bufWhere);
      info.shape = vec(b->shape());
      info.shard = shardOf(b, info.shape, bufWhere);
      info.host = b->space() == fb::MemorySpace::Host;
      if (static_cast<int>(b->space()) > static_cast<int>(fb::MemorySpace::Host))
        fail(bufWhere, ": unknown memory space ", static_cast<int>(b->space()));
      if (info.host && info.offset < arenaBytes)
        fail(bufWhere, " ('", info.name, "'): a host buffer at offset ", info.offset,
             " lies in the device arena of ", arenaBytes, " bytes");
      checkPlacement(info.shape, info.dtype, info.offset, info.host ? arenaBytes + hostBytes
                                                                   : arenaBytes,
                     bufWhere + " ('" + info.name + "')" + (info.host ? " in host memory" : ""));
      program.buffers.push_back(std::move(info));
    }
  if (p->instructions())
    for (size_t i = 0; i < p->instructions()->size(); ++i) {
      const fb::Instruction *in = p->instructions()->Get(i);
      std::string instWhere = where + " instruction " + std::to_string(i);
      InstructionInfo info;
      if (static_cast<int>(in->kind()) > static_cast<int>(fb::OpKind::AllSlice))
        fail(instWhere, ": unknown kind ", static_cast<int>(in->kind()));
      info.kind = static_cast<InstructionKind>(in->kind());
      info.kernel = str(in->kernel());
      info.inputs = vec(in->inputs());
      info.outputs = vec(in->outputs());
      for (uint32_t index : info.inputs)
        if (index >= program.buffers.size())
          fail(instWhere, ": input buffer index ", index, " out of range (",
               program.buffers.size(), " buffers)");
      for (uint32_t index : info.outputs)
        if (index >= program.buffers.size())
          fail(instWhere, ": output buffer index ", index, " out of range (",
               program.buffers.size(), " buffers)");
      if (in->ints())
        for (const fb::IntAttr *a : *in->ints()) info.attrs.setInt(a->name()->str(), a->value());
      if (in->floats())
        for (const fb::FloatAttr *a : *in->floats())
          info.attrs.setFloat(a->name()->str(), a->value());
      if (in->arrays())
        for (const fb::IntsAttr *a : *in->arrays())
          info.attrs.setInts(a->name()->str(), vec(a->values()));
      if (in->rank_offsets())
        for (const fb::RankOffset *r : *in->rank_offsets()) {
          RankOffsetInfo term;
          term.attr = r->attr()->str();
          term.index = r->index();
          term.stride = r->stride();
          if (r->axes())
            for (const flatbuffers::String *axis : *r->axes()) term.axes.push_back(axis->str());
          int64_t size = info.attrs.hasInt(term.attr)    ? 1
                         : info.attrs.hasInts(term.attr) ? static_cast<int64_t>(
                                                               info.attrs.getInts(term.attr).size())
                                                         : -1;
          if (size < 0)
            fail(instWhere, ": rank offset for attribute '", term.attr,
                 "', which the instruction does not have as an int or int array");
          if (term.index < 0 || term.index >= size)
            fail(instWhere, ": rank offset index ", term.index, " out of range for attribute '",
                 term.attr, "' of ", size, " element(s)");
          if (term.axes.empty() || term.stride < 0)
            fail(instWhere, ": rank offset for '", term.attr,
                 "' needs mesh axes and a stride >= 0");
          info.rankOffsets.push_back(std::move(term));
        }
      if (in->group())
        for (const flatbuffers::String *g : *in->group()) info.group.push_back(g->str());
      info.reduction = str(in->reduction());
      info.root = in->root();
      info.axis = str(in->axis());
      info.shift = in->shift();
      info.tag = in->tag();
      info.event = in->event();
      info.stream = in->stream();
      info.channel = in->channel();
      checkChannel(info, instWhere);
      info.location = str(in->location());
      info.action = str(in->action());
      info.faultSite = in->fault_site();
      info.onHost = in->on_host();
      checkMemorySpaces(info, program, instWhere);
      if (info.kind == InstructionKind::Kernel && info.kernel.empty())
        fail(instWhere, ": kernel instruction without a kernel name");
      if (info.faultSite)
        checkFaultSite(info, program, instWhere);
      program.instructions.push_back(std::move(info));
    }
  return program;
}

/// The artifact file's bytes, checked: its identifier, the FlatBuffers
/// verifier and the content hash.
std::vector<uint8_t> readVerified(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    fail("cannot open artifact '", path, "'");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(file)),
                             std::istreambuf_iterator<char>());
  if (bytes.size() < 8 || !fb::ArtifactBufferHasIdentifier(bytes.data()))
    fail(path, ": not an llmc artifact (missing the 'LLMC' file identifier)");
  flatbuffers::Verifier verifier(bytes.data(), bytes.size());
  if (!fb::VerifyArtifactBuffer(verifier))
    fail(path, ": corrupt artifact (FlatBuffers verification failed)");
  const fb::Artifact *root = fb::GetArtifact(bytes.data());
  const uint32_t version = root->schema_version();
  if (version / 100 != kArtifactSchemaVersion / 100)
    fail(path, ": schema_version ", version, " is not compatible with this runtime (",
         kArtifactSchemaVersion, ")");
  std::vector<uint8_t> copy = bytes;
  fb::GetMutableArtifact(copy.data())->mutate_content_hash(0);
  uint64_t actual = fnv1a64(copy.data(), copy.size());
  if (actual != root->content_hash())
    fail(path, ": content_hash mismatch (stored ", root->content_hash(), ", computed ", actual,
         "): the file was modified or truncated");
  return bytes;
}

/// Every role's ranks and persistent buffers (pipeline stages hold
/// different parameters; checkpoints index them all) into `artifact`;
/// returns the role of `rank`.
const fb::Role *decodeRoles(const fb::Artifact *root, const std::string &path, int rank,
                            Artifact &artifact) {
  const fb::Role *role = nullptr;
  if (root->roles())
    for (const fb::Role *candidate : *root->roles()) {
      std::vector<int> ranks = vec(candidate->ranks());
      for (int r : ranks)
        if (r == rank)
          role = candidate;
      RoleState state;
      state.ranks = ranks;
      uint64_t arena = candidate->memory() ? candidate->memory()->arena_bytes() : 0;
      uint64_t host = candidate->memory() ? candidate->memory()->host_bytes() : 0;
      if (candidate->programs())
        for (const fb::Program *p : *candidate->programs())
          for (BufferInfo &b : decodeProgram(p, path, arena, host).buffers)
            if (!b.name.empty() && (b.category == "param" || b.category == "optim") &&
                std::none_of(state.persistent.begin(), state.persistent.end(),
                             [&](const BufferInfo &o) { return o.name == b.name; }))
              state.persistent.push_back(std::move(b));
      artifact.roles.push_back(std::move(state));
    }
  if (!role)
    fail(path, ": no role for rank ", rank, " (world size ", artifact.worldSize, ")");
  return role;
}

/// A role's memory plan; its host parts must fit in host_bytes, and
/// host_bytes beside the arena.
MemoryPlanInfo decodeMemoryPlan(const fb::MemoryPlan *plan, const std::string &path) {
  MemoryPlanInfo m;
  m.arenaBytes = plan->arena_bytes();
  m.persistentBytes = plan->persistent_bytes();
  m.peakBytes = plan->peak_bytes();
  m.hostBytes = plan->host_bytes();
  m.hostOptimizerStateBytes = plan->host_optimizer_state_bytes();
  m.hostActivationsBytes = plan->host_activations_bytes();
  m.hostWeightsBytes = plan->host_weights_bytes();
  // Each part no larger than what the parts before it left of host_bytes.
  uint64_t left = m.hostBytes;
  bool partsFit = true;
  for (uint64_t part : {m.hostOptimizerStateBytes, m.hostActivationsBytes, m.hostWeightsBytes}) {
    partsFit = partsFit && part <= left;
    left = partsFit ? left - part : 0;
  }
  if (m.hostBytes > UINT64_MAX - m.arenaBytes || !partsFit)
    fail(path, ": memory plan: host_optimizer_state_bytes ", m.hostOptimizerStateBytes,
         ", host_activations_bytes ", m.hostActivationsBytes, ", host_weights_bytes ",
         m.hostWeightsBytes, " and host_bytes ", m.hostBytes, " do not fit beside the arena of ",
         m.arenaBytes, " bytes");
  if (plan->breakdown())
    for (const fb::MemoryCategory *c : *plan->breakdown())
      m.breakdown.push_back({c->name()->str(), c->bytes()});
  if (plan->category_peaks())
    for (const fb::MemoryCategory *c : *plan->category_peaks())
      m.categoryPeaks[c->name()->str()] = c->bytes();
  if (plan->gradient_peak_parts())
    for (const fb::MemoryCategory *c : *plan->gradient_peak_parts())
      m.gradientPeakParts[c->name()->str()] = c->bytes();
  if (plan->activations_by_microbatch())
    for (const fb::MemoryCategory *c : *plan->activations_by_microbatch())
      m.activationsByMicrobatch[std::atoll(c->name()->c_str())] = c->bytes();
  if (plan->saved_per_layer()) {
    for (const fb::MemoryCategory *c : *plan->saved_per_layer())
      m.savedPerLayer.push_back({c->name()->str(), c->bytes()});
    std::sort(m.savedPerLayer.begin(), m.savedPerLayer.end(),
              [](const auto &a, const auto &b) { return naturalLess(a.first, b.first); });
  }
  return m;
}

/// One parameter of a role: its buffer within the arena (or, for
/// streamed generation weights, host memory) and an init the runtime has.
ParameterInfo decodeParameter(const fb::Parameter *p, const std::string &path,
                              const MemoryPlanInfo &memory) {
  ParameterInfo info;
  info.name = p->name()->str();
  const std::string where = path + ": parameter '" + info.name + "'";
  info.shape = vec(p->shape());
  info.dtype = dtypeOf(p->dtype(), where);
  info.offset = p->offset();
  info.init = str(p->init());
  info.scale = p->scale();
  info.trainable = p->trainable();
  info.shard = shardOf(p, info.shape, where);
  // Streamed generation weights (--device-memory) live in host memory.
  checkPlacement(info.shape, info.dtype, info.offset, memory.arenaBytes + memory.hostBytes, where);
  if (info.init != "normal" && info.init != "uniform" && info.init != "zeros" &&
      info.init != "ones")
    fail(path, ": parameter '", info.name, "' has unknown init '", info.init, "'");
  return info;
}

} // namespace

Artifact loadArtifact(const std::string &path, int rank) {
  const std::vector<uint8_t> bytes = readVerified(path);
  const fb::Artifact *root = fb::GetArtifact(bytes.data());
  Artifact artifact;
  artifact.path = path;
  artifact.schemaVersion = root->schema_version();
  artifact.contentHash = root->content_hash();
  artifact.producer = str(root->producer());
  artifact.backend = str(root->backend());
  if (artifact.backend != "cpu" && artifact.backend != "cuda")
    fail(path, ": unknown backend '", artifact.backend, "'");
  if (root->mesh())
    for (const fb::MeshAxis *axis : *root->mesh())
      artifact.mesh.push_back({axis->name()->str(), axis->size()});
  artifact.worldSize = root->world_size();
  if (artifact.worldSize < 1)
    fail(path, ": world_size must be >= 1, got ", artifact.worldSize);
  if (root->metadata())
    for (const fb::KeyValue *kv : *root->metadata())
      artifact.metadata[kv->key()->str()] = str(kv->value());

  const fb::Role *role = decodeRoles(root, path, rank, artifact);
  artifact.ranks = vec(role->ranks());
  if (!role->memory())
    fail(path, ": role of rank ", rank, " has no memory plan");
  artifact.memory = decodeMemoryPlan(role->memory(), path);
  if (!role->programs() || role->programs()->size() == 0)
    fail(path, ": role of rank ", rank, " has no programs");
  for (const fb::Program *p : *role->programs())
    artifact.programs.push_back(
        decodeProgram(p, path, artifact.memory.arenaBytes, artifact.memory.hostBytes));
  if (role->parameters())
    for (const fb::Parameter *p : *role->parameters())
      artifact.parameters.push_back(decodeParameter(p, path, artifact.memory));
  return artifact;
}

} // namespace llmc
