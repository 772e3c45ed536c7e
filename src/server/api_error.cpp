#include "server/api_error.h"

#include <nlohmann/json.hpp>

namespace qserve::server {

std::string ApiError::type() const {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "service_unavailable";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

std::string ApiError::body() const {
  nlohmann::ordered_json j;
  j["error"]["message"] = message;
  j["error"]["type"] = type();
  j["error"]["param"] = param.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(param);
  j["error"]["code"] = code.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(code);
  // error_handler_t::replace: a message holding invalid UTF-8 never makes dump() throw.
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

ApiError ApiError::for_status(int status) {
  switch (status) {
    case 400: return {400, "malformed HTTP request", "bad_request", ""};
    case 401: return {401, "missing or invalid API key", "invalid_api_key", ""};
    case 404: return {404, "not found", "not_found", ""};
    case 405: return {405, "method not allowed", "method_not_allowed", ""};
    case 413: return {413, "request body too large", "request_too_large", ""};
    case 414: return {414, "request URI too long", "uri_too_long", ""};
    case 429: return {429, "too many requests", "rate_limit_exceeded", ""};
    case 503: return {503, "server is shutting down", "unavailable", ""};
    default: return {status, "error", "", ""};
  }
}

ApiError ApiError::from_error(const Error& e) {
  switch (e.code()) {
    case ErrorCode::kInvalidArgument: return {400, e.what(), "invalid_value", ""};
    case ErrorCode::kOutOfRange: return {400, e.what(), "context_length_exceeded", ""};
    case ErrorCode::kNotFound: return {404, e.what(), "not_found", ""};
    case ErrorCode::kResourceExhausted: return {429, e.what(), "queue_full", ""};
    case ErrorCode::kUnsupported: return {503, e.what(), "unavailable", ""};
    default: return {500, e.what(), "internal_error", ""};
  }
}

}  // namespace qserve::server
