// Hand-written scanners equivalent to the split regexes of the byte-level BPE
// tokenizers (leftmost-first alternation, as Oniguruma / fancy-regex run them):
//
//  GPT-2 (also ByteLevel's use_regex):
//    's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//  Llama-3 (Qwen2 is the same with \p{N} instead of \p{N}{1,3}):
//    (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//     ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace qserve {

struct ScannerRules {
  bool contractions_ignore_case = false;
  bool llama3_letters = false;     // [^\r\n\p{L}\p{N}]?\p{L}+ instead of  ?\p{L}+
  int max_digits = 0;              // \p{N}{1,k}; 0: \p{N}+
  bool digits_space_prefix = true; //  ?\p{N}+ (GPT-2)
  bool other_takes_newlines = false;  // [^\s\p{L}\p{N}]+[\r\n]*
  bool newline_rule = false;       // \s*[\r\n]+
};

// The rules of a known pattern string; nullopt for any other pattern.
std::optional<ScannerRules> scanner_rules_for(std::string_view pattern);
ScannerRules gpt2_scanner_rules();

// Appends the [begin, end) byte ranges of the matches in `text`.
void scan_matches(const ScannerRules& rules, std::string_view text,
                  std::vector<std::pair<size_t, size_t>>& out);

}  // namespace qserve
