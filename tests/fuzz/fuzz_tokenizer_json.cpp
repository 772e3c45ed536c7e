// libFuzzer target: a model's tokenizer.json (read from the model directory on
// every load): any bytes end in a working tokenizer or qserve::Error, never a
// crash, a hang or another exception; a tokenizer it builds encodes into its
// vocabulary (whatever the text: encoding never fails) and decodes to valid UTF-8.
//   scripts/fuzz.sh [seconds]      (seeds: tests/data/tokenizer/*/tokenizer.json)
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/error.h"
#include "fuzz_util.h"
#include "tokenizer/bpe_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  qserve::fuzz::MemFile file(data, size);
  std::unique_ptr<qserve::BpeTokenizer> tok;
  try {
    tok = qserve::BpeTokenizer::from_file(file.path());
  } catch (const qserve::Error&) {
    return 0;
  }
  // a tokenizer that loaded encodes any text (no exception of any kind)
  for (bool add_special : {false, true}) {
    const auto ids = tok->encode("Hello, world!  12345 \xC3\xA9t\xC3\xA9 \xF0\x9F\x98\x80 <|endoftext|>\n\tx", add_special);
    for (int32_t id : ids) FUZZ_CHECK(id >= 0 && id < tok->vocab_size());
    FUZZ_CHECK(qserve::fuzz::valid_utf8(tok->decode(ids)));
  }
  return 0;
}
