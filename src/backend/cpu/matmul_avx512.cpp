// AVX-512F instance of matmul_kernel.inc (called only when the CPU has it).
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
// Every function below is compiled for avx512f,fma,f16c (GCC: target pragma; clang,
// which ignores it, an attribute on each function of the region).
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,fma,f16c")
#endif
#if !defined(__clang__)
// GCC 12's avx512fintrin.h builds some intrinsics on _mm256_undefined_* and
// then warns about it; the warning is about the header, not this code.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace qserve::detail {
namespace {

struct V {
  using Reg = __m512;
  using Mask = __mmask16;
  static constexpr int64_t W = 16;
  static constexpr int TM = 4;  // 16 accumulators + 4 x + 1 w of 32 registers
  static constexpr int TN = 4;
  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, Reg v) { _mm512_storeu_ps(p, v); }
  static Mask tail_mask(int64_t n) { return static_cast<Mask>((1u << n) - 1u); }
  static Reg load_tail(const float* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
  static Reg load_f16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static Reg load_bf16(const uint16_t* p) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16)); }
  static Reg fma(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  static float sum(Reg a) { return _mm512_reduce_add_ps(a); }
  // for the block loaders (matmul_blocks.inc): W codes as int32 lanes
  using IReg = __m512i;
  static IReg u8(const uint8_t* p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static IReg i8(const uint8_t* p) { return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static IReg set1i(int v) { return _mm512_set1_epi32(v); }
  static IReg iota() { return _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15); }
  static IReg and_(IReg a, int b) { return _mm512_and_si512(a, set1i(b)); }
  static IReg or_(IReg a, IReg b) { return _mm512_or_si512(a, b); }
  static IReg srl(IReg a, int n) { return _mm512_srl_epi32(a, _mm_cvtsi32_si128(n)); }
  static IReg sll(IReg a, int n) { return _mm512_sll_epi32(a, _mm_cvtsi32_si128(n)); }
  static IReg srlv(IReg a, IReg n) { return _mm512_srlv_epi32(a, n); }
  static IReg add_i(IReg a, int b) { return _mm512_add_epi32(a, set1i(b)); }
  static IReg sub_i(IReg a, int b) { return _mm512_sub_epi32(a, set1i(b)); }
  static Reg to_f(IReg a) { return _mm512_cvtepi32_ps(a); }
  static Reg set1(float v) { return _mm512_set1_ps(v); }
  static Reg mul(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
  static Reg add(Reg a, Reg b) { return _mm512_add_ps(a, b); }
  static Reg sub(Reg a, Reg b) { return _mm512_sub_ps(a, b); }
  static float half(uint16_t h) { return _cvtsh_ss(h); }  // the value half_to_float gives (NaNs stay NaN)
};

#include "backend/cpu/matmul_kernel.inc"

}  // namespace

void matmul_f32_avx512(const float* x, const void* w, DType wdtype, const float* bias, float* y, int64_t T, int64_t K, int64_t N,
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
void matmul_f32_avx512(const float*, const void*, DType, const float*, float*, int64_t, int64_t, int64_t, int64_t, int64_t) {}
}  // namespace qserve::detail
#endif
