// Two tiers of errors (docs/architecture.md):
//  - qserve::Error: bad user input or bad data (a corrupt checkpoint, an
//    invalid flag, a prompt longer than the context). Thrown, caught at the
//    edge (CLI: one line on stderr + exit code; HTTP: an OpenAI error body).
//  - QS_CHECK: a broken internal invariant. Aborts with file:line.
#pragma once

#include <fmt/format.h>

#include <sstream>
#include <stdexcept>
#include <string>

namespace qserve {

enum class ErrorCode {
  kInvalidArgument,    // a flag, a request field or an API argument is wrong
  kNotFound,           // a file, a tensor, a model that does not exist
  kCorruptData,        // a checkpoint / tokenizer file that fails validation
  kUnsupported,        // valid input that we do not implement (architecture, dtype)
  kOutOfRange,         // e.g. prompt + max_tokens beyond the context
  kResourceExhausted,  // out of KV pages, queue full
  kIo,                 // read / write / mmap failures
  kInternal,           // should not happen; reported, not aborted
};

const char* error_code_name(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, std::string message) : std::runtime_error(std::move(message)), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

// Throws qserve::Error with a fmt-formatted message.
template <typename... Args>
[[noreturn]] void fail(ErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(code, fmt::format(format, std::forward<Args>(args)...));
}

namespace detail {
// Collects `QS_CHECK(cond) << "msg"` output, then aborts in the destructor.
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  [[noreturn]] ~CheckFailure();
  template <typename T>
  CheckFailure& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }

 private:
  std::ostringstream stream_;
};
struct Voidify {
  void operator&(CheckFailure&) {}
  void operator&(CheckFailure&&) {}  // QS_CHECK(cond) with no message
};
}  // namespace detail

}  // namespace qserve

// Aborts with file:line when `cond` is false: for invariants, never for user input.
#define QS_CHECK(cond)                  \
  (cond) ? (void)0                      \
         : ::qserve::detail::Voidify() & \
               ::qserve::detail::CheckFailure(__FILE__, __LINE__, #cond)
