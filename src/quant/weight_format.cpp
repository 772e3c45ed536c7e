#include "quant/weight_format.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/half.h"

namespace qserve::quant {
namespace {

// Round half to even (the default FP rounding mode), as torch.round does.
inline double round_even(double v) { return std::nearbyint(v); }

inline int clamp_int(double v, int lo, int hi) {
  return static_cast<int>(std::clamp(v, static_cast<double>(lo), static_cast<double>(hi)));
}

void check_shape(std::span<const float> w, int64_t n, int64_t k) {
  QS_CHECK(n > 0 && k > 0) << "empty weight " << n << "x" << k;
  QS_CHECK(k % 2 == 0) << "k must be even for INT4 packing, got " << k;
  QS_CHECK(static_cast<int64_t>(w.size()) == n * k) << "weight size " << w.size() << " != " << n << "x" << k;
}

}  // namespace

int32_t quantize_activation_row(const float* x, int64_t k, int8_t* q, uint16_t* scale, uint16_t* a_sum) {
  float amax = 0.0f;
  for (int64_t i = 0; i < k; ++i) amax = std::max(amax, std::fabs(x[i]));
  const uint16_t s_bits = float_to_half(amax / 127.0f);
  const float s = half_to_float(s_bits);
  int64_t sum = 0;
  for (int64_t i = 0; i < k; ++i) {
    const int v = s > 0.0f ? clamp_int(round_even(x[i] / s), -127, 127) : 0;
    q[i] = static_cast<int8_t>(v);
    sum += v;
  }
  *scale = s_bits;
  if (a_sum) *a_sum = float_to_half(s * static_cast<float>(sum));
  return static_cast<int32_t>(sum);
}

QuantizedActivations quantize_activations(std::span<const float> x, int64_t m, int64_t k) {
  QS_CHECK(static_cast<int64_t>(x.size()) == m * k);
  QuantizedActivations a;
  a.m = m;
  a.k = k;
  a.q.resize(m * k);
  a.scale.resize(m);
  a.a_sum.resize(m);
  for (int64_t t = 0; t < m; ++t)
    quantize_activation_row(x.data() + t * k, k, a.q.data() + t * k, &a.scale[t], &a.a_sum[t]);
  return a;
}

std::vector<uint8_t> pack_int4(std::span<const uint8_t> vals, int64_t n, int64_t k) {
  QS_CHECK(k % 2 == 0 && static_cast<int64_t>(vals.size()) == n * k);
  std::vector<uint8_t> out(n * k / 2);
  for (int64_t j = 0; j < n * k / 2; ++j) {
    QS_CHECK(vals[2 * j] < 16 && vals[2 * j + 1] < 16) << "not a 4-bit value";
    out[j] = static_cast<uint8_t>(vals[2 * j] | (vals[2 * j + 1] << 4));
  }
  return out;
}

std::vector<uint8_t> unpack_int4(std::span<const uint8_t> packed, int64_t n, int64_t k) {
  QS_CHECK(k % 2 == 0 && static_cast<int64_t>(packed.size()) == n * k / 2);
  std::vector<uint8_t> out(n * k);
  for (int64_t j = 0; j < n * k / 2; ++j) {
    out[2 * j] = packed[j] & 0x0f;
    out[2 * j + 1] = packed[j] >> 4;
  }
  return out;
}

Level2Params level2_params(int mn, int mx) {
  Level2Params p;
  const int s2 = std::max(1, static_cast<int>(round_even((mx - mn) / 15.0)));
  QS_CHECK(s2 <= 255);
  p.s2 = static_cast<uint8_t>(s2);
  p.zero = static_cast<uint8_t>(clamp_int(round_even(-static_cast<double>(mn) / s2), 0, 15));
  return p;
}

uint8_t level2_quantize(int w8, Level2Params p) {
  return static_cast<uint8_t>(clamp_int(round_even(static_cast<double>(w8) / p.s2) + p.zero, 0, 15));
}

W4G128Weights quantize_w4_g128(std::span<const float> w, int64_t n, int64_t k, int64_t group, int protective_range) {
  check_shape(w, n, k);
  QS_CHECK(group > 0 && group % 2 == 0);
  W4G128Weights out;
  out.n = n;
  out.k = k;
  out.group = group;
  const int64_t groups = out.groups();
  out.s1.resize(n);
  out.s2.resize(n * groups);
  out.zero.resize(n * groups);
  std::vector<uint8_t> w4(n * k);
  std::vector<int> w8(k);
  for (int64_t o = 0; o < n; ++o) {
    const float* row = w.data() + o * k;
    float amax = 0.0f;
    for (int64_t i = 0; i < k; ++i) amax = std::max(amax, std::fabs(row[i]));
    const uint16_t s1_bits = float_to_half(amax / static_cast<float>(protective_range));
    const float s1 = half_to_float(s1_bits);
    out.s1[o] = s1_bits;
    for (int64_t i = 0; i < k; ++i)
      w8[i] = s1 > 0.0f ? clamp_int(round_even(row[i] / s1), -protective_range, protective_range) : 0;
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t begin = g * group, end = std::min(k, begin + group);
      const auto [mn_it, mx_it] = std::minmax_element(w8.begin() + begin, w8.begin() + end);
      const Level2Params p = level2_params(*mn_it, *mx_it);
      out.s2[o * groups + g] = p.s2;
      out.zero[o * groups + g] = p.zero;
      for (int64_t i = begin; i < end; ++i) w4[o * k + i] = level2_quantize(w8[i], p);
    }
  }
  out.qweight = pack_int4(w4, n, k);
  return out;
}

W4PerChannelWeights quantize_w4_per_channel(std::span<const float> w, int64_t n, int64_t k) {
  check_shape(w, n, k);
  W4PerChannelWeights out;
  out.n = n;
  out.k = k;
  out.scale.resize(n);
  out.zero.resize(n);
  std::vector<uint8_t> w4(n * k);
  for (int64_t o = 0; o < n; ++o) {
    const float* row = w.data() + o * k;
    const auto [mn_it, mx_it] = std::minmax_element(row, row + k);
    const float mn = *mn_it, mx = *mx_it;
    // A constant row (range 0) gets scale |c| / 15, which represents c exactly
    // with z = 0 (c > 0) or z = 15 (c < 0); an all-zero row gets scale 1.
    float s = (mx - mn) / 15.0f;
    if (!(s > 0.0f)) s = std::max(std::fabs(mn), std::fabs(mx)) / 15.0f;
    uint16_t s_bits = float_to_half(s);
    if (!(half_to_float(s_bits) > 0.0f)) s_bits = float_to_half(1.0f);
    const float sh = half_to_float(s_bits);
    const int z = clamp_int(round_even(-mn / sh), 0, 15);
    out.scale[o] = s_bits;
    out.zero[o] = static_cast<uint8_t>(z);
    for (int64_t i = 0; i < k; ++i) w4[o * k + i] = static_cast<uint8_t>(clamp_int(round_even(row[i] / sh) + z, 0, 15));
  }
  out.qweight = pack_int4(w4, n, k);
  return out;
}

W8PerChannelWeights quantize_w8_per_channel(std::span<const float> w, int64_t n, int64_t k) {
  QS_CHECK(static_cast<int64_t>(w.size()) == n * k);
  W8PerChannelWeights out;
  out.n = n;
  out.k = k;
  out.q.resize(n * k);
  out.scale.resize(n);
  for (int64_t o = 0; o < n; ++o) {
    const float* row = w.data() + o * k;
    float amax = 0.0f;
    for (int64_t i = 0; i < k; ++i) amax = std::max(amax, std::fabs(row[i]));
    out.scale[o] = float_to_half(amax / 127.0f);
    const float s = half_to_float(out.scale[o]);
    for (int64_t i = 0; i < k; ++i)
      out.q[o * k + i] = static_cast<int8_t>(s > 0.0f ? clamp_int(round_even(row[i] / s), -127, 127) : 0);
  }
  return out;
}

W4A16Weights quantize_w4a16(std::span<const float> w, int64_t n, int64_t k, int64_t group) {
  check_shape(w, n, k);
  W4A16Weights out;
  out.n = n;
  out.k = k;
  out.group = group;
  const int64_t groups = out.groups();
  out.scale.resize(n * groups);
  out.zero.resize(n * groups);
  std::vector<uint8_t> w4(n * k);
  for (int64_t o = 0; o < n; ++o) {
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t begin = g * group, end = std::min(k, begin + group);
      const float* row = w.data() + o * k;
      // The range always includes 0, so that zero stays representable.
      const float mn = std::min(0.0f, *std::min_element(row + begin, row + end));
      const float mx = std::max(0.0f, *std::max_element(row + begin, row + end));
      uint16_t s_bits = float_to_half((mx - mn) / 15.0f);
      if (!(half_to_float(s_bits) > 0.0f)) s_bits = float_to_half(1.0f);
      const float s = half_to_float(s_bits);
      const int z = clamp_int(round_even(-mn / s), 0, 15);
      out.scale[o * groups + g] = s_bits;
      out.zero[o * groups + g] = static_cast<uint8_t>(z);
      for (int64_t i = begin; i < end; ++i)
        w4[o * k + i] = static_cast<uint8_t>(clamp_int(round_even(row[i] / s) + z, 0, 15));
    }
  }
  out.qweight = pack_int4(w4, n, k);
  return out;
}

std::vector<int8_t> dequantize_level2(const W4G128Weights& w) {
  const int64_t groups = w.groups();
  std::vector<int8_t> out(w.n * w.k);
  for (int64_t o = 0; o < w.n; ++o)
    for (int64_t i = 0; i < w.k; ++i) {
      const int64_t g = o * groups + i / w.group;
      const int v = level2_dequant_exact(int4_at(w.qweight.data(), w.k, o, i), w.s2[g], w.zero[g]);
      QS_CHECK(v >= -128 && v <= 127) << "level-2 value " << v << " outside INT8 at (" << o << ", " << i << ")";
      out[o * w.k + i] = static_cast<int8_t>(v);
    }
  return out;
}

std::vector<float> dequantize(const W4G128Weights& w) {
  const std::vector<int8_t> w8 = dequantize_level2(w);
  std::vector<float> out(w.n * w.k);
  for (int64_t o = 0; o < w.n; ++o) {
    const float s1 = half_to_float(w.s1[o]);
    for (int64_t i = 0; i < w.k; ++i) out[o * w.k + i] = s1 * w8[o * w.k + i];
  }
  return out;
}

std::vector<float> dequantize(const W4PerChannelWeights& w) {
  std::vector<float> out(w.n * w.k);
  for (int64_t o = 0; o < w.n; ++o) {
    const float s = half_to_float(w.scale[o]);
    for (int64_t i = 0; i < w.k; ++i)
      out[o * w.k + i] = s * (static_cast<int>(int4_at(w.qweight.data(), w.k, o, i)) - w.zero[o]);
  }
  return out;
}

std::vector<float> dequantize(const W4A16Weights& w) {
  const int64_t groups = w.groups();
  std::vector<float> out(w.n * w.k);
  for (int64_t o = 0; o < w.n; ++o)
    for (int64_t i = 0; i < w.k; ++i) {
      const int64_t g = o * groups + i / w.group;
      out[o * w.k + i] = half_to_float(w.scale[g]) * (static_cast<int>(int4_at(w.qweight.data(), w.k, o, i)) - w.zero[g]);
    }
  return out;
}

}  // namespace qserve::quant
