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

}  // namespace qserve::unicode_tables
