// Added tokens (tokenizer.json "added_tokens", and the control pieces of a
// SentencePiece model): found in the input before normalization and
// pre-tokenization, leftmost-longest, as Hugging Face's AddedVocabulary does.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace qserve {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool single_word = false;  // only when not inside a word
  bool lstrip = false;       // swallows the whitespace on its left
  bool rstrip = false;       // swallows the whitespace on its right
  bool normalized = true;    // matched on the normalized text
  bool special = false;
};

// A piece of the input: text to tokenize (token_id < 0) or an added token.
struct AddedSplit {
  size_t begin, end;  // byte range in the input
  int32_t token_id;
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);
  bool empty() const { return tokens_.empty(); }
  // Splits `text` into added tokens and the text between them (never empty
  // pieces; an empty text gives no pieces).
  std::vector<AddedSplit> split(std::string_view text) const;

 private:
  std::vector<AddedToken> tokens_;
  // [256] for each first byte: indices into tokens_, longest content first.
  std::vector<std::vector<uint32_t>> by_first_byte_;
};

}  // namespace qserve
