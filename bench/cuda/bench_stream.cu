// Per-SM ingest ceiling: how fast N CTAs (one per SM) stream bytes from
// global memory, by method, with no other work. The decode GEMMs read their
// weights this way (docs/gemm-hopper.md, "What limits it"); this says how
// many SMs a layer needs to reach HBM's rate, and which copy shape gets there.
//
//   bench_stream [--json FILE] [--quick]
//
// Methods (each CTA reads its own contiguous `per_cta` bytes; the buffer is
// rotated over regions larger than 2x L2, so reads come from HBM):
//   bulk  one thread issues cp.async.bulk copies of `chunk` bytes into a ring
//         of `slots` shared-memory buffers, each completing on an mbarrier;
//         three warps wait for each slot and release it (the W4 GEMM's
//         producer / consumer shape, without the consumers' work);
//   bulk4 the same with the copies issued by four threads (one per warp of
//         warpgroup 0), each owning every fourth slot;
//   ldg   all 256 threads load 16 B per iteration (ld.global, 4 loads in
//         flight per thread), XOR-reduced so the loads stay.
// Reports GB/s per CTA and in total, for CTAs in {16, 32, 64, 96, 132}.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/kernels/gemm_hopper_primitives.cuh"
#include "bench_common.h"

namespace {

using namespace qserve;

// [slots] mbarriers full, [slots] empty, then the ring (1024-B aligned).
// kIssuers: threads issuing copies (lane 0 of warps 0..kIssuers-1), issuer i
// owning slots i, i + kIssuers, ...; consumers: warps kIssuers.. of the CTA.
template <int kIssuers>
__global__ void __launch_bounds__(256, 1)
    stream_bulk(const uint8_t* src, uint64_t per_cta, uint32_t chunk, int slots, uint32_t* sink) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ uint8_t smem_raw[];
  uint64_t* full = reinterpret_cast<uint64_t*>(smem_raw);
  uint64_t* empty = full + slots;
  uint8_t* ring = smem_raw + ((2 * slots * 8 + 1023) & ~1023);
  constexpr int kConsumerWarps = 8 - kIssuers;
  if (threadIdx.x == 0) {
    for (int s = 0; s < slots; ++s) {
      cuda::ptx::mbar_init(&full[s], 1);
      cuda::ptx::mbar_init(&empty[s], kConsumerWarps);
    }
    cuda::ptx::fence_mbar_init();
  }
  __syncthreads();
  const uint8_t* base = src + blockIdx.x * per_cta;
  const int n = static_cast<int>(per_cta / chunk);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (warp < kIssuers) {
    if (lane == 0)
      for (int i = warp; i < n; i += kIssuers) {
        const int s = i % slots;
        cuda::ptx::mbar_wait(&empty[s], ((i / slots) & 1) ^ 1);
        cuda::ptx::mbar_arrive_expect_tx(&full[s], chunk);
        cuda::ptx::tma_load_1d(ring + static_cast<size_t>(s) * chunk, base + static_cast<size_t>(i) * chunk, chunk,
                               &full[s]);
      }
  } else {
    uint32_t x = 0;
    for (int i = 0; i < n; ++i) {
      const int s = i % slots;
      cuda::ptx::mbar_wait(&full[s], (i / slots) & 1);
      x ^= reinterpret_cast<const uint32_t*>(ring + static_cast<size_t>(s) * chunk)[lane];
      __syncwarp();
      if (lane == 0) cuda::ptx::mbar_arrive(&empty[s]);
    }
    if (x == 0x9e3779b9u) sink[blockIdx.x] = x;  // keeps the reads
  }
#endif
}

__global__ void __launch_bounds__(256, 1) stream_ldg(const uint4* src, uint64_t per_cta, uint32_t* sink) {
  const uint4* base = src + blockIdx.x * (per_cta / 16);
  const uint64_t n = per_cta / 16;
  uint32_t x = 0;
  for (uint64_t i = threadIdx.x; i < n; i += 4 * 256) {
    uint4 v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = i + j * 256 < n ? __ldcs(base + i + j * 256) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int j = 0; j < 4; ++j) x ^= v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
  }
  if (x == 0x9e3779b9u) sink[blockIdx.x * 256 + threadIdx.x] = x;
}

struct Case {
  std::string method;
  int ctas;
  uint32_t chunk;
  int slots;
  double us, gbps_total, gbps_per_cta;
};

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
    else if (!std::strcmp(argv[i], "--quick")) quick = true;
    else {
      std::fprintf(stderr, "usage: bench_stream [--json FILE] [--quick]\n");
      return 2;
    }
  }
  bench::print_device();
  const int sms = bench::num_sms();
  constexpr uint64_t kPerCta = 1u << 20;  // 1 MB per CTA per launch
  constexpr int kRegions = 4;             // regions of 132 MB: 528 MB > 2x L2
  const uint64_t region = kPerCta * 132;
  bench::DeviceMem buf(region * kRegions), sink(132 * 256 * 4);
  bench::check(cudaMemset(buf.ptr, 1, buf.bytes), "memset");
  for (auto* k : {reinterpret_cast<const void*>(&stream_bulk<1>), reinterpret_cast<const void*>(&stream_bulk<4>)})
    bench::check(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024), "smem attr");

  std::vector<int> ctas = {16, 32, 64, 96, sms};
  std::vector<std::pair<uint32_t, int>> shapes = {{8192, 20}, {8192, 8}, {16384, 10}, {32768, 5}, {4096, 40}};
  if (quick) shapes = {{8192, 20}};
  std::vector<Case> cases;
  auto run = [&](const std::string& method, int n, uint32_t chunk, int slots) {
    int launch = 0;
    auto fn = [&] {
      const uint8_t* src = buf.as<uint8_t>() + (launch++ % kRegions) * region;
      if (method == "ldg")
        stream_ldg<<<n, 256>>>(reinterpret_cast<const uint4*>(src), kPerCta, sink.as<uint32_t>());
      else if (method == "bulk")
        stream_bulk<1><<<n, 256, 1024 + chunk * slots>>>(src, kPerCta, chunk, slots, sink.as<uint32_t>());
      else
        stream_bulk<4><<<n, 256, 1024 + chunk * slots>>>(src, kPerCta, chunk, slots, sink.as<uint32_t>());
    };
    const double us = bench::time_us(fn, 8, 7);
    bench::check(cudaGetLastError(), "launch");
    const double bytes = static_cast<double>(kPerCta) * n;
    cases.push_back({method, n, chunk, slots, us, bytes / us * 1e-3, kPerCta / us * 1e-3});
    const Case& c = cases.back();
    std::printf("%-6s ctas %3d chunk %6u slots %3d  %8.2f us  %7.1f GB/s total  %6.1f GB/s per CTA\n", c.method.c_str(),
                c.ctas, c.chunk, c.slots, c.us, c.gbps_total, c.gbps_per_cta);
    std::fflush(stdout);
  };
  for (int n : ctas) {
    for (auto [chunk, slots] : shapes) run("bulk", n, chunk, slots);
    run("bulk4", n, 8192, 20);
    run("ldg", n, 0, 0);
  }
  if (!json_path.empty()) {
    FILE* f = std::fopen(json_path.c_str(), "w");
    if (!f) return 1;
    std::fprintf(f, "[\n");
    for (size_t i = 0; i < cases.size(); ++i) {
      const Case& c = cases[i];
      std::fprintf(f,
                   "  {\"method\": \"%s\", \"ctas\": %d, \"chunk\": %u, \"slots\": %d, \"us\": %.2f, \"gbps_total\": %.1f, "
                   "\"gbps_per_cta\": %.1f}%s\n",
                   c.method.c_str(), c.ctas, c.chunk, c.slots, c.us, c.gbps_total, c.gbps_per_cta,
                   i + 1 < cases.size() ? "," : "");
    }
    std::fprintf(f, "]\n");
    std::fclose(f);
  }
  return 0;
}
