// libFuzzer target: the OpenAI request parser never crashes, never throws, and
// what it accepts is within the limits it promises.
//   scripts/fuzz.sh [seconds]      (clang++ -fsanitize=fuzzer,address,undefined)
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/request_parser.h"

namespace {
void check(bool ok) {
  if (!ok) std::abort();
}

void check_common(const qserve::server::CommonRequest& r, const qserve::server::ParserLimits& l) {
  check(r.n >= 1 && r.n <= l.max_n);
  check(r.params.temperature >= 0.0f && r.params.temperature <= 2.0f);
  check(r.params.top_p > 0.0f && r.params.top_p <= 1.0f);
  check(r.params.max_tokens == -1 || r.params.max_tokens >= 1);
  check(static_cast<int>(r.params.stop.size()) <= l.max_stop);
  for (const auto& s : r.params.stop) check(!s.empty() && s.size() <= l.max_stop_length);
  check(r.params.logprobs <= l.max_logprobs);
  check(!r.include_usage || r.stream);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  qserve::server::ParserLimits limits;
  auto c = qserve::server::parse_completion_request(body, limits);
  if (c.ok()) {
    check_common(*c.value, limits);
    check(!c.value->prompts.empty());
    for (const auto& p : c.value->prompts) check(!p.text.empty() || !p.token_ids.empty());
  } else {
    check(c.error.status == 400 && !c.error.body().empty());
  }
  auto chat = qserve::server::parse_chat_request(body, limits);
  if (chat.ok()) {
    check_common(*chat.value, limits);
    check(chat.value->messages.is_array() && !chat.value->messages.empty());
    for (const auto& m : chat.value->messages) check(m.is_object() && m.contains("role"));
  } else {
    check(chat.error.status == 400 && !chat.error.body().empty());
  }
  return 0;
}
