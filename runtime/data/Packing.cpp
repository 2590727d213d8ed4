//===- Packing.cpp - document boundaries of packed rows -------------------===//

#include "runtime/data/Packing.h"

#include "runtime/Artifact.h"
#include "runtime/Executor.h"
#include "runtime/support/Error.h"

namespace llmc {

void packRows(const int32_t *tokens, int64_t rows, int64_t T, int64_t separator,
              int32_t *segments, int32_t *positions) {
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t *x = tokens + r * T;
    int32_t segment = 0, position = 0;
    for (int64_t t = 0; t < T; ++t, ++position) {
      if (t > 0 && x[t] == separator && x[t - 1] != separator) ++segment, position = 0;
      segments[r * T + t] = segment;
      positions[r * T + t] = position;
    }
  }
}

int64_t docSeparator(const Artifact &artifact) {
  return static_cast<int64_t>(artifact.metaNumber("model.doc_separator", -1));
}

void fillPackedInputs(const BoundProgram &program, const TensorView &tokens, int64_t separator) {
  const std::string &name = program.info().name;
  if (!program.has("segments") && !program.has("positions"))
    return;
  if (separator < 0)
    fail("program '", name, "' takes packed rows but the artifact records no "
         "model.doc_separator (compile with --set doc_separator=N)");
  TensorView segments = program.view("segments"), positions = program.view("positions");
  for (const TensorView *v : {&segments, &positions})
    if (v->dtype != DType::I32 || v->shape != tokens.shape)
      fail("program '", name, "': inputs 'segments' and 'positions' must be i32 like 'tokens' (",
           tokens.describe(), "), got ", segments.describe(), " and ", positions.describe());
  int64_t T = tokens.dim(-1);
  packRows(tokens.as<int32_t>(), tokens.numel() / T, T, separator, segments.as<int32_t>(),
           positions.as<int32_t>());
  program.toDevice(segments);
  program.toDevice(positions);
}

} // namespace llmc
