//===- ElementwiseProgramBuilder.h - programs for fused_elementwise tests -===//
//
// Builds a common/ElementwiseProgram.h program instruction by instruction
// and hands it to a kernel as its `program` and `yields` attributes.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_TEST_UNIT_KERNELS_ELEMENTWISEPROGRAMBUILDER_H
#define LLMC_TEST_UNIT_KERNELS_ELEMENTWISEPROGRAMBUILDER_H

#include "common/ElementwiseProgram.h"
#include "kernels/Kernel.h"

#include <vector>

namespace llmc::test {

struct ProgramBuilder {
  std::vector<int64_t> words, yields;

  /// Appends an instruction; returns the register it defines.
  int64_t emit(ew::Opcode op, DType dtype, int64_t a = 0, int64_t b = 0, int64_t c = 0) {
    for (int64_t w : {static_cast<int64_t>(op), static_cast<int64_t>(dtype), a, b, c})
      words.push_back(w);
    return static_cast<int64_t>(words.size() / ew::kFields) - 1;
  }

  KernelAttrs attrs() const {
    KernelAttrs a;
    a.setInts("program", words);
    a.setInts("yields", yields);
    return a;
  }
};

} // namespace llmc::test

#endif
