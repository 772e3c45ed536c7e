// UTF-8 helpers and the character classes of the pre-tokenizer patterns.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace qserve::unicode {

enum CharClass : uint8_t {
  kOther = 0,   // not a letter, number or whitespace
  kLetter = 1,  // \p{L}
  kNumber = 2,  // \p{N}
  kSpace = 3,   // \s
};

CharClass char_class(uint32_t cp);

// Decodes one code point at s[pos]; advances pos. Invalid bytes decode as
// U+FFFD consuming one byte (never happens on std::string from valid UTF-8).
uint32_t decode_utf8(std::string_view s, size_t& pos);
void append_utf8(std::string& out, uint32_t cp);
// Byte length of the UTF-8 sequence that starts with `lead` (1 for invalid leads).
int utf8_seq_len(uint8_t lead);

// One step of strict UTF-8 validation (Unicode table 3-7) at s[pos]:
// len bytes form a valid character, or the maximal invalid subpart (len >= 1);
// truncated: a valid prefix cut off by the end of s.
struct Utf8Step {
  size_t len;
  bool valid;
  bool truncated;
};
Utf8Step utf8_step(std::string_view s, size_t pos);
// Length of the longest valid UTF-8 prefix of s.
size_t utf8_valid_prefix(std::string_view s);
// Bytes at the end of s that start a character the end cut off (0..3).
size_t utf8_incomplete_tail(std::string_view s);

// Unicode Normalization Form C (canonical decomposition, canonical ordering,
// canonical composition). Text that is not valid UTF-8 is returned unchanged.
std::string to_nfc(std::string_view s);

// The GPT-2 byte <-> unicode map of the ByteLevel pre-tokenizer: each byte
// becomes a printable character ("Ġ" for ' ', "Ċ" for '\n').
const std::string& byte_to_unicode(uint8_t b);  // UTF-8 of the mapped character
// -1 when cp is not the image of a byte.
int unicode_to_byte(uint32_t cp);

}  // namespace qserve::unicode
