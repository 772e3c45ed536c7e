// What the engine needs of a tokenizer, as one small interface: encode a
// prompt, stream-decode one request's output, the special ids. The real one
// wraps qserve::Tokenizer (src/tokenizer/tokenizer.h); tests plug in a fake.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace qserve {

// Incremental detokenization of one output: never emits half a UTF-8 character.
class TextStream {
 public:
  virtual ~TextStream() = default;
  // Appends one generated id; returns the text it completes (possibly empty).
  virtual std::string step(int32_t id) = 0;
  // The held-back tail at the end of the output, made valid UTF-8.
  virtual std::string flush() = 0;
};

class TextCodec {
 public:
  virtual ~TextCodec() = default;
  virtual std::vector<int32_t> encode(const std::string& text, bool add_special) const = 0;
  virtual std::string decode(std::span<const int32_t> ids, bool skip_special) const = 0;
  // A decoder for the tokens generated after `prompt_ids` (which give context only).
  virtual std::unique_ptr<TextStream> start_stream(std::span<const int32_t> prompt_ids, bool skip_special) const = 0;

  virtual int32_t vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;               // -1: none
  virtual std::vector<int32_t> eos_ids() const = 0;
  virtual std::string token_text(int32_t id) const = 0;
  virtual std::string chat_template() const { return {}; }
};

}  // namespace qserve
