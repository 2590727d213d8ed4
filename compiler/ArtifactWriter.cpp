//===- ArtifactWriter.cpp - exec module -> .llmc FlatBuffer ---------------===//
//
// A direct transcription of the exec IR: buffers and instructions keep their
// order, attributes keep their names. The content hash is patched in last
// (see common/ArtifactFormat.h).
//
//===----------------------------------------------------------------------===//

#include "compiler/ArtifactWriter.h"

#include "common/ArtifactFormat.h"
#include "common/schema/artifact_generated.h"
#include "dialects/Annotations/Annotations.h"
#include "dialects/Dist/DistDialect.h"
#include "dialects/Exec/ExecDialect.h"
#include "dialects/LLM/LLMDialect.h"
#include "passes/lib/EntryPoints.h"
#include "passes/lib/SizeFormat.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
namespace fb = llmc::fb;

namespace llmc {
namespace {

FailureOr<fb::DType> dtypeOf(Location loc, Type element) {
  if (element.isF32()) return fb::DType::F32;
  if (element.isBF16()) return fb::DType::BF16;
  if (element.isF16()) return fb::DType::F16;
  if (element.isF64()) return fb::DType::F64;
  if (element.isInteger(32)) return fb::DType::I32;
  if (element.isInteger(64)) return fb::DType::I64;
  // Bytes: int8 codes, and fp8 codes (a KV cache's, fp8 GEMM operands';
  // the kernels get their format as an attribute).
  if (element.isInteger(8) || isa<Float8E4M3FNType, Float8E5M2Type>(element))
    return fb::DType::U8;
  return emitError(loc) << "artifact: unsupported element type " << element;
}

std::string locationString(Location loc) {
  std::string text;
  llvm::raw_string_ostream os(text);
  loc.print(os);
  return text;
}

class Writer {
public:
  explicit Writer(ModuleOp module) : module(module) { fbb.ForceDefaults(true); }

  FailureOr<std::vector<uint8_t>> write(const std::map<std::string, std::string> &metadata);

private:
  /// One role: the programs, parameter table and memory plan of `roleModule`
  /// (a pipeline stage, or the whole SPMD module), run by `ranks`.
  FailureOr<flatbuffers::Offset<fb::Role>> role(ModuleOp roleModule,
                                                const std::vector<int32_t> &ranks);
  FailureOr<flatbuffers::Offset<fb::Program>> program(exec::ProgramOp op);
  using Index = llvm::DenseMap<Value, uint32_t>;
  using InstructionOffset = flatbuffers::Offset<fb::Instruction>;
  /// What every instruction records: where it came from, the step's part
  /// it belongs to, whether it is the fault-injection site.
  struct Origin {
    flatbuffers::Offset<flatbuffers::String> location, action;
    bool faultSite = false;
  };
  FailureOr<InstructionOffset> instruction(Operation *op, const Index &index);
  FailureOr<InstructionOffset> kernelInstruction(exec::KernelOp kernel, const Index &index,
                                                 const Origin &origin);
  flatbuffers::Offset<flatbuffers::Vector<uint32_t>> bufferList(ValueRange values,
                                                                const Index &index) {
    std::vector<uint32_t> out;
    for (Value v : values)
      out.push_back(index.lookup(v));
    return fbb.CreateVector(out);
  }
  /// A kernel's rank-dependent attribute terms.
  std::vector<flatbuffers::Offset<fb::RankOffset>> rankOffsets(exec::KernelOp kernel);

  template <typename Collective>
  InstructionOffset collective(Collective c, fb::OpKind kind, const Index &index,
                               const Origin &origin) {
    std::vector<flatbuffers::Offset<flatbuffers::String>> group;
    for (Attribute axis : c.getGroup())
      group.push_back(fbb.CreateString(cast<StringAttr>(axis).getValue().str()));
    auto groupV = fbb.CreateVector(group);
    auto ins = bufferList(c->getOperand(0), index), outs = bufferList(c->getOperand(1), index);
    auto reduction = fbb.CreateString(c.getReduction().str());
    fb::InstructionBuilder b(fbb);
    b.add_kind(kind);
    b.add_inputs(ins);
    b.add_outputs(outs);
    b.add_group(groupV);
    b.add_reduction(reduction);
    b.add_root(c.getRoot());
    b.add_stream(c.getStream());
    b.add_location(origin.location);
    b.add_action(origin.action);
    b.add_on_host(c->hasAttr(exec::kOnHostAttr));
    return b.Finish();
  }

  template <typename PointToPoint>
  InstructionOffset pointToPoint(PointToPoint c, fb::OpKind kind, const Index &index,
                                 const Origin &origin) {
    auto buf = bufferList(c->getOperand(0), index);
    auto axis = fbb.CreateString(c.getAxis().str());
    fb::InstructionBuilder b(fbb);
    b.add_kind(kind);
    b.add_inputs(buf);
    b.add_axis(axis);
    b.add_shift(c.getShift());
    b.add_tag(c.getTag());
    b.add_stream(c.getStream());
    b.add_channel(c.getChannel());
    b.add_location(origin.location);
    b.add_action(origin.action);
    b.add_fault_site(origin.faultSite);
    return b.Finish();
  }

  template <typename Event>
  InstructionOffset event(Event e, fb::OpKind kind, const Origin &origin) {
    fb::InstructionBuilder b(fbb);
    b.add_kind(kind);
    b.add_event(e.getEvent());
    b.add_stream(e.getStream());
    b.add_location(origin.location);
    b.add_action(origin.action);
    return b.Finish();
  }

  ModuleOp module;
  ModuleOp current; ///< the role being written
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<fb::Parameter>> parameters; ///< of the current role
  llvm::StringSet<> seenParameters;
};

std::vector<flatbuffers::Offset<fb::RankOffset>> Writer::rankOffsets(exec::KernelOp kernel) {
  std::vector<flatbuffers::Offset<fb::RankOffset>> terms;
  if (auto attr = kernel->getAttrOfType<ArrayAttr>(dist::DistDialect::kRankOffsetsAttrName))
    for (auto term : attr.getAsRange<dist::RankOffsetAttr>()) {
      std::vector<flatbuffers::Offset<flatbuffers::String>> axes;
      for (StringRef axis : term.getAxes().getAsValueRange<StringAttr>())
        axes.push_back(fbb.CreateString(axis.str()));
      auto attrName = fbb.CreateString(term.getAttr().getValue().str());
      terms.push_back(fb::CreateRankOffset(fbb, attrName, static_cast<int32_t>(term.getIndex()),
                                           fbb.CreateVector(axes), term.getStride()));
    }
  return terms;
}

FailureOr<Writer::InstructionOffset>
Writer::kernelInstruction(exec::KernelOp kernel, const Index &index, const Origin &origin) {
  std::vector<flatbuffers::Offset<fb::RankOffset>> terms = rankOffsets(kernel);
  std::vector<flatbuffers::Offset<fb::IntAttr>> ints;
  std::vector<flatbuffers::Offset<fb::FloatAttr>> floats;
  std::vector<flatbuffers::Offset<fb::IntsAttr>> arrays;
  for (NamedAttribute attr : kernel->getDiscardableAttrs()) {
    if (attr.getName() == dist::DistDialect::kRankOffsetsAttrName ||
        attr.getName() == exec::kActionAttr || attr.getName() == exec::kFaultSiteAttr ||
        attr.getName() == exec::kOnHostAttr)
      continue;
    auto name = fbb.CreateString(attr.getName().getValue().str());
    if (auto i = dyn_cast<IntegerAttr>(attr.getValue()))
      ints.push_back(fb::CreateIntAttr(fbb, name, i.getInt()));
    else if (auto f = dyn_cast<FloatAttr>(attr.getValue()))
      floats.push_back(fb::CreateFloatAttr(fbb, name, f.getValueAsDouble()));
    else if (auto a = dyn_cast<DenseI64ArrayAttr>(attr.getValue()))
      arrays.push_back(
          fb::CreateIntsAttr(fbb, name, fbb.CreateVector(std::vector<int64_t>(a.asArrayRef()))));
    else
      return kernel.emitOpError("attribute '")
             << attr.getName().getValue() << "' cannot be serialized";
  }
  auto ins = bufferList(kernel.getInputs(), index), outs = bufferList(kernel.getOutputs(), index);
  auto callee = fbb.CreateString(kernel.getCallee().str());
  auto intsV = fbb.CreateVector(ints);
  auto floatsV = fbb.CreateVector(floats);
  auto arraysV = fbb.CreateVector(arrays);
  auto rankOffsetsV = fbb.CreateVector(terms);
  fb::InstructionBuilder b(fbb);
  b.add_kind(fb::OpKind::Kernel);
  b.add_kernel(callee);
  b.add_inputs(ins);
  b.add_outputs(outs);
  b.add_ints(intsV);
  b.add_floats(floatsV);
  b.add_arrays(arraysV);
  b.add_rank_offsets(rankOffsetsV);
  b.add_stream(kernel.getStream());
  b.add_location(origin.location);
  b.add_action(origin.action);
  b.add_fault_site(origin.faultSite);
  b.add_on_host(kernel->hasAttr(exec::kOnHostAttr));
  return b.Finish();
}

FailureOr<Writer::InstructionOffset> Writer::instruction(Operation *op, const Index &index) {
  auto actionAttr = op->getAttrOfType<StringAttr>(exec::kActionAttr);
  Origin origin;
  origin.location = fbb.CreateString(locationString(op->getLoc()));
  origin.action = fbb.CreateString(actionAttr ? actionAttr.getValue().str() : "");
  origin.faultSite = op->hasAttr(exec::kFaultSiteAttr);
  if (auto kernel = dyn_cast<exec::KernelOp>(op))
    return kernelInstruction(kernel, index, origin);
  auto all = [&](auto c, fb::OpKind kind) { return collective(c, kind, index, origin); };
  auto p2p = [&](auto c, fb::OpKind kind) { return pointToPoint(c, kind, index, origin); };
  return TypeSwitch<Operation *, FailureOr<InstructionOffset>>(op)
      .Case([&](exec::AllReduceOp c) { return all(c, fb::OpKind::AllReduce); })
      .Case([&](exec::AllGatherOp c) { return all(c, fb::OpKind::AllGather); })
      .Case([&](exec::ReduceScatterOp c) { return all(c, fb::OpKind::ReduceScatter); })
      .Case([&](exec::BroadcastOp c) { return all(c, fb::OpKind::Broadcast); })
      .Case([&](exec::ReduceOp c) { return all(c, fb::OpKind::Reduce); })
      .Case([&](exec::AllToAllOp c) { return all(c, fb::OpKind::AllToAll); })
      .Case([&](exec::AllSliceOp c) { return all(c, fb::OpKind::AllSlice); })
      .Case([&](exec::SendOp c) { return p2p(c, fb::OpKind::Send); })
      .Case([&](exec::RecvOp c) { return p2p(c, fb::OpKind::Recv); })
      .Case([&](exec::RecordEventOp e) { return event(e, fb::OpKind::RecordEvent, origin); })
      .Case([&](exec::WaitEventOp e) { return event(e, fb::OpKind::WaitEvent, origin); })
      .Default([&](Operation *other) -> FailureOr<InstructionOffset> {
        return other->emitOpError("cannot be serialized into an artifact");
      });
}

FailureOr<flatbuffers::Offset<fb::Program>> Writer::program(exec::ProgramOp op) {
  llvm::DenseMap<Value, uint32_t> index;
  std::vector<flatbuffers::Offset<fb::Buffer>> buffers;
  std::vector<flatbuffers::Offset<fb::Instruction>> instructions;
  for (Operation &inner : op.getBody().front()) {
    if (auto buffer = dyn_cast<exec::BufferOp>(inner)) {
      MemRefType type = buffer.getType();
      FailureOr<fb::DType> dtype = dtypeOf(buffer.getLoc(), type.getElementType());
      if (failed(dtype))
        return failure();
      std::vector<int64_t> shape(type.getShape());
      std::string name = buffer.getName() ? buffer.getName()->str() : "";
      // Sharded state: this rank's piece of which global tensor.
      std::vector<int64_t> globalShape;
      std::vector<flatbuffers::Offset<fb::ShardLevel>> levels;
      if (auto shard = buffer->getAttrOfType<DictionaryAttr>(kShardAttr)) {
        globalShape = std::vector<int64_t>(
            shard.getAs<DenseI64ArrayAttr>("global_shape").asArrayRef());
        for (Attribute a : shard.getAs<ArrayAttr>("levels")) {
          auto level = cast<DictionaryAttr>(a);
          std::vector<flatbuffers::Offset<flatbuffers::String>> axes;
          for (StringRef axis : level.getAs<ArrayAttr>("axes").getAsValueRange<StringAttr>())
            axes.push_back(fbb.CreateString(axis.str()));
          auto padTo = level.getAs<IntegerAttr>("pad_to");
          levels.push_back(fb::CreateShardLevel(fbb, fbb.CreateVector(axes),
                                                level.getAs<IntegerAttr>("dim").getInt(),
                                                level.getAs<IntegerAttr>("blocks").getInt(),
                                                padTo ? padTo.getInt() : 0));
        }
      }
      // The parameter table: every named parameter buffer, once.
      if (auto param = buffer->getAttrOfType<llm::ParamAttr>(llm::kParamAttrName))
        if (!name.empty() && seenParameters.insert(name).second)
          parameters.push_back(fb::CreateParameter(
              fbb, fbb.CreateString(name), fbb.CreateVector(shape), *dtype,
              buffer.getOffset(), fbb.CreateString(param.getInit().str()),
              param.getScale().convertToDouble(), param.getTrainable(),
              fbb.CreateVector(globalShape), fbb.CreateVector(levels)));
      index[buffer.getResult()] = buffers.size();
      buffers.push_back(fb::CreateBuffer(fbb, fbb.CreateString(name),
                                         fbb.CreateString(buffer.getCategory().str()),
                                         buffer.getOffset(), *dtype, fbb.CreateVector(shape),
                                         fbb.CreateVector(globalShape),
                                         fbb.CreateVector(levels),
                                         buffer->hasAttr(exec::kHostSpaceAttr)
                                             ? fb::MemorySpace::Host
                                             : fb::MemorySpace::Device));
      continue;
    }
    FailureOr<flatbuffers::Offset<fb::Instruction>> inst = instruction(&inner, index);
    if (failed(inst))
      return failure();
    instructions.push_back(*inst);
  }
  uint64_t peak = 0, bound = 0;
  if (auto plan = current->getAttrOfType<DictionaryAttr>("exec.memory_plan"))
    if (auto programs = plan.getAs<DictionaryAttr>("programs"))
      if (auto mine = programs.getAs<DictionaryAttr>(op.getSymName())) {
        if (auto p = mine.getAs<IntegerAttr>("peak"))
          peak = p.getInt();
        if (auto b = mine.getAs<IntegerAttr>("live_bound"))
          bound = b.getInt();
      }
  return fb::CreateProgram(fbb, fbb.CreateString(op.getSymName().str()),
                           fbb.CreateVector(buffers), fbb.CreateVector(instructions), peak,
                           bound);
}

FailureOr<flatbuffers::Offset<fb::Role>> Writer::role(ModuleOp roleModule,
                                                      const std::vector<int32_t> &ranks) {
  current = roleModule;
  parameters.clear();
  seenParameters.clear();
  auto arena = roleModule->getAttrOfType<IntegerAttr>(exec::kArenaBytesAttr);
  auto plan = roleModule->getAttrOfType<DictionaryAttr>("exec.memory_plan");
  if (!arena || !plan)
    return module.emitError("artifact: module is not lowered (no exec.arena_bytes / "
                            "exec.memory_plan); run llmc-lower-to-exec first");
  std::vector<flatbuffers::Offset<fb::Program>> programs;
  for (auto op : roleModule.getOps<exec::ProgramOp>()) {
    FailureOr<flatbuffers::Offset<fb::Program>> p = program(op);
    if (failed(p))
      return failure();
    programs.push_back(*p);
  }

  // Memory plan: persistent state plus the largest program's peak breakdown.
  auto get = [&](DictionaryAttr d, StringRef key) -> uint64_t {
    auto v = d ? d.getAs<IntegerAttr>(key) : IntegerAttr();
    return v ? v.getInt() : 0;
  };
  // The arena's breakdown: optimizer state offloaded to host memory is not
  // in it.
  uint64_t hostState = get(plan, "host_optimizer_state");
  std::map<std::string, uint64_t> breakdown{
      {"params", get(plan, "params")},
      {"optimizer_state", get(plan, "optimizer_state") - hostState}};
  if (uint64_t kvCache = get(plan, "kv_cache"))
    breakdown["kv_cache"] = kvCache;
  if (uint64_t staging = get(plan, "weight_staging"))
    breakdown["weight_staging"] = staging;
  DictionaryAttr worst;
  if (auto progs = plan.getAs<DictionaryAttr>("programs"))
    for (NamedAttribute entry : progs)
      if (auto d = dyn_cast<DictionaryAttr>(entry.getValue()))
        if (!worst || get(d, "peak") > get(worst, "peak"))
          worst = d;
  std::map<std::string, uint64_t> categoryPeaks;
  // The parts of the gradient peak come from the program that sets it.
  std::map<std::string, uint64_t> gradientParts;
  if (auto progs = plan.getAs<DictionaryAttr>("programs"))
    for (NamedAttribute entry : progs)
      if (auto d = dyn_cast<DictionaryAttr>(entry.getValue()))
        if (auto peaks = d.getAs<DictionaryAttr>("category_peaks"))
          for (NamedAttribute peak : peaks) {
            uint64_t bytes = cast<IntegerAttr>(peak.getValue()).getInt();
            uint64_t &slot = categoryPeaks[peak.getName().str()];
            if (peak.getName() == "grad" && bytes > slot) {
              gradientParts.clear();
              if (auto parts = d.getAs<DictionaryAttr>("gradient_peak_parts"))
                for (NamedAttribute part : parts)
                  gradientParts[part.getName().str()] = cast<IntegerAttr>(part.getValue()).getInt();
            }
            slot = std::max(slot, bytes);
          }
  // The peak's transient categories (integers) and its activations by
  // microbatch; what each layer keeps, from the training step.
  std::map<std::string, uint64_t> byMicrobatch, perLayer;
  auto collect = [](DictionaryAttr d, StringRef key, std::map<std::string, uint64_t> &into) {
    if (auto entries = d ? d.getAs<DictionaryAttr>(key) : DictionaryAttr())
      for (NamedAttribute entry : entries)
        into[entry.getName().str()] = cast<IntegerAttr>(entry.getValue()).getInt();
  };
  if (worst) {
    for (NamedAttribute entry : worst)
      if (auto bytes = dyn_cast<IntegerAttr>(entry.getValue());
          bytes && entry.getName() != "peak" && entry.getName() != "live_bound")
        breakdown[memoryCategoryLabel(entry.getName())] += bytes.getInt();
    collect(worst, "activations_by_microbatch", byMicrobatch);
  }
  if (auto progs = plan.getAs<DictionaryAttr>("programs"))
    collect(progs.getAs<DictionaryAttr>("train_step"), "saved_per_layer", perLayer);
  auto categoryVector = [&](const std::map<std::string, uint64_t> &entries) {
    std::vector<flatbuffers::Offset<fb::MemoryCategory>> out;
    for (auto &[name, bytes] : entries)
      out.push_back(fb::CreateMemoryCategory(fbb, fbb.CreateString(name), bytes));
    return fbb.CreateVector(out);
  };
  auto categories = categoryVector(breakdown);
  auto peaks = categoryVector(categoryPeaks);
  auto microbatches = categoryVector(byMicrobatch);
  auto layers = categoryVector(perLayer);
  auto parts = categoryVector(gradientParts);
  auto memory =
      fb::CreateMemoryPlan(fbb, arena.getInt(), get(plan, "persistent"), arena.getInt(), categories,
                           peaks, microbatches, layers, parts, get(plan, "host"), hostState,
                           get(plan, "host_activations"), get(plan, "host_weights"));
  return fb::CreateRole(fbb, fbb.CreateVector(ranks), fbb.CreateVector(programs),
                        fbb.CreateVector(parameters), memory);
}

FailureOr<std::vector<uint8_t>>
Writer::write(const std::map<std::string, std::string> &metadata) {
  SmallVector<ModuleOp> roleModules = programModules(module);
  std::vector<flatbuffers::Offset<fb::MeshAxis>> mesh;
  int32_t world = 1;
  auto meshAttr = roleModules.front()->getAttrOfType<DictionaryAttr>(exec::kMeshAttr);
  auto order = roleModules.front()->getAttrOfType<ArrayAttr>(exec::kMeshAxesAttr);
  if (meshAttr && order)
    for (StringRef axis : order.getAsValueRange<StringAttr>()) {
      int32_t size = meshAttr.getAs<IntegerAttr>(axis).getInt();
      mesh.push_back(fb::CreateMeshAxis(fbb, fbb.CreateString(axis.str()), size));
      world *= size;
    }
  // SPMD: every rank runs the one role; pipeline stages: a role per stage.
  std::vector<flatbuffers::Offset<fb::Role>> roles;
  for (ModuleOp roleModule : roleModules) {
    std::vector<int32_t> ranks;
    if (auto list = roleModule->getAttrOfType<DenseI64ArrayAttr>(kStageRanksAttr)) {
      for (int64_t r : list.asArrayRef())
        ranks.push_back(static_cast<int32_t>(r));
    } else {
      for (int32_t r = 0; r < world; ++r)
        ranks.push_back(r);
    }
    FailureOr<flatbuffers::Offset<fb::Role>> r = role(roleModule, ranks);
    if (failed(r))
      return failure();
    roles.push_back(*r);
  }
  std::vector<flatbuffers::Offset<fb::KeyValue>> kvs;
  for (auto &[key, value] : metadata)
    kvs.push_back(fb::CreateKeyValue(fbb, fbb.CreateString(key), fbb.CreateString(value)));
  std::string backend = "cpu";
  if (auto b = module->getAttrOfType<StringAttr>("exec.backend"))
    backend = b.getValue().str();
  auto artifact = fb::CreateArtifact(
      fbb, kArtifactSchemaVersion, /*content_hash=*/0, fbb.CreateString("llmc"),
      fbb.CreateString(backend), fbb.CreateVector(mesh), world, fbb.CreateVector(roles),
      fbb.CreateVector(kvs));
  fb::FinishArtifactBuffer(fbb, artifact);

  std::vector<uint8_t> bytes(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
  uint64_t hash = fnv1a64(bytes.data(), bytes.size());
  if (!fb::GetMutableArtifact(bytes.data())->mutate_content_hash(hash))
    return module.emitError("artifact: content hash field missing");
  return bytes;
}

} // namespace

FailureOr<std::vector<uint8_t>>
writeArtifact(ModuleOp module, const std::map<std::string, std::string> &metadata) {
  return Writer(module).write(metadata);
}

} // namespace llmc
