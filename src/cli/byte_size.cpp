#include "cli/byte_size.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "core/error.h"

namespace qserve::cli {

int64_t parse_byte_size(const std::string& text, const std::string& flag) {
  const char* begin = text.c_str();
  char* end = nullptr;
  const double value = std::strtod(begin, &end);
  std::string suffix(end);
  for (char& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double unit = 0;
  if (suffix.empty() || suffix == "B") unit = 1;
  else if (suffix == "K" || suffix == "KB") unit = 1e3;
  else if (suffix == "M" || suffix == "MB") unit = 1e6;
  else if (suffix == "G" || suffix == "GB") unit = 1e9;
  else if (suffix == "T" || suffix == "TB") unit = 1e12;
  else if (suffix == "KIB") unit = 1024.0;
  else if (suffix == "MIB") unit = 1024.0 * 1024;
  else if (suffix == "GIB") unit = 1024.0 * 1024 * 1024;
  else if (suffix == "TIB") unit = 1024.0 * 1024 * 1024 * 1024;
  if (end == begin || unit == 0 || !std::isfinite(value) || value < 0 || value * unit > 9.2e18)
    fail(ErrorCode::kInvalidArgument, "{} {}: expected a byte count such as 80e9, 48GB or 80GiB", flag, text);
  return static_cast<int64_t>(std::llround(value * unit));
}

}  // namespace qserve::cli
