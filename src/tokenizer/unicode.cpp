#include "tokenizer/unicode.h"

#include <algorithm>
#include <array>

#include "tokenizer/unicode_tables.h"

namespace qserve::unicode {
namespace {

bool in_ranges(const unicode_tables::CodepointRange* r, size_t n, uint32_t cp) {
  const auto* end = r + n;
  const auto* it = std::upper_bound(r, end, cp, [](uint32_t c, const unicode_tables::CodepointRange& x) {
    return c < x.first;
  });
  return it != r && cp <= (it - 1)->last;
}

CharClass classify_slow(uint32_t cp) {
  namespace t = unicode_tables;
  if (in_ranges(t::kWhiteSpace, t::kWhiteSpace_size, cp)) return kSpace;
  if (in_ranges(t::kLetter, t::kLetter_size, cp)) return kLetter;
  if (in_ranges(t::kNumber, t::kNumber_size, cp)) return kNumber;
  return kOther;
}

// The Basic Multilingual Plane classified once: [65536] CharClass.
const std::array<uint8_t, 65536>& bmp_table() {
  static const auto table = [] {
    std::array<uint8_t, 65536> t{};
    for (uint32_t cp = 0; cp < 65536; ++cp) t[cp] = classify_slow(cp);
    return t;
  }();
  return table;
}

struct ByteMap {
  std::array<std::string, 256> to_unicode;
  std::array<int16_t, 512> from_unicode;  // every mapped code point is < 512
};

const ByteMap& byte_map() {
  static const ByteMap map = [] {
    ByteMap m;
    m.from_unicode.fill(-1);
    // Printable bytes map to themselves; the rest to 256 + n in byte order.
    auto printable = [](int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); };
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const uint32_t cp = printable(b) ? b : 256 + n++;
      append_utf8(m.to_unicode[b], cp);
      m.from_unicode[cp] = static_cast<int16_t>(b);
    }
    return m;
  }();
  return map;
}

}  // namespace

CharClass char_class(uint32_t cp) {
  if (cp < 65536) return static_cast<CharClass>(bmp_table()[cp]);
  return classify_slow(cp);
}

int utf8_seq_len(uint8_t lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 1;
}

uint32_t decode_utf8(std::string_view s, size_t& pos) {
  const auto b0 = static_cast<uint8_t>(s[pos]);
  const int len = utf8_seq_len(b0);
  if (len == 1) {
    ++pos;
    return b0 < 0x80 ? b0 : 0xFFFD;
  }
  if (pos + len > s.size()) {
    ++pos;
    return 0xFFFD;
  }
  uint32_t cp = b0 & (0x7F >> len);
  for (int i = 1; i < len; ++i) {
    const auto b = static_cast<uint8_t>(s[pos + i]);
    if ((b & 0xC0) != 0x80) {
      ++pos;
      return 0xFFFD;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  pos += len;
  return cp;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

Utf8Step utf8_step(std::string_view s, size_t pos) {
  const auto b0 = static_cast<uint8_t>(s[pos]);
  if (b0 < 0x80) return {1, true, false};
  int need;
  uint8_t lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return {1, false, false};
  }
  size_t len = 1;
  for (int k = 0; k < need; ++k) {
    if (pos + len >= s.size()) return {len, false, true};
    const auto b = static_cast<uint8_t>(s[pos + len]);
    if (k == 0 ? (b < lo || b > hi) : (b & 0xC0) != 0x80) return {len, false, false};
    ++len;
  }
  return {len, true, false};
}

size_t utf8_valid_prefix(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    const Utf8Step st = utf8_step(s, pos);
    if (!st.valid) break;
    pos += st.len;
  }
  return pos;
}

size_t utf8_incomplete_tail(std::string_view s) {
  for (size_t k = 1; k <= 3 && k <= s.size(); ++k) {
    const auto b = static_cast<uint8_t>(s[s.size() - k]);
    if ((b & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const Utf8Step st = utf8_step(s, s.size() - k);
    return st.truncated && st.len == k ? k : 0;
  }
  return 0;
}

const std::string& byte_to_unicode(uint8_t b) { return byte_map().to_unicode[b]; }

int unicode_to_byte(uint32_t cp) { return cp < 512 ? byte_map().from_unicode[cp] : -1; }

}  // namespace qserve::unicode
