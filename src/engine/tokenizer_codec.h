// The engine's TextCodec over a real qserve::Tokenizer: encode / decode,
// streaming through IncrementalDecoder, the chat template of the model folder.
#pragma once

#include <memory>
#include <string>

#include "engine/text_codec.h"
#include "tokenizer/tokenizer.h"

namespace qserve {

class TokenizerCodec : public TextCodec {
 public:
  TokenizerCodec(std::shared_ptr<const Tokenizer> tokenizer, std::string chat_template = {});
  // load_tokenizer(model_dir) + the chat template: a GGUF file's
  // tokenizer.chat_template (the file opened once for both), else the model
  // folder's (ChatTemplate::source_from_model_dir). Throws qserve::Error.
  static std::shared_ptr<TokenizerCodec> load(const std::string& model_dir);

  std::vector<int32_t> encode(const std::string& text, bool add_special) const override;
  std::string decode(std::span<const int32_t> ids, bool skip_special) const override;
  std::unique_ptr<TextStream> start_stream(std::span<const int32_t> prompt_ids, bool skip_special) const override;
  int32_t vocab_size() const override { return tokenizer_->vocab_size(); }
  int32_t bos_id() const override { return tokenizer_->bos_id(); }
  std::vector<int32_t> eos_ids() const override { return tokenizer_->eos_ids(); }
  std::string token_text(int32_t id) const override { return tokenizer_->token_text(id); }
  std::string chat_template() const override { return chat_template_; }

  const Tokenizer& tokenizer() const { return *tokenizer_; }

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::string chat_template_;
};

}  // namespace qserve
