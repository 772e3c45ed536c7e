// libFuzzer target: the OpenAI request parser never crashes, never throws, and
// what it accepts is within the limits it promises.
//   scripts/fuzz.sh [seconds]      (clang++ -fsanitize=fuzzer,address,undefined)
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_util.h"
#include "server/request_parser.h"

namespace {
void check_common(const qserve::server::CommonRequest& r, const qserve::server::ParserLimits& l) {
  FUZZ_CHECK(r.n >= 1 && r.n <= l.max_n);
  FUZZ_CHECK(r.params.temperature >= 0.0f && r.params.temperature <= 2.0f);
  FUZZ_CHECK(r.params.top_p > 0.0f && r.params.top_p <= 1.0f);
  FUZZ_CHECK(r.params.max_tokens == -1 || r.params.max_tokens >= 1);
  FUZZ_CHECK(static_cast<int>(r.params.stop.size()) <= l.max_stop);
  for (const auto& s : r.params.stop) FUZZ_CHECK(!s.empty() && s.size() <= l.max_stop_length);
  FUZZ_CHECK(r.params.logprobs <= l.max_logprobs);
  FUZZ_CHECK(!r.include_usage || r.stream);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  qserve::server::ParserLimits limits;
  auto c = qserve::server::parse_completion_request(body, limits);
  if (c.ok()) {
    check_common(*c.value, limits);
    FUZZ_CHECK(!c.value->prompts.empty());
    for (const auto& p : c.value->prompts) FUZZ_CHECK(!p.text.empty() || !p.token_ids.empty());
  } else {
    FUZZ_CHECK(c.error.status == 400 && !c.error.body().empty());
  }
  auto chat = qserve::server::parse_chat_request(body, limits);
  if (chat.ok()) {
    check_common(*chat.value, limits);
    FUZZ_CHECK(chat.value->messages.is_array() && !chat.value->messages.empty());
    for (const auto& m : chat.value->messages) FUZZ_CHECK(m.is_object() && m.contains("role"));
  } else {
    FUZZ_CHECK(chat.error.status == 400 && !chat.error.body().empty());
  }
  return 0;
}
