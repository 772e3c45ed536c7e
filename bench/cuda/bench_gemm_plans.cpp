// The W4A8 planner's choices, without a GPU: for each layer shape, m and
// kind, the plan the engine would run on a device of the given compute
// capability and SM count (default: the H200, 9.0 and 132 SMs), and whether
// it came from the measured table (gemm_w4a8_measured.h) or the rule. For
// planner work: compare its lines with bench_gemm's `sweep` lines, which
// time every candidate on the GPU.
//
//   bench_gemm_plans [--sms N] [--cc MAJOR.MINOR] [--m 1,16,...] [--shape N,K ...]
//
// Without --shape: bench_gemm's nine layers (gemm_layers.h). Output: one line per (layer, m, kind) with the plan as
// "TILE/SPLITS" (sk: stream-K), the CTAs, the output tile grid and the source.
#include <cstdint>
#include <cstdio>
#include <deque>
#include <exception>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/cuda/gemm_w4a8.h"
#include "backend/cuda/gemm_w4a8_measured.h"
#include "../bench_args.h"
#include "gemm_layers.h"

namespace {

using namespace qserve;

int run(int argc, char** argv) {
  cuda::DeviceInfo dev;
  dev.cc_major = 9, dev.cc_minor = 0, dev.sm_count = 132;
  std::vector<int64_t> ms = {1, 16, 32, 64, 128, 160, 200, 256, 320, 384, 448, 512, 768, 1024, 1536, 2048, 3072,
                             4096, 8192};
  std::vector<bench::GemmLayer> shapes;
  std::deque<std::string> custom_names;  // stable storage for the custom shapes' names
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return bench::next_arg(argc, argv, i); };
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
      if (nk.size() != 2 || nk[0] <= 0 || nk[1] <= 0 || nk[1] % 64 != 0)
        throw std::invalid_argument("--shape wants N,K with K a multiple of 64");
      custom_names.push_back(std::to_string(nk[0]) + "x" + std::to_string(nk[1]));
      shapes.push_back({"custom", custom_names.back().c_str(), nk[0], nk[1]});
    } else {
      throw std::invalid_argument("unknown argument " + a);
    }
  }
  if (dev.sm_count <= 0) throw std::invalid_argument("--sms must be positive");
  if (shapes.empty()) shapes.assign(std::begin(bench::kGemmLayers), std::end(bench::kGemmLayers));
  std::printf("# compute capability %d.%d, %d SMs\n", dev.cc_major, dev.cc_minor, dev.sm_count);
  for (const bench::GemmLayer& s : shapes)
    for (const int64_t m : ms)
      for (const bool g128 : {false, true}) {
        const cuda::W4A8Plan p = cuda::plan_w4a8(dev, m, s.n, s.k, -1, 0, g128);
        // the table's entry, unless the planner set it aside (padding, or the rule's 160-224-token tiles)
        const auto entry = cuda::w4a8_wgmma_supported(dev) ? cuda::measured_w4a8_plan(m, s.n, s.k, g128) : std::nullopt;
        const bool table = entry && entry->tile == p.tile && entry->splits == p.splits;
        const int64_t ctas = p.launched_ctas();
        const std::string name = std::string(s.model) + "/" + s.layer;
        std::printf("%-18s n=%-6lld k=%-6lld m=%-5lld %-4s %-22s ctas %5lld grid %4d x %3d  %s\n", name.c_str(),
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
