#pragma once

namespace qserve {
// The project version, from CMake's project().
inline constexpr const char* kVersion = QSERVE_VERSION;
}  // namespace qserve
