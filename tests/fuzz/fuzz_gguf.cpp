// libFuzzer target: a GGUF file, from the bytes up to a model (a corrupt or
// hostile file must end in qserve::Error, never a crash, a hang or another
// exception): the reader's validation, the checkpoint view (every tensor
// dequantized, the synthesized config.json), the model configuration, the
// tokenizer exported from the metadata (built, then one encode / decode) and
// the chat template it carries (parsed and rendered).
//   scripts/fuzz.sh [seconds]      (seeds: tests/data/gguf/*.gguf)
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>

#include "core/error.h"
#include "fuzz_util.h"
#include "model/gguf.h"
#include "model/gguf_checkpoint.h"
#include "model/gguf_tokenizer.h"
#include "model/model_config.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  qserve::fuzz::MemFile file(data, size);
  std::shared_ptr<qserve::GgufFile> gguf;
  try {
    gguf = qserve::GgufFile::open(file.path());
  } catch (const qserve::Error&) {
    return 0;
  }
  for (const auto& t : gguf->tensors()) FUZZ_CHECK(t.data != nullptr && t.offset + t.nbytes >= t.offset);
  try {
    auto ck = qserve::open_gguf_checkpoint(file.path());
    for (const auto& [name, tensor] : ck->tensors()) FUZZ_CHECK(!name.empty() && tensor.numel() >= 0);
    qserve::ModelConfig::from_json(ck->config());
  } catch (const qserve::Error&) {
  }
  nlohmann::json exported;
  try {
    exported = qserve::gguf_tokenizer_json(*gguf);
  } catch (const qserve::Error&) {
  }
  if (!exported.is_null()) {
    // what the exporter accepts, the tokenizer loads (`qserve convert` writes it as tokenizer.json)
    std::unique_ptr<qserve::BpeTokenizer> built;
    try {
      built = std::make_unique<qserve::BpeTokenizer>(exported);
    } catch (const qserve::Error& e) {
      std::fprintf(stderr, "exported tokenizer.json rejected: %s\n", e.what());
      FUZZ_CHECK(false);
    }
    const qserve::BpeTokenizer& tok = *built;
    const auto ids = tok.encode("Hello, world! 123 <|im_start|> \xC3\xA9t\xC3\xA9");
    for (int32_t id : ids) FUZZ_CHECK(id >= 0 && id < tok.vocab_size());
    FUZZ_CHECK(qserve::fuzz::valid_utf8(tok.decode(ids)));
  }
  try {
    if (auto tmpl = qserve::ChatTemplate::from_tokenizer_config(qserve::gguf_tokenizer_config(*gguf))) {
      nlohmann::ordered_json messages = nlohmann::ordered_json::array();
      messages.push_back({{"role", "user"}, {"content", "Hi"}});
      tmpl->render(messages, true);
    }
    qserve::gguf_generation_config(*gguf);
  } catch (const qserve::Error&) {
  }
  return 0;
}
