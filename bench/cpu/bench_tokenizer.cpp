// Tokenizer throughput on one thread: encode (cold word cache, then warm),
// decode, and streaming decode, over a text file split into lines.
//   build/bench/qserve_bench_tokenizer TOKENIZER(.json|.model|model dir) TEXT_FILE [--reps N]
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

using namespace qserve;

namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s TOKENIZER TEXT_FILE [--reps N]\n", argv[0]);
    return 2;
  }
  int reps = 3;
  if (argc >= 5 && std::string(argv[3]) == "--reps") reps = std::max(1, std::atoi(argv[4]));
  try {
    auto tok = load_tokenizer(argv[1]);
    std::ifstream f(argv[2], std::ios::binary);
    if (!f) fail(ErrorCode::kNotFound, "cannot open {}", argv[2]);
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string text = ss.str();
    std::vector<std::string> lines;
    for (size_t b = 0, e; b < text.size(); b = e + 1) {
      e = text.find('\n', b);
      if (e == std::string::npos) e = text.size();
      lines.push_back(text.substr(b, e - b + (e < text.size() ? 1 : 0)));
    }
    std::vector<std::vector<int32_t>> ids(lines.size());
    for (int rep = 0; rep < reps; ++rep) {
      size_t n = 0;
      const double t0 = now_s();
      for (size_t i = 0; i < lines.size(); ++i) {
        ids[i] = tok->encode(lines[i], false);
        n += ids[i].size();
      }
      const double dt = now_s() - t0;
      std::printf("encode %s: %zu tokens, %.3f s, %.0f tokens/s, %.1f MB/s\n", rep == 0 ? "(cold cache)" : "(warm)     ",
                  n, dt, n / dt, text.size() / dt / 1e6);
    }
    size_t n = 0, bytes = 0;
    double t0 = now_s();
    for (const auto& v : ids) {
      bytes += tok->decode(v).size();
      n += v.size();
    }
    double dt = now_s() - t0;
    std::printf("decode:                %zu tokens, %.3f s, %.0f tokens/s (%zu bytes)\n", n, dt, n / dt, bytes);
    t0 = now_s();
    for (const auto& v : ids) {
      IncrementalDecoder dec(*tok);
      for (int32_t id : v) bytes += dec.step(id).size();
      bytes += dec.flush().size();
    }
    dt = now_s() - t0;
    std::printf("streaming decode:      %zu tokens, %.3f s, %.0f tokens/s\n", n, dt, n / dt);
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_tokenizer: %s\n", e.what());
    return 1;
  }
  return 0;
}
