#include "cli/calibration_text.h"

#include <fstream>
#include <sstream>

#include "core/error.h"

namespace qserve::cli {

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorCode::kNotFound, "cannot read text file {}", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail(ErrorCode::kIo, "error reading {}", path);
  return ss.str();
}

std::vector<std::vector<int32_t>> calibration_windows(const std::vector<int32_t>& tokens, int64_t n, int64_t len) {
  const int64_t total = static_cast<int64_t>(tokens.size());
  if (n <= 0 || len <= 0) fail(ErrorCode::kInvalidArgument, "calibration needs samples > 0 and seqlen > 0");
  if (total < len) fail(ErrorCode::kInvalidArgument, "calibration text has {} tokens, fewer than --calib-seqlen {}", total, len);
  std::vector<std::vector<int32_t>> out;
  const int64_t span = total - len;  // last possible start
  for (int64_t i = 0; i < n; ++i) {
    const int64_t start = n == 1 ? 0 : span * i / (n - 1);
    out.emplace_back(tokens.begin() + start, tokens.begin() + start + len);
  }
  return out;
}

int64_t peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // "VmHWM:  12345 kB"
  return 0;
}

}  // namespace qserve::cli
