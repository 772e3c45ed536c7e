#include "core/error.h"

#include <cstdio>
#include <cstdlib>

namespace qserve {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kCorruptData: return "corrupt_data";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kOutOfRange: return "out_of_range";
    case ErrorCode::kResourceExhausted: return "resource_exhausted";
    case ErrorCode::kIo: return "io_error";
    case ErrorCode::kInternal: return "internal";
  }
  return "unknown";
}

namespace detail {

CheckFailure::CheckFailure(const char* file, int line, const char* condition) {
  stream_ << file << ":" << line << ": check failed: " << condition << " ";
}

CheckFailure::~CheckFailure() {
  std::fprintf(stderr, "%s\n", stream_.str().c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace detail
}  // namespace qserve
