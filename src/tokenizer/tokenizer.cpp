#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/gguf.h"
#include "model/gguf_tokenizer.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer/unicode.h"

namespace qserve {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string utf8_make_valid(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    const unicode::Utf8Step st = unicode::utf8_step(bytes, pos);
    if (st.valid) out.append(bytes.substr(pos, st.len));
    else out += "\xEF\xBF\xBD";
    pos += st.len;
  }
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  return utf8_make_valid(decode_impl(ids, skip_special, /*raw_tail=*/false));
}

// ---- IncrementalDecoder ----

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special) {}

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, std::span<const int32_t> prompt_ids,
                                       bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special), ids_(prompt_ids.begin(), prompt_ids.end()) {
  // A few prompt tokens of context are enough for leading-space rules.
  read_offset_ = ids_.size();
  prefix_offset_ = read_offset_ > 5 ? read_offset_ - 5 : 0;
  emitted_ = tokenizer_.decode_bytes(std::span(ids_).subspan(prefix_offset_), skip_special_).size();
}

std::string IncrementalDecoder::step(int32_t id) {
  ids_.push_back(id);
  const std::string full = tokenizer_.decode_bytes(std::span(ids_).subspan(prefix_offset_), skip_special_);
  const size_t tail = unicode::utf8_incomplete_tail(full);
  const size_t end = full.size() - tail;
  if (end <= emitted_) return "";
  std::string out = utf8_make_valid(std::string_view(full).substr(emitted_, end - emitted_));
  emitted_ = end;
  if (tail == 0) {
    // Everything so far is out: the last tokens become the context.
    prefix_offset_ = read_offset_;
    read_offset_ = ids_.size();
    emitted_ = tokenizer_
                   .decode_bytes(std::span(ids_).subspan(prefix_offset_, read_offset_ - prefix_offset_),
                                 skip_special_)
                   .size();
  }
  return out;
}

std::string IncrementalDecoder::flush() {
  // Raw bytes, as in step(), so that emitted_ counts the same bytes.
  const std::string full = tokenizer_.decode_impl(std::span(ids_).subspan(prefix_offset_), skip_special_, false);
  std::string out = full.size() > emitted_ ? utf8_make_valid(std::string_view(full).substr(emitted_)) : std::string();
  prefix_offset_ = read_offset_ = ids_.size();
  emitted_ = 0;
  return out;
}

// ---- load_tokenizer ----

namespace {

json read_json_if_exists(const fs::path& p) {
  if (!fs::exists(p)) return json();
  std::ifstream f(p);
  try {
    return json::parse(f);
  } catch (const json::exception& e) {
    fail(ErrorCode::kCorruptData, "{}: invalid JSON ({})", p.string(), e.what());
  }
}

// "bos_token": "<s>" or {"content": "<s>", ...}.
std::optional<std::string> token_string(const json& cfg, const char* key) {
  if (!cfg.is_object() || !cfg.contains(key)) return std::nullopt;
  const json& v = cfg.at(key);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v.at("content").is_string()) return v.at("content").get<std::string>();
  return std::nullopt;
}

// "eos_token_id": 2 or [128001, 128009]. Values outside int32 are dropped (not
// wrapped into a small id); the caller checks them against the vocabulary.
void append_ids(const json& cfg, const char* key, std::vector<int32_t>& out) {
  if (!cfg.is_object() || !cfg.contains(key)) return;
  auto add = [&](const json& x) {
    if (!x.is_number_integer()) return;
    const bool fits = x.is_number_unsigned() ? x.get<uint64_t>() <= INT32_MAX
                                             : x.get<int64_t>() >= INT32_MIN && x.get<int64_t>() <= INT32_MAX;
    if (fits) out.push_back(static_cast<int32_t>(x.get<int64_t>()));
  };
  const json& v = cfg.at(key);
  if (v.is_array()) {
    for (const json& x : v) add(x);
  } else {
    add(v);
  }
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& model_dir, std::optional<std::string>* gguf_chat_template) {
  if (gguf_chat_template) gguf_chat_template->reset();
  const fs::path dir(model_dir);
  fs::path tokenizer_json = dir / "tokenizer.json", tokenizer_model = dir / "tokenizer.model";
  fs::path config_dir = dir;
  if (fs::is_regular_file(dir)) {  // a tokenizer file given directly
    config_dir = dir.parent_path();
    tokenizer_json = dir.extension() == ".json" ? dir : fs::path();
    tokenizer_model = dir.extension() == ".json" ? fs::path() : dir;
  } else if (!fs::is_directory(dir)) {
    fail(ErrorCode::kNotFound, "model directory {} does not exist", model_dir);
  }
  json tok_cfg, gen_cfg, model_cfg;
  std::optional<json> gguf_tokenizer;
  if (fs::is_regular_file(dir) && dir.extension() == ".gguf") {
    // A GGUF file: the tokenizer in its metadata, as the Hugging Face files
    // `qserve convert` would write (model/gguf_tokenizer.h).
    auto gguf = GgufFile::open(model_dir);
    gguf_tokenizer = gguf_tokenizer_json(*gguf);
    tok_cfg = gguf_tokenizer_config(*gguf);
    gen_cfg = gguf_generation_config(*gguf);
    if (gguf_chat_template) *gguf_chat_template = gguf->get_string_opt("tokenizer.chat_template").value_or("");
  } else {
    tok_cfg = read_json_if_exists(config_dir / "tokenizer_config.json");
    gen_cfg = read_json_if_exists(config_dir / "generation_config.json");
    model_cfg = read_json_if_exists(config_dir / "config.json");
  }

  std::unique_ptr<Tokenizer> tok;
  BpeTokenizer* bpe = nullptr;
  if (gguf_tokenizer) {
    auto b = std::make_unique<BpeTokenizer>(*gguf_tokenizer);
    bpe = b.get();
    tok = std::move(b);
  } else if (!tokenizer_json.empty() && fs::exists(tokenizer_json)) {
    auto b = BpeTokenizer::from_file(tokenizer_json.string());
    bpe = b.get();
    tok = std::move(b);
  } else if (!tokenizer_model.empty() && fs::exists(tokenizer_model)) {
    tok = std::make_unique<SentencePieceTokenizer>(tokenizer_model.string());
  } else {
    fail(ErrorCode::kNotFound, "{}: no tokenizer.json or tokenizer.model", model_dir);
  }

  // BOS: tokenizer_config's token string, else the configs' first id inside
  // the vocabulary (as for EOS below, ids past it are ignored: encode would
  // put them in every prompt), else the model's own.
  const auto in_vocab = [&](int32_t id) { return id >= 0 && id < tok->vocab_size(); };
  int32_t bos = tok->bos_id();
  if (auto s = token_string(tok_cfg, "bos_token"); s && tok->token_id(*s)) {
    bos = *tok->token_id(*s);
  } else {
    std::vector<int32_t> ids;
    append_ids(gen_cfg, "bos_token_id", ids);
    append_ids(model_cfg, "bos_token_id", ids);
    if (auto it = std::find_if(ids.begin(), ids.end(), in_vocab); it != ids.end()) bos = *it;
  }
  tok->set_bos_id(bos);

  // EOS: every id any config names (generation_config may list several).
  std::vector<int32_t> eos;
  append_ids(gen_cfg, "eos_token_id", eos);
  append_ids(model_cfg, "eos_token_id", eos);
  if (auto s = token_string(tok_cfg, "eos_token"); s && tok->token_id(*s)) eos.push_back(*tok->token_id(*s));
  for (int32_t id : tok->eos_ids()) eos.push_back(id);
  std::vector<int32_t> unique;
  for (int32_t id : eos)
    if (in_vocab(id) && std::find(unique.begin(), unique.end(), id) == unique.end())
      unique.push_back(id);
  tok->set_eos_ids(std::move(unique));

  if (tok_cfg.is_object()) {
    auto flag = [&](const char* key) -> std::optional<bool> {
      if (tok_cfg.contains(key) && tok_cfg.at(key).is_boolean()) return tok_cfg.at(key).get<bool>();
      return std::nullopt;
    };
    if (bpe) {
      if (auto f = flag("add_bos_token")) bpe->set_add_bos(*f);
      if (auto f = flag("add_eos_token"); f && !tok->eos_ids().empty()) bpe->set_add_eos(*f, tok->eos_ids().front());
    } else if (auto* spm = dynamic_cast<SentencePieceTokenizer*>(tok.get())) {
      if (auto f = flag("add_bos_token")) spm->set_add_bos(*f);
      if (auto f = flag("add_eos_token")) spm->set_add_eos(*f);
    }
  }
  return tok;
}

}  // namespace qserve
