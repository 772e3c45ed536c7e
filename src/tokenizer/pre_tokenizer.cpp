#include "tokenizer/pre_tokenizer.h"

#include <re2/re2.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/regex_scanner.h"
#include "tokenizer/unicode.h"

namespace qserve {
namespace {

using json = nlohmann::json;
using Ranges = std::vector<std::pair<size_t, size_t>>;

enum class Behavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };

Behavior parse_behavior(const std::string& s) {
  if (s == "Isolated") return Behavior::kIsolated;
  if (s == "Removed") return Behavior::kRemoved;
  if (s == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (s == "MergedWithNext") return Behavior::kMergedWithNext;
  if (s == "Contiguous") return Behavior::kContiguous;
  fail(ErrorCode::kUnsupported, "tokenizer.json: unknown split behavior '{}'", s);
}

struct Span {
  size_t begin, end;
  bool is_match;
};

// Hugging Face's NormalizedString::split: matches + the gaps between them,
// combined as `behavior` says; empty pieces dropped.
void split_piece(const PreToken& piece, const Ranges& matches, Behavior behavior, bool invert,
                 std::vector<PreToken>& out) {
  std::vector<Span> spans;
  size_t last = 0;
  for (auto [b, e] : matches) {
    if (b > last) spans.push_back({last, b, invert});
    spans.push_back({b, e, !invert});
    last = e;
  }
  if (last < piece.text.size()) spans.push_back({last, piece.text.size(), invert});

  std::vector<Span> merged;
  bool previous_match = false;
  switch (behavior) {
    case Behavior::kIsolated:
      merged = spans;
      break;
    case Behavior::kRemoved:
      for (const Span& s : spans)
        if (!s.is_match) merged.push_back(s);
      break;
    case Behavior::kMergedWithPrevious:
      for (const Span& s : spans) {
        if (s.is_match && !previous_match && !merged.empty()) merged.back().end = s.end;
        else merged.push_back(s);
        previous_match = s.is_match;
      }
      break;
    case Behavior::kMergedWithNext:
      for (size_t k = spans.size(); k-- > 0;) {
        const Span& s = spans[k];
        if (s.is_match && !previous_match && !merged.empty()) merged.back().begin = s.begin;
        else merged.push_back(s);
        previous_match = s.is_match;
      }
      std::reverse(merged.begin(), merged.end());
      break;
    case Behavior::kContiguous:
      for (size_t k = 0; k < spans.size(); ++k) {
        if (k > 0 && spans[k].is_match == spans[k - 1].is_match && !merged.empty())
          merged.back().end = spans[k].end;
        else merged.push_back(spans[k]);
      }
      break;
  }
  for (const Span& s : merged) {
    if (s.end == s.begin) continue;
    out.push_back({piece.text.substr(s.begin, s.end - s.begin), piece.at_input_start && s.begin == 0});
  }
}

class ScannerMatcher : public SplitMatcher {
 public:
  explicit ScannerMatcher(ScannerRules rules) : rules_(rules) {}
  void find_matches(std::string_view text, Ranges& out) const override { scan_matches(rules_, text, out); }

 private:
  ScannerRules rules_;
};

class Re2Matcher : public SplitMatcher {
 public:
  explicit Re2Matcher(const std::string& pattern) : re_(pattern, RE2::Quiet) {
    if (!re_.ok())
      fail(ErrorCode::kUnsupported, "tokenizer.json: split pattern {} is not supported ({})", pattern,
           re_.error());
  }
  void find_matches(std::string_view text, Ranges& out) const override {
    re2::StringPiece input(text.data(), text.size());
    re2::StringPiece m;
    size_t pos = 0;
    while (pos <= text.size() &&
           re_.Match(input, pos, text.size(), RE2::UNANCHORED, &m, 1)) {
      const size_t b = m.data() - text.data();
      const size_t e = b + m.size();
      if (e == b) {  // empty match: step one character
        pos = b + (b < text.size() ? unicode::utf8_seq_len(static_cast<uint8_t>(text[b])) : 1);
        continue;
      }
      out.emplace_back(b, e);
      pos = e;
    }
  }

 private:
  RE2 re_;
};

class LiteralMatcher : public SplitMatcher {
 public:
  explicit LiteralMatcher(std::string s) : s_(std::move(s)) {}
  void find_matches(std::string_view text, Ranges& out) const override {
    if (s_.empty()) return;
    for (size_t p = text.find(s_); p != std::string_view::npos; p = text.find(s_, p + s_.size()))
      out.emplace_back(p, p + s_.size());
  }

 private:
  std::string s_;
};

class SplitPre : public PreTokenizer {
 public:
  SplitPre(std::unique_ptr<SplitMatcher> m, Behavior b, bool invert)
      : matcher_(std::move(m)), behavior_(b), invert_(invert) {}
  void apply(std::vector<PreToken>& pieces) const override {
    std::vector<PreToken> out;
    Ranges matches;
    for (const PreToken& p : pieces) {
      matches.clear();
      matcher_->find_matches(p.text, matches);
      split_piece(p, matches, behavior_, invert_, out);
    }
    pieces = std::move(out);
  }

 private:
  std::unique_ptr<SplitMatcher> matcher_;
  Behavior behavior_;
  bool invert_;
};

class ByteLevelPre : public PreTokenizer {
 public:
  ByteLevelPre(bool add_prefix_space, bool use_regex) : add_prefix_space_(add_prefix_space), use_regex_(use_regex) {}
  void apply(std::vector<PreToken>& pieces) const override {
    std::vector<PreToken> split;
    Ranges matches;
    for (PreToken& p : pieces) {
      if (add_prefix_space_ && (p.text.empty() || p.text[0] != ' ')) p.text.insert(0, " ");
      if (use_regex_) {
        matches.clear();
        scan_matches(gpt2_scanner_rules(), p.text, matches);
        split_piece(p, matches, Behavior::kIsolated, false, split);
      } else {
        split.push_back(std::move(p));
      }
    }
    for (PreToken& p : split) {
      std::string mapped;
      mapped.reserve(p.text.size() * 2);
      for (char c : p.text) mapped += unicode::byte_to_unicode(static_cast<uint8_t>(c));
      p.text = std::move(mapped);
    }
    pieces = std::move(split);
  }

 private:
  bool add_prefix_space_, use_regex_;
};

class MetaspacePre : public PreTokenizer {
 public:
  enum class Prepend { kAlways, kFirst, kNever };
  MetaspacePre(std::string replacement, Prepend prepend, bool split)
      : replacement_(std::move(replacement)), prepend_(prepend), split_(split) {}
  void apply(std::vector<PreToken>& pieces) const override {
    std::vector<PreToken> out;
    Ranges matches;
    for (PreToken& p : pieces) {
      std::string t;
      for (char c : p.text) {
        if (c == ' ') t += replacement_;
        else t += c;
      }
      const bool starts = t.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts && (prepend_ == Prepend::kAlways || (prepend_ == Prepend::kFirst && p.at_input_start)))
        t.insert(0, replacement_);
      p.text = std::move(t);
      if (split_) {
        matches.clear();
        LiteralMatcher(replacement_).find_matches(p.text, matches);
        split_piece(p, matches, Behavior::kMergedWithNext, false, out);
      } else {
        out.push_back(std::move(p));
      }
    }
    pieces = std::move(out);
  }

 private:
  std::string replacement_;
  Prepend prepend_;
  bool split_;
};

class DigitsPre : public PreTokenizer {
 public:
  explicit DigitsPre(bool individual) : individual_(individual) {}
  void apply(std::vector<PreToken>& pieces) const override {
    std::vector<PreToken> out;
    Ranges matches;
    for (const PreToken& p : pieces) {
      matches.clear();
      size_t pos = 0;
      while (pos < p.text.size()) {
        const size_t b = pos;
        const uint32_t cp = unicode::decode_utf8(p.text, pos);
        if (unicode::char_class(cp) == unicode::kNumber) matches.emplace_back(b, pos);
      }
      split_piece(p, matches, individual_ ? Behavior::kIsolated : Behavior::kContiguous, false, out);
    }
    pieces = std::move(out);
  }

 private:
  bool individual_;
};

class SequencePre : public PreTokenizer {
 public:
  explicit SequencePre(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  void apply(std::vector<PreToken>& pieces) const override {
    for (const auto& s : steps_) s->apply(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

}  // namespace

std::unique_ptr<SplitMatcher> make_regex_matcher(const std::string& pattern) {
  if (auto rules = scanner_rules_for(pattern)) return std::make_unique<ScannerMatcher>(*rules);
  return std::make_unique<Re2Matcher>(pattern);
}

std::unique_ptr<SplitMatcher> make_literal_matcher(const std::string& literal) {
  return std::make_unique<LiteralMatcher>(literal);
}

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const json& c) {
  if (c.is_null()) return nullptr;
  const std::string type = c.value("type", "");
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (const json& s : c.at("pretokenizers"))
      if (auto p = make_pre_tokenizer(s)) steps.push_back(std::move(p));
    return std::make_unique<SequencePre>(std::move(steps));
  }
  if (type == "ByteLevel")
    return std::make_unique<ByteLevelPre>(c.value("add_prefix_space", true), c.value("use_regex", true));
  if (type == "Split") {
    const json& pat = c.at("pattern");
    std::unique_ptr<SplitMatcher> m;
    if (pat.contains("Regex")) m = make_regex_matcher(pat.at("Regex").get<std::string>());
    else m = make_literal_matcher(pat.at("String").get<std::string>());
    return std::make_unique<SplitPre>(std::move(m), parse_behavior(c.value("behavior", "Isolated")),
                                      c.value("invert", false));
  }
  if (type == "Metaspace") {
    auto prepend = MetaspacePre::Prepend::kAlways;
    if (c.contains("prepend_scheme")) {
      const std::string s = c.at("prepend_scheme").get<std::string>();
      if (s == "first") prepend = MetaspacePre::Prepend::kFirst;
      else if (s == "never") prepend = MetaspacePre::Prepend::kNever;
    } else if (!c.value("add_prefix_space", true)) {
      prepend = MetaspacePre::Prepend::kNever;
    }
    return std::make_unique<MetaspacePre>(c.value("replacement", std::string("\xE2\x96\x81")), prepend,
                                          c.value("split", true));
  }
  if (type == "Digits") return std::make_unique<DigitsPre>(c.value("individual_digits", false));
  if (type == "WhitespaceSplit") {
    return std::make_unique<SplitPre>(make_regex_matcher(R"(\s+)"), Behavior::kRemoved, false);
  }
  fail(ErrorCode::kUnsupported, "tokenizer.json: pre_tokenizer type '{}' is not supported", type);
}

}  // namespace qserve
