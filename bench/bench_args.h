// Command-line pieces the benchmarks share, CPU (bench/cpu/) and GPU
// (bench/cuda/): host code only.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace qserve::bench {

// The value of the flag argv[i] (argv[i + 1], i advanced past it), or
// std::invalid_argument naming the flag when it is the last argument.
inline std::string next_arg(int argc, char** argv, int& i) {
  if (i + 1 >= argc) throw std::invalid_argument(std::string("missing value for ") + argv[i]);
  return argv[++i];
}

// "a,b,c" -> {"a", "b", "c"}.
inline std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) v.push_back(item);
  return v;
}

// "1,16,1024" -> {1, 16, 1024}; a token that is not a number throws
// std::invalid_argument (std::stoll).
template <typename T = int64_t>
std::vector<T> parse_list(const std::string& s) {
  std::vector<T> v;
  for (const std::string& item : split_list(s)) v.push_back(static_cast<T>(std::stoll(item)));
  return v;
}

}  // namespace qserve::bench
