// Helpers shared by the libFuzzer targets (scripts/fuzz.sh).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tokenizer/unicode.h"

namespace qserve::fuzz {

// A property the target promises; a violation is a crash libFuzzer records
// (the condition and its line on stderr first).
#define FUZZ_CHECK(cond)                                                          \
  do {                                                                            \
    if (!(cond)) {                                                                \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                               \
    }                                                                             \
  } while (0)

// The fuzz input as a file that the readers can open by path (they memory-map
// it): an anonymous memory file, "/proc/self/fd/N", closed with this object.
class MemFile {
 public:
  MemFile(const uint8_t* data, size_t size) : fd_(memfd_create("fuzz_input", 0)) {
    FUZZ_CHECK(fd_ >= 0);
    size_t done = 0;
    while (done < size) {
      const ssize_t n = write(fd_, data + done, size - done);
      FUZZ_CHECK(n > 0);
      done += static_cast<size_t>(n);
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  int fd_;
  std::string path_;
};

// True when `s` is well-formed UTF-8 (strict: no overlongs, surrogates or
// values past U+10FFFF; the tokenizer's own validator, as tests/unit/test_detok.cpp uses).
inline bool valid_utf8(std::string_view s) { return unicode::utf8_valid_prefix(s) == s.size(); }

}  // namespace qserve::fuzz
