// KV cache format: quantization round-trip bounds, the degenerate case, and
// page addressing properties (docs/kv-cache-layout.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/half.h"
#include "quant/activation_quant.h"
#include "quant/weight_format.h"
#include "quant/kv_format.h"

namespace qserve {
namespace {

float fp16_ulp(float v) {
  const uint16_t h = float_to_half(std::fabs(v));
  return half_to_float(static_cast<uint16_t>(h + 1)) - half_to_float(h);
}

std::vector<uint16_t> random_head(std::mt19937& rng, int d, float center, float spread) {
  std::normal_distribution<float> n(center, spread);
  std::vector<uint16_t> x(d);
  for (auto& v : x) v = float_to_half(n(rng));
  return x;
}

class KvQuantRoundTrip : public ::testing::TestWithParam<KvDtype> {};

TEST_P(KvQuantRoundTrip, ErrorWithinHalfAStep) {
  const KvDtype dtype = GetParam();
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> center(-50.f, 50.f), spread(1e-3f, 20.f);
  for (int d : {32, 64, 128}) {
    for (int trial = 0; trial < 300; ++trial) {
      const std::vector<uint16_t> x = random_head(rng, d, center(rng), spread(rng));
      std::vector<uint8_t> codes(d);
      uint16_t s = 0, z = 0;
      kv_quantize_head(x.data(), d, dtype, codes.data(), &s, &z);
      std::vector<float> xhat(d);
      kv_dequantize_head(codes.data(), s, z, d, dtype, xhat.data());
      const float scale = half_to_float(s), zero = half_to_float(z);
      ASSERT_GT(scale, 0.f);
      float mx = 0;
      for (uint16_t v : x) mx = std::max(mx, std::fabs(half_to_float(v)));
      // half a step from rounding; the fp16 zero can be off by half an ulp
      // and the fp16 scale by 2^-11 relative, which matters only when clamped.
      const float bound = scale * (0.5f + 0.5f * fp16_ulp(zero) + 0.01f) + 1e-6f * mx;
      for (int i = 0; i < d; ++i)
        ASSERT_LE(std::fabs(xhat[i] - half_to_float(x[i])), bound)
            << "d=" << d << " trial=" << trial << " i=" << i << " scale=" << scale << " zero=" << zero;
    }
  }
}

TEST_P(KvQuantRoundTrip, DegenerateTokenIsExact) {
  const KvDtype dtype = GetParam();
  for (float value : {0.f, -0.f, 1.f, -3.25f, 65504.f, -65504.f, 6e-8f, 1234.5f}) {
    const int d = 128;
    std::vector<uint16_t> x(d, float_to_half(value));
    std::vector<uint8_t> codes(d);
    uint16_t s = 0, z = 0;
    kv_quantize_head(x.data(), d, dtype, codes.data(), &s, &z);
    std::vector<float> xhat(d);
    kv_dequantize_head(codes.data(), s, z, d, dtype, xhat.data());
    for (int i = 0; i < d; ++i) ASSERT_EQ(xhat[i], half_to_float(x[i])) << value;
  }
}

TEST_P(KvQuantRoundTrip, RangeBelowFp16ResolutionStaysClose) {
  const KvDtype dtype = GetParam();
  const int d = 64;
  std::vector<uint16_t> x(d, float_to_half(0.f));
  x[3] = 0x0001;  // smallest subnormal: (max - min) / 15 underflows fp16
  std::vector<uint8_t> codes(d);
  uint16_t s = 0, z = 0;
  kv_quantize_head(x.data(), d, dtype, codes.data(), &s, &z);
  std::vector<float> xhat(d);
  kv_dequantize_head(codes.data(), s, z, d, dtype, xhat.data());
  for (int i = 0; i < d; ++i) EXPECT_LE(std::fabs(xhat[i] - half_to_float(x[i])), 1e-7f);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, KvQuantRoundTrip, ::testing::Values(KvDtype::kInt4, KvDtype::kInt8));

TEST(KvQuant, CodesSpanTheRange) {
  // A linear ramp uses both ends of the code range.
  for (KvDtype dtype : {KvDtype::kInt4, KvDtype::kInt8}) {
    const int d = 128;
    std::vector<uint16_t> x(d);
    for (int i = 0; i < d; ++i) x[i] = float_to_half(-1.f + 2.f * i / (d - 1));
    std::vector<uint8_t> codes(d);
    uint16_t s, z;
    kv_quantize_head(x.data(), d, dtype, codes.data(), &s, &z);
    const int lo = dtype == KvDtype::kInt4 ? codes[0] & 0xf : codes[0];
    const int hi = dtype == KvDtype::kInt4 ? codes[d / 2 - 1] >> 4 : codes[d - 1];
    EXPECT_EQ(lo, 0);
    EXPECT_EQ(hi, kv_max_code(dtype));
  }
}

TEST(KvPageLayout, RegionsAlignedDisjointAndInsideThePage) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    KvPageLayout l;
    l.page_size = std::uniform_int_distribution<int>(1, 130)(rng);
    l.num_kv_heads = std::uniform_int_distribution<int>(1, 8)(rng);
    l.head_dim = 32 * std::uniform_int_distribution<int>(1, 4)(rng);
    l.dtype = static_cast<KvDtype>(trial % 3);
    ASSERT_EQ(l.page_bytes() % kKvAlign, 0);
    std::vector<int> owner(l.page_bytes(), -1);
    auto claim = [&](int64_t off, int64_t n, int who) {
      ASSERT_GE(off, 0);
      ASSERT_LE(off + n, l.page_bytes());
      for (int64_t i = off; i < off + n; ++i) {
        ASSERT_EQ(owner[i], -1) << "byte " << i << " claimed twice";
        owner[i] = who;
      }
    };
    for (int h = 0; h < l.num_kv_heads; ++h) {
      ASSERT_EQ(l.head_block_offset(h) % kKvAlign, 0);
      ASSERT_EQ((l.head_block_offset(h) + l.values_region_bytes()) % kKvAlign, 0);
      for (int s = 0; s < l.page_size; ++s) {
        const int who = h * l.page_size + s;
        claim(l.value_offset(h, s), l.token_value_bytes(), who);
        if (kv_has_params(l.dtype)) {
          ASSERT_EQ(l.zero_offset(h, s), l.scale_offset(h, s) + 2);
          claim(l.scale_offset(h, s), 4, who);
        }
      }
      // consecutive slots are contiguous (one coalesced stream per head)
      if (l.page_size > 1) {
        ASSERT_EQ(l.value_offset(h, 1) - l.value_offset(h, 0), l.token_value_bytes());
      }
    }
    // only padding is unclaimed
    int64_t used = 0;
    for (int o : owner) used += o >= 0;
    const int64_t per_token = l.token_value_bytes() + (kv_has_params(l.dtype) ? 4 : 0);
    ASSERT_EQ(used, per_token * l.page_size * l.num_kv_heads);
  }
}

TEST(KvPageLayout, WriteReadEveryTokenOfAPage) {
  std::mt19937 rng(11);
  for (KvDtype dtype : {KvDtype::kInt4, KvDtype::kInt8, KvDtype::kFp16}) {
    KvPageLayout l{.page_size = 17, .num_kv_heads = 3, .head_dim = 64, .dtype = dtype};
    std::vector<uint8_t> page(l.page_bytes(), 0xAB);
    std::vector<std::vector<uint16_t>> tokens;
    for (int h = 0; h < 3; ++h)
      for (int s = 0; s < 17; ++s) {
        tokens.push_back(random_head(rng, 64, static_cast<float>(h - s), 2.f));
        kv_write_token(l, page.data(), h, s, tokens.back().data());
      }
    int i = 0;
    for (int h = 0; h < 3; ++h)
      for (int s = 0; s < 17; ++s, ++i) {
        std::vector<float> got(64), want(64);
        kv_read_token(l, page.data(), h, s, got.data());
        std::vector<uint8_t> codes(l.token_value_bytes());
        uint16_t sc = 0, z = 0;
        kv_quantize_head(tokens[i].data(), 64, dtype, codes.data(), &sc, &z);
        kv_dequantize_head(codes.data(), sc, z, 64, dtype, want.data());
        ASSERT_EQ(got, want) << "head " << h << " slot " << s;
      }
  }
}

TEST(ActivationQuant, DeviceHelpersMatchTheHostRow) {
  std::mt19937 rng(3);
  std::normal_distribution<float> n(0.f, 3.f);
  std::vector<float> x(4096);
  for (auto& v : x) v = n(rng);
  std::vector<int8_t> q(x.size());
  uint16_t s_bits, sum_bits;
  quant::quantize_activation_row(x.data(), static_cast<int64_t>(x.size()), q.data(), &s_bits, &sum_bits);
  const float s = half_to_float(s_bits);
  float absmax = 0;
  int64_t total = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    absmax = std::max(absmax, std::fabs(x[i]));
    ASSERT_GE(q[i], -127);
    ASSERT_LE(std::fabs(q[i] * s - x[i]), 0.5f * s + 1e-3f * absmax) << i;
    total += q[i];
    ASSERT_EQ(act_quantize_value(x[i], s), q[i]) << i;
  }
  EXPECT_EQ(s_bits, float_to_half(act_raw_scale(absmax)));
  EXPECT_NEAR(s, absmax / 127.f, absmax / 127.f * 1e-3f);
  EXPECT_EQ(sum_bits, float_to_half(s * static_cast<float>(total)));
  std::vector<float> zeros(64, 0.f);
  std::vector<int8_t> qz(64, 5);
  quant::quantize_activation_row(zeros.data(), 64, qz.data(), &s_bits, &sum_bits);
  EXPECT_EQ(half_to_float(s_bits), 0.f);
  for (int8_t v : qz) EXPECT_EQ(v, 0);
}

}  // namespace
}  // namespace qserve
