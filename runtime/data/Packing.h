//===- Packing.h - document boundaries of packed rows ----------*- C++ -*-===//
//
// A packed artifact (compiled with the model key doc_separator) takes two
// inputs besides tokens and targets, both [rows, T]: `segments`, the index
// of the document each token belongs to, and `positions`, the token's
// position inside its document. Attention keeps every document to itself
// and positions restart at each one, so a row of several documents trains
// exactly as the documents would one at a time.
//
// Both are derived from the row's own tokens: a document starts at the row
// start and at every separator token that does not follow another one (the
// separator opens a document, as GPT-2's <|endoftext|> does in llm.c's
// shards; a run of separators, e.g. a blank line between stories with the
// byte tokenizer's separator '\n', opens one document, not several empty
// ones). So packed rows are the same windows of the token stream as plain
// rows, a pure function of the step on any layout, and resuming or
// resharding stays exact.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_DATA_PACKING_H
#define LLMC_RUNTIME_DATA_PACKING_H

#include <cstdint>

namespace llmc {

struct Artifact;
class BoundProgram;
struct TensorView;

/// Segment ids (0, 1, … per row) and positions of `rows` rows of T tokens.
void packRows(const int32_t *tokens, int64_t rows, int64_t T, int64_t separator,
              int32_t *segments, int32_t *positions);

/// The separator recorded in a packed artifact (-1: not packed).
int64_t docSeparator(const Artifact &artifact);

/// When `program` takes packed rows, fills its `segments` and `positions`
/// from `tokens` (its host-side token input, already filled) and moves them
/// to the device; does nothing for a program of plain rows. Throws naming
/// the program when the inputs do not match the tokens or the artifact
/// records no separator.
void fillPackedInputs(const BoundProgram &program, const TensorView &tokens, int64_t separator);

} // namespace llmc

#endif
