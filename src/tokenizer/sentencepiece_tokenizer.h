// SentencePiece (`tokenizer.model`) through libsentencepiece, with the Llama-2
// conventions: BOS added by encode(add_special), byte-fallback pieces
// ("<0x0A>"), control pieces ("<s>", "</s>") recognised in the input text and
// decoded as Hugging Face's LlamaTokenizerFast does.
#pragma once

#include <memory>
#include <string>

#include "tokenizer/added_tokens.h"
#include "tokenizer/text_transforms.h"
#include "tokenizer/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace qserve {

class SentencePieceTokenizer : public Tokenizer {
 public:
  // Throws Error(kNotFound / kCorruptData).
  explicit SentencePieceTokenizer(const std::string& model_path);
  ~SentencePieceTokenizer() override;

  std::vector<int32_t> encode(std::string_view text, bool add_special = true) const override;
  int32_t vocab_size() const override;
  std::optional<int32_t> token_id(std::string_view token) const override;
  std::string token_text(int32_t id) const override;
  bool is_special(int32_t id) const override;

  void set_add_bos(bool add) { add_bos_ = add; }
  void set_add_eos(bool add) { add_eos_ = add; }

 protected:
  std::string decode_impl(std::span<const int32_t> ids, bool skip_special, bool raw_tail) const override;

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::unique_ptr<Decoder> decoder_;  // pieces -> text (Llama's tokenizer.json decoder)
  AddedTokenMatcher specials_;        // control and unknown pieces, found in the input
  bool add_bos_ = true;
  bool add_eos_ = false;
};

}  // namespace qserve
