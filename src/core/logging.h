// Logging goes through spdlog to stderr; stdout is reserved for generated
// text and machine-readable output (--json).
#pragma once

#include <spdlog/spdlog.h>

namespace qserve {

// Level from QSERVE_LOG_LEVEL (trace, debug, info, warn, error, off); default warn.
void init_logging();

}  // namespace qserve
