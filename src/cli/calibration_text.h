// Calibration and evaluation text helpers shared by `qserve quantize` and
// `qserve eval`: reading a text file, cutting token windows, peak memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace qserve::cli {

// The whole file as bytes; Error(kNotFound / kIo) naming it.
std::string read_text_file(const std::string& path);

// n windows of len tokens at evenly spaced starts over `tokens` (overlapping
// only when the text is shorter than n * len); Error(kInvalidArgument) if the
// text has fewer than len tokens.
std::vector<std::vector<int32_t>> calibration_windows(const std::vector<int32_t>& tokens, int64_t n, int64_t len);

// Peak resident set size of this process (VmHWM), in bytes; 0 if unknown.
int64_t peak_rss_bytes();

}  // namespace qserve::cli
