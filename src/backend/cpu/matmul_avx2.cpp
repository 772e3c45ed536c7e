// AVX2 + FMA instance of matmul_kernel.inc (called only when the CPU has it).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/dtype.h"
#include "core/quant_blocks.h"

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
  static void store(float* p, Reg v) { _mm256_storeu_ps(p, v); }
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
  // for the block loaders (matmul_blocks.inc): W codes as int32 lanes
  using IReg = __m256i;
  static IReg u8(const uint8_t* p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
  static IReg i8(const uint8_t* p) { return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
  static IReg set1i(int v) { return _mm256_set1_epi32(v); }
  static IReg iota() { return _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7); }
  static IReg and_(IReg a, int b) { return _mm256_and_si256(a, set1i(b)); }
  static IReg or_(IReg a, IReg b) { return _mm256_or_si256(a, b); }
  static IReg srl(IReg a, int n) { return _mm256_srl_epi32(a, _mm_cvtsi32_si128(n)); }
  static IReg sll(IReg a, int n) { return _mm256_sll_epi32(a, _mm_cvtsi32_si128(n)); }
  static IReg srlv(IReg a, IReg n) { return _mm256_srlv_epi32(a, n); }
  static IReg add_i(IReg a, int b) { return _mm256_add_epi32(a, set1i(b)); }
  static IReg sub_i(IReg a, int b) { return _mm256_sub_epi32(a, set1i(b)); }
  static Reg to_f(IReg a) { return _mm256_cvtepi32_ps(a); }
  static Reg set1(float v) { return _mm256_set1_ps(v); }
  static Reg mul(Reg a, Reg b) { return _mm256_mul_ps(a, b); }
  static Reg add(Reg a, Reg b) { return _mm256_add_ps(a, b); }
  static Reg sub(Reg a, Reg b) { return _mm256_sub_ps(a, b); }
  static float half(uint16_t h) { return _cvtsh_ss(h); }  // the value half_to_float gives (NaNs stay NaN)
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
