#include "tokenizer/text_transforms.h"

#include <re2/re2.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace qserve {
namespace {

using json = nlohmann::json;

// A "pattern": {"String": s} or {"Regex": r} replacement.
class Replacer {
 public:
  Replacer(const json& pattern, std::string content) : content_(std::move(content)) {
    if (pattern.contains("String")) {
      literal_ = pattern.at("String").get<std::string>();
    } else {
      re_ = std::make_unique<RE2>(pattern.at("Regex").get<std::string>(), RE2::Quiet);
      if (!re_->ok()) fail(ErrorCode::kUnsupported, "tokenizer.json: Replace pattern not supported: {}", re_->error());
      // RE2 rewrite strings treat '\' as an escape.
      for (char c : content_) {
        if (c == '\\') rewrite_ += '\\';
        rewrite_ += c;
      }
    }
  }
  std::string apply(std::string s) const {
    if (re_) {
      RE2::GlobalReplace(&s, *re_, rewrite_);
      return s;
    }
    if (literal_.empty()) return s;
    std::string out;
    size_t last = 0;
    for (size_t p = s.find(literal_); p != std::string::npos; p = s.find(literal_, last)) {
      out.append(s, last, p - last);
      out += content_;
      last = p + literal_.size();
    }
    out.append(s, last);
    return out;
  }

 private:
  std::string content_, literal_, rewrite_;
  std::unique_ptr<RE2> re_;
};

bool is_white_space(uint32_t cp) { return unicode::char_class(cp) == unicode::kSpace; }

// ---- normalizers ----

class SequenceNorm : public Normalizer {
 public:
  explicit SequenceNorm(std::vector<std::unique_ptr<Normalizer>> s) : steps_(std::move(s)) {}
  std::string normalize(std::string t) const override {
    for (const auto& s : steps_) t = s->normalize(std::move(t));
    return t;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

class PrependNorm : public Normalizer {
 public:
  explicit PrependNorm(std::string p) : p_(std::move(p)) {}
  std::string normalize(std::string t) const override { return t.empty() ? t : p_ + t; }

 private:
  std::string p_;
};

class ReplaceNorm : public Normalizer {
 public:
  explicit ReplaceNorm(const json& c) : r_(c.at("pattern"), c.at("content").get<std::string>()) {}
  std::string normalize(std::string t) const override { return r_.apply(std::move(t)); }

 private:
  Replacer r_;
};

class StripNorm : public Normalizer {
 public:
  StripNorm(bool left, bool right) : left_(left), right_(right) {}
  std::string normalize(std::string t) const override {
    size_t b = 0, e = t.size();
    if (left_) {
      while (b < e) {
        size_t p = b;
        if (!is_white_space(unicode::decode_utf8(t, p))) break;
        b = p;
      }
    }
    if (right_) {
      while (e > b) {
        size_t s = e - 1;
        while (s > b && (static_cast<uint8_t>(t[s]) & 0xC0) == 0x80) --s;
        size_t p = s;
        if (!is_white_space(unicode::decode_utf8(t, p))) break;
        e = s;
      }
    }
    return t.substr(b, e - b);
  }

 private:
  bool left_, right_;
};

class LowercaseNorm : public Normalizer {
 public:
  std::string normalize(std::string t) const override {
    for (char& c : t)
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
    return t;
  }
};

// NFC (Qwen2 declares it).
class NfcNorm : public Normalizer {
 public:
  std::string normalize(std::string t) const override { return unicode::to_nfc(t); }
};

// ---- decoders ----

class SequenceDec : public Decoder {
 public:
  explicit SequenceDec(std::vector<std::unique_ptr<Decoder>> s) : steps_(std::move(s)) {}
  void decode_chain(std::vector<std::string>& t, bool raw_tail) const override {
    for (const auto& s : steps_) s->decode_chain(t, raw_tail);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

class ByteLevelDec : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens, bool) const override {
    std::string bytes;
    std::string mapped;
    for (const std::string& t : tokens) {
      mapped.clear();
      bool all = true;
      size_t pos = 0;
      while (pos < t.size()) {
        const int b = unicode::unicode_to_byte(unicode::decode_utf8(t, pos));
        if (b < 0) {
          all = false;
          break;
        }
        mapped += static_cast<char>(b);
      }
      bytes += all ? mapped : t;
    }
    tokens.assign(1, std::move(bytes));
  }
};

class MetaspaceDec : public Decoder {
 public:
  MetaspaceDec(std::string replacement, bool strip_first) : rep_(std::move(replacement)), strip_first_(strip_first) {}
  void decode_chain(std::vector<std::string>& tokens, bool) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string& t = tokens[i];
      for (size_t p = 0; p < t.size();) {
        if (!rep_.empty() && t.compare(p, rep_.size(), rep_) == 0) {
          if (!(i == 0 && strip_first_)) out += ' ';
          p += rep_.size();
        } else {
          out += t[p++];
        }
      }
      tokens[i] = std::move(out);
    }
  }

 private:
  std::string rep_;
  bool strip_first_;
};

class ReplaceDec : public Decoder {
 public:
  explicit ReplaceDec(const json& c) : r_(c.at("pattern"), c.at("content").get<std::string>()) {}
  void decode_chain(std::vector<std::string>& tokens, bool) const override {
    for (auto& t : tokens) t = r_.apply(std::move(t));
  }

 private:
  Replacer r_;
};

bool valid_utf8(std::string_view s) { return unicode::utf8_valid_prefix(s) == s.size(); }

// "<0x41>" tokens become bytes; runs of them that are not valid UTF-8 become
// one U+FFFD per byte (Hugging Face), except an incomplete tail when raw_tail.
class ByteFallbackDec : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens, bool raw_tail) const override {
    std::vector<std::string> out;
    std::string run;
    size_t run_tokens = 0;
    auto flush = [&](bool at_end) {
      if (run_tokens == 0) return;
      const bool incomplete_tail =
          unicode::utf8_valid_prefix(run) + unicode::utf8_incomplete_tail(run) == run.size();
      if (valid_utf8(run) || (at_end && raw_tail && incomplete_tail)) {
        out.push_back(run);
      } else {
        for (size_t k = 0; k < run_tokens; ++k) out.emplace_back("\xEF\xBF\xBD");
      }
      run.clear();
      run_tokens = 0;
    };
    for (std::string& t : tokens) {
      int byte = -1;
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') {
        auto hex = [](char c) {
          if (c >= '0' && c <= '9') return c - '0';
          if (c >= 'A' && c <= 'F') return c - 'A' + 10;
          if (c >= 'a' && c <= 'f') return c - 'a' + 10;
          return -1;
        };
        const int hi = hex(t[3]), lo = hex(t[4]);
        if (hi >= 0 && lo >= 0) byte = hi * 16 + lo;
      }
      if (byte >= 0) {
        run += static_cast<char>(byte);
        ++run_tokens;
      } else {
        flush(false);
        out.push_back(std::move(t));
      }
    }
    flush(true);
    tokens = std::move(out);
  }
};

class FuseDec : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens, bool) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

class StripDec : public Decoder {
 public:
  StripDec(uint32_t content, size_t start, size_t stop) : content_(content), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens, bool) const override {
    for (auto& t : tokens) {
      // [n + 1] byte offsets of the characters.
      std::vector<size_t> off;
      std::vector<uint32_t> cps;
      for (size_t p = 0; p < t.size();) {
        off.push_back(p);
        cps.push_back(unicode::decode_utf8(t, p));
      }
      off.push_back(t.size());
      size_t b = 0, e = cps.size();
      for (size_t i = 0; i < start_ && i < cps.size() && cps[i] == content_; ++i) b = i + 1;
      for (size_t i = 0; i < stop_ && i < cps.size() && cps[cps.size() - 1 - i] == content_; ++i)
        e = cps.size() - 1 - i;
      t = e > b ? t.substr(off[b], off[e] - off[b]) : std::string();
    }
  }

 private:
  uint32_t content_;
  size_t start_, stop_;
};

bool metaspace_strips_first(const json& c) {
  if (c.contains("prepend_scheme")) return c.at("prepend_scheme").get<std::string>() != "never";
  return c.value("add_prefix_space", true);
}

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const json& c) {
  if (c.is_null()) return nullptr;
  const std::string type = c.value("type", "");
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (const json& s : c.at("normalizers"))
      if (auto n = make_normalizer(s)) steps.push_back(std::move(n));
    return std::make_unique<SequenceNorm>(std::move(steps));
  }
  if (type == "Prepend") return std::make_unique<PrependNorm>(c.at("prepend").get<std::string>());
  if (type == "Replace") return std::make_unique<ReplaceNorm>(c);
  if (type == "Strip") return std::make_unique<StripNorm>(c.value("strip_left", true), c.value("strip_right", true));
  if (type == "Lowercase") return std::make_unique<LowercaseNorm>();
  if (type == "NFC") return std::make_unique<NfcNorm>();
  fail(ErrorCode::kUnsupported, "tokenizer.json: normalizer type '{}' is not supported", type);
}

std::unique_ptr<Decoder> make_decoder(const json& c) {
  if (c.is_null()) return nullptr;
  const std::string type = c.value("type", "");
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Decoder>> steps;
    for (const json& s : c.at("decoders"))
      if (auto d = make_decoder(s)) steps.push_back(std::move(d));
    return std::make_unique<SequenceDec>(std::move(steps));
  }
  if (type == "ByteLevel") return std::make_unique<ByteLevelDec>();
  if (type == "Metaspace")
    return std::make_unique<MetaspaceDec>(c.value("replacement", std::string("\xE2\x96\x81")), metaspace_strips_first(c));
  if (type == "Replace") return std::make_unique<ReplaceDec>(c);
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDec>();
  if (type == "Fuse") return std::make_unique<FuseDec>();
  if (type == "Strip") {
    const std::string content = c.at("content").get<std::string>();
    size_t p = 0;
    const uint32_t cp = content.empty() ? 0 : unicode::decode_utf8(content, p);
    return std::make_unique<StripDec>(cp, c.value("start", 0), c.value("stop", 0));
  }
  fail(ErrorCode::kUnsupported, "tokenizer.json: decoder type '{}' is not supported", type);
}

PostProcessor make_post_processor(const json& c) {
  PostProcessor pp;
  if (c.is_null()) return pp;
  const std::string type = c.value("type", "");
  if (type == "ByteLevel") return pp;
  if (type == "Sequence") {
    for (const json& s : c.at("processors")) {
      PostProcessor p = make_post_processor(s);
      pp.prefix.insert(pp.prefix.end(), p.prefix.begin(), p.prefix.end());
      pp.suffix.insert(pp.suffix.begin(), p.suffix.begin(), p.suffix.end());
    }
    return pp;
  }
  if (type == "TemplateProcessing") {
    const json& specials = c.at("special_tokens");
    bool seen_sequence = false;
    for (const json& item : c.at("single")) {
      if (item.contains("Sequence")) {
        seen_sequence = true;
        continue;
      }
      const std::string name = item.at("SpecialToken").at("id").get<std::string>();
      if (!specials.contains(name))
        fail(ErrorCode::kCorruptData, "tokenizer.json: template token '{}' not in special_tokens", name);
      for (const json& id : specials.at(name).at("ids"))
        (seen_sequence ? pp.suffix : pp.prefix).push_back(id.get<int32_t>());
    }
    return pp;
  }
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    pp.prefix.push_back(c.at("cls").at(1).get<int32_t>());
    pp.suffix.push_back(c.at("sep").at(1).get<int32_t>());
    return pp;
  }
  fail(ErrorCode::kUnsupported, "tokenizer.json: post_processor type '{}' is not supported", type);
}

}  // namespace qserve
