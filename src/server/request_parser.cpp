#include "server/request_parser.h"

#include <cmath>
#include <limits>

#include "fmt/format.h"

namespace qserve::server {
namespace {

using Json = nlohmann::ordered_json;

// Thrown and caught inside this file only.
struct Reject {
  ApiError error;
};

[[noreturn]] void reject(const std::string& param, const std::string& message, const std::string& code = "invalid_value") {
  throw Reject{ApiError::bad_request(message, param, code)};
}

const Json* field(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<int64_t> get_int(const Json& j, const char* key, int64_t lo, int64_t hi) {
  const Json* v = field(j, key);
  if (!v) return std::nullopt;
  int64_t x;
  if (v->is_number_integer() && !v->is_number_unsigned()) {
    x = v->get<int64_t>();
  } else if (v->is_number_unsigned()) {
    uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) reject(key, fmt::format("'{}' is out of range", key));
    x = static_cast<int64_t>(u);
  } else {
    reject(key, fmt::format("'{}' must be an integer", key), "invalid_type");
  }
  if (x < lo || x > hi) reject(key, fmt::format("'{}' must be between {} and {}, got {}", key, lo, hi, x));
  return x;
}

std::optional<double> get_number(const Json& j, const char* key, double lo, double hi, bool lo_open = false) {
  const Json* v = field(j, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) reject(key, fmt::format("'{}' must be a number", key), "invalid_type");
  double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi || (lo_open && x == lo))
    reject(key, fmt::format("'{}' must be in {}{}, {}], got {}", key, lo_open ? "(" : "[", lo, hi, x));
  return x;
}

std::optional<bool> get_bool(const Json& j, const char* key) {
  const Json* v = field(j, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) reject(key, fmt::format("'{}' must be a boolean", key), "invalid_type");
  return v->get<bool>();
}

std::optional<std::string> get_string(const Json& j, const char* key) {
  const Json* v = field(j, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) reject(key, fmt::format("'{}' must be a string", key), "invalid_type");
  return v->get<std::string>();
}

int32_t token_id(const Json& v, const char* key) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > std::numeric_limits<int32_t>::max())
    reject(key, fmt::format("'{}' must hold non-negative integer token ids", key), "invalid_type");
  return static_cast<int32_t>(v.get<int64_t>());
}

Json parse_body(std::string_view body, const ParserLimits& limits) {
  if (json_nesting_depth(body) > limits.max_json_depth)
    reject("", fmt::format("request body nests deeper than {} levels", limits.max_json_depth));
  Json j = Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) reject("", "request body is not valid JSON", "invalid_json");
  if (!j.is_object()) reject("", "request body must be a JSON object", "invalid_json");
  return j;
}

void parse_common(const Json& j, const ParserLimits& limits, CommonRequest& r, bool chat) {
  r.model = get_string(j, "model");
  auto& p = r.params;
  // max_tokens; chat also takes its newer name max_completion_tokens.
  std::optional<int64_t> max_tokens = get_int(j, "max_tokens", 1, std::numeric_limits<int32_t>::max());
  if (chat)
    if (auto m = get_int(j, "max_completion_tokens", 1, std::numeric_limits<int32_t>::max())) max_tokens = m;
  p.max_tokens = max_tokens ? static_cast<int>(*max_tokens) : (chat ? -1 : 16);  // OpenAI's completions default: 16
  if (auto t = get_number(j, "temperature", 0.0, 2.0)) p.temperature = static_cast<float>(*t);
  if (auto t = get_number(j, "top_p", 0.0, 1.0, true)) p.top_p = static_cast<float>(*t);
  if (auto k = get_int(j, "top_k", -1, 1 << 20)) p.top_k = static_cast<int>(*k);
  if (auto m = get_number(j, "min_p", 0.0, 1.0)) p.min_p = static_cast<float>(*m);
  if (auto rp = get_number(j, "repetition_penalty", 0.0, 10.0, true)) p.repetition_penalty = static_cast<float>(*rp);
  for (const char* pen : {"presence_penalty", "frequency_penalty"})
    if (auto x = get_number(j, pen, -2.0, 2.0); x && *x != 0.0)
      reject(pen, fmt::format("'{}' is not supported (use repetition_penalty)", pen), "unsupported_parameter");
  if (auto s = get_int(j, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()))
    p.seed = static_cast<uint64_t>(*s);
  r.n = static_cast<int>(get_int(j, "n", 1, limits.max_n).value_or(1));
  if (auto b = get_int(j, "best_of", 1, limits.max_n); b && *b != r.n)
    reject("best_of", "'best_of' different from 'n' is not supported", "unsupported_parameter");
  if (const Json* stop = field(j, "stop")) {
    if (stop->is_string()) {
      p.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array()) {
      if (static_cast<int>(stop->size()) > limits.max_stop)
        reject("stop", fmt::format("at most {} stop sequences", limits.max_stop));
      for (const auto& s : *stop) {
        if (!s.is_string()) reject("stop", "'stop' must be a string or a list of strings", "invalid_type");
        p.stop.push_back(s.get<std::string>());
      }
    } else {
      reject("stop", "'stop' must be a string or a list of strings", "invalid_type");
    }
    for (const auto& s : p.stop) {
      if (s.empty()) reject("stop", "stop sequences must not be empty");
      if (s.size() > limits.max_stop_length)
        reject("stop", fmt::format("stop sequences are limited to {} bytes", limits.max_stop_length));
    }
  }
  if (const Json* ids = field(j, "stop_token_ids")) {
    if (!ids->is_array()) reject("stop_token_ids", "'stop_token_ids' must be a list of integers", "invalid_type");
    for (const auto& id : *ids) p.stop_token_ids.push_back(token_id(id, "stop_token_ids"));
  }
  r.stream = get_bool(j, "stream").value_or(false);
  if (const Json* so = field(j, "stream_options")) {
    if (!so->is_object()) reject("stream_options", "'stream_options' must be an object", "invalid_type");
    if (!r.stream) reject("stream_options", "'stream_options' is only allowed with stream=true");
    r.include_usage = get_bool(*so, "include_usage").value_or(false);
  }
  p.ignore_eos = get_bool(j, "ignore_eos").value_or(false);
  p.min_tokens = static_cast<int>(get_int(j, "min_tokens", 0, std::numeric_limits<int32_t>::max()).value_or(0));
  if (p.max_tokens >= 0 && p.min_tokens > p.max_tokens) reject("min_tokens", "'min_tokens' must not exceed 'max_tokens'");
  p.skip_special_tokens = get_bool(j, "skip_special_tokens").value_or(true);
  p.include_stop_str_in_output = get_bool(j, "include_stop_str_in_output").value_or(false);
  if (const Json* lb = field(j, "logit_bias"); lb && !(lb->is_object() && lb->empty()))
    reject("logit_bias", "'logit_bias' is not supported", "unsupported_parameter");
  if (const Json* rf = field(j, "response_format")) {
    if (!rf->is_object() || rf->value("type", "") != "text")
      reject("response_format", "only response_format {\"type\": \"text\"} is supported", "unsupported_parameter");
  }
  get_string(j, "user");  // accepted, unused
}

std::string message_content(const Json& m, size_t index) {
  const std::string param = fmt::format("messages[{}].content", index);
  const Json* c = field(m, "content");
  if (!c) return {};
  if (c->is_string()) return c->get<std::string>();
  if (!c->is_array()) reject(param, "content must be a string or a list of content parts", "invalid_type");
  std::string text;
  for (const auto& part : *c) {
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      reject(param, "each content part must be an object with a 'type'", "invalid_type");
    if (part["type"] != "text") reject(param, "only 'text' content parts are supported", "unsupported_parameter");
    if (!part.contains("text") || !part["text"].is_string())
      reject(param, "a text content part needs a string 'text'", "invalid_type");
    if (!text.empty()) text += "\n";
    text += part["text"].get<std::string>();
  }
  return text;
}

}  // namespace

int json_nesting_depth(std::string_view body) {
  int depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char c : body) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') max_depth = std::max(max_depth, ++depth);
    else if ((c == ']' || c == '}') && depth > 0) --depth;
  }
  return max_depth;
}

Parsed<CompletionRequest> parse_completion_request(std::string_view body, const ParserLimits& limits) {
  Parsed<CompletionRequest> out;
  try {
    Json j = parse_body(body, limits);
    CompletionRequest r;
    parse_common(j, limits, r, false);
    if (auto lp = get_int(j, "logprobs", 0, limits.max_logprobs)) r.params.logprobs = static_cast<int>(*lp);
    if (get_bool(j, "echo").value_or(false)) reject("echo", "'echo' is not supported", "unsupported_parameter");
    if (auto s = get_string(j, "suffix"); s && !s->empty())
      reject("suffix", "'suffix' is not supported", "unsupported_parameter");
    const Json* prompt = field(j, "prompt");
    if (!prompt) reject("prompt", "'prompt' is required", "missing_required_parameter");
    auto ids_of = [](const Json& arr) {
      PromptInput in;
      for (const auto& id : arr) in.token_ids.push_back(token_id(id, "prompt"));
      if (in.token_ids.empty()) reject("prompt", "a token-id prompt must not be empty");
      return in;
    };
    if (prompt->is_string()) {
      r.prompts.push_back({prompt->get<std::string>(), {}});
    } else if (prompt->is_array() && !prompt->empty()) {
      if ((*prompt)[0].is_number()) {
        r.prompts.push_back(ids_of(*prompt));
      } else {
        for (const auto& p : *prompt) {
          if (p.is_string()) r.prompts.push_back({p.get<std::string>(), {}});
          else if (p.is_array()) r.prompts.push_back(ids_of(p));
          else reject("prompt", "'prompt' must be a string, a list of strings or a list of token ids", "invalid_type");
        }
      }
    } else {
      reject("prompt", "'prompt' must be a non-empty string, list of strings or list of token ids", "invalid_type");
    }
    if (static_cast<int>(r.prompts.size()) * r.n > limits.max_n * 4)
      reject("prompt", fmt::format("at most {} choices per request", limits.max_n * 4));
    for (const auto& p : r.prompts)
      if (p.token_ids.empty() && p.text.empty()) reject("prompt", "'prompt' must not be empty");
    out.value = std::move(r);
  } catch (const Reject& e) {
    out.error = e.error;
  } catch (const std::exception& e) {  // a JSON type error missed above: still a 400, never a crash
    out.error = ApiError::bad_request(std::string("invalid request: ") + e.what());
  }
  return out;
}

Parsed<ChatRequest> parse_chat_request(std::string_view body, const ParserLimits& limits) {
  Parsed<ChatRequest> out;
  try {
    Json j = parse_body(body, limits);
    ChatRequest r;
    parse_common(j, limits, r, true);
    r.logprobs = get_bool(j, "logprobs").value_or(false);
    auto top = get_int(j, "top_logprobs", 0, limits.max_logprobs);
    if (top && !r.logprobs) reject("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    if (r.logprobs) r.params.logprobs = static_cast<int>(top.value_or(0));
    const Json* messages = field(j, "messages");
    if (!messages) reject("messages", "'messages' is required", "missing_required_parameter");
    if (!messages->is_array()) reject("messages", "'messages' must be a list", "invalid_type");
    if (messages->empty()) reject("messages", "'messages' must not be empty");
    r.messages = Json::array();
    for (size_t i = 0; i < messages->size(); ++i) {
      const Json& m = (*messages)[i];
      const std::string param = fmt::format("messages[{}]", i);
      if (!m.is_object()) reject(param, "each message must be an object", "invalid_type");
      const Json* role = field(m, "role");
      if (!role || !role->is_string()) reject(param + ".role", "each message needs a string 'role'", "invalid_type");
      std::string role_s = role->get<std::string>();
      if (role_s != "system" && role_s != "user" && role_s != "assistant" && role_s != "tool" && role_s != "developer")
        reject(param + ".role", fmt::format("unknown role '{}'", role_s));
      Json clean = Json::object();
      clean["role"] = role_s == "developer" ? "system" : role_s;
      if (!field(m, "content") && !(role_s == "assistant" && field(m, "tool_calls")))
        reject(param + ".content", "each message needs 'content'", "missing_required_parameter");
      if (field(m, "content")) clean["content"] = message_content(m, i);
      if (auto name = get_string(m, "name")) clean["name"] = *name;
      if (const Json* tc = field(m, "tool_calls")) {
        if (!tc->is_array()) reject(param + ".tool_calls", "'tool_calls' must be a list", "invalid_type");
        Json calls = *tc;
        for (auto& call : calls) {  // templates expect the arguments as an object; OpenAI sends a JSON string
          if (call.is_object() && call.contains("function") && call["function"].is_object() &&
              call["function"].contains("arguments") && call["function"]["arguments"].is_string()) {
            Json parsed = Json::parse(call["function"]["arguments"].get<std::string>(), nullptr, false);
            if (!parsed.is_discarded() && json_nesting_depth(call["function"]["arguments"].get<std::string>()) <=
                                              limits.max_json_depth)
              call["function"]["arguments"] = parsed;
          }
        }
        clean["tool_calls"] = calls;
      }
      if (auto id = get_string(m, "tool_call_id")) clean["tool_call_id"] = *id;
      r.messages.push_back(std::move(clean));
    }
    r.template_extra = Json::object();
    if (const Json* tools = field(j, "tools")) {
      if (!tools->is_array()) reject("tools", "'tools' must be a list", "invalid_type");
      if (!tools->empty()) r.template_extra["tools"] = *tools;
    }
    if (const Json* kw = field(j, "chat_template_kwargs")) {
      if (!kw->is_object()) reject("chat_template_kwargs", "'chat_template_kwargs' must be an object", "invalid_type");
      for (auto it = kw->begin(); it != kw->end(); ++it)
        if (it.key() != "messages" && it.key() != "add_generation_prompt") r.template_extra[it.key()] = it.value();
    }
    r.add_generation_prompt = get_bool(j, "add_generation_prompt").value_or(true);
    out.value = std::move(r);
  } catch (const Reject& e) {
    out.error = e.error;
  } catch (const std::exception& e) {
    out.error = ApiError::bad_request(std::string("invalid request: ") + e.what());
  }
  return out;
}

}  // namespace qserve::server
