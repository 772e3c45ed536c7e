#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/gemm_w4a8.h"
#include "core/half.h"
#include "quant/weight_format.h"

namespace qserve {
namespace {

using quant::level2_dequant_exact;
using quant::level2_dequant_wrap4;
using quant::level2_params;
using quant::level2_quantize;
using quant::scaled_zero;

std::vector<float> random_weights(int64_t n, int64_t k, uint32_t seed, float outlier = 0.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::vector<float> w(n * k);
  for (auto& v : w) v = dist(rng);
  if (outlier > 0) {
    std::uniform_int_distribution<int64_t> pick(0, n * k - 1);
    for (int i = 0; i < n; ++i) w[pick(rng)] = outlier * (i % 2 ? 1.0f : -1.0f);
  }
  return w;
}

// Largest |exact level-2 value| over every W8 in [mn, mx] of a group, as the
// GEMM would see it.
int worst_level2(int mn, int mx) {
  const auto p = level2_params(mn, mx);
  int worst = 0;
  for (int v = mn; v <= mx; ++v) {
    const int d = level2_dequant_exact(level2_quantize(v, p), p.s2, p.zero);
    if (d < -128 || d > 127) return d;
    worst = std::max(worst, std::abs(d));
  }
  return worst;
}

TEST(WeightFormat, ProtectiveRangeExhaustive) {
  // Every group range within [-119, 119], every value in it: INT8 never overflows.
  for (int mn = -119; mn <= 119; ++mn)
    for (int mx = mn; mx <= 119; ++mx) {
      const int d = worst_level2(mn, mx);
      ASSERT_GE(d, -128) << "[" << mn << ", " << mx << "]";
      ASSERT_LE(d, 127) << "[" << mn << ", " << mx << "]";
    }
}

TEST(WeightFormat, PaperExampleOverflowsWithoutProtectiveRange) {
  // The paper's group [-113, 120]: s2 = 16, z = 7, and 120 -> W4 15 -> 128.
  const auto p = level2_params(-113, 120);
  EXPECT_EQ(p.s2, 16);
  EXPECT_EQ(p.zero, 7);
  EXPECT_EQ(level2_dequant_exact(level2_quantize(120, p), p.s2, p.zero), 128);
  // With level 1 in [-119, 119] that group cannot occur; the same weights
  // through the quantizer with R = 127 vs R = 119:
  std::vector<float> w(128, 0.0f);
  for (int i = 0; i < 128; ++i) w[i] = -113.0f + (233.0f * i) / 127.0f;  // spans [-113, 120]
  w[127] = 120.0f;
  // R = 120 keeps 120 -> 120, so the group is exactly [-113, 120].
  const auto bad = quant::quantize_w4_g128(w, 1, 128, 128, 120);
  EXPECT_EQ(bad.s2[0], 16);
  EXPECT_EQ(bad.zero[0], 7);
  EXPECT_EQ(level2_dequant_exact(quant::int4_at(bad.qweight.data(), 128, 0, 127), bad.s2[0], bad.zero[0]), 128);
  EXPECT_DEATH(quant::dequantize_level2(bad), "outside INT8");
  const auto good = quant::quantize_w4_g128(w, 1, 128);
  const auto w8 = quant::dequantize_level2(good);  // aborts on overflow
  EXPECT_EQ(w8.size(), 128u);
}

TEST(WeightFormat, ProtectiveRangeRandomAndAdversarialGroups) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t n = 8, k = 256;
    // Adversarial: each row has its extreme at +-max and the rest spread to hit
    // the edges of the level-2 grid.
    std::vector<float> w = random_weights(n, k, rng(), trial % 3 == 0 ? 0.5f : 0.0f);
    for (int64_t o = 0; o < n; ++o) {
      w[o * k + (trial % k)] = (trial % 2 ? 1.0f : -1.0f);
      w[o * k + ((trial * 7) % k)] = (trial % 2 ? -0.99f : 0.99f);
    }
    const auto q = quant::quantize_w4_g128(w, n, k);
    for (int64_t g = 0; g < n * q.groups(); ++g) {
      ASSERT_GE(q.s2[g], 1);
      ASSERT_LE(q.s2[g], 16);
      ASSERT_LE(q.zero[g], 15);
    }
    quant::dequantize_level2(q);  // checks every value is in [-128, 127]
  }
}

TEST(WeightFormat, WrapAroundDequantEqualsExact) {
  // Every (s2, z) the format allows, every W4: multiply-then-subtract in 8-bit
  // lanes gives the exact value whenever that value fits INT8.
  for (int s2 = 1; s2 <= 16; ++s2)
    for (int z = 0; z <= 15; ++z)
      for (int w0 = 0; w0 < 16; ++w0) {
        const uint32_t packed = static_cast<uint32_t>(w0) | static_cast<uint32_t>((w0 * 7 + 3) % 16) << 8 |
                                static_cast<uint32_t>((15 - w0)) << 16 | static_cast<uint32_t>((w0 * 5) % 16) << 24;
        const uint32_t got = level2_dequant_wrap4(packed, static_cast<uint8_t>(s2), scaled_zero(s2, z));
        for (int lane = 0; lane < 4; ++lane) {
          const uint8_t w4 = (packed >> (8 * lane)) & 0xff;
          const int exact = level2_dequant_exact(w4, s2, z);
          if (exact < -128 || exact > 127) continue;
          EXPECT_EQ(static_cast<int8_t>((got >> (8 * lane)) & 0xff), exact) << s2 << " " << z << " " << int(w4);
        }
      }
}

TEST(WeightFormat, PackUnpackRoundTrip) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> d(0, 15);
  const int64_t n = 5, k = 38;
  std::vector<uint8_t> v(n * k);
  for (auto& x : v) x = static_cast<uint8_t>(d(rng));
  const auto packed = quant::pack_int4(v, n, k);
  ASSERT_EQ(packed.size(), static_cast<size_t>(n * k / 2));
  EXPECT_EQ(packed[0] & 0x0f, v[0]);  // even channel in the low nibble
  EXPECT_EQ(packed[0] >> 4, v[1]);
  EXPECT_EQ(quant::unpack_int4(packed, n, k), v);
  for (int64_t o = 0; o < n; ++o)
    for (int64_t i = 0; i < k; ++i) EXPECT_EQ(quant::int4_at(packed.data(), k, o, i), v[o * k + i]);
}

TEST(WeightFormat, PartialLastGroup) {
  // k = 576 = 4.5 x 128: five groups, the last one of 64 channels.
  const int64_t n = 4, k = 576;
  auto w = random_weights(n, k, 11);
  for (int64_t i = 512; i < 576; ++i) w[i] *= 10.0f;  // row 0's last group: large range
  const auto q = quant::quantize_w4_g128(w, n, k);
  EXPECT_EQ(q.groups(), 5);
  EXPECT_EQ(q.s2.size(), static_cast<size_t>(n * 5));
  const auto deq = quant::dequantize(q);
  double err = 0, ref = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    err += (deq[i] - w[i]) * (deq[i] - w[i]);
    ref += w[i] * w[i];
  }
  EXPECT_LT(std::sqrt(err / ref), 0.15);
}

TEST(WeightFormat, QuantizersReconstruct) {
  const int64_t n = 16, k = 512;
  const auto w = random_weights(n, k, 5);
  auto rel = [&](const std::vector<float>& d) {
    double e = 0, r = 0;
    for (size_t i = 0; i < w.size(); ++i) {
      e += (d[i] - w[i]) * (d[i] - w[i]);
      r += w[i] * w[i];
    }
    return std::sqrt(e / r);
  };
  EXPECT_LT(rel(quant::dequantize(quant::quantize_w4_g128(w, n, k))), 0.15);
  EXPECT_LT(rel(quant::dequantize(quant::quantize_w4_per_channel(w, n, k))), 0.25);
  EXPECT_LT(rel(quant::dequantize(quant::quantize_w4a16(w, n, k))), 0.15);
  const auto w8 = quant::quantize_w8_per_channel(w, n, k);
  std::vector<float> d8(n * k);
  for (int64_t o = 0; o < n; ++o)
    for (int64_t i = 0; i < k; ++i) d8[o * k + i] = half_to_float(w8.scale[o]) * w8.q[o * k + i];
  EXPECT_LT(rel(d8), 0.02);
  // Constant rows survive per-channel quantization exactly.
  std::vector<float> c(2 * 4, 0.5f);
  for (int i = 4; i < 8; ++i) c[i] = -0.25f;
  const auto dc = quant::dequantize(quant::quantize_w4_per_channel(c, 2, 4));
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(dc[i], c[i], 1e-3f);
}

TEST(WeightFormat, ActivationQuantization) {
  std::vector<float> x = {0.5f, -1.0f, 0.25f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  const auto a = quant::quantize_activations(x, 2, 4);
  EXPECT_EQ(a.q[1], -127);
  EXPECT_NEAR(a.q[0], 64, 1);  // 0.5 / (fp16(1 / 127)) ~ 63.5
  int sum = a.q[0] + a.q[1] + a.q[2] + a.q[3];
  EXPECT_EQ(a.a_sum[0], float_to_half(half_to_float(a.scale[0]) * sum));
  EXPECT_EQ(a.q[4], 0);  // an all-zero token
  EXPECT_EQ(half_to_float(a.scale[1]), 0.0f);
}

// Naive int64 reference of sum_i xq * wq.
std::vector<int64_t> naive_gemm(const std::vector<int8_t>& x, const std::vector<int8_t>& w, int64_t m, int64_t n,
                                int64_t k) {
  std::vector<int64_t> acc(m * n, 0);
  for (int64_t t = 0; t < m; ++t)
    for (int64_t o = 0; o < n; ++o)
      for (int64_t i = 0; i < k; ++i) acc[t * n + o] += int64_t{x[t * k + i]} * int64_t{w[o * k + i]};
  return acc;
}

TEST(CpuGemm, IntegerAccumulationMatchesNaiveInt64) {
  std::mt19937 rng(9);
  std::uniform_int_distribution<int> d8(-127, 127);
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 7, 128}, {7, 33, 576}, {33, 48, 320}}) {
    std::vector<int8_t> x(m * k);
    for (auto& v : x) v = static_cast<int8_t>(d8(rng));
    x[0] = -127;
    const auto wf = random_weights(n, k, rng());
    // g128
    const auto wg = quant::quantize_w4_g128(wf, n, k);
    std::vector<int32_t> acc(m * n);
    std::vector<uint16_t> sx(m, float_to_half(0.01f)), y(m * n);
    cpu::gemm_w4a8_g128(x.data(), sx.data(), m, wg, acc.data(), y.data());
    auto ref = naive_gemm(x, quant::dequantize_level2(wg), m, n, k);
    for (int64_t i = 0; i < m * n; ++i) ASSERT_EQ(acc[i], ref[i]);
    for (int64_t t = 0; t < m; ++t)
      for (int64_t o = 0; o < n; ++o)
        EXPECT_EQ(y[t * n + o], float_to_half(0.01f * 0 + half_to_float(sx[t]) * half_to_float(wg.s1[o]) *
                                                              static_cast<float>(ref[t * n + o])));
    // per-channel
    const auto wp = quant::quantize_w4_per_channel(wf, n, k);
    const auto w4u = quant::unpack_int4(wp.qweight, n, k);
    const std::vector<int8_t> w4(w4u.begin(), w4u.end());
    std::vector<uint16_t> asum(m);
    for (int64_t t = 0; t < m; ++t) {
      int64_t s = 0;
      for (int64_t i = 0; i < k; ++i) s += x[t * k + i];
      asum[t] = float_to_half(half_to_float(sx[t]) * s);
    }
    cpu::gemm_w4a8_per_channel(x.data(), sx.data(), asum.data(), m, wp, acc.data(), y.data());
    ref = naive_gemm(x, w4, m, n, k);
    for (int64_t i = 0; i < m * n; ++i) ASSERT_EQ(acc[i], ref[i]);
    // The epilogue reproduces x * dequant(w) up to INT8 activation error.
    const auto wdq = quant::dequantize(wp);
    for (int64_t t = 0; t < m; ++t)
      for (int64_t o = 0; o < n; ++o) {
        double r = 0;
        for (int64_t i = 0; i < k; ++i) r += half_to_float(sx[t]) * x[t * k + i] * double(wdq[o * k + i]);
        EXPECT_NEAR(half_to_float(y[t * n + o]), r, 2e-3 * std::abs(r) + 1e-3);
      }
    // W8A8
    const auto w8 = quant::quantize_w8_per_channel(wf, n, k);
    cpu::gemm_w8a8(x.data(), sx.data(), m, w8, acc.data(), nullptr);
    ref = naive_gemm(x, w8.q, m, n, k);
    for (int64_t i = 0; i < m * n; ++i) ASSERT_EQ(acc[i], ref[i]);
  }
}

TEST(CpuGemm, W4A16MatchesDequantizedFloat) {
  const int64_t m = 3, n = 20, k = 256;
  const auto wf = random_weights(n, k, 21);
  const auto q = quant::quantize_w4a16(wf, n, k);
  const auto wd = quant::dequantize(q);
  std::mt19937 rng(2);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<uint16_t> x(m * k), y(m * n);
  for (auto& v : x) v = float_to_half(d(rng));
  cpu::gemm_w4a16(x.data(), m, q, y.data());
  for (int64_t t = 0; t < m; ++t)
    for (int64_t o = 0; o < n; ++o) {
      double r = 0;
      for (int64_t i = 0; i < k; ++i) r += double(half_to_float(x[t * k + i])) * wd[o * k + i];
      EXPECT_NEAR(half_to_float(y[t * n + o]), r, 1e-3 * std::abs(r) + 1e-3);
    }
}

// The prepared form (codes and scales unpacked once, 16 channels a vector)
// gives the reference's bits: the float sums before their fp16 rounding (a
// fused multiply-add in place of the reference's two roundings would change
// them), on odd sizes (channel tails below 16 and 64, a partial last group,
// 1-9 tokens), with the packed codes dropped after preparing.
TEST(CpuGemm, W4A16PreparedGivesTheReferenceBits) {
  std::mt19937 rng(5);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (int64_t m : {1, 2, 9})
    for (int64_t n : {7, 16, 70, 133})
      for (int64_t k : {128, 200, 576}) {
        const auto wf = random_weights(n, k, static_cast<uint32_t>(100 + n + k));
        auto q = quant::quantize_w4a16(wf, n, k);
        std::vector<uint16_t> x(m * k), want(m * n, 0x7e00), got(m * n, 0x7c00);  // NaN / inf before the runs
        std::vector<float> want_sums(m * n, NAN), got_sums(m * n, -NAN);
        for (auto& v : x) v = float_to_half(d(rng));
        cpu::gemm_w4a16(x.data(), m, q, want.data());
        cpu::gemm_w4a16_sums(x.data(), m, q, want_sums.data());
        const cpu::W4A16Prepared prepared = cpu::prepare_w4a16(q);
        q.qweight.clear();
        cpu::gemm_w4a16(x.data(), m, prepared, got.data());
        cpu::gemm_w4a16_sums(x.data(), m, prepared, got_sums.data());
        for (int64_t i = 0; i < m * n; ++i)
          ASSERT_EQ(std::bit_cast<uint32_t>(got_sums[i]), std::bit_cast<uint32_t>(want_sums[i]))
              << "m " << m << " n " << n << " k " << k << " at " << i << ": " << got_sums[i] << " vs " << want_sums[i];
        ASSERT_EQ(got, want) << "m " << m << " n " << n << " k " << k;
      }
}

}  // namespace
}  // namespace qserve
