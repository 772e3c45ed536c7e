// The OpenAI-compatible API over an Engine: routes, authentication, chat
// templates, streaming, metrics, draining. HTTP-library free: it consumes
// HttpRequest and produces HttpResponse (http_server.h), so it is tested
// without sockets too. Handlers never throw.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "qserve/engine.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/request_parser.h"
#include "tokenizer/chat_template.h"

namespace qserve::server {

struct ServerConfig {
  std::string served_model_name;  // empty: the engine's model name
  std::string api_key;            // empty: no authentication
  ParserLimits limits;
  int keepalive_ms = 1000;        // idle interval after which a waiting connection is probed
};

class OpenAIServer {
 public:
  OpenAIServer(Engine& engine, ServerConfig config);

  // Registers every route on `http`.
  void register_routes(HttpServer& http);
  // Dispatches one request (what the routes call).
  HttpResponse handle(const HttpRequest& request);

  // After this, generation requests get 503 and /health reports draining.
  void begin_drain() { draining_ = true; }
  // Generation requests whose responses are not complete yet.
  int in_flight() const { return in_flight_.load(); }
  const std::string& model_name() const { return model_name_; }
  bool has_chat_template() const { return chat_template_.has_value(); }

 private:
  HttpResponse route(const HttpRequest& request);
  HttpResponse completions(const HttpRequest& request);
  HttpResponse chat_completions(const HttpRequest& request);
  HttpResponse models();
  HttpResponse metrics();
  HttpResponse error_response(const ApiError& e);
  std::optional<ApiError> check_auth(const HttpRequest& request) const;
  std::optional<ApiError> check_model(const std::optional<std::string>& model) const;
  std::string token_text(int32_t id) const;

  Engine& engine_;
  ServerConfig config_;
  std::string model_name_;
  std::optional<ChatTemplate> chat_template_;
  std::string chat_template_error_;
  ServerMetrics metrics_;
  std::atomic<bool> draining_{false};
  std::atomic<int> in_flight_{0};
  std::atomic<uint64_t> next_id_{1};
  friend class GenerationResponder;
};

// Compares in time that depends only on the lengths, not on where they differ.
bool constant_time_equals(const std::string& a, const std::string& b);

}  // namespace qserve::server
