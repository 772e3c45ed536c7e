#include "engine/tokenizer_codec.h"

#include "tokenizer/chat_template.h"

#include <filesystem>

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

}  // namespace

TokenizerCodec::TokenizerCodec(std::shared_ptr<const Tokenizer> tokenizer, std::string chat_template)
    : tokenizer_(std::move(tokenizer)), chat_template_(std::move(chat_template)) {}

std::shared_ptr<TokenizerCodec> TokenizerCodec::load(const std::string& model_dir) {
  std::optional<std::string> gguf_template;  // set for a GGUF file: the template in its metadata
  std::shared_ptr<const Tokenizer> tok = load_tokenizer(model_dir, &gguf_template);
  if (gguf_template) return std::make_shared<TokenizerCodec>(std::move(tok), std::move(*gguf_template));
  std::filesystem::path dir(model_dir);
  if (std::filesystem::is_regular_file(dir)) dir = dir.parent_path();
  return std::make_shared<TokenizerCodec>(std::move(tok), ChatTemplate::source_from_model_dir(dir).value_or(""));
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
