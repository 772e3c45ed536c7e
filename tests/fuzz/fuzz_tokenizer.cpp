// libFuzzer target: the tokenizers on text a client sends (the server encodes
// whatever a request holds) and on ids a client sends (prompts as token ids).
// Input: byte 0 picks one of the committed tokenizer.json files
// (tests/data/tokenizer: byte-level BPE with the Llama-3, GPT-2 and Qwen2
// pre-tokenizers, Metaspace, byte fallback, digit splitting), the rest is the
// text. Properties:
//  - encode never fails, every id is in the vocabulary;
//  - decode is valid UTF-8 and never fails on ids in the vocabulary; the
//    byte-level tokenizers without a normalizer give the text back
//    (invalid UTF-8 replaced as decode does);
//  - incremental decoding (one id at a time, then flush) yields decode(), and
//    valid UTF-8 always (with byte fallback, only text that was valid UTF-8
//    streams to exactly decode(): tokenizer.h, IncrementalDecoder);
//  - the input read as little-endian int32 ids decodes or throws qserve::Error.
//   scripts/fuzz.sh [seconds]
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "fuzz_util.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/tokenizer.h"

#ifndef QSERVE_TEST_DATA_DIR
#error "QSERVE_TEST_DATA_DIR must name tests/data"
#endif

namespace {
struct Entry {
  const char* dir;
  bool round_trips;    // byte-level, no normalizer: decode(encode(t)) == utf8_make_valid(t)
  bool byte_fallback;  // <0xXX> tokens: a run that is not UTF-8 decodes to one U+FFFD per token
};
constexpr Entry kTokenizers[] = {
    {"bpe_llama3", true, false},     {"bpe_gpt2", true, false},        {"bpe_qwen2", false, false},
    {"bpe_metaspace", false, true},  {"bpe_bytefallback", false, true}, {"bpe_digits", true, false},
};
constexpr size_t kCount = sizeof(kTokenizers) / sizeof(kTokenizers[0]);

const std::vector<std::unique_ptr<qserve::Tokenizer>>& tokenizers() {
  static const auto all = [] {
    std::vector<std::unique_ptr<qserve::Tokenizer>> v;
    for (const auto& e : kTokenizers)
      v.push_back(qserve::BpeTokenizer::from_file(std::string(QSERVE_TEST_DATA_DIR) + "/tokenizer/" + e.dir +
                                                  "/tokenizer.json"));
    return v;
  }();
  return all;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t which = data[0] % kCount;
  const qserve::Tokenizer& tok = *tokenizers()[which];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  for (bool add_special : {false, true}) {
    const std::vector<int32_t> ids = tok.encode(text, add_special);
    for (int32_t id : ids) FUZZ_CHECK(id >= 0 && id < tok.vocab_size());
    const std::string decoded = tok.decode(ids);
    FUZZ_CHECK(qserve::fuzz::valid_utf8(decoded));
    // (bpe_llama3's added tokens <tool> / </tool> strip the whitespace beside them, as in Hugging Face)
    const bool strips = text.find("<tool>") != text.npos || text.find("</tool>") != text.npos;
    if (!add_special && kTokenizers[which].round_trips && !strips)
      FUZZ_CHECK(decoded == qserve::utf8_make_valid(text));
    qserve::IncrementalDecoder inc(tok);
    std::string streamed;
    for (int32_t id : ids) streamed += inc.step(id);
    streamed += inc.flush();
    FUZZ_CHECK(qserve::fuzz::valid_utf8(streamed));
    if (!kTokenizers[which].byte_fallback || qserve::fuzz::valid_utf8(text)) FUZZ_CHECK(streamed == decoded);
  }

  std::vector<int32_t> raw((size - 1) / 4);
  if (!raw.empty()) std::memcpy(raw.data(), data + 1, raw.size() * 4);
  try {
    FUZZ_CHECK(qserve::fuzz::valid_utf8(tok.decode(raw)));
    FUZZ_CHECK(qserve::fuzz::valid_utf8(tok.decode(raw, /*skip_special=*/true)));
  } catch (const qserve::Error&) {
  }
  return 0;
}
