// The W4A16 CPU GEMM through weights prepared once (gemm_w4a8.h): the
// reference (gemm_w4a16 on quant::W4A16Weights) sums each output channel as
// sum += x[i] * ((q - z) * scale) in float, i = 0..k-1, a multiply and an add
// each rounded; here 16 channels run in the lanes of one AVX-512 vector with
// those same operations in the same order, so the results are the same bits.
// This file is compiled with -ffp-contract=off (src/CMakeLists.txt): a fused
// multiply-add would round once where the reference rounds twice.
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "backend/cpu/gemm_w4a8.h"
#include "core/error.h"
#include "core/half.h"
#include "core/thread_pool.h"

namespace qserve::cpu {
namespace {

// Channels [o0, o1) of one token, one channel at a time: the reference's loop.
void channels_scalar(const float* xf, const W4A16Prepared& w, int64_t o0, int64_t o1, float* y) {
  for (int64_t o = o0; o < o1; ++o) {
    float sum = 0.0f;
    for (int64_t i = 0; i < w.k; ++i) {
      const float wf = w.scales[(i / w.group) * w.n + o] * static_cast<float>(w.codes[i * w.n + o]);
      sum += xf[i] * wf;
    }
    y[o] = sum;
  }
}

bool have_avx512() { return __builtin_cpu_supports("avx512f"); }

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's avx512fintrin.h
#endif
// Channels [o0, o0 + 16 * V) of one token, V vectors of 16 lanes side by side
// (independent sums, so the adds' latency overlaps).
template <int V>
__attribute__((target("avx512f"))) void channels_avx512(const float* xf, const W4A16Prepared& w, int64_t o0, float* y) {
  __m512 acc[V];
  for (int v = 0; v < V; ++v) acc[v] = _mm512_setzero_ps();
  for (int64_t g0 = 0; g0 < w.k; g0 += w.group) {
    __m512 s[V];
    for (int v = 0; v < V; ++v) s[v] = _mm512_loadu_ps(&w.scales[(g0 / w.group) * w.n + o0 + 16 * v]);
    const int64_t g1 = std::min(w.k, g0 + w.group);
    for (int64_t i = g0; i < g1; ++i) {
      const __m512 xb = _mm512_set1_ps(xf[i]);
      const int8_t* c = &w.codes[i * w.n + o0];
      for (int v = 0; v < V; ++v) {
        const __m512 q = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c + 16 * v))));
        const __m512 wf = _mm512_mul_ps(s[v], q);
        acc[v] = _mm512_add_ps(acc[v], _mm512_mul_ps(xb, wf));
      }
    }
  }
  for (int v = 0; v < V; ++v) _mm512_storeu_ps(y + o0 + 16 * v, acc[v]);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace

W4A16Prepared prepare_w4a16(const quant::W4A16Weights& w) {
  const int64_t groups = w.groups();
  QS_CHECK(static_cast<int64_t>(w.qweight.size()) == w.n * ((w.k + 1) / 2) && static_cast<int64_t>(w.scale.size()) == w.n * groups &&
           static_cast<int64_t>(w.zero.size()) == w.n * groups)
      << "prepare_w4a16: W4A16 weights " << w.n << " x " << w.k << " hold " << w.qweight.size() << " packed bytes, "
      << w.scale.size() << " scales and " << w.zero.size() << " zeros";
  W4A16Prepared p;
  p.n = w.n;
  p.k = w.k;
  p.group = w.group;
  p.codes.resize(static_cast<size_t>(w.n * w.k));
  p.scales.resize(static_cast<size_t>(groups * w.n));
  for (int64_t o = 0; o < w.n; ++o) {
    for (int64_t g = 0; g < groups; ++g) p.scales[g * w.n + o] = half_to_float(w.scale[o * groups + g]);
    for (int64_t i = 0; i < w.k; ++i)
      p.codes[i * w.n + o] = static_cast<int8_t>(static_cast<int>(quant::int4_at(w.qweight.data(), w.k, o, i)) - w.zero[o * groups + i / w.group]);
  }
  return p;
}

void gemm_w4a16_sums(const uint16_t* x, int64_t m, const W4A16Prepared& w, float* sums) {
  std::vector<float> xf(static_cast<size_t>(m * w.k));
  for (size_t i = 0; i < xf.size(); ++i) xf[i] = half_to_float(x[i]);
  // Blocks of 64 channels over the threads, every token of a block together
  // (its codes stay in cache across the tokens).
  constexpr int64_t kBlock = 64;
  const int64_t blocks = (w.n + kBlock - 1) / kBlock;
  const bool simd = have_avx512();
  ThreadPool::global().parallel_for(blocks, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t o0 = b * kBlock, o1 = std::min(w.n, o0 + kBlock);
      for (int64_t t = 0; t < m; ++t) {
        const float* xt = xf.data() + t * w.k;
        float* yt = sums + t * w.n;
        if (simd && o1 - o0 == kBlock) channels_avx512<4>(xt, w, o0, yt);
        else if (simd) {
          int64_t o = o0;
          for (; o + 16 <= o1; o += 16) channels_avx512<1>(xt, w, o, yt);
          channels_scalar(xt, w, o, o1, yt);
        } else channels_scalar(xt, w, o0, o1, yt);
      }
    }
  }, 1);
}

void gemm_w4a16(const uint16_t* x, int64_t m, const W4A16Prepared& w, uint16_t* y) {
  std::vector<float> sums(static_cast<size_t>(m * w.n));
  gemm_w4a16_sums(x, m, w, sums.data());
  for (size_t i = 0; i < sums.size(); ++i) y[i] = float_to_half(sums[i]);
}

}  // namespace qserve::cpu
