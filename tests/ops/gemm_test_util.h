// Helpers of the quantized-GEMM op tests (test_gemm_w4a8.cpp, test_gemm_s8.cpp):
// random INT8 activations with their fp16 per-token scales and sums, uploads
// to the backend's DeviceBuffer, the fp16 ulp distance, one CUDA context.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include "backend/cuda/cuda_context.h"
#include "backend/cuda/device_memory.h"
#include "core/half.h"

namespace qserve::test {

// Distance in representable fp16 values (across zero as well).
inline int ulp_distance(uint16_t a, uint16_t b) {
  auto key = [](uint16_t h) { return (h & 0x8000) ? -static_cast<int>(h & 0x7fff) : static_cast<int>(h); };
  return std::abs(key(a) - key(b));
}

struct QuantizedActivations {
  std::vector<int8_t> q;        // [m, k] codes in [-127, 127]
  std::vector<uint16_t> s_x;    // [m] fp16 per-token scales
  std::vector<uint16_t> a_sum;  // [m] fp16 s_x * sum of the row's codes (per-channel epilogue)
  std::vector<int32_t> x_sum;   // [m] the row's code sum (g128: the biased weights' correction)
};

inline QuantizedActivations random_activations(int64_t m, int64_t k, std::mt19937& rng) {
  QuantizedActivations a;
  a.q.resize(m * k);
  std::uniform_int_distribution<int> d(-127, 127);
  for (auto& v : a.q) v = static_cast<int8_t>(d(rng));
  std::uniform_real_distribution<float> s(0.001f, 0.05f);
  a.s_x.resize(m);
  a.a_sum.resize(m);
  a.x_sum.resize(m);
  for (int64_t t = 0; t < m; ++t) {
    a.s_x[t] = float_to_half(s(rng));
    int64_t sum = 0;
    for (int64_t i = 0; i < k; ++i) sum += a.q[t * k + i];
    a.a_sum[t] = float_to_half(half_to_float(a.s_x[t]) * static_cast<float>(sum));
    a.x_sum[t] = static_cast<int32_t>(sum);
  }
  return a;
}

// A device copy (at least 4 bytes, so that an empty vector still has an address).
template <typename T>
cuda::DeviceBuffer to_device(const std::vector<T>& v) {
  cuda::DeviceBuffer b(std::max<size_t>(v.size() * sizeof(T), 4));
  b.upload(v);
  return b;
}

// The tests' one context (device 0).
inline cuda::CudaContext& gemm_test_context() {
  static cuda::CudaContext ctx(0);
  return ctx;
}

}  // namespace qserve::test
