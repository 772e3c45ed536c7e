#include "backend/cpu/gemm_w4a8.h"

#include <algorithm>
#include <vector>

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

}  // namespace

void gemm_s8s8_s32(const int8_t* xq, const int8_t* wq, int64_t m, int64_t n, int64_t k, int32_t* acc) {
  QS_CHECK(k < 133144) << "k = " << k << " could overflow INT32 accumulation";
  // Parallel over output channels in blocks; each block walks all tokens so a
  // block of weight rows stays in cache.
  constexpr int64_t kRowBlock = 16;
  const int64_t blocks = (n + kRowBlock - 1) / kRowBlock;
  ThreadPool::global().parallel_for(blocks, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t o0 = b * kRowBlock, o1 = std::min(n, o0 + kRowBlock);
      for (int64_t t = 0; t < m; ++t)
        for (int64_t o = o0; o < o1; ++o) acc[t * n + o] = dot_s8(xq + t * k, wq + o * k, k);
    }
  });
}

void gemm_w4a8_g128(const int8_t* xq, const uint16_t* s_x, int64_t m, const quant::W4G128Weights& w,
                    int32_t* acc_out, uint16_t* y) {
  const std::vector<int8_t> w8 = quant::dequantize_level2(w);
  std::vector<int32_t> acc(m * w.n);
  gemm_s8s8_s32(xq, w8.data(), m, w.n, w.k, acc.data());
  if (acc_out) std::copy(acc.begin(), acc.end(), acc_out);
  if (!y) return;
  for (int64_t t = 0; t < m; ++t)
    for (int64_t o = 0; o < w.n; ++o)
      y[t * w.n + o] = float_to_half(
          quant::epilogue_g128(acc[t * w.n + o], half_to_float(s_x[t]), half_to_float(w.s1[o])));
}

void gemm_w4a8_per_channel(const int8_t* xq, const uint16_t* s_x, const uint16_t* a_sum, int64_t m,
                           const quant::W4PerChannelWeights& w, int32_t* acc_out, uint16_t* y) {
  const std::vector<int8_t> w4 = w4_as_int8(w.qweight, w.n, w.k);
  std::vector<int32_t> acc(m * w.n);
  gemm_s8s8_s32(xq, w4.data(), m, w.n, w.k, acc.data());
  if (acc_out) std::copy(acc.begin(), acc.end(), acc_out);
  if (!y) return;
  for (int64_t o = 0; o < w.n; ++o) {
    const float s = half_to_float(w.scale[o]);
    const float sz = quant::scaled_zero_point(s, w.zero[o]);
    for (int64_t t = 0; t < m; ++t)
      y[t * w.n + o] = float_to_half(quant::epilogue_per_channel(acc[t * w.n + o], half_to_float(s_x[t]), s, sz,
                                                                 half_to_float(a_sum[t])));
  }
}

void gemm_w8a8(const int8_t* xq, const uint16_t* s_x, int64_t m, const quant::W8PerChannelWeights& w,
               int32_t* acc_out, uint16_t* y) {
  std::vector<int32_t> acc(m * w.n);
  gemm_s8s8_s32(xq, w.q.data(), m, w.n, w.k, acc.data());
  if (acc_out) std::copy(acc.begin(), acc.end(), acc_out);
  if (!y) return;
  for (int64_t t = 0; t < m; ++t)
    for (int64_t o = 0; o < w.n; ++o)
      y[t * w.n + o] =
          float_to_half(quant::epilogue_w8a8(acc[t * w.n + o], half_to_float(s_x[t]), half_to_float(w.scale[o])));
}

void gemm_w4a16(const uint16_t* x, int64_t m, const quant::W4A16Weights& w, uint16_t* y) {
  const std::vector<float> wf = quant::dequantize(w);  // [n, k]
  std::vector<float> xf(m * w.k);
  for (int64_t i = 0; i < m * w.k; ++i) xf[i] = half_to_float(x[i]);
  const int64_t n = w.n, k = w.k;
  ThreadPool::global().parallel_for(n, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o)
      for (int64_t t = 0; t < m; ++t) {
        float sum = 0.0f;
        for (int64_t i = 0; i < k; ++i) sum += xf[t * k + i] * wf[o * k + i];
        y[t * n + o] = float_to_half(sum);
      }
  }, 8);
}

}  // namespace qserve::cpu
