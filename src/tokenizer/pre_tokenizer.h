// Hugging Face pre-tokenizers (tokenizer.json "pre_tokenizer"): split a text
// segment into pieces that the BPE model encodes independently.
//
// The split patterns of GPT-2, Llama-3 and Qwen2 use `\s+(?!\S)`, a lookahead
// that RE2 cannot express, so they are scanned by hand (regex_scanner.h);
// other lookaround-free patterns go through RE2.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace qserve {

// One piece of the segment being pre-tokenized. at_input_start: the piece
// begins at byte 0 of the whole input (Metaspace's prepend_scheme "first").
struct PreToken {
  std::string text;
  bool at_input_start = false;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces` by their pre-tokenization (split and/or transformed).
  virtual void apply(std::vector<PreToken>& pieces) const = 0;
};

// Builds the pre-tokenizer of a tokenizer.json "pre_tokenizer" object; nullptr
// for JSON null. Throws Error(kUnsupported) for a type or pattern it lacks.
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& config);

// Finds the non-overlapping matches of a split pattern, left to right:
// [begin, end) byte ranges within `text`.
class SplitMatcher {
 public:
  virtual ~SplitMatcher() = default;
  virtual void find_matches(std::string_view text,
                            std::vector<std::pair<size_t, size_t>>& out) const = 0;
};

// The hand-written scanners for the known patterns, else RE2 (patterns with no
// lookaround), else Error(kUnsupported).
std::unique_ptr<SplitMatcher> make_regex_matcher(const std::string& pattern);
std::unique_ptr<SplitMatcher> make_literal_matcher(const std::string& literal);

}  // namespace qserve
