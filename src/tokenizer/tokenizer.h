// The tokenizer interface every part of qserve uses (CLI, server, engine).
//
// Two implementations sit behind it:
//  - byte-level / byte-fallback BPE read from a Hugging Face `tokenizer.json`
//    (bpe_tokenizer.h), ids identical to the `tokenizers` library;
//  - SentencePiece read from `tokenizer.model` through libsentencepiece
//    (sentencepiece_tokenizer.h), with the Llama-2 conventions.
// load_tokenizer() picks one from a model directory and reads BOS / EOS from
// tokenizer_config.json, generation_config.json and config.json.
//
// Thread safety: every const method may be called from several threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace qserve {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Text -> ids. add_special: the special tokens the model's post-processor /
  // config asks for (e.g. BOS for Llama); special-token strings that appear in
  // `text` (e.g. "<|im_end|>") are always recognised as single tokens.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special = true) const = 0;

  // Ids -> valid UTF-8 text (byte sequences that do not form UTF-8 become
  // U+FFFD, as Hugging Face does). skip_special drops special tokens.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // Like decode(), but an incomplete UTF-8 sequence at the very end is kept as
  // raw bytes (it may be completed by the next token): what incremental
  // decoding works on.
  std::string decode_bytes(std::span<const int32_t> ids, bool skip_special = false) const {
    return decode_impl(ids, skip_special, /*raw_tail=*/true);
  }

  virtual int32_t vocab_size() const = 0;
  // The id of an exact token string ("<|im_end|>", "Ġthe"); nullopt if absent.
  virtual std::optional<int32_t> token_id(std::string_view token) const = 0;
  // The token's string as stored in the vocabulary ("Ġthe", "▁the", "<0x0A>").
  virtual std::string token_text(int32_t id) const = 0;
  virtual bool is_special(int32_t id) const = 0;

  // -1 when the model has none.
  int32_t bos_id() const { return bos_id_; }
  // Every id that ends generation (generation_config.json may list several).
  std::vector<int32_t> eos_ids() const { return eos_ids_; }

  // Set by load_tokenizer() from the model's config files.
  void set_bos_id(int32_t id) { bos_id_ = id; }
  void set_eos_ids(std::vector<int32_t> ids) { eos_ids_ = std::move(ids); }

 protected:
  friend class IncrementalDecoder;
  // Ids -> bytes. Invalid UTF-8 may remain (decode() replaces it as Hugging
  // Face's from_utf8_lossy does); raw_tail: see decode_bytes().
  virtual std::string decode_impl(std::span<const int32_t> ids, bool skip_special, bool raw_tail) const = 0;

  int32_t bos_id_ = -1;
  std::vector<int32_t> eos_ids_;
};

// Reads `tokenizer.json` (preferred) or `tokenizer.model` from model_dir, plus
// tokenizer_config.json / generation_config.json / config.json for BOS / EOS;
// model_dir may also name a tokenizer file or a GGUF file (the tokenizer in
// its metadata). gguf_chat_template, when given and model_dir is a GGUF file,
// is set to its tokenizer.chat_template ("" if none; left empty for anything
// else), so that a caller need not open the file again. Throws qserve::Error
// (kNotFound, kCorruptData, kUnsupported) on bad input.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& model_dir,
                                          std::optional<std::string>* gguf_chat_template = nullptr);

// Replaces every maximal invalid UTF-8 subsequence with U+FFFD (the rule of
// Rust's String::from_utf8_lossy, which Hugging Face tokenizers use).
std::string utf8_make_valid(std::string_view bytes);

// Streaming detokenization: feed ids one at a time, get the text they add.
// Never emits half a UTF-8 character (bytes of a character split across
// byte-fallback / byte-level tokens are held until complete), and decodes each
// new token in the context of the previous ones, so SentencePiece's leading
// space and similar context rules come out as in a full decode().
// The concatenation of everything returned equals decode(all ids) once
// flush() is called, with one exception: a run of byte-fallback tokens
// (<0xXX>) that is not valid UTF-8 decodes, as in Hugging Face, to one U+FFFD
// per token of the whole run, which a stream cannot know before the run ends,
// so it may have sent the run's valid characters already (each invalid byte
// still comes out as U+FFFD; the stream is valid UTF-8 either way).
class IncrementalDecoder {
 public:
  explicit IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special = false);
  // Optionally start after a prompt: the prompt's text is not emitted, but it
  // is the context for the first generated token.
  IncrementalDecoder(const Tokenizer& tokenizer, std::span<const int32_t> prompt_ids,
                     bool skip_special = false);

  // Appends one id; returns the newly completed text (possibly empty).
  std::string step(int32_t id);
  // The text still held back (an incomplete UTF-8 tail), made valid: call at
  // the end of a stream.
  std::string flush();

  const std::vector<int32_t>& ids() const { return ids_; }

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  std::vector<int32_t> ids_;
  size_t prefix_offset_ = 0;  // ids_[prefix_offset_, end) is decoded on each step
  size_t read_offset_ = 0;    // ids_[read_offset_, end) have not been fully emitted
  size_t emitted_ = 0;        // bytes of decode(ids_[prefix_offset_, end)) already returned
};

}  // namespace qserve
