#include "server/openai_format.h"

namespace qserve::server {

const char* openai_finish_reason(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "abort";
    case FinishReason::kError: return "error";
    default: return nullptr;
  }
}

Json envelope(const std::string& id, const char* object, int64_t created, const std::string& model) {
  Json j;
  j["id"] = id;
  j["object"] = object;
  j["created"] = created;
  j["model"] = model;
  return j;
}

Json usage_json(int prompt_tokens, int completion_tokens) {
  Json u;
  u["prompt_tokens"] = prompt_tokens;
  u["completion_tokens"] = completion_tokens;
  u["total_tokens"] = prompt_tokens + completion_tokens;
  return u;
}

Json completion_logprobs(const std::vector<GeneratedTokenLogprobs>& entries, const TokenText& token_text,
                         int text_offset) {
  Json j;
  Json tokens = Json::array(), token_logprobs = Json::array(), top = Json::array(), offsets = Json::array();
  for (const auto& e : entries) {
    std::string t = token_text(e.token_id);
    tokens.push_back(t);
    token_logprobs.push_back(e.logprob);
    Json alts = Json::object();
    for (const auto& a : e.top) alts[token_text(a.token_id)] = a.logprob;
    top.push_back(alts);
    offsets.push_back(text_offset);
    text_offset += static_cast<int>(t.size());
  }
  j["tokens"] = tokens;
  j["token_logprobs"] = token_logprobs;
  j["top_logprobs"] = top;
  j["text_offset"] = offsets;
  return j;
}

namespace {
Json bytes_of(const std::string& s) {
  Json b = Json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}
}  // namespace

Json chat_logprobs(const std::vector<GeneratedTokenLogprobs>& entries, const TokenText& token_text) {
  Json content = Json::array();
  for (const auto& e : entries) {
    std::string t = token_text(e.token_id);
    Json item;
    item["token"] = t;
    item["logprob"] = e.logprob;
    item["bytes"] = bytes_of(t);
    Json alts = Json::array();
    for (const auto& a : e.top) {
      std::string at = token_text(a.token_id);
      alts.push_back(Json{{"token", at}, {"logprob", a.logprob}, {"bytes", bytes_of(at)}});
    }
    item["top_logprobs"] = alts;
    content.push_back(item);
  }
  Json j;
  j["content"] = content;
  return j;
}

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

std::string sse_event(const Json& j) { return "data: " + dump(j) + "\n\n"; }

}  // namespace qserve::server
