#include "backend/cuda/cuda_check.h"

#include <cstdio>
#include <cstdlib>

namespace qserve::cuda::detail {

void cuda_failure(const char* file, int line, const char* expr, const char* library, int code, const char* message) {
  std::fprintf(stderr, "%s:%d: %s failed: %s error %d (%s)\n", file, line, expr, library, code,
               message ? message : "?");
  std::fflush(stderr);
  std::abort();
}

}  // namespace qserve::cuda::detail
