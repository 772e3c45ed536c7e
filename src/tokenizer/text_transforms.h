// The string-to-string stages of a Hugging Face tokenizer.json around the BPE
// model: normalizers (before pre-tokenization), decoders (ids -> text) and
// post-processors (special tokens added around the ids).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace qserve {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string normalize(std::string text) const = 0;
};
// nullptr for JSON null. Supported: Sequence, Prepend, Replace, Strip,
// Lowercase (ASCII), NFC.
std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& config);

// Works on the list of token strings as Hugging Face's decode_chain does, but
// on raw bytes: nothing here replaces invalid UTF-8 (Tokenizer::decode does).
class Decoder {
 public:
  virtual ~Decoder() = default;
  // raw_tail: keep an incomplete UTF-8 sequence at the very end as bytes
  // (streaming) instead of replacing it as Hugging Face does.
  virtual void decode_chain(std::vector<std::string>& tokens, bool raw_tail) const = 0;
};
// nullptr for JSON null. Supported: Sequence, ByteLevel, Metaspace, Replace,
// ByteFallback, Fuse, Strip.
std::unique_ptr<Decoder> make_decoder(const nlohmann::json& config);

// The ids to put before / after a single sequence when add_special is set.
struct PostProcessor {
  std::vector<int32_t> prefix, suffix;
};
PostProcessor make_post_processor(const nlohmann::json& config);

}  // namespace qserve
