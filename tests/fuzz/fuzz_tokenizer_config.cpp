// libFuzzer target: the JSON side files a model directory ships beside its
// tokenizer (tokenizer_config.json, generation_config.json, config.json: the
// input is written as all three, so that one document reaches every field
// they are read for: BOS / EOS tokens and ids, add_bos_token, the chat
// template). load_tokenizer and ChatTemplate::source_from_model_dir (what the
// engine reads, parsed and rendered here as the server does) end in a result
// or qserve::Error, never a crash or another exception, and what they accept
// stays inside the vocabulary: BOS none or an id of it, EOS ids of it, encode's
// ids of it (a BOS id from a config past the vocabulary would reach the
// embedding lookup).
//   scripts/fuzz.sh [seconds]      (seeds: corpus/tokenizer_config)
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "fuzz_util.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

#ifndef QSERVE_TEST_DATA_DIR
#error "QSERVE_TEST_DATA_DIR must name tests/data"
#endif

namespace fs = std::filesystem;

namespace {
// A model directory for this process (removed at exit): the committed Llama-3
// style tokenizer.json and the three side files, rewritten per input.
const fs::path& model_dir() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("qserve_fuzz_tokcfg_" + std::to_string(getpid()));
    fs::create_directories(d);
    fs::copy_file(std::string(QSERVE_TEST_DATA_DIR) + "/tokenizer/bpe_llama3/tokenizer.json", d / "tokenizer.json",
                  fs::copy_options::overwrite_existing);
    std::atexit([] { std::error_code ec; fs::remove_all(model_dir(), ec); });
    return d;
  }();
  return dir;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fs::path& dir = model_dir();
  for (const char* name : {"tokenizer_config.json", "generation_config.json", "config.json"}) {
    std::ofstream(dir / name, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), size);
  }
  try {
    auto tok = qserve::load_tokenizer(dir.string());
    FUZZ_CHECK(tok->bos_id() == -1 || (tok->bos_id() >= 0 && tok->bos_id() < tok->vocab_size()));
    for (int32_t id : tok->eos_ids()) FUZZ_CHECK(id >= 0 && id < tok->vocab_size());
    for (int32_t id : tok->encode("Hello <|eot_id|> world", /*add_special=*/true))
      FUZZ_CHECK(id >= 0 && id < tok->vocab_size());
  } catch (const qserve::Error&) {
  }
  try {
    if (auto source = qserve::ChatTemplate::source_from_model_dir(dir)) {
      nlohmann::ordered_json messages = nlohmann::ordered_json::array();
      messages.push_back({{"role", "user"}, {"content", "Hi"}});
      qserve::ChatTemplate(*source).render(messages, true);
    }
  } catch (const qserve::Error&) {
  }
  return 0;
}
