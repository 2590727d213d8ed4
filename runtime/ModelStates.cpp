//===- ModelStates.cpp - ZeRO's model-state accounting of a plan ----------===//

#include "runtime/ModelStates.h"

#include <algorithm>
#include <sstream>

namespace llmc {
namespace {


int64_t product(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

/// The instruction of `program` that writes buffer `index`, or null.
const InstructionInfo *producer(const ProgramInfo &program, uint32_t index) {
  for (const InstructionInfo &inst : program.instructions)
    if (std::find(inst.outputs.begin(), inst.outputs.end(), index) != inst.outputs.end())
      return &inst;
  return nullptr;
}

} // namespace

double ModelStates::formulaParams() const {
  return static_cast<double>(paramBytes) * psi / (stage >= 3 ? groupSize : 1);
}
double ModelStates::formulaGradients() const {
  return static_cast<double>(gradBytes) * psi / (stage >= 2 ? groupSize : 1);
}
double ModelStates::formulaOptimizer() const {
  return static_cast<double>(optimizerBytes) * psi / (stage >= 1 ? groupSize : 1);
}

std::string ModelStates::formula() const {
  int whole = paramBytes * (stage < 3) + gradBytes * (stage < 2) + optimizerBytes * (stage < 1);
  int sharded = paramBytes + gradBytes + optimizerBytes - whole;
  std::ostringstream os;
  if (whole) os << whole << "Ψ";
  if (whole && sharded) os << " + ";
  if (sharded) os << sharded << "Ψ/N";
  return os.str();
}

ModelStates modelStates(const Artifact &artifact) {
  ModelStates m;
  m.stage = static_cast<int>(artifact.metaNumber("zero", 0));
  std::vector<std::string> zeroAxes = artifact.metaList("zero_axes");
  for (auto &[axis, size] : artifact.mesh)
    if (std::find(zeroAxes.begin(), zeroAxes.end(), axis) != zeroAxes.end())
      m.groupSize *= size;

  // Ψ per model-parallel rank: each trainable parameter's global size,
  // divided by the splits that are not ZeRO's (tensor parallelism).
  for (const ParameterInfo &p : artifact.parameters) {
    if (!p.trainable) continue;
    int64_t n = p.shard.sharded() ? product(p.shard.globalShape) : p.numel();
    for (const ShardLevel &level : p.shard.levels) {
      bool zero = std::any_of(level.axes.begin(), level.axes.end(), [&](const std::string &a) {
        return std::find(zeroAxes.begin(), zeroAxes.end(), a) != zeroAxes.end();
      });
      if (zero) continue;
      int64_t parts = 1;
      for (const std::string &axis : level.axes)
        for (auto &[name, size] : artifact.mesh)
          if (name == axis) parts *= size;
      n /= parts;
    }
    m.psi += n;
    m.paramBytes = static_cast<int>(dtypeSize(p.dtype));
  }

  // Persistent state, by category, once each.
  std::vector<std::string> seen;
  for (const ProgramInfo &program : artifact.programs)
    for (const BufferInfo &b : program.buffers) {
      if (b.name.empty() || (b.category != "param" && b.category != "optim") ||
          std::find(seen.begin(), seen.end(), b.name) != seen.end())
        continue;
      seen.push_back(b.name);
      bool frozen = std::any_of(artifact.parameters.begin(), artifact.parameters.end(),
                                [&](const ParameterInfo &p) {
                                  return p.name == b.name && !p.trainable;
                                });
      (b.category != "param" ? m.plannedOptimizer
                             : frozen ? m.plannedFrozen : m.plannedParams) += b.bytes();
    }
  // Gradients: the most gradient bytes the plan ever holds at once
  // (accumulated, synchronised and widened values included); their element
  // size from what the optimizer step consumes, before any widening cast.
  auto peak = artifact.memory.categoryPeaks.find("grad");
  if (peak != artifact.memory.categoryPeaks.end())
    m.plannedGradients = peak->second;
  if (const ProgramInfo *step = artifact.program("train_step"))
    for (const InstructionInfo &inst : step->instructions) {
      if (inst.kind != InstructionKind::Kernel || (inst.kernel != "adamw" && inst.kernel != "adamw8bit") ||
          inst.inputs.size() < 2)
        continue;
      uint32_t grad = inst.inputs[1];
      if (const InstructionInfo *cast = producer(*step, grad);
          cast && cast->kernel == "cast" && !cast->inputs.empty())
        grad = cast->inputs[0];
      m.gradBytes = static_cast<int>(dtypeSize(step->buffers[grad].dtype));
      break;
    }
  // K: optimizer bytes per trainable parameter, from the plan (AdamW's m and
  // v — 8 bytes, or 2 and the block absmax with adamw8bit — plus an fp32
  // master under mixed precision).
  if (m.psi > 0) {
    double perParam = static_cast<double>(m.plannedOptimizer) *
                      (m.stage >= 1 ? static_cast<double>(m.groupSize) : 1.0) /
                      static_cast<double>(m.psi);
    m.optimizerBytes = static_cast<int>(perParam + 0.5);
  }
  return m;
}

} // namespace llmc
