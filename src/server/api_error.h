// OpenAI-style errors at the HTTP edge: {"error": {"message", "type", "param",
// "code"}} with the matching status. qserve::Error codes map onto statuses here
// and nowhere else.
#pragma once

#include <string>

#include "core/error.h"

namespace qserve::server {

struct ApiError {
  int status = 400;
  std::string message;
  std::string code;   // "invalid_value", "model_not_found", "context_length_exceeded", ...
  std::string param;  // the offending request field ("" if none)

  // "invalid_request_error", "authentication_error", "rate_limit_error", ... from status.
  std::string type() const;
  std::string body() const;

  static ApiError bad_request(std::string message, std::string param = {}, std::string code = "invalid_value") {
    return ApiError{400, std::move(message), std::move(code), std::move(param)};
  }
  // A generic error for an HTTP status with no body yet (404, 413, ...).
  static ApiError for_status(int status);
  // 400 (kInvalidArgument, kOutOfRange), 404 (kNotFound), 429 (kResourceExhausted),
  // 503 (kUnsupported: shutting down), 500 otherwise.
  static ApiError from_error(const Error& e);
};

}  // namespace qserve::server
