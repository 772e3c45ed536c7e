#include "tokenizer/regex_scanner.h"

#include "tokenizer/unicode.h"

namespace qserve {
namespace {

using unicode::CharClass;

constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The text as code points: [n] cp, [n] class, [n + 1] byte offsets.
struct Codepoints {
  std::vector<uint32_t> cp;
  std::vector<uint8_t> cls;
  std::vector<size_t> off;
};

void to_codepoints(std::string_view text, Codepoints& c) {
  c.cp.clear();
  c.cls.clear();
  c.off.clear();
  size_t pos = 0;
  while (pos < text.size()) {
    c.off.push_back(pos);
    const uint32_t cp = unicode::decode_utf8(text, pos);
    c.cp.push_back(cp);
    c.cls.push_back(unicode::char_class(cp));
  }
  c.off.push_back(text.size());
}

bool is_newline(uint32_t cp) { return cp == '\r' || cp == '\n'; }

uint32_t fold(uint32_t cp) {
  if (cp >= 'A' && cp <= 'Z') return cp + 32;
  if (cp == 0x17F) return 's';  // LATIN SMALL LETTER LONG S folds to 's'
  return cp;
}

class Scanner {
 public:
  Scanner(const ScannerRules& r, const Codepoints& c) : r_(r), c_(c), n_(c.cp.size()) {}

  // End (code-point index) of the match starting at i; i when none.
  size_t match_at(size_t i) const {
    if (size_t j = contraction(i); j > i) return j;
    if (size_t j = letters(i); j > i) return j;
    if (size_t j = digits(i); j > i) return j;
    if (size_t j = others(i); j > i) return j;
    if (r_.newline_rule) {
      if (size_t j = spaces_then_newlines(i); j > i) return j;
    }
    const size_t j = run(i, unicode::kSpace);
    if (j == i) return i;
    if (j == n_ || j - i == 1) return j;  // \s+(?!\S) at the end, or \s+
    return j - 1;                         // \s+(?!\S): leave one space for the next word
  }

 private:
  uint8_t cls(size_t i) const { return i < n_ ? c_.cls[i] : 255; }
  uint32_t cp(size_t i) const { return i < n_ ? c_.cp[i] : 0; }

  size_t run(size_t i, uint8_t k, size_t max = SIZE_MAX) const {
    size_t j = i;
    while (j < n_ && c_.cls[j] == k && j - i < max) ++j;
    return j;
  }

  size_t contraction(size_t i) const {
    if (cp(i) != '\'') return i;
    auto at = [&](size_t k) { return r_.contractions_ignore_case ? fold(cp(k)) : cp(k); };
    const uint32_t a = at(i + 1);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    const uint32_t b = at(i + 2);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    return i;
  }

  size_t letters(size_t i) const {
    if (cls(i) == unicode::kLetter) return run(i, unicode::kLetter);
    const bool prefix_ok = r_.llama3_letters
                               ? (i < n_ && !is_newline(cp(i)) && cls(i) != unicode::kNumber)
                               : cp(i) == ' ';
    if (prefix_ok && cls(i + 1) == unicode::kLetter) return run(i + 1, unicode::kLetter);
    return i;
  }

  size_t digits(size_t i) const {
    const size_t max = r_.max_digits > 0 ? static_cast<size_t>(r_.max_digits) : SIZE_MAX;
    if (cls(i) == unicode::kNumber) return run(i, unicode::kNumber, max);
    if (r_.digits_space_prefix && cp(i) == ' ' && cls(i + 1) == unicode::kNumber)
      return run(i + 1, unicode::kNumber, max);
    return i;
  }

  size_t others(size_t i) const {
    size_t j = i;
    if (cls(i) == unicode::kOther) {
      j = run(i, unicode::kOther);
    } else if (cp(i) == ' ' && cls(i + 1) == unicode::kOther) {
      j = run(i + 1, unicode::kOther);
    } else {
      return i;
    }
    if (r_.other_takes_newlines) {
      while (j < n_ && is_newline(c_.cp[j])) ++j;
    }
    return j;
  }

  // \s*[\r\n]+ : up to the last newline of the whitespace run.
  size_t spaces_then_newlines(size_t i) const {
    const size_t j = run(i, unicode::kSpace);
    for (size_t k = j; k > i; --k) {
      if (is_newline(c_.cp[k - 1])) return k;
    }
    return i;
  }

  const ScannerRules& r_;
  const Codepoints& c_;
  size_t n_;
};

}  // namespace

ScannerRules gpt2_scanner_rules() { return ScannerRules{}; }

std::optional<ScannerRules> scanner_rules_for(std::string_view pattern) {
  if (pattern == kGpt2Pattern) return gpt2_scanner_rules();
  if (pattern == kLlama3Pattern || pattern == kQwen2Pattern) {
    ScannerRules r;
    r.contractions_ignore_case = true;
    r.llama3_letters = true;
    r.max_digits = pattern == kLlama3Pattern ? 3 : 1;
    r.digits_space_prefix = false;
    r.other_takes_newlines = true;
    r.newline_rule = true;
    return r;
  }
  return std::nullopt;
}

void scan_matches(const ScannerRules& rules, std::string_view text,
                  std::vector<std::pair<size_t, size_t>>& out) {
  thread_local Codepoints c;
  to_codepoints(text, c);
  const Scanner scanner(rules, c);
  const size_t n = c.cp.size();
  size_t i = 0;
  while (i < n) {
    const size_t j = scanner.match_at(i);
    if (j > i) {
      out.emplace_back(c.off[i], c.off[j]);
      i = j;
    } else {
      ++i;
    }
  }
}

}  // namespace qserve
