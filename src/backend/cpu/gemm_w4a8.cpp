#include "backend/cpu/gemm_w4a8.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/prefetch.h"
#include "core/error.h"
#include "core/half.h"
#include "core/thread_pool.h"
#include "quant/gemm_epilogue.h"

namespace qserve::cpu {
namespace {

// One dot product of int8 rows; int32 cannot overflow for k < 2^31 / 127^2 = 133,144.
inline int32_t dot_s8(const int8_t* a, const int8_t* b, int64_t k) {
  int32_t sum = 0;
  for (int64_t i = 0; i < k; ++i) sum += static_cast<int32_t>(a[i]) * static_cast<int32_t>(b[i]);
  return sum;
}

std::vector<int8_t> w4_as_int8(const std::vector<uint8_t>& packed, int64_t n, int64_t k) {
  const std::vector<uint8_t> u = quant::unpack_int4(packed, n, k);
  return std::vector<int8_t>(u.begin(), u.end());  // 0..15 fits int8
}


// ---- VNNI paths: tiles of 4 tokens x 4 weight rows, 16 accumulators ----

// xu [m, k]: xq + 128 as uint8 (xq XOR 0x80).
std::vector<uint8_t> biased_activations(const int8_t* xq, int64_t m, int64_t k) {
  std::vector<uint8_t> xu(static_cast<size_t>(m * k));
  for (int64_t i = 0; i < m * k; ++i) xu[i] = static_cast<uint8_t>(xq[i]) ^ 0x80u;
  return xu;
}

// 128 * sum_i w[o, i] for each row: the correction of the +128 bias.
std::vector<int32_t> bias_corrections(const int8_t* wq, int64_t n, int64_t k) {
  std::vector<int32_t> c(n);
  for (int64_t o = 0; o < n; ++o) {
    int32_t s = 0;
    for (int64_t i = 0; i < k; ++i) s += wq[o * k + i];
    c[o] = 128 * s;
  }
  return c;
}

inline int32_t dot_u8s8(const uint8_t* a, const int8_t* b, int64_t k) {
  int32_t sum = 0;
  for (int64_t i = 0; i < k; ++i) sum += static_cast<int32_t>(a[i]) * static_cast<int32_t>(b[i]);
  return sum;
}

#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's _mm512_reduce_add_epi32 builds on _mm256_undefined_si256 and then
// warns (-Wmaybe-uninitialized) where it is inlined: the header's, not ours.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// NT (1-4) tokens from t0 x rows [o0, o1) in tiles of 4 rows.
template <int NT>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) inline void tokens_avx512_vnni(
    const uint8_t* xu, const int8_t* wq, const int32_t* corr, int64_t n, int64_t k, int64_t t0, int64_t o0, int64_t o1,
    int32_t* acc) {
  const int64_t k64 = k / 64 * 64;
  const __mmask64 tail = k64 < k ? (~0ull >> (64 - (k - k64))) : 0;
  const int64_t ahead = prefetch_rows_ahead(k);  // rows of k INT8 weights (prefetch.h)
  const uint8_t* xr[NT];
  for (int r = 0; r < NT; ++r) xr[r] = xu + (t0 + r) * k;
  for (int64_t oo = o0; oo < o1; oo += 4) {
    const int64_t no = std::min<int64_t>(4, o1 - oo);
    __m512i c[NT][4];
    for (auto& r : c)
      for (auto& v : r) v = _mm512_setzero_si512();
    // Rows past the end repeat the last valid row (results discarded).
    const int8_t* wr[4];
    for (int j = 0; j < 4; ++j) wr[j] = wq + (oo + std::min<int64_t>(j, no - 1)) * k;
    const int8_t* pf = oo + ahead + 4 <= n ? wq + (oo + ahead) * k : nullptr;
    for (int64_t i = 0; i < k64; i += 64) {
      if (pf != nullptr)
        for (int j = 0; j < 4; ++j) _mm_prefetch(reinterpret_cast<const char*>(pf + j * k + i), _MM_HINT_T0);
      __m512i b[4];
      for (int j = 0; j < 4; ++j) b[j] = _mm512_loadu_si512(wr[j] + i);
      for (int r = 0; r < NT; ++r) {
        const __m512i a = _mm512_loadu_si512(xr[r] + i);
        for (int j = 0; j < 4; ++j) c[r][j] = _mm512_dpbusd_epi32(c[r][j], a, b[j]);
      }
    }
    if (tail) {
      __m512i b[4];
      for (int j = 0; j < 4; ++j) b[j] = _mm512_maskz_loadu_epi8(tail, wr[j] + k64);
      for (int r = 0; r < NT; ++r) {
        const __m512i a = _mm512_maskz_loadu_epi8(tail, xr[r] + k64);
        for (int j = 0; j < 4; ++j) c[r][j] = _mm512_dpbusd_epi32(c[r][j], a, b[j]);
      }
    }
    for (int r = 0; r < NT; ++r)
      for (int j = 0; j < no; ++j) acc[(t0 + r) * n + oo + j] = _mm512_reduce_add_epi32(c[r][j]) - corr[oo + j];
  }
}

// Tokens in groups of 4 (the last group 1-3: no token row is computed twice).
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void tile_avx512_vnni(
    const uint8_t* xu, const int8_t* wq, const int32_t* corr, int64_t m, int64_t n, int64_t k, int64_t o0, int64_t o1,
    int32_t* acc) {
  for (int64_t t0 = 0; t0 < m; t0 += 4) {
    switch (std::min<int64_t>(4, m - t0)) {
      case 1: tokens_avx512_vnni<1>(xu, wq, corr, n, k, t0, o0, o1, acc); break;
      case 2: tokens_avx512_vnni<2>(xu, wq, corr, n, k, t0, o0, o1, acc); break;
      case 3: tokens_avx512_vnni<3>(xu, wq, corr, n, k, t0, o0, o1, acc); break;
      default: tokens_avx512_vnni<4>(xu, wq, corr, n, k, t0, o0, o1, acc); break;
    }
  }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

__attribute__((target("avx2,avxvnni"))) inline int32_t hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// NT (1-4) tokens from t0 x rows [o0, o1) in tiles of 4 rows (the AVX-512
// form's structure on 256-bit vectors; the k tail through dot_u8s8).
template <int NT>
__attribute__((target("avx2,avxvnni"))) inline void tokens_avx_vnni(const uint8_t* xu, const int8_t* wq, const int32_t* corr,
                                                                    int64_t n, int64_t k, int64_t t0, int64_t o0, int64_t o1,
                                                                    int32_t* acc) {
  const int64_t k32 = k / 32 * 32;
  const int64_t ahead = prefetch_rows_ahead(k);  // rows of k INT8 weights (prefetch.h)
  const uint8_t* xr[NT];
  for (int r = 0; r < NT; ++r) xr[r] = xu + (t0 + r) * k;
  for (int64_t oo = o0; oo < o1; oo += 4) {
    const int64_t no = std::min<int64_t>(4, o1 - oo);
    __m256i c[NT][4];
    for (auto& r : c)
      for (auto& v : r) v = _mm256_setzero_si256();
    // Rows past the end repeat the last valid row (results discarded).
    const int8_t* wr[4];
    for (int j = 0; j < 4; ++j) wr[j] = wq + (oo + std::min<int64_t>(j, no - 1)) * k;
    const int8_t* pf = oo + ahead + 4 <= n ? wq + (oo + ahead) * k : nullptr;
    for (int64_t i = 0; i < k32; i += 32) {
      if (pf != nullptr && (i & 63) == 0)
        for (int j = 0; j < 4; ++j) _mm_prefetch(reinterpret_cast<const char*>(pf + j * k + i), _MM_HINT_T0);
      __m256i b[4];
      for (int j = 0; j < 4; ++j) b[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr[j] + i));
      for (int r = 0; r < NT; ++r) {
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xr[r] + i));
        for (int j = 0; j < 4; ++j) c[r][j] = _mm256_dpbusd_avx_epi32(c[r][j], a, b[j]);
      }
    }
    for (int r = 0; r < NT; ++r)
      for (int j = 0; j < no; ++j)
        acc[(t0 + r) * n + oo + j] = hsum_epi32(c[r][j]) + dot_u8s8(xr[r] + k32, wr[j] + k32, k - k32) - corr[oo + j];
  }
}

// Tokens in groups of 4 (the last group 1-3: no token row is computed twice).
__attribute__((target("avx2,avxvnni"))) void tile_avx_vnni(const uint8_t* xu, const int8_t* wq, const int32_t* corr,
                                                           int64_t m, int64_t n, int64_t k, int64_t o0, int64_t o1,
                                                           int32_t* acc) {
  for (int64_t t0 = 0; t0 < m; t0 += 4) {
    switch (std::min<int64_t>(4, m - t0)) {
      case 1: tokens_avx_vnni<1>(xu, wq, corr, n, k, t0, o0, o1, acc); break;
      case 2: tokens_avx_vnni<2>(xu, wq, corr, n, k, t0, o0, o1, acc); break;
      case 3: tokens_avx_vnni<3>(xu, wq, corr, n, k, t0, o0, o1, acc); break;
      default: tokens_avx_vnni<4>(xu, wq, corr, n, k, t0, o0, o1, acc); break;
    }
  }
}

}  // namespace

bool s8_gemm_path_supported(S8GemmPath path) {
  switch (path) {
    case S8GemmPath::kScalar: return true;
    case S8GemmPath::kAvxVnni: return __builtin_cpu_supports("avx2") && cpu_features::avx_vnni();
    case S8GemmPath::kAvx512Vnni:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vnni");
  }
  return false;
}

const char* s8_gemm_path_name(S8GemmPath path) {
  switch (path) {
    case S8GemmPath::kScalar: return "scalar";
    case S8GemmPath::kAvxVnni: return "avx_vnni";
    case S8GemmPath::kAvx512Vnni: return "avx512_vnni";
  }
  return "?";
}

S8GemmPath s8_gemm_default_path() {
  static const S8GemmPath path = [] {
    if (const char* e = std::getenv("QSERVE_CPU_GEMM")) {
      for (S8GemmPath p : {S8GemmPath::kScalar, S8GemmPath::kAvxVnni, S8GemmPath::kAvx512Vnni})
        if (std::strcmp(e, s8_gemm_path_name(p)) == 0 && s8_gemm_path_supported(p)) return p;
    }
    for (S8GemmPath p : {S8GemmPath::kAvx512Vnni, S8GemmPath::kAvxVnni})
      if (s8_gemm_path_supported(p)) return p;
    return S8GemmPath::kScalar;
  }();
  return path;
}

void gemm_s8s8_s32(const int8_t* xq, const int8_t* wq, int64_t m, int64_t n, int64_t k, int32_t* acc) {
  gemm_s8s8_s32(xq, wq, m, n, k, acc, s8_gemm_default_path());
}

namespace {

// The integer core; `corr` (bias_corrections of wq) is read by the VNNI paths
// only and may be null on the scalar one.
void run_s8s8_s32(const int8_t* xq, const int8_t* wq, const int32_t* corr, int64_t m, int64_t n, int64_t k,
                  int32_t* acc, S8GemmPath path) {
  // Parallel over output channels in blocks; each block walks all tokens so a
  // block of weight rows stays in cache.
  constexpr int64_t kRowBlock = 16;
  const int64_t blocks = (n + kRowBlock - 1) / kRowBlock;
  if (path == S8GemmPath::kScalar) {
    ThreadPool::global().parallel_for(blocks, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t o0 = b * kRowBlock, o1 = std::min(n, o0 + kRowBlock);
        for (int64_t t = 0; t < m; ++t)
          for (int64_t o = o0; o < o1; ++o) acc[t * n + o] = dot_s8(xq + t * k, wq + o * k, k);
      }
    });
    return;
  }
  const std::vector<uint8_t> xu = biased_activations(xq, m, k);
  ThreadPool::global().parallel_for(blocks, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t o0 = b * kRowBlock, o1 = std::min(n, o0 + kRowBlock);
      if (path == S8GemmPath::kAvx512Vnni) tile_avx512_vnni(xu.data(), wq, corr, m, n, k, o0, o1, acc);
      else tile_avx_vnni(xu.data(), wq, corr, m, n, k, o0, o1, acc);
    }
  });
}

// fn(t) for the token rows [0, m) of an epilogue over n channels, over the
// threads once there are enough outputs (each output is computed alone: the
// split changes no result).
template <class Fn>
void for_token_rows(int64_t m, int64_t n, const Fn& fn) {
  ThreadPool::global().parallel_for(m, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) fn(t);
  }, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, n)));
}

// The path a call takes: `path`, checked, or the scalar one where the +128 bias could overflow.
S8GemmPath checked_path(int64_t k, S8GemmPath path) {
  QS_CHECK(k < 133144) << "k = " << k << " could overflow INT32 accumulation";
  QS_CHECK(s8_gemm_path_supported(path)) << "GEMM path " << s8_gemm_path_name(path) << " not supported by this CPU";
  return path != S8GemmPath::kScalar && k >= 65793 ? S8GemmPath::kScalar : path;
}

}  // namespace

void gemm_s8s8_s32(const int8_t* xq, const int8_t* wq, int64_t m, int64_t n, int64_t k, int32_t* acc,
                   S8GemmPath path) {
  path = checked_path(k, path);
  const std::vector<int32_t> corr = path == S8GemmPath::kScalar ? std::vector<int32_t>() : bias_corrections(wq, n, k);
  run_s8s8_s32(xq, wq, corr.empty() ? nullptr : corr.data(), m, n, k, acc, path);
}

void gemm_s8s8_s32(const int8_t* xq, const S8Weights& w, int64_t m, int32_t* acc) {
  gemm_s8s8_s32(xq, w, m, acc, s8_gemm_default_path());
}

void gemm_s8s8_s32(const int8_t* xq, const S8Weights& w, int64_t m, int32_t* acc, S8GemmPath path) {
  QS_CHECK(static_cast<int64_t>(w.q.size()) == w.n * w.k && static_cast<int64_t>(w.corr.size()) == w.n)
      << "S8Weights " << w.n << " x " << w.k << " holds " << w.q.size() << " values and " << w.corr.size() << " corrections";
  run_s8s8_s32(xq, w.q.data(), w.corr.data(), m, w.n, w.k, acc, checked_path(w.k, path));
}

S8Weights prepare_s8_weights(std::vector<int8_t> q, int64_t n, int64_t k) {
  QS_CHECK(static_cast<int64_t>(q.size()) == n * k) << "prepare_s8_weights: " << q.size() << " values for " << n << " x " << k;
  S8Weights w{n, k, std::move(q), {}};
  w.corr = bias_corrections(w.q.data(), n, k);
  return w;
}

S8Weights prepare_s8_weights(const quant::W4G128Weights& w) { return prepare_s8_weights(quant::dequantize_level2(w), w.n, w.k); }
S8Weights prepare_s8_weights(const quant::W4PerChannelWeights& w) { return prepare_s8_weights(w4_as_int8(w.qweight, w.n, w.k), w.n, w.k); }
S8Weights prepare_s8_weights(const quant::W8PerChannelWeights& w) { return prepare_s8_weights(w.q, w.n, w.k); }

void gemm_w4a8_g128(const int8_t* xq, const uint16_t* s_x, int64_t m, const quant::W4G128Weights& w,
                    int32_t* acc_out, uint16_t* y) {
  gemm_w4a8_g128(xq, s_x, m, w, prepare_s8_weights(w), acc_out, y);
}

void gemm_w4a8_g128(const int8_t* xq, const uint16_t* s_x, int64_t m, const quant::W4G128Weights& w,
                    const S8Weights& w8, int32_t* acc_out, uint16_t* y) {
  QS_CHECK(w8.n == w.n && w8.k == w.k) << "gemm_w4a8_g128: prepared " << w8.n << " x " << w8.k << " for " << w.n << " x " << w.k;
  std::vector<int32_t> acc(m * w.n);
  gemm_s8s8_s32(xq, w8, m, acc.data());
  if (acc_out) std::copy(acc.begin(), acc.end(), acc_out);
  if (!y) return;
  for_token_rows(m, w.n, [&](int64_t t) {
    const float sx = half_to_float(s_x[t]);
    for (int64_t o = 0; o < w.n; ++o)
      y[t * w.n + o] = float_to_half(quant::epilogue_g128(acc[t * w.n + o], sx, half_to_float(w.s1[o])));
  });
}

void gemm_w4a8_per_channel(const int8_t* xq, const uint16_t* s_x, const uint16_t* a_sum, int64_t m,
                           const quant::W4PerChannelWeights& w, int32_t* acc_out, uint16_t* y) {
  gemm_w4a8_per_channel(xq, s_x, a_sum, m, w, prepare_s8_weights(w), acc_out, y);
}

void gemm_w4a8_per_channel(const int8_t* xq, const uint16_t* s_x, const uint16_t* a_sum, int64_t m,
                           const quant::W4PerChannelWeights& w, const S8Weights& w4, int32_t* acc_out, uint16_t* y) {
  QS_CHECK(w4.n == w.n && w4.k == w.k) << "gemm_w4a8_per_channel: prepared " << w4.n << " x " << w4.k << " for " << w.n << " x " << w.k;
  std::vector<int32_t> acc(m * w.n);
  gemm_s8s8_s32(xq, w4, m, acc.data());
  if (acc_out) std::copy(acc.begin(), acc.end(), acc_out);
  if (!y) return;
  // Each channel's scale and scaled zero once, not once per token.
  std::vector<float> s(w.n), sz(w.n);
  for (int64_t o = 0; o < w.n; ++o) {
    s[o] = half_to_float(w.scale[o]);
    sz[o] = quant::scaled_zero_point(s[o], w.zero[o]);
  }
  for_token_rows(m, w.n, [&](int64_t t) {
    const float sx = half_to_float(s_x[t]), as = half_to_float(a_sum[t]);
    for (int64_t o = 0; o < w.n; ++o)
      y[t * w.n + o] = float_to_half(quant::epilogue_per_channel(acc[t * w.n + o], sx, s[o], sz[o], as));
  });
}

void gemm_w8a8(const int8_t* xq, const uint16_t* s_x, int64_t m, const quant::W8PerChannelWeights& w,
               int32_t* acc_out, uint16_t* y) {
  gemm_w8a8(xq, s_x, m, w, prepare_s8_weights(w), acc_out, y);
}

void gemm_w8a8(const int8_t* xq, const uint16_t* s_x, int64_t m, const quant::W8PerChannelWeights& w,
               const S8Weights& w8, int32_t* acc_out, uint16_t* y) {
  QS_CHECK(w8.n == w.n && w8.k == w.k) << "gemm_w8a8: prepared " << w8.n << " x " << w8.k << " for " << w.n << " x " << w.k;
  std::vector<int32_t> acc(m * w.n);
  gemm_s8s8_s32(xq, w8, m, acc.data());
  if (acc_out) std::copy(acc.begin(), acc.end(), acc_out);
  if (!y) return;
  for_token_rows(m, w.n, [&](int64_t t) {
    const float sx = half_to_float(s_x[t]);
    for (int64_t o = 0; o < w.n; ++o)
      y[t * w.n + o] = float_to_half(quant::epilogue_w8a8(acc[t * w.n + o], sx, half_to_float(w.scale[o])));
  });
}

void gemm_w4a16_sums(const uint16_t* x, int64_t m, const quant::W4A16Weights& w, float* sums) {
  const std::vector<float> wf = quant::dequantize(w);  // [n, k]
  std::vector<float> xf(m * w.k);
  for (int64_t i = 0; i < m * w.k; ++i) xf[i] = half_to_float(x[i]);
  const int64_t n = w.n, k = w.k;
  ThreadPool::global().parallel_for(n, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o)
      for (int64_t t = 0; t < m; ++t) {
        float sum = 0.0f;
        for (int64_t i = 0; i < k; ++i) sum += xf[t * k + i] * wf[o * k + i];
        sums[t * n + o] = sum;
      }
  }, 8);
}

void gemm_w4a16(const uint16_t* x, int64_t m, const quant::W4A16Weights& w, uint16_t* y) {
  std::vector<float> sums(static_cast<size_t>(m * w.n));
  gemm_w4a16_sums(x, m, w, sums.data());
  for (size_t i = 0; i < sums.size(); ++i) y[i] = float_to_half(sums[i]);
}

}  // namespace qserve::cpu
