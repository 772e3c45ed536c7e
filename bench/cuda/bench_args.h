// Command-line pieces the GPU benchmarks share (host code only: also
// included by the .cpp benchmarks).
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace qserve::bench {

// "1,16,1024" -> {1, 16, 1024}; a token that is not a number throws
// std::invalid_argument (std::stoll).
template <typename T = int64_t>
std::vector<T> parse_list(const std::string& s) {
  std::vector<T> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) v.push_back(static_cast<T>(std::stoll(item)));
  return v;
}

}  // namespace qserve::bench
