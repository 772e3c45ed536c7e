#include "engine/tokenizer_codec.h"

#include "model/gguf.h"
#include "model/gguf_tokenizer.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace qserve {

namespace {

class DecoderStream : public TextStream {
 public:
  DecoderStream(const Tokenizer& tok, std::span<const int32_t> prompt, bool skip_special)
      : decoder_(tok, prompt, skip_special) {}
  std::string step(int32_t id) override { return decoder_.step(id); }
  std::string flush() override { return decoder_.flush(); }

 private:
  IncrementalDecoder decoder_;
};

std::string read_chat_template(const std::filesystem::path& dir) {
  const auto cfg_path = dir / "tokenizer_config.json";
  if (std::filesystem::exists(cfg_path)) {
    std::ifstream f(cfg_path);
    const auto cfg = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
    if (cfg.is_object() && cfg.contains("chat_template")) {
      const auto& t = cfg.at("chat_template");
      if (t.is_string()) return t.get<std::string>();
      if (t.is_array()) {  // [{"name": "default", "template": "..."}, ...]
        for (const auto& e : t)
          if (e.value("name", "") == "default" && e.contains("template")) return e.at("template").get<std::string>();
      }
    }
  }
  const auto jinja = dir / "chat_template.jinja";
  if (std::filesystem::exists(jinja)) {
    std::ifstream f(jinja);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  return {};
}

}  // namespace

TokenizerCodec::TokenizerCodec(std::shared_ptr<const Tokenizer> tokenizer, std::string chat_template)
    : tokenizer_(std::move(tokenizer)), chat_template_(std::move(chat_template)) {}

std::shared_ptr<TokenizerCodec> TokenizerCodec::load(const std::string& model_dir) {
  std::shared_ptr<const Tokenizer> tok = load_tokenizer(model_dir);
  std::filesystem::path dir(model_dir);
  if (std::filesystem::is_regular_file(dir) && dir.extension() == ".gguf") {  // template in the GGUF metadata
    const auto cfg = gguf_tokenizer_config(*GgufFile::open(model_dir));
    return std::make_shared<TokenizerCodec>(std::move(tok), cfg.value("chat_template", std::string()));
  }
  if (std::filesystem::is_regular_file(dir)) dir = dir.parent_path();
  return std::make_shared<TokenizerCodec>(std::move(tok), read_chat_template(dir));
}

std::vector<int32_t> TokenizerCodec::encode(const std::string& text, bool add_special) const {
  return tokenizer_->encode(text, add_special);
}

std::string TokenizerCodec::decode(std::span<const int32_t> ids, bool skip_special) const {
  return tokenizer_->decode(ids, skip_special);
}

std::unique_ptr<TextStream> TokenizerCodec::start_stream(std::span<const int32_t> prompt_ids, bool skip_special) const {
  return std::make_unique<DecoderStream>(*tokenizer_, prompt_ids, skip_special);
}

}  // namespace qserve
