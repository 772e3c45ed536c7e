#include "server/openai_server.h"

#include <ctime>

#include <fmt/format.h>

#include "core/logging.h"
#include "server/openai_format.h"
#include "server/chat_page.inc"  // kChatPage: src/server/static/chat.html, embedded at build time

namespace qserve::server {

bool constant_time_equals(const std::string& a, const std::string& b) {
  size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

OpenAIServer::OpenAIServer(Engine& engine, ServerConfig config) : engine_(engine), config_(std::move(config)) {
  const ModelInfo& info = engine_.model_info();
  model_name_ = config_.served_model_name.empty() ? info.name : config_.served_model_name;
  if (!info.chat_template.empty()) {
    std::map<std::string, std::string> tokens;
    if (!info.bos_token.empty()) tokens["bos_token"] = info.bos_token;
    if (!info.eos_token.empty()) tokens["eos_token"] = info.eos_token;
    try {
      chat_template_.emplace(info.chat_template, tokens);
    } catch (const Error& e) {
      chat_template_error_ = e.what();
      spdlog::warn("the model's chat template does not parse ({}); /v1/chat/completions is disabled", e.what());
    }
  }
}

std::string OpenAIServer::token_text(int32_t id) const {
  try {
    return engine_.detokenize({id}, false);
  } catch (const Error&) {  // an engine without a tokenizer: logprobs carry no token text
    return {};
  }
}

HttpResponse OpenAIServer::error_response(const ApiError& e) {
  HttpResponse r;
  r.status = e.status;
  r.body = e.body();
  if (e.status == 401) r.headers["WWW-Authenticate"] = "Bearer";
  return r;
}

std::optional<ApiError> OpenAIServer::check_auth(const HttpRequest& request) const {
  if (config_.api_key.empty()) return std::nullopt;
  std::string given;
  if (const std::string* h = request.header("authorization")) {
    static const std::string kBearer = "Bearer ";
    if (h->compare(0, kBearer.size(), kBearer) == 0) given = h->substr(kBearer.size());
  } else if (const std::string* k = request.header("x-api-key")) {
    given = *k;
  }
  if (given.empty()) return ApiError{401, "missing API key: send 'Authorization: Bearer <key>'", "invalid_api_key", ""};
  if (!constant_time_equals(given, config_.api_key)) return ApiError{401, "invalid API key", "invalid_api_key", ""};
  return std::nullopt;
}

std::optional<ApiError> OpenAIServer::check_model(const std::optional<std::string>& model) const {
  if (!model || model->empty() || *model == model_name_) return std::nullopt;
  return ApiError{404, fmt::format("The model '{}' does not exist; this server serves '{}'", *model, model_name_),
                  "model_not_found", "model"};
}

HttpResponse OpenAIServer::models() {
  Json m;
  m["id"] = model_name_;
  m["object"] = "model";
  m["created"] = static_cast<int64_t>(std::time(nullptr));
  m["owned_by"] = "qserve";
  m["max_model_len"] = engine_.model_info().max_model_len;
  Json j;
  j["object"] = "list";
  j["data"] = Json::array({m});
  HttpResponse r;
  r.body = dump(j);
  return r;
}

HttpResponse OpenAIServer::metrics() {
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = metrics_.render(engine_.stats(), model_name_);
  return r;
}

HttpResponse OpenAIServer::route(const HttpRequest& req) {
  const bool api = req.path.rfind("/v1/", 0) == 0;
  if (api)
    if (auto e = check_auth(req)) return error_response(*e);
  if (req.method == "GET") {
    if (req.path == "/health") {
      HttpResponse r;
      r.status = draining_ ? 503 : 200;
      r.body = draining_ ? R"({"status":"draining"})" : R"({"status":"ok"})";
      return r;
    }
    if (req.path == "/metrics") return metrics();
    if (req.path == "/v1/models") return models();
    if (req.path == "/" || req.path == "/index.html") {
      HttpResponse r;
      r.content_type = "text/html; charset=utf-8";
      r.body.assign(reinterpret_cast<const char*>(kChatPage), kChatPage_size);
      return r;
    }
  } else if (req.method == "POST") {
    if (req.path == "/v1/completions") return completions(req);
    if (req.path == "/v1/chat/completions") return chat_completions(req);
  }
  return error_response(ApiError{404, fmt::format("no route for {} {}", req.method, req.path), "not_found", ""});
}

HttpResponse OpenAIServer::handle(const HttpRequest& req) {
  HttpResponse r;
  try {
    r = route(req);
  } catch (const Error& e) {
    r = error_response(ApiError::from_error(e));
  } catch (const std::exception& e) {
    spdlog::error("{} {}: {}", req.method, req.path, e.what());
    r = error_response(ApiError{500, "internal server error", "internal_error", ""});
  }
  if (req.path != "/metrics" && req.path != "/health") metrics_.record_http(req.path.rfind("/v1/", 0) == 0 ? req.path : "other", r.status);
  return r;
}

void OpenAIServer::register_routes(HttpServer& http) {
  auto h = [this](const HttpRequest& r) { return handle(r); };
  for (const char* path : {"/", "/index.html", "/health", "/metrics", "/v1/models"}) http.route("GET", path, h);
  for (const char* path : {"/v1/completions", "/v1/chat/completions"}) http.route("POST", path, h);
  http.set_not_found(h);
}

}  // namespace qserve::server
