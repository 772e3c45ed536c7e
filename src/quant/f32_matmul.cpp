#include "quant/f32_matmul.h"

#include <immintrin.h>

#include <algorithm>

#include "core/thread_pool.h"

namespace qserve::quant {
namespace {

void tile_scalar(const float* x, int64_t k, const float* w, float* y, int64_t ldy, int64_t t0, int64_t t1,
                 int64_t n0, int64_t n1) {
  for (int64_t t = t0; t < t1; ++t)
    for (int64_t j = n0; j < n1; ++j) {
      const float* a = x + t * k;
      const float* b = w + j * k;
      float acc = 0;
      for (int64_t i = 0; i < k; ++i) acc += a[i] * b[i];
      y[t * ldy + j] = acc;
    }
}

__attribute__((target("avx2,fma"))) inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// 4 rows of X x 4 rows of W per step: 16 accumulators of 8 lanes.
__attribute__((target("avx2,fma"))) void tile_avx2(const float* x, int64_t k, const float* w, float* y, int64_t ldy,
                                                   int64_t t0, int64_t t1, int64_t n0, int64_t n1) {
  const int64_t k8 = k / 8 * 8;
  int64_t t = t0;
  for (; t + 4 <= t1; t += 4) {
    int64_t j = n0;
    for (; j + 4 <= n1; j += 4) {
      __m256 acc[4][4];
      for (auto& r : acc)
        for (auto& c : r) c = _mm256_setzero_ps();
      for (int64_t i = 0; i < k8; i += 8) {
        __m256 b[4];
        for (int c = 0; c < 4; ++c) b[c] = _mm256_loadu_ps(w + (j + c) * k + i);
        for (int r = 0; r < 4; ++r) {
          const __m256 a = _mm256_loadu_ps(x + (t + r) * k + i);
          for (int c = 0; c < 4; ++c) acc[r][c] = _mm256_fmadd_ps(a, b[c], acc[r][c]);
        }
      }
      for (int r = 0; r < 4; ++r)
        for (int c = 0; c < 4; ++c) {
          float s = hsum(acc[r][c]);
          for (int64_t i = k8; i < k; ++i) s += x[(t + r) * k + i] * w[(j + c) * k + i];
          y[(t + r) * ldy + j + c] = s;
        }
    }
    if (j < n1) tile_scalar(x, k, w, y, ldy, t, t + 4, j, n1);
  }
  if (t < t1) tile_scalar(x, k, w, y, ldy, t, t1, n0, n1);
}

}  // namespace

void matmul_nt(const float* x, int64_t t, int64_t k, const float* w, int64_t n, float* y) {
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  // Tiles of 64 outputs x 64 tokens: W tile (64 x k) stays in L2 while tokens stream.
  constexpr int64_t kN = 64, kT = 64;
  const int64_t nt = (n + kN - 1) / kN, tt = (t + kT - 1) / kT;
  ThreadPool::global().parallel_for(nt * tt, [&](int64_t begin, int64_t end) {
    for (int64_t idx = begin; idx < end; ++idx) {
      const int64_t n0 = (idx / tt) * kN, t0 = (idx % tt) * kT;
      const int64_t n1 = std::min(n, n0 + kN), t1 = std::min(t, t0 + kT);
      if (avx2)
        tile_avx2(x, k, w, y, n, t0, t1, n0, n1);
      else
        tile_scalar(x, k, w, y, n, t0, t1, n0, n1);
    }
  });
}

}  // namespace qserve::quant
