// Helpers of the CUDA op tests: device buffers, the "no device" skip, and
// fp16 comparisons.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/half.h"

namespace qserve::test {

inline bool has_cuda_device() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

#define QS_SKIP_WITHOUT_CUDA()                                          \
  do {                                                                  \
    if (!::qserve::test::has_cuda_device()) GTEST_SKIP() << "skipped: no CUDA device"; \
  } while (0)

#define QS_CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << cudaGetErrorString(cudaGetLastError())

// A device copy of a host vector (or `n` poisoned elements), freed on scope exit.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n, uint8_t poison = 0xFF) : n_(n) {
    if (n == 0) return;
    if (cudaMalloc(&ptr_, n * sizeof(T)) != cudaSuccess) ptr_ = nullptr;
    if (ptr_) cudaMemset(ptr_, poison, n * sizeof(T));
    // Legacy default stream: the kernels under test run on non-blocking
    // streams, which do not wait for it (nor for upload's copy below).
    cudaDeviceSynchronize();
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), n_(o.n_) { o.ptr_ = nullptr; }
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
  }
  void upload(const std::vector<T>& host) {
    if (!host.empty()) cudaMemcpy(ptr_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
    cudaDeviceSynchronize();
  }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    if (n_) cudaMemcpy(host.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost);
    return host;
  }
  T* get() const { return ptr_; }
  size_t size() const { return n_; }

 private:
  T* ptr_ = nullptr;
  size_t n_ = 0;
};

inline std::vector<uint16_t> random_half(std::mt19937& rng, size_t n, float sd = 1.f, float mean = 0.f) {
  std::normal_distribution<float> d(mean, sd);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = float_to_half(d(rng));
  return v;
}

struct Fp16Diff {
  double max_abs = 0, rel_l2 = 0;
  int64_t bad = 0, nan = 0, first_bad = -1;
};
// Elements with |got - want| > atol + rtol |want| are "bad".
inline Fp16Diff compare_half(const std::vector<uint16_t>& got, const std::vector<uint16_t>& want, double atol,
                             double rtol) {
  Fp16Diff r;
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = half_to_float(got[i]), w = half_to_float(want[i]);
    if (std::isnan(g)) {
      if (r.nan++ == 0 && r.first_bad < 0) r.first_bad = static_cast<int64_t>(i);
      continue;
    }
    const double e = std::fabs(g - w);
    r.max_abs = std::max(r.max_abs, e);
    num += e * e;
    den += w * w;
    if (e > atol + rtol * std::fabs(w) && r.bad++ == 0) r.first_bad = static_cast<int64_t>(i);
  }
  r.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return r;
}

}  // namespace qserve::test
