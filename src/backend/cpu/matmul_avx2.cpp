// AVX2 + FMA instance of matmul_kernel.inc (called only when the CPU has it).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/dtype.h"

#include "backend/cpu/matmul.h"
#include "backend/cpu/prefetch.h"

#if defined(__x86_64__) && defined(__GNUC__)
// Every function below is compiled for avx2,fma,f16c (GCC: target pragma; clang,
// which ignores it, an attribute on each function of the region).
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

namespace qserve::detail {
namespace {

struct V {
  using Reg = __m256;
  using Mask = __m256i;
  static constexpr int64_t W = 8;
  static constexpr int TM = 2;  // 8 accumulators + 2 x + 1 w of 16 registers
  static constexpr int TN = 4;
  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg load(const float* p) { return _mm256_loadu_ps(p); }
  static Mask tail_mask(int64_t n) {
    // lane j active when j < n
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static Reg load_tail(const float* p, Mask m) { return _mm256_maskload_ps(p, m); }
  static Reg load_f16(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static Reg load_bf16(const uint16_t* p) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16)); }
  static Reg fma(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  static float sum(Reg a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};

#include "backend/cpu/matmul_kernel.inc"

}  // namespace

void matmul_f32_avx2(const float* x, const void* w, DType wdtype, const float* bias, float* y, int64_t T, int64_t K, int64_t N,
                     int64_t n0, int64_t n1) {
  matmul_any(x, w, wdtype, bias, y, T, K, N, n0, n1);
}

}  // namespace qserve::detail

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#else
namespace qserve::detail {
void matmul_f32_avx2(const float*, const void*, DType, const float*, float*, int64_t, int64_t, int64_t, int64_t, int64_t) {}
}  // namespace qserve::detail
#endif
