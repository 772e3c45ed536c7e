// Byte counts on the command line: "80000000000", "80e9", "80GB" / "80G"
// (decimal), "80GiB" (binary); also K, M, T and KiB, MiB, TiB.
#pragma once

#include <cstdint>
#include <string>

namespace qserve::cli {

// Error(kInvalidArgument) naming `flag` for a malformed or negative size.
int64_t parse_byte_size(const std::string& text, const std::string& flag);

}  // namespace qserve::cli
