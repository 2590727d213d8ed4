//===- NormalizeTest.cpp - Unicode normalization form C -------------------===//
//
// toNfc against Python's unicodedata.normalize("NFC", ...) (Unicode 14.0),
// whose results are written out below: composition, canonical ordering of
// combining marks, a composition exclusion, a singleton, Hangul syllables
// by arithmetic, blocking, a leading non-starter, and invalid UTF-8 passed
// through. (hf_tokenizer checks it against the tokenizers library too, over
// every code point of planes 0-3 and 14 next to a letter.)
//
//===----------------------------------------------------------------------===//

#include "runtime/support/Normalize.h"

#include <gtest/gtest.h>

namespace llmc::unicode {
namespace {

struct Case {
  const char *name, *in, *nfc;
};

TEST(Normalize, MatchesPythonsUnicodedata) {
  const Case cases[] = {
      {"empty", "", ""},
      {"ascii", "plain ascii", "plain ascii"},
      {"e + acute composes", "cafe\u0301", "caf\u00e9"},
      {"A + ring composes", "A\u030a", "\u00c5"},
      {"angstrom sign is a singleton", "\u212b", "\u00c5"},
      {"Hangul L V T", "\u1100\u1161\u11a8", "\uac01"},
      {"Hangul LV + T", "\uac00\u11a8", "\uac01"},
      {"excluded from composition", "\u0958", "\u0915\u093c"},
      {"marks reordered, no composite", "q\u0307\u0323", "q\u0323\u0307"},
      {"marks reordered, then composed", "a\u0323\u0307", "\u1ea1\u0307"},
      {"compatibility ligature kept", "\ufb01", "\ufb01"},
      {"second acute blocked", "e\u0301\u0301", "\u00e9\u0301"},
      {"cedilla ordered first", "A\u0327\u0301", "\u00c1\u0327"},
      {"long s dot with dot below", "\u1e9b\u0323", "\u1e9b\u0323"},
      {"x + dot above", "x\u0307", "\u1e8b"},
      {"two marks composed in turn", "o\u0308\u0304", "\u022b"},
      {"leading non-starter", "\u0301a", "\u0301a"},
  };
  for (const Case &c : cases) EXPECT_EQ(toNfc(c.in), c.nfc) << c.name;
}

TEST(Normalize, InvalidBytesPassThroughAndSplitRuns) {
  // A stray continuation byte between a base and its mark: they no longer
  // meet, and the byte stays.
  EXPECT_EQ(toNfc("e\x80\u0301"), "e\x80\u0301");
  EXPECT_EQ(toNfc("\xff"
                  "e\u0301\xfe"),
            "\xff\u00e9\xfe");
}

} // namespace
} // namespace llmc::unicode
