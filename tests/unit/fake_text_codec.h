// TEST DOUBLE: a byte tokenizer. Ids 0..255 are bytes; 256 is BOS, 257 is EOS.
#pragma once

#include <string>
#include <vector>

#include "engine/text_codec.h"

namespace qserve::fakes {

class FakeTextCodec : public TextCodec {
 public:
  static constexpr int32_t kBos = 256;
  static constexpr int32_t kEos = 257;

  std::vector<int32_t> encode(const std::string& text, bool add_special) const override {
    std::vector<int32_t> ids;
    if (add_special) ids.push_back(kBos);
    for (unsigned char c : text) ids.push_back(c);
    return ids;
  }
  std::string decode(std::span<const int32_t> ids, bool skip_special) const override {
    std::string s;
    for (int32_t id : ids) {
      if (id < 256) s += static_cast<char>(id);
      else if (!skip_special) s += token_text(id);
    }
    return s;
  }
  std::unique_ptr<TextStream> start_stream(std::span<const int32_t>, bool skip_special) const override {
    struct Stream : TextStream {
      const FakeTextCodec* codec;
      bool skip;
      std::string step(int32_t id) override { return codec->decode(std::vector<int32_t>{id}, skip); }
      std::string flush() override { return {}; }
    };
    auto s = std::make_unique<Stream>();
    s->codec = this;
    s->skip = skip_special;
    return s;
  }
  int32_t vocab_size() const override { return 258; }
  int32_t bos_id() const override { return kBos; }
  std::vector<int32_t> eos_ids() const override { return {kEos}; }
  std::string token_text(int32_t id) const override {
    if (id == kBos) return "<s>";
    if (id == kEos) return "</s>";
    return std::string(1, static_cast<char>(id));
  }
};

}  // namespace qserve::fakes
