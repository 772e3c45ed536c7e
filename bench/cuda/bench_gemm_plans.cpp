// The W4A8 planner's choices, without a GPU: for each layer shape, m and
// kind, the plan the engine would run on a device of the given compute
// capability and SM count (default: the H200, 9.0 and 132 SMs), and whether
// it came from the measured table (gemm_w4a8_measured.h) or the rule. For
// planner work: compare its lines with bench_gemm's `sweep` lines, which
// time every candidate on the GPU.
//
//   bench_gemm_plans [--sms N] [--cc MAJOR.MINOR] [--m 1,16,...] [--shape N,K ...]
//
// Without --shape: bench_gemm's nine layers (Llama-3-8B, Llama-2-7B, the 70B
// down layer). Output: one line per (layer, m, kind) with the plan as
// "TILE/SPLITS" (sk: stream-K), the CTAs, the output tile grid and the source.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "backend/cuda/gemm_w4a8.h"
#include "backend/cuda/gemm_w4a8_measured.h"
#include "bench_args.h"

namespace {

using namespace qserve;

struct Shape {
  std::string name;
  int64_t n, k;
};

int run(int argc, char** argv) {
  cuda::DeviceInfo dev;
  dev.cc_major = 9, dev.cc_minor = 0, dev.sm_count = 132;
  std::vector<int64_t> ms = {1, 16, 32, 64, 128, 160, 200, 256, 320, 384, 448, 512, 768, 1024, 1536, 2048, 3072,
                             4096, 8192};
  std::vector<Shape> shapes;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--sms") {
      dev.sm_count = std::stoi(next());
    } else if (a == "--cc") {
      const std::string v = next();
      const size_t dot = v.find('.');
      if (dot == std::string::npos) throw std::invalid_argument("--cc wants MAJOR.MINOR, e.g. 9.0");
      dev.cc_major = std::stoi(v.substr(0, dot)), dev.cc_minor = std::stoi(v.substr(dot + 1));
    } else if (a == "--m") {
      ms = bench::parse_list(next());
    } else if (a == "--shape") {
      const auto nk = bench::parse_list(next());
      if (nk.size() != 2 || nk[1] % 64 != 0) throw std::invalid_argument("--shape wants N,K with K a multiple of 64");
      shapes.push_back({"custom/" + std::to_string(nk[0]) + "x" + std::to_string(nk[1]), nk[0], nk[1]});
    } else {
      throw std::invalid_argument("unknown argument " + a);
    }
  }
  if (dev.sm_count <= 0) throw std::invalid_argument("--sms must be positive");
  if (shapes.empty())
    shapes = {{"llama3-8b/qkv", 6144, 4096},     {"llama3-8b/o", 4096, 4096},    {"llama3-8b/gate_up", 28672, 4096},
              {"llama3-8b/down", 4096, 14336},   {"llama2-7b/qkv", 12288, 4096}, {"llama2-7b/o", 4096, 4096},
              {"llama2-7b/gate_up", 22016, 4096}, {"llama2-7b/down", 4096, 11008}, {"70b/down", 8192, 28672}};
  std::printf("# compute capability %d.%d, %d SMs\n", dev.cc_major, dev.cc_minor, dev.sm_count);
  for (const Shape& s : shapes)
    for (const int64_t m : ms)
      for (const bool g128 : {false, true}) {
        const cuda::W4A8Plan p = cuda::plan_w4a8(dev, m, s.n, s.k, -1, 0, g128);
        const bool table = cuda::w4a8_wgmma_supported(dev) && cuda::measured_w4a8_plan(m, s.n, s.k, g128);
        // (the mma.sync plans leave ctas unset: one CTA per unit)
        const int64_t ctas = p.ctas > 0 ? p.ctas : int64_t{p.grid_n} * p.grid_m * p.splits;
        std::printf("%-18s n=%-6lld k=%-6lld m=%-5lld %-4s %-22s ctas %5lld grid %4d x %3d  %s\n", s.name.c_str(),
                    static_cast<long long>(s.n), static_cast<long long>(s.k), static_cast<long long>(m),
                    g128 ? "g128" : "pc", cuda::w4a8_plan_name(p.tile, p.splits).c_str(), static_cast<long long>(ctas),
                    p.grid_n, p.grid_m,
                    table ? "table" : "rule");
      }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gemm_plans: %s\n", e.what());
    return 2;
  }
}
