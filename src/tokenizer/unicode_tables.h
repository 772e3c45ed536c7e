// Unicode data for the pre-tokenizer scanners: generated ranges (see
// scripts/gen_unicode_tables.py) and fast classification.
#pragma once

#include <cstddef>
#include <cstdint>

namespace qserve::unicode_tables {

struct CodepointRange {
  uint32_t first, last;
};
extern const CodepointRange kLetter[];      // \p{L}: Lu Ll Lt Lm Lo
extern const size_t kLetter_size;
extern const CodepointRange kNumber[];      // \p{N}: Nd Nl No
extern const size_t kNumber_size;
extern const CodepointRange kWhiteSpace[];  // \s: the White_Space property
extern const size_t kWhiteSpace_size;

// NFC data (nfc_tables.cpp), each sorted by its first field. Hangul
// syllables are algorithmic.
struct CombiningClass {
  uint32_t cp, ccc;  // ccc != 0
};
extern const CombiningClass kCombiningClass[];
extern const size_t kCombiningClass_size;
struct Decomposition {
  uint32_t cp, first, second;  // canonical; second == 0 for a singleton
};
extern const Decomposition kDecomposition[];
extern const size_t kDecomposition_size;
struct Composition {
  uint32_t first, second, composite;  // primary composites, sorted by (first, second)
};
extern const Composition kComposition[];
extern const size_t kComposition_size;

}  // namespace qserve::unicode_tables
