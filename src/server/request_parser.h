// Validation of OpenAI request bodies, kept apart from HTTP and from the engine
// so that it can be fuzzed (tests/fuzz/fuzz_request_parser.cpp). Every body,
// however malformed, gives either a request the engine accepts the shape of,
// or an ApiError (400 with the offending field); nothing here throws.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qserve/request.h"
#include "server/api_error.h"

namespace qserve::server {

struct ParserLimits {
  int max_n = 16;              // choices per request
  int max_stop = 16;           // stop strings
  size_t max_stop_length = 256;
  int max_logprobs = 20;
  int max_json_depth = 64;     // nesting of the body (deeper: 400, before any recursive parse)
};

// Fields common to both endpoints.
struct CommonRequest {
  std::optional<std::string> model;
  GenerationParams params;  // max_tokens < 0: up to the context
  int n = 1;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
};

struct PromptInput {
  std::string text;              // when token_ids is empty
  std::vector<int32_t> token_ids;
};

struct CompletionRequest : CommonRequest {
  std::vector<PromptInput> prompts;  // a batch: choices are prompt-major
};

struct ChatRequest : CommonRequest {
  nlohmann::ordered_json messages;        // validated; content parts joined into strings
  nlohmann::ordered_json template_extra;  // tools, chat_template_kwargs
  bool add_generation_prompt = true;
  bool logprobs = false;                  // chat: logprobs bool + top_logprobs
};

template <typename T>
struct Parsed {
  std::optional<T> value;
  ApiError error;  // when !value
  bool ok() const { return value.has_value(); }
};

Parsed<CompletionRequest> parse_completion_request(std::string_view body, const ParserLimits& limits = {});
Parsed<ChatRequest> parse_chat_request(std::string_view body, const ParserLimits& limits = {});

// Depth of [ { nesting outside strings; a cheap guard before nlohmann's recursive parser.
int json_nesting_depth(std::string_view body);

}  // namespace qserve::server
