#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace qserve {
namespace {

bool is_space_at(std::string_view s, size_t pos, size_t* len) {
  size_t p = pos;
  const uint32_t cp = unicode::decode_utf8(s, p);
  *len = p - pos;
  return unicode::char_class(cp) == unicode::kSpace;
}

// Rust's char::is_alphanumeric, plus '_' as Hugging Face's word check uses.
bool is_word_char(uint32_t cp) {
  const auto c = unicode::char_class(cp);
  return c == unicode::kLetter || c == unicode::kNumber || cp == '_';
}

uint32_t last_char(std::string_view s) {
  size_t b = s.size() - 1;
  while (b > 0 && (static_cast<uint8_t>(s[b]) & 0xC0) == 0x80) --b;
  size_t p = b;
  return unicode::decode_utf8(s, p);
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) : by_first_byte_(256) {
  for (auto& t : tokens)
    if (!t.content.empty()) tokens_.push_back(std::move(t));
  for (uint32_t i = 0; i < tokens_.size(); ++i)
    by_first_byte_[static_cast<uint8_t>(tokens_[i].content[0])].push_back(i);
  for (auto& v : by_first_byte_)
    std::stable_sort(v.begin(), v.end(), [&](uint32_t a, uint32_t b) {
      return tokens_[a].content.size() > tokens_[b].content.size();
    });
}

std::vector<AddedSplit> AddedTokenMatcher::split(std::string_view text) const {
  std::vector<AddedSplit> out;
  size_t start_offset = 0;  // end of the previous token
  size_t pos = 0;
  while (pos < text.size()) {
    const AddedToken* match = nullptr;
    if (!tokens_.empty()) {
      for (uint32_t i : by_first_byte_[static_cast<uint8_t>(text[pos])]) {
        const std::string& c = tokens_[i].content;
        if (text.compare(pos, c.size(), c) == 0) {
          match = &tokens_[i];
          break;
        }
      }
    }
    if (!match) {
      ++pos;
      continue;
    }
    size_t start = pos, stop = pos + match->content.size();
    if (match->single_word) {
      size_t p = stop;
      const bool word_before = start > 0 && is_word_char(last_char(text.substr(0, start)));
      const bool word_after = stop < text.size() && is_word_char(unicode::decode_utf8(text, p));
      if (word_before || word_after) {
        ++pos;
        continue;
      }
    }
    if (match->lstrip) {
      while (start > start_offset) {
        size_t b = start - 1;
        while (b > start_offset && (static_cast<uint8_t>(text[b]) & 0xC0) == 0x80) --b;
        size_t len;
        if (!is_space_at(text, b, &len)) break;
        start = b;
      }
    }
    if (match->rstrip) {
      size_t len;
      while (stop < text.size() && is_space_at(text, stop, &len)) stop += len;
    }
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, match->id});
    start_offset = stop;
    pos = stop;
  }
  if (start_offset < text.size()) out.push_back({start_offset, text.size(), -1});
  return out;
}

}  // namespace qserve
