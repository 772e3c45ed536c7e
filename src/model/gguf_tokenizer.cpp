#include "model/gguf_tokenizer.h"

#include <algorithm>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"

namespace qserve {
namespace {

using json = nlohmann::json;

constexpr int kTypeNormal = 1, kTypeUnknown = 2, kTypeControl = 3, kTypeUserDefined = 4;

bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<uint8_t>(s[i]);
    int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (int k = 1; k < len; ++k) {
      if ((static_cast<uint8_t>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<int> types;  // 1 normal when the file has no token_type
  std::vector<float> scores;
};

Vocab read_vocab(const GgufFile& g) {
  Vocab v;
  const json& tokens = g.get_array("tokenizer.ggml.tokens");
  v.tokens.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (!tokens[i].is_string()) fail(ErrorCode::kCorruptData, "{}: tokenizer.ggml.tokens[{}] is not a string", g.path(), i);
    v.tokens.push_back(tokens[i].get<std::string>());
    if (!valid_utf8(v.tokens.back())) {
      fail(ErrorCode::kCorruptData, "{}: tokenizer.ggml.tokens[{}] is not valid UTF-8", g.path(), i);
    }
  }
  if (v.tokens.empty()) fail(ErrorCode::kCorruptData, "{}: tokenizer.ggml.tokens is empty", g.path());
  v.types.assign(v.tokens.size(), kTypeNormal);
  if (g.find("tokenizer.ggml.token_type")) {
    const json& types = g.get_array("tokenizer.ggml.token_type");
    if (types.size() != v.tokens.size()) {
      fail(ErrorCode::kCorruptData, "{}: {} token types for {} tokens", g.path(), types.size(), v.tokens.size());
    }
    for (size_t i = 0; i < types.size(); ++i) {
      if (!types[i].is_number_integer()) fail(ErrorCode::kCorruptData, "{}: token_type[{}] is not an integer", g.path(), i);
      v.types[i] = types[i].get<int>();
    }
  }
  if (g.find("tokenizer.ggml.scores")) {
    const json& scores = g.get_array("tokenizer.ggml.scores");
    if (scores.size() != v.tokens.size()) {
      fail(ErrorCode::kCorruptData, "{}: {} token scores for {} tokens", g.path(), scores.size(), v.tokens.size());
    }
    for (size_t i = 0; i < scores.size(); ++i) {
      if (!scores[i].is_number()) fail(ErrorCode::kCorruptData, "{}: scores[{}] is not a number", g.path(), i);
      v.scores.push_back(scores[i].get<float>());
    }
  }
  return v;
}

// A special-token id from the metadata, checked against the vocabulary.
std::optional<int64_t> token_id(const GgufFile& g, const std::string& key, size_t vocab_size) {
  if (!g.find(key)) return std::nullopt;
  const uint64_t id = g.get_uint_or(key, 0);
  if (id >= vocab_size) fail(ErrorCode::kCorruptData, "{}: {} = {} is outside the vocabulary ({})", g.path(), key, id, vocab_size);
  return static_cast<int64_t>(id);
}

json added_tokens(const Vocab& v) {
  json out = json::array();
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    const int t = v.types[i];
    if (t != kTypeControl && t != kTypeUnknown && t != kTypeUserDefined) continue;
    out.push_back({{"id", i},
                   {"content", v.tokens[i]},
                   {"single_word", false},
                   {"lstrip", false},
                   {"rstrip", false},
                   {"normalized", false},
                   {"special", t != kTypeUserDefined}});
  }
  return out;
}

json byte_level(bool add_prefix_space, bool trim_offsets, bool use_regex) {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", add_prefix_space},
          {"trim_offsets", trim_offsets},
          {"use_regex", use_regex}};
}

json split_regex(const std::string& pattern) {
  return {{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}};
}

// The pre-tokenizer that matches llama.cpp's tokenizer.ggml.pre (llama-vocab.cpp)
// and the Hugging Face tokenizer.json the GGUF was converted from.
json byte_level_pre_tokenizer(const GgufFile& g, const std::string& pre, json* normalizer) {
  static const char* kLlama3 =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
      "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  static const char* kQwen2 =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
      "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  if (pre.empty() || pre == "default" || pre == "gpt2" || pre == "gpt-2") return byte_level(false, true, true);
  // SmolLM / StarCoder: every digit on its own, then the GPT-2 pattern
  // (llama.cpp: "\p{N}" followed by the GPT-2 regex).
  if (pre == "smollm" || pre == "starcoder" || pre == "refact") {
    return {{"type", "Sequence"},
            {"pretokenizers", json::array({{{"type", "Digits"}, {"individual_digits", true}},
                                           byte_level(false, true, true)})}};
  }
  if (pre == "llama3" || pre == "llama-bpe" || pre == "llama-v3") {
    return {{"type", "Sequence"},
            {"pretokenizers", json::array({split_regex(kLlama3), byte_level(false, true, false)})}};
  }
  if (pre == "qwen2") {
    *normalizer = {{"type", "NFC"}};
    return {{"type", "Sequence"},
            {"pretokenizers", json::array({split_regex(kQwen2), byte_level(false, false, false)})}};
  }
  fail(ErrorCode::kUnsupported, "{}: tokenizer pre-tokenizer '{}' is not supported (known: gpt2, smollm, starcoder, "
       "llama3/llama-bpe, qwen2)", g.path(), pre);
}

json bos_template(const std::string& bos, int64_t bos_id) {
  const json bos_tok = {{"SpecialToken", {{"id", bos}, {"type_id", 0}}}};
  const json bos_tok1 = {{"SpecialToken", {{"id", bos}, {"type_id", 1}}}};
  const json a = {{"Sequence", {{"id", "A"}, {"type_id", 0}}}};
  const json b = {{"Sequence", {{"id", "B"}, {"type_id", 1}}}};
  return {{"type", "TemplateProcessing"},
          {"single", json::array({bos_tok, a})},
          {"pair", json::array({bos_tok, a, bos_tok1, b})},
          {"special_tokens", {{bos, {{"id", bos}, {"ids", {bos_id}}, {"tokens", {bos}}}}}}};
}

json bpe_model(const Vocab& v, json merges, const json& unk, bool byte_fallback) {
  json vocab = json::object();
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (!vocab.contains(v.tokens[i])) vocab[v.tokens[i]] = i;  // a duplicate keeps its first id
  }
  return {{"type", "BPE"},        {"dropout", nullptr},      {"unk_token", unk},
          {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr},
          {"fuse_unk", byte_fallback}, {"byte_fallback", byte_fallback}, {"ignore_merges", false},
          {"vocab", std::move(vocab)}, {"merges", std::move(merges)}};
}

// SentencePiece BPE has no merge list; rebuild one from the scores the way
// Hugging Face does (SentencePieceExtractor): every split of a piece into two
// pieces of the vocabulary is a merge ranked by the merged piece's score
// (higher first), ties by the ids of the halves.
json spm_merges(const Vocab& v) {
  std::unordered_map<std::string, int64_t> ids;
  for (size_t i = 0; i < v.tokens.size(); ++i) ids.emplace(v.tokens[i], static_cast<int64_t>(i));
  struct Merge {
    float score;
    int64_t left, right;
  };
  std::vector<Merge> merges;
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    const std::string& piece = v.tokens[i];
    std::vector<Merge> local;
    for (size_t cut = 1; cut < piece.size(); ++cut) {
      if ((static_cast<uint8_t>(piece[cut]) & 0xC0) == 0x80) continue;  // inside a UTF-8 character
      auto l = ids.find(piece.substr(0, cut));
      auto r = ids.find(piece.substr(cut));
      if (l != ids.end() && r != ids.end()) local.push_back({v.scores[i], l->second, r->second});
    }
    std::stable_sort(local.begin(), local.end(), [](const Merge& a, const Merge& b) {
      return a.left != b.left ? a.left < b.left : a.right < b.right;
    });
    merges.insert(merges.end(), local.begin(), local.end());
  }
  std::stable_sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) { return a.score > b.score; });
  json out = json::array();
  for (const Merge& m : merges) out.push_back(json::array({v.tokens[m.left], v.tokens[m.right]}));
  return out;
}

}  // namespace

nlohmann::json gguf_tokenizer_json(const GgufFile& g) {
  const std::string model = g.get_string_opt("tokenizer.ggml.model").value_or("");
  if (model.empty()) fail(ErrorCode::kNotFound, "{}: the GGUF holds no tokenizer (tokenizer.ggml.model)", g.path());
  const Vocab v = read_vocab(g);
  json out = {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}};
  out["added_tokens"] = added_tokens(v);
  if (model == "gpt2") {
    const bool add_bos = g.get_bool_or("tokenizer.ggml.add_bos_token", false);
    json normalizer = nullptr;
    json pre = byte_level_pre_tokenizer(g, g.get_string_opt("tokenizer.ggml.pre").value_or("default"), &normalizer);
    // Each merge joins two tokens of the vocabulary into a third (checked here,
    // so that an inconsistent file is an error naming it, not a tokenizer.json
    // that `qserve convert` writes and nothing can load).
    const std::unordered_set<std::string> token_set(v.tokens.begin(), v.tokens.end());
    json merges = json::array();
    for (const auto& m : g.get_array("tokenizer.ggml.merges")) {
      if (!m.is_string()) fail(ErrorCode::kCorruptData, "{}: tokenizer.ggml.merges holds a non-string", g.path());
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || sp == 0 || sp + 1 == s.size()) {
        fail(ErrorCode::kCorruptData, "{}: merge '{}' is not 'left right'", g.path(), s);
      }
      std::string left = s.substr(0, sp), right = s.substr(sp + 1);
      for (const std::string* t : {&left, &right})
        if (!token_set.count(*t))
          fail(ErrorCode::kCorruptData, "{}: tokenizer.ggml.merges: '{}' names '{}', not a token", g.path(), s, *t);
      if (!token_set.count(left + right))
        fail(ErrorCode::kCorruptData, "{}: tokenizer.ggml.merges: '{}' makes '{}', not a token", g.path(), s, left + right);
      merges.push_back(json::array({std::move(left), std::move(right)}));
    }
    out["normalizer"] = normalizer;
    out["pre_tokenizer"] = pre;
    const auto bos = token_id(g, "tokenizer.ggml.bos_token_id", v.tokens.size());
    out["post_processor"] =
        add_bos && bos ? bos_template(v.tokens[*bos], *bos) : byte_level(true, false, true);
    out["decoder"] = byte_level(true, true, true);
    out["model"] = bpe_model(v, std::move(merges), nullptr, false);
  } else if (model == "llama") {
    if (v.scores.empty()) fail(ErrorCode::kCorruptData, "{}: SentencePiece tokenizer without tokenizer.ggml.scores", g.path());
    const bool add_bos = g.get_bool_or("tokenizer.ggml.add_bos_token", true);
    const bool add_space = g.get_bool_or("tokenizer.ggml.add_space_prefix", true);
    json norms = json::array();
    if (add_space) norms.push_back({{"type", "Prepend"}, {"prepend", "\xe2\x96\x81"}});
    norms.push_back({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xe2\x96\x81"}});
    out["normalizer"] = {{"type", "Sequence"}, {"normalizers", norms}};
    out["pre_tokenizer"] = nullptr;
    const auto bos = token_id(g, "tokenizer.ggml.bos_token_id", v.tokens.size());
    out["post_processor"] = add_bos && bos ? bos_template(v.tokens[*bos], *bos) : json(nullptr);
    json decoders = json::array({{{"type", "Replace"}, {"pattern", {{"String", "\xe2\x96\x81"}}}, {"content", " "}},
                                 {{"type", "ByteFallback"}},
                                 {{"type", "Fuse"}}});
    if (add_space) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    out["decoder"] = {{"type", "Sequence"}, {"decoders", decoders}};
    const auto unk = token_id(g, "tokenizer.ggml.unknown_token_id", v.tokens.size());
    out["model"] = bpe_model(v, spm_merges(v), unk ? json(v.tokens[*unk]) : json(nullptr), true);
  } else {
    fail(ErrorCode::kUnsupported, "{}: tokenizer model '{}' is not supported (gpt2, llama)", g.path(), model);
  }
  return out;
}

std::vector<int64_t> gguf_eos_token_ids(const GgufFile& g) {
  const auto& tokens = g.get_array("tokenizer.ggml.tokens");
  std::vector<int64_t> ids;
  auto add = [&](std::optional<int64_t> id) {
    if (id && std::find(ids.begin(), ids.end(), *id) == ids.end()) ids.push_back(*id);
  };
  add(token_id(g, "tokenizer.ggml.eos_token_id", tokens.size()));
  // A chat model's turn ends with its end-of-turn token, which need not be the
  // end-of-sequence token of the base vocabulary (ChatML's <|im_end|>,
  // Llama 3's <|eot_id|>). Generation must stop there too, so every one of
  // them is an eos id in generation_config.json.
  add(token_id(g, "tokenizer.ggml.eot_token_id", tokens.size()));
  const std::string tmpl = g.get_string_opt("tokenizer.chat_template").value_or("");
  for (const char* marker : {"<|im_end|>", "<|eot_id|>", "<|end|>"}) {
    if (tmpl.find(marker) == std::string::npos) continue;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i].is_string() && tokens[i].get<std::string>() == marker) add(static_cast<int64_t>(i));
    }
  }
  return ids;
}

nlohmann::json gguf_tokenizer_config(const GgufFile& g) {
  const auto& tokens = g.get_array("tokenizer.ggml.tokens");
  const std::string model = g.get_string_opt("tokenizer.ggml.model").value_or("");
  json cfg = {{"tokenizer_class", "PreTrainedTokenizerFast"},
              {"clean_up_tokenization_spaces", false},
              {"add_bos_token", g.get_bool_or("tokenizer.ggml.add_bos_token", model == "llama")},
              {"add_eos_token", g.get_bool_or("tokenizer.ggml.add_eos_token", false)}};
  const auto arch = g.get_string_opt("general.architecture");
  if (arch) {
    const uint64_t ctx = g.get_uint_or(*arch + ".context_length", 0);
    if (ctx) cfg["model_max_length"] = ctx;
  }
  auto name_of = [&](const char* key) -> std::optional<std::string> {
    auto id = token_id(g, key, tokens.size());
    if (!id) return std::nullopt;
    return tokens[*id].get<std::string>();
  };
  if (auto s = name_of("tokenizer.ggml.bos_token_id")) cfg["bos_token"] = *s;
  if (auto s = name_of("tokenizer.ggml.eos_token_id")) cfg["eos_token"] = *s;
  if (auto s = name_of("tokenizer.ggml.unknown_token_id")) cfg["unk_token"] = *s;
  if (auto s = name_of("tokenizer.ggml.padding_token_id")) cfg["pad_token"] = *s;
  if (auto t = g.get_string_opt("tokenizer.chat_template")) cfg["chat_template"] = *t;
  return cfg;
}

nlohmann::json gguf_generation_config(const GgufFile& g) {
  const auto& tokens = g.get_array("tokenizer.ggml.tokens");
  json cfg = {{"_from_model_config", false}};
  if (auto bos = token_id(g, "tokenizer.ggml.bos_token_id", tokens.size())) cfg["bos_token_id"] = *bos;
  const auto eos = gguf_eos_token_ids(g);
  if (!eos.empty()) cfg["eos_token_id"] = eos;
  if (auto pad = token_id(g, "tokenizer.ggml.padding_token_id", tokens.size())) cfg["pad_token_id"] = *pad;
  return cfg;
}

}  // namespace qserve
