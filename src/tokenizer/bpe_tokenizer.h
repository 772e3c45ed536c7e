// A Hugging Face tokenizer.json with a BPE model (byte-level like GPT-2 /
// Llama-3 / Qwen2 / SmolLM2, or SentencePiece-style with byte fallback like
// the Llama-2 conversion). The pipeline, as in the `tokenizers` library:
//   added tokens split out -> normalizer -> added tokens (normalized ones)
//   -> pre-tokenizer -> BPE model per piece -> post-processor (add_special).
#pragma once

#include <memory>
#include <string>
#include <unordered_map>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/text_transforms.h"
#include "tokenizer/tokenizer.h"

namespace qserve {

class BpeTokenizer : public Tokenizer {
 public:
  // Throws Error(kCorruptData / kUnsupported).
  explicit BpeTokenizer(const nlohmann::json& tokenizer_json);
  static std::unique_ptr<BpeTokenizer> from_file(const std::string& path);

  std::vector<int32_t> encode(std::string_view text, bool add_special = true) const override;
  int32_t vocab_size() const override { return vocab_size_; }
  std::optional<int32_t> token_id(std::string_view token) const override;
  std::string token_text(int32_t id) const override;
  bool is_special(int32_t id) const override;

  // tokenizer_config.json's add_bos_token / add_eos_token, as transformers
  // applies them to the post-processor.
  void set_add_bos(bool add);
  void set_add_eos(bool add, int32_t eos_id);
  const PostProcessor& post_processor() const { return post_; }

 protected:
  std::string decode_impl(std::span<const int32_t> ids, bool skip_special, bool raw_tail) const override;

 private:
  void encode_text(std::string_view text, bool at_input_start, std::vector<int32_t>& out) const;

  BpeModel model_;
  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<Decoder> decoder_;
  PostProcessor post_;
  std::unordered_map<int32_t, AddedToken> added_by_id_;
  std::unordered_map<std::string, int32_t> added_by_content_;
  AddedTokenMatcher raw_matcher_;         // tokens with normalized = false (all, without a normalizer)
  AddedTokenMatcher normalized_matcher_;  // tokens with normalized = true, on normalized text
  int32_t vocab_size_ = 0;
};

}  // namespace qserve
