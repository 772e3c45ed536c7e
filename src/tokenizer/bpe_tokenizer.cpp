#include "tokenizer/bpe_tokenizer.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"

namespace qserve {

using json = nlohmann::json;

std::unique_ptr<BpeTokenizer> BpeTokenizer::from_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(ErrorCode::kNotFound, "cannot open {}", path);
  json j;
  try {
    j = json::parse(f);
  } catch (const json::exception& e) {
    fail(ErrorCode::kCorruptData, "{}: invalid JSON ({})", path, e.what());
  }
  try {
    return std::make_unique<BpeTokenizer>(j);
  } catch (const json::exception& e) {
    fail(ErrorCode::kCorruptData, "{}: unexpected structure ({})", path, e.what());
  }
}

static const json& field(const json& j, const char* key) {
  static const json null_json;
  auto it = j.find(key);
  return it == j.end() ? null_json : *it;
}

BpeTokenizer::BpeTokenizer(const json& j) : model_([&]() -> const json& {
  const json& m = j.at("model");
  const std::string type = m.value("type", "BPE");
  if (type != "BPE") fail(ErrorCode::kUnsupported, "tokenizer.json: model type '{}' is not supported (BPE only)", type);
  return m;
}()) {
  normalizer_ = make_normalizer(field(j, "normalizer"));
  pre_tokenizer_ = make_pre_tokenizer(field(j, "pre_tokenizer"));
  decoder_ = make_decoder(field(j, "decoder"));
  post_ = make_post_processor(field(j, "post_processor"));
  vocab_size_ = model_.size();

  std::vector<AddedToken> raw, normalized;
  for (const json& a : field(j, "added_tokens")) {
    AddedToken t;
    t.id = a.at("id").get<int32_t>();
    t.content = a.at("content").get<std::string>();
    t.single_word = a.value("single_word", false);
    t.lstrip = a.value("lstrip", false);
    t.rstrip = a.value("rstrip", false);
    t.special = a.value("special", false);
    t.normalized = a.value("normalized", !t.special);
    if (t.id < 0) fail(ErrorCode::kCorruptData, "tokenizer.json: added token '{}' has id {}", t.content, t.id);
    vocab_size_ = std::max(vocab_size_, t.id + 1);
    added_by_id_[t.id] = t;
    added_by_content_[t.content] = t.id;
    if (t.normalized && normalizer_) {
      // Matched on normalized text, so in its normalized form.
      AddedToken n = t;
      n.content = normalizer_->normalize(t.content);
      normalized.push_back(std::move(n));
    } else {
      raw.push_back(t);
    }
  }
  raw_matcher_ = AddedTokenMatcher(std::move(raw));
  normalized_matcher_ = AddedTokenMatcher(std::move(normalized));
}

void BpeTokenizer::encode_text(std::string_view text, bool at_input_start, std::vector<int32_t>& out) const {
  std::vector<PreToken> pieces;
  pieces.push_back({std::string(text), at_input_start});
  if (pre_tokenizer_) pre_tokenizer_->apply(pieces);
  for (const PreToken& p : pieces) model_.encode_word(p.text, out);
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool add_special) const {
  std::vector<int32_t> ids;
  if (add_special) ids = post_.prefix;
  for (const AddedSplit& s : raw_matcher_.split(text)) {
    if (s.token_id >= 0) {
      ids.push_back(s.token_id);
      continue;
    }
    std::string_view segment = text.substr(s.begin, s.end - s.begin);
    if (!normalizer_) {
      encode_text(segment, s.begin == 0, ids);
      continue;
    }
    const std::string norm = normalizer_->normalize(std::string(segment));
    for (const AddedSplit& n : normalized_matcher_.split(norm)) {
      if (n.token_id >= 0) ids.push_back(n.token_id);
      else encode_text(std::string_view(norm).substr(n.begin, n.end - n.begin), s.begin == 0 && n.begin == 0, ids);
    }
  }
  if (add_special) ids.insert(ids.end(), post_.suffix.begin(), post_.suffix.end());
  return ids;
}

std::string BpeTokenizer::decode_impl(std::span<const int32_t> ids, bool skip_special, bool raw_tail) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (auto it = added_by_id_.find(id); it != added_by_id_.end()) {
      if (!(skip_special && it->second.special)) tokens.push_back(it->second.content);
    } else if (const std::string* t = model_.id_to_token(id); t && !t->empty()) {
      tokens.push_back(*t);
    }
  }
  if (!decoder_) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i) out += ' ';
      out += tokens[i];
    }
    return out;
  }
  decoder_->decode_chain(tokens, raw_tail);
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

std::optional<int32_t> BpeTokenizer::token_id(std::string_view token) const {
  const std::string key(token);
  if (auto it = added_by_content_.find(key); it != added_by_content_.end()) return it->second;
  if (auto it = model_.vocab().find(key); it != model_.vocab().end()) return it->second;
  return std::nullopt;
}

std::string BpeTokenizer::token_text(int32_t id) const {
  if (auto it = added_by_id_.find(id); it != added_by_id_.end()) return it->second.content;
  const std::string* t = model_.id_to_token(id);
  return t ? *t : std::string();
}

bool BpeTokenizer::is_special(int32_t id) const {
  auto it = added_by_id_.find(id);
  return it != added_by_id_.end() && it->second.special;
}

void BpeTokenizer::set_add_bos(bool add) {
  const bool has = !post_.prefix.empty() && post_.prefix.front() == bos_id_;
  if (add && !has && bos_id_ >= 0) post_.prefix.insert(post_.prefix.begin(), bos_id_);
  if (!add && has) post_.prefix.erase(post_.prefix.begin());
}

void BpeTokenizer::set_add_eos(bool add, int32_t eos_id) {
  const bool has = !post_.suffix.empty() && post_.suffix.back() == eos_id;
  if (add && !has && eos_id >= 0) post_.suffix.push_back(eos_id);
  if (!add && has) post_.suffix.pop_back();
}

}  // namespace qserve
