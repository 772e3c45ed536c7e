// Shared pieces of the GPU benchmarks: device memory, timing with CUDA
// events (median of several batches of back-to-back launches, queued before
// the GPU starts them), random fills, and a JSON report.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "gpu_hold.h"
#include "quant/kv_format.h"

namespace qserve::bench {

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s failed: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

struct DeviceMem {
  void* ptr = nullptr;
  size_t bytes = 0;
  explicit DeviceMem(size_t n) : bytes(n) {
    if (n) check(cudaMalloc(&ptr, n), "cudaMalloc");
  }
  ~DeviceMem() {
    if (ptr) cudaFree(ptr);
  }
  DeviceMem(const DeviceMem&) = delete;
  DeviceMem& operator=(const DeviceMem&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr);
  }
};

inline int num_sms() {
  int n = 0;
  cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, 0);
  return n;
}

inline void print_device() {
  cudaDeviceProp p{};
  cudaGetDeviceProperties(&p, 0);
  int rt = 0, drv = 0;
  cudaRuntimeGetVersion(&rt);
  cudaDriverGetVersion(&drv);
  std::printf("device: %s, %d SMs, L2 %d MB, runtime %d, driver %d\n", p.name, p.multiProcessorCount,
              p.l2CacheSize >> 20, rt, drv);
}

__global__ inline void fill_random_half_kernel(uint16_t* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint64_t h = (i + seed * 0x632be59bd9b4e019ull) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    const float u = static_cast<float>(h >> 40) * (1.f / 16777216.f);
    p[i] = __half_as_ushort(__float2half(4.f * u - 2.f));
  }
}
inline void fill_random_half(uint16_t* p, size_t n, uint64_t seed) { fill_random_half_kernel<<<2048, 256>>>(p, n, seed); }

// Median over `batches` of (time of `per_batch` back-to-back calls) / per_batch, in us.
inline double time_us(const std::function<void()>& fn, int per_batch = 10, int batches = 5) {
  for (int i = 0; i < 3; ++i) fn();
  check(cudaDeviceSynchronize(), "warm-up");
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<double> t;
  for (int k = 0; k < batches; ++k) {
    const auto queued_from = std::chrono::steady_clock::now();
    hold_gpu(nullptr);  // the batch is queued before the GPU starts it (gpu_hold.h)
    cudaEventRecord(a);
    for (int i = 0; i < per_batch; ++i) fn();
    cudaEventRecord(b);
    release_gpu();
    if (queued_timing && std::chrono::steady_clock::now() - queued_from > std::chrono::milliseconds(500))
      std::fprintf(stderr, "warning: queuing a timed batch took > 0.5 s (a synchronizing call in the timed function?)\n");
    check(cudaEventSynchronize(b), "timing");
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    t.push_back(ms * 1000.0 / per_batch);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Report {
  std::vector<std::string> rows;
  void add_decode(const char* model, int batch, int ctx, KvDtype dtype, int splits, double us, double tbs,
                  const char* kernel = "auto") {
    char b[288];
    std::snprintf(b, sizeof b,
                  "{\"op\":\"decode\",\"model\":\"%s\",\"batch\":%d,\"context\":%d,\"kv\":\"%s\",\"kernel\":\"%s\",\"splits\":%d,\"us\":%.2f,\"tb_s\":%.3f}",
                  model, batch, ctx, dtype == KvDtype::kInt4 ? "kv4" : dtype == KvDtype::kInt8 ? "kv8" : "fp16", kernel, splits, us, tbs);
    rows.emplace_back(b);
  }
  void add(const std::string& json_object) { rows.push_back(json_object); }
  void write(const std::string& path) const {
    FILE* f = std::fopen(path.c_str(), "w");
    if (!f) return;
    std::fprintf(f, "[\n");
    for (size_t i = 0; i < rows.size(); ++i) std::fprintf(f, "  %s%s\n", rows[i].c_str(), i + 1 < rows.size() ? "," : "");
    std::fprintf(f, "]\n");
    std::fclose(f);
  }
};

}  // namespace qserve::bench
