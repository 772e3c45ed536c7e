#include "core/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>

namespace qserve {

void init_logging() {
  static bool done = false;
  if (done) return;
  done = true;
  auto logger = spdlog::stderr_color_mt("qserve");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
  spdlog::set_level(spdlog::level::warn);
  if (const char* env = std::getenv("QSERVE_LOG_LEVEL")) spdlog::set_level(spdlog::level::from_str(env));
}

}  // namespace qserve
