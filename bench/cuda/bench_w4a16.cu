// W4A16 GEMM (backend/cuda/gemm_w4a16.h) against cuBLAS FP16 on the same
// problem, timed in the same process: every streaming tile at m <= 16, the
// dequantize + cuBLAS path, and what the planner ships. Weights rotate over
// copies larger than 2x L2 (a layer's weights come from HBM, as in a forward
// pass); CUDA events over batches of back-to-back launches, median.
//
//   bench_w4a16 [--m 1,4,8,16,32,64,256,1024,4096] [--json FILE]
#include <cublas_v2.h>
#include <cuda_fp16.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/gemm_w4a16.h"
#include "../bench_args.h"
#include "bench_common.h"
#include "core/half.h"
#include "quant/weight_format.h"

namespace qserve::bench {
namespace {

struct Layer {
  const char* model;
  const char* name;
  int64_t n, k;
};
const Layer kLayers[] = {
    {"llama3-8b", "qkv", 6144, 4096},  {"llama3-8b", "o", 4096, 4096},          {"llama3-8b", "gate_up", 28672, 4096},
    {"llama3-8b", "down", 4096, 14336}, {"llama2-7b", "gate_up", 22016, 4096}, {"70b", "down", 8192, 28672},
};

// Random W4A16 weights (codes, scales ~1e-3, zeros 8): their values do not change the time.
quant::W4A16Weights random_weights(int64_t n, int64_t k, std::mt19937& rng) {
  quant::W4A16Weights w;
  w.n = n;
  w.k = k;
  w.qweight.resize(static_cast<size_t>(n * k / 2));
  for (auto& b : w.qweight) b = static_cast<uint8_t>(rng());
  w.scale.assign(static_cast<size_t>(n * w.groups()), float_to_half(1e-3f));
  w.zero.assign(static_cast<size_t>(n * w.groups()), 8);
  return w;
}

int run(int argc, char** argv) {
  std::vector<int64_t> ms = {1, 4, 8, 16, 32, 64, 256, 1024, 4096};
  std::string json;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--m") && i + 1 < argc) ms = parse_list(argv[++i]);
    else if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
    else {
      std::fprintf(stderr, "usage: bench_w4a16 [--m LIST] [--json FILE]\n");
      return 2;
    }
  }
  print_device();
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  cublasHandle_t h;
  cublasCreate(&h);
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  cublasSetStream(h, stream);
  Report report;
  std::mt19937 rng(1);
  DeviceMem scratch(cuda::kW4A16ScratchBytes);
  std::printf("| model | layer (n x k) | m | cuBLAS FP16 us | W4A16 shipped us | vs FP16 | W4A16 GB/s | dequant+cuBLAS us |"
              " stream tiles 0..%d us |\n|---|---|---|---|---|---|---|---|---|\n", cuda::kW4A16StreamTileCount - 1);
  for (const Layer& L : kLayers) {
    const int64_t n = L.n, k = L.k;
    const size_t w4_bytes = static_cast<size_t>(n * k / 2);
    const int copies = static_cast<int>(std::max<size_t>(2, 2 * static_cast<size_t>(prop.l2CacheSize) / w4_bytes + 1));
    std::vector<cuda::W4A16DeviceWeights> dw;
    for (int c = 0; c < copies; ++c) dw.push_back(cuda::upload_w4a16(random_weights(n, k, rng)));
    // FP16 weights: rotated the same way (2 B per weight).
    const int copies16 = static_cast<int>(std::max<size_t>(2, 2 * static_cast<size_t>(prop.l2CacheSize) / (n * k * 2) + 1));
    std::vector<std::unique_ptr<DeviceMem>> w16;
    for (int c = 0; c < copies16; ++c) {
      w16.push_back(std::make_unique<DeviceMem>(static_cast<size_t>(n * k * 2)));
      fill_random_half(w16.back()->as<uint16_t>(), static_cast<size_t>(n * k), 100 + c);
    }
    for (int64_t m : ms) {
      DeviceMem x(static_cast<size_t>(m * k * 2)), y(static_cast<size_t>(m * n * 2));
      fill_random_half(x.as<uint16_t>(), static_cast<size_t>(m * k), 7);
      const float alpha = 1.f, beta = 0.f;
      int i16 = 0, i4 = 0;
      const double fp16_us = time_us([&] {
        cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha,
                     w16[i16++ % copies16]->ptr, CUDA_R_16F, static_cast<int>(k), x.ptr, CUDA_R_16F, static_cast<int>(k),
                     &beta, y.ptr, CUDA_R_16F, static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
      }, 20, 7);
      auto w4 = [&](int tile) {
        return time_us([&] {
          cuda::gemm_w4a16(dw[i4++ % copies], x.as<__half>(), m, y.as<__half>(), scratch.ptr, scratch.bytes, h, stream, tile);
        }, 20, 7);
      };
      const double shipped = w4(-1);
      const double deq = time_us([&] {
        cuda::gemm_w4a16_dequant_cublas(dw[i4++ % copies], x.as<__half>(), m, y.as<__half>(), scratch.ptr, scratch.bytes, h,
                                        stream);
      }, 20, 7);
      std::string tiles;
      std::vector<double> tile_us;
      for (int t = 0; t < cuda::kW4A16StreamTileCount; ++t) {
        const double us = m <= 64 ? w4(t) : -1;
        tile_us.push_back(us);
        char b[32];
        std::snprintf(b, sizeof b, "%s%.1f", t ? " / " : "", us);
        tiles += us < 0 ? std::string(t ? " / " : "") + "-" : b;
      }
      const double gbs = (static_cast<double>(w4_bytes) + m * k * 2.0 + m * n * 2.0) / (shipped * 1e3);
      std::printf("| %s | %s (%lld x %lld) | %lld | %.1f | %.1f | %.2fx | %.0f | %.1f | %s |\n", L.model, L.name,
                  static_cast<long long>(n), static_cast<long long>(k), static_cast<long long>(m), fp16_us, shipped,
                  fp16_us / shipped, gbs, deq, tiles.c_str());
      std::fflush(stdout);
      char b[512];
      std::snprintf(b, sizeof b,
                    "{\"op\":\"w4a16\",\"model\":\"%s\",\"layer\":\"%s\",\"n\":%lld,\"k\":%lld,\"m\":%lld,\"fp16_us\":%.2f,"
                    "\"shipped_us\":%.2f,\"dequant_cublas_us\":%.2f,\"tile_us\":[%.2f,%.2f,%.2f,%.2f,%.2f],\"planner_tile\":%d}",
                    L.model, L.name, static_cast<long long>(n), static_cast<long long>(k), static_cast<long long>(m), fp16_us,
                    shipped, deq, tile_us[0], tile_us[1], tile_us[2], tile_us[3], tile_us[4], cuda::w4a16_stream_tile(m, n));
      report.add(b);
    }
  }
  check(cudaDeviceSynchronize(), "bench");
  if (!json.empty()) report.write(json);
  cublasDestroy(h);
  return 0;
}

}  // namespace
}  // namespace qserve::bench

int main(int argc, char** argv) { return qserve::bench::run(argc, argv); }
