// GB/s of the CPU linear layers' matmul (matmul_f32_fast) with the weights
// cold: a benchmark, not a test.
//
//   build/bench/qserve_bench_matmul [--tokens T,...] [--dtype f32|f16|bf16|q4_0|q4_1|q5_0|q5_1|q8_0|q4_k|q6_k,...]
//                                   [--mb MB] [--threads N] [--shapes NxK,...] [--reps R]
//
// QSERVE_CPU_MATMUL=avx2 (or scalar) times a narrower instruction set than the CPU's best.
//
// Shapes default to the layers of the default model (SmolLM2-135M: q|k|v 960 x
// 576, o 576 x 576, gate|up 3072 x 576, down 576 x 1536, lm_head 49152 x 576).
// Each timed call reads its own copy of the weights from a pool of at least
// --mb MB (default 1024, past a large L3), so every call streams its weights
// from memory as decode does; --mb 0 keeps one copy (the weights hot in cache).
// Per shape, token count and dtype: the median of R passes over the pool,
// microseconds per call and weight GB/s (weight bytes / time).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "../bench_args.h"
#include "backend/cpu/matmul.h"
#include "core/dtype.h"
#include "core/half.h"
#include "core/thread_pool.h"

using namespace qserve;

namespace {

[[noreturn]] void usage_error(const std::string& why) {
  fmt::print(stderr, "qserve_bench_matmul: {}\n", why);
  std::exit(2);
}

int64_t parse_int(const std::string& s, const char* what) {
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (end == s.c_str() || *end != '\0' || v < 0) usage_error(fmt::format("bad {} '{}'", what, s));
  return v;
}

DType parse_dtype(const std::string& s) {
  std::string upper = s;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const auto d = dtype_from_name(upper);
  if (d && (*d == DType::kF32 || *d == DType::kF16 || *d == DType::kBF16 || dtype_is_blocked(*d))) return *d;
  usage_error(fmt::format("bad dtype '{}' (f32, f16, bf16, or a GGUF block format: q4_0, q4_1, q5_0, q5_1, q8_0, q4_k, q6_k)", s));
}

struct Shape {
  int64_t n, k;
  std::string name;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<Shape> shapes = {{960, 576, "qkv"}, {576, 576, "o"}, {3072, 576, "gate_up"}, {576, 1536, "down"}, {49152, 576, "lm_head"}};
  std::vector<int64_t> tokens = {1};
  std::vector<DType> dtypes = {DType::kF16};
  int64_t pool_mb = 1024, reps = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--tokens") {
      tokens.clear();
      for (const auto& t : bench::split_list(next())) tokens.push_back(std::max<int64_t>(1, parse_int(t, "token count")));
    } else if (a == "--dtype") {
      dtypes.clear();
      for (const auto& d : bench::split_list(next())) dtypes.push_back(parse_dtype(d));
    } else if (a == "--shapes") {
      shapes.clear();
      for (const auto& s : bench::split_list(next())) {
        const size_t x = s.find('x');
        if (x == std::string::npos) usage_error(fmt::format("bad shape '{}' (NxK)", s));
        shapes.push_back({parse_int(s.substr(0, x), "N"), parse_int(s.substr(x + 1), "K"), s});
      }
    } else if (a == "--mb") pool_mb = parse_int(next(), "--mb");
    else if (a == "--reps") reps = std::max<int64_t>(1, parse_int(next(), "--reps"));
    else if (a == "--threads") setenv("QSERVE_NUM_THREADS", next().c_str(), 1);
    else if (a == "--help" || a == "-h") {
      fmt::print("usage: {} [--tokens T,...] [--dtype f32|f16|bf16|q4_0|q4_1|q5_0|q5_1|q8_0|q4_k|q6_k,...] [--mb MB] [--threads N]\n"
                 "       [--shapes NxK,...] [--reps R]   (QSERVE_CPU_MATMUL=avx2|scalar: a narrower path)\n", argv[0]);
      return 0;
    } else usage_error(fmt::format("unknown argument '{}'", a));
  }
  fmt::print("matmul_f32_fast ({}), {} threads, weight pool >= {} MB, median of {} passes\n", matmul_f32_fast_isa(),
             ThreadPool::global().num_threads(), pool_mb, reps);
  fmt::print("{:>10} {:>7} {:>5} {:>4} {:>8} {:>10} {:>8}\n", "shape", "N", "K", "T", "dtype", "us/call", "GB/s");
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  for (const Shape& s : shapes) {
    for (DType dt : dtypes) {
      if (dtype_is_blocked(dt) && s.k % dtype_block_elems(dt) != 0) {
        fmt::print("{:>10} {:>7} {:>5}: K is not whole {} blocks, skipped\n", s.name, s.n, s.k, dtype_name(dt));
        continue;
      }
      const int64_t bytes = static_cast<int64_t>(dtype_row_bytes(dt, s.n * s.k));
      const int64_t copies = std::max<int64_t>(1, (pool_mb << 20) / std::max<int64_t>(1, bytes));
      std::vector<uint8_t> pool(static_cast<size_t>(copies * bytes));
      if (dtype_is_blocked(dt)) {
        // random codes; every 16-bit word a small fp16 value, so that the block's
        // scale fields (wherever its layout puts them) are finite
        for (size_t i = 0; i + 1 < pool.size(); i += 2) {
          const uint16_t h = float_to_half(dist(rng));
          std::memcpy(pool.data() + i, &h, 2);
        }
      }
      for (int64_t i = 0; !dtype_is_blocked(dt) && i < copies * s.n * s.k; ++i) {
        const float v = dist(rng);
        if (dt == DType::kF32) reinterpret_cast<float*>(pool.data())[i] = v;
        else if (dt == DType::kF16) reinterpret_cast<uint16_t*>(pool.data())[i] = float_to_half(v);
        else reinterpret_cast<uint16_t*>(pool.data())[i] = float_to_bf16(v);
      }
      for (int64_t T : tokens) {
        std::vector<float> x(T * s.k), y(T * s.n);
        for (float& v : x) v = dist(rng);
        std::vector<double> pass_us;
        for (int64_t r = 0; r < reps; ++r) {
          const auto t0 = std::chrono::steady_clock::now();
          for (int64_t c = 0; c < copies; ++c) matmul_f32_fast(x.data(), pool.data() + c * bytes, dt, nullptr, y.data(), T, s.k, s.n);
          pass_us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / copies);
        }
        std::sort(pass_us.begin(), pass_us.end());
        const double us = pass_us[pass_us.size() / 2];
        fmt::print("{:>10} {:>7} {:>5} {:>4} {:>8} {:>10.1f} {:>8.2f}\n", s.name, s.n, s.k, T, dtype_name(dt), us, bytes / us * 1e-3);
      }
    }
  }
  return 0;
}
