// libFuzzer target: a chat template's source (models ship their own: a
// hostile or broken template must end in qserve::Error, never a crash, a hang,
// unbounded memory or another exception), parsed and rendered on a short
// conversation with and without the generation prompt.
//   scripts/fuzz.sh [seconds]      (seeds: tests/data/chat_templates/*.jinja)
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "fuzz_util.h"
#include "tokenizer/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const nlohmann::ordered_json messages = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "You are brief."},
    {"role": "user", "content": "Hi <b>there</b>"},
    {"role": "assistant", "content": "Hello.", "tool_calls": [
      {"type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]},
    {"role": "tool", "content": "42"},
    {"role": "user", "content": [{"type": "text", "text": "and?"}]}
  ])");
  static const nlohmann::ordered_json extra = nlohmann::ordered_json::parse(R"({
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "enable_thinking": false
  })");
  try {
    qserve::ChatTemplate tmpl(std::string(reinterpret_cast<const char*>(data), size),
                              {{"bos_token", "<s>"}, {"eos_token", "</s>"}});
    for (bool gen : {false, true}) {
      try {
        tmpl.render(messages, gen, extra);
      } catch (const qserve::Error&) {
      }
    }
  } catch (const qserve::Error&) {
  }
  return 0;
}
