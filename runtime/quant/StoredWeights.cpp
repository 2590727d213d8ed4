//===- StoredWeights.cpp - the weights programs read in quantized storage ---===//

#include "runtime/quant/StoredWeights.h"

#include "runtime/Sharding.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/support/Strings.h"

#include <algorithm>

namespace llmc {

/// Whether kernel `name` reads int8/int4/fp8 storage (else NF4's).
bool readsIntStorage(const std::string &name) {
  return name == "matmul_int" || name == "grouped_matmul_int";
}

/// Whether kernel `name` reads a mixture of experts' stacked weights.
bool readsExperts(const std::string &name) {
  return name == "grouped_matmul_int" || name == "grouped_matmul_nf4";
}

/// The input of kernel `inst` that is a weight's quantized codes
/// (`<weight>.qweight`), or -1 for a kernel that reads none.
int codesInput(const ProgramInfo &program, const InstructionInfo &inst) {
  int index = -1;
  if (inst.kind == InstructionKind::Kernel &&
      (inst.kernel == "matmul_int" || inst.kernel == "matmul_nf4"))
    index = 1;
  if (inst.kind == InstructionKind::Kernel && readsExperts(inst.kernel))
    index = 2; // after x and the offsets
  if (inst.kind == InstructionKind::Kernel && inst.kernel == "qat_dequantize_nf4")
    index = 0;
  if (index < 0 || static_cast<int>(inst.inputs.size()) <= index)
    return -1;
  const std::string &name = program.buffers[inst.inputs[index]].name;
  return name.size() > 8 && endsWith(name, ".qweight") ? index : -1;
}

/// The shape of the whole weight whose storage `inst` reads through its
/// codes, input `codes`: the file's weight.
std::vector<int64_t> storedWeightShape(const ProgramInfo &program, const InstructionInfo &inst,
                                       int codes, const Mesh &mesh) {
  const bool nf4 = !readsIntStorage(inst.kernel);
  std::vector<int64_t> shape = inst.kernel == "qat_dequantize_nf4"
                                   ? program.buffers[inst.outputs[0]].shape
                                   : inst.attrs.getInts("weight_shape"); // this rank's piece
  // Storage split by tensor parallelism is [rows, bytes per row]: the
  // whole weight's shape follows from its global shape. A stack of G
  // experts' is its view's [G · rows, bytes per row]; expert parallelism
  // splits the view's rows into runs of whole experts (a level of one
  // chunk, after tensor parallelism's level of G chunks, one per expert),
  // so this rank's piece holds G / parts of them.
  const BufferInfo &codesBuffer = program.buffers[inst.inputs[codes]];
  std::vector<int64_t> stored = globalShapeOf(codesBuffer);
  const int64_t perByte = nf4 || inst.attrs.getInt("bits", 8) == 4 ? 2 : 1;
  if (readsExperts(inst.kernel)) {
    if (stored.size() != 2 || shape.empty())
      return shape;
    const std::vector<ShardLevel> &levels = codesBuffer.shard.levels;
    const ShardMap map(codesBuffer.shard, codesBuffer.shape, mesh);
    int64_t experts = shape[0];
    for (size_t i = 0; i < levels.size(); ++i)
      if (levels[i].dim == 0 && levels[i].blocks == 1 && !levels[i].pads())
        experts *= map.parts()[i];
    return {experts, stored[0] / experts, stored[1] * perByte};
  }
  // (QLoRA's expansion of a stack split by tp or ep lands here too: its
  // whole weight is the view [G · A, B], which is what checkScheme
  // compares.)
  if (stored.size() == 2)
    return {stored[0], stored[1] * perByte};
  // NF4 codes of a head padded along its rows (llmc-pad-vocab) are the real
  // weight's, two per byte, padded at their end: the file's weight has the
  // real rows.
  if (nf4 && codesBuffer.shard.sharded() && shape.size() == 2)
    shape[0] = stored[0] * 2 / shape[1];
  return shape;
}

} // namespace llmc
