// The JSON bodies of OpenAI responses and stream chunks (completions and chat
// completions), built from the engine's outputs.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

#include "qserve/request.h"

namespace qserve::server {

using Json = nlohmann::ordered_json;
// A token's text, for logprobs ("Ġthe" is shown decoded, " the").
using TokenText = std::function<std::string(int32_t)>;

// What one choice produced, accumulated over its outputs.
struct ChoiceResult {
  std::string text;
  std::vector<GeneratedTokenLogprobs> logprobs;
  FinishReason finish_reason = FinishReason::kNone;
  std::string error;
  Usage usage;
  RequestTimings timings;
};

// "stop", "length", "abort" (cancelled), "error".
const char* openai_finish_reason(FinishReason r);

// Common envelope: id, object, created, model.
Json envelope(const std::string& id, const char* object, int64_t created, const std::string& model);
Json usage_json(int prompt_tokens, int completion_tokens);

// logprobs of the completions API for `entries` whose text starts at `text_offset`.
Json completion_logprobs(const std::vector<GeneratedTokenLogprobs>& entries, const TokenText& token_text,
                         int text_offset);
// logprobs of the chat API ({"content": [...]}).
Json chat_logprobs(const std::vector<GeneratedTokenLogprobs>& entries, const TokenText& token_text);

// "data: {json}\n\n" (invalid UTF-8 replaced, never throws).
std::string sse_event(const Json& j);
std::string dump(const Json& j);

}  // namespace qserve::server
