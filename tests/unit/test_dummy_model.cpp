// --load-format dummy: random quantized layers are valid in their canonical
// layout (scale / zero ranges, g128 level 2 inside INT8), seeded, of the
// intended magnitude; the weight-size estimate is the layers' real size; the
// dummy model runs in every precision with finite, seeded logits.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "core/half.h"
#include "engine/dummy_arch.h"
#include "engine/dummy_model.h"
#include "engine/dummy_weights.h"
#include "engine/kv_memory_plan.h"
#include "quant/weight_format.h"
#include "same_quantized_linear.h"

namespace qserve {
namespace {

using quant::WeightFormat;

const WeightFormat kFormats[] = {WeightFormat::kF16, WeightFormat::kW8PerChannel, WeightFormat::kW4PerChannel,
                                 WeightFormat::kW4G128, WeightFormat::kW4A16};

int64_t stored_bytes(const quant::QuantizedLinear& q) {
  return static_cast<int64_t>(q.f16.size() * 2 + q.w8.q.size() + q.w8.scale.size() * 2 + q.w4pc.qweight.size() +
                              q.w4pc.scale.size() * 2 + q.w4pc.zero.size() + q.g128.qweight.size() +
                              q.g128.s1.size() * 2 + q.g128.s2.size() + q.g128.zero.size() + q.w4a16.qweight.size() +
                              q.w4a16.scale.size() * 2 + q.w4a16.zero.size());
}

bool positive_half(uint16_t h) {
  const float f = half_to_float(h);
  return std::isfinite(f) && f > 0.0f;
}

TEST(DummyWeights, EveryFormatIsValidInItsCanonicalLayout) {
  for (WeightFormat f : kFormats) {
    for (auto [n, k] : {std::pair<int64_t, int64_t>{33, 200}, {16, 384}, {7, 2}}) {
      SCOPED_TRACE(quant::weight_format_name(f) + " " + std::to_string(n) + "x" + std::to_string(k));
      const quant::QuantizedLinear q = random_quantized_linear(f, n, k, 128, 42);
      EXPECT_EQ(q.n, n);
      EXPECT_EQ(q.k, k);
      switch (f) {
        case WeightFormat::kF16:
          ASSERT_EQ(static_cast<int64_t>(q.f16.size()), n * k);
          for (uint16_t h : q.f16) ASSERT_TRUE(std::isfinite(half_to_float(h)));
          break;
        case WeightFormat::kW8PerChannel:
          ASSERT_EQ(static_cast<int64_t>(q.w8.q.size()), n * k);
          for (int8_t v : q.w8.q) ASSERT_GE(v, -127);  // symmetric INT8
          for (uint16_t s : q.w8.scale) ASSERT_TRUE(positive_half(s));
          break;
        case WeightFormat::kW4PerChannel:
          ASSERT_EQ(static_cast<int64_t>(q.w4pc.qweight.size()), n * k / 2);
          for (int64_t o = 0; o < n; ++o) {
            ASSERT_TRUE(positive_half(q.w4pc.scale[o]));
            ASSERT_LE(q.w4pc.zero[o], 15);
          }
          break;
        case WeightFormat::kW4G128: {
          const quant::W4G128Weights& w = q.g128;
          ASSERT_EQ(w.group, 128);
          ASSERT_EQ(static_cast<int64_t>(w.s2.size()), n * w.groups());
          for (int64_t o = 0; o < n; ++o) ASSERT_TRUE(positive_half(w.s1[o]));
          for (size_t g = 0; g < w.s2.size(); ++g) {
            // Every code 0..15 dequantizes into INT8 (the protective range's guarantee).
            ASSERT_GE(w.s2[g], 1);
            ASSERT_LE(w.s2[g], 16);
            ASSERT_LE(w.zero[g], 15);
            ASSERT_GE(quant::level2_dequant_exact(0, w.s2[g], w.zero[g]), -128);
            ASSERT_LE(quant::level2_dequant_exact(15, w.s2[g], w.zero[g]), 127);
          }
          // The exact and the 8-bit wrap-around level 2 (the GEMM's) agree on every weight.
          const std::vector<int8_t> w8 = quant::dequantize_level2(w);
          for (int64_t o = 0; o < n; ++o)
            for (int64_t i = 0; i < k; ++i) {
              const int64_t g = o * w.groups() + i / w.group;
              const uint8_t code = quant::int4_at(w.qweight.data(), k, o, i);
              const uint32_t wrapped = quant::level2_dequant_wrap4(code, w.s2[g], quant::scaled_zero(w.s2[g], w.zero[g]));
              ASSERT_EQ(static_cast<int8_t>(wrapped & 0xff), w8[o * k + i]);
            }
          break;
        }
        case WeightFormat::kW4A16:
          ASSERT_EQ(static_cast<int64_t>(q.w4a16.scale.size()), n * q.w4a16.groups());
          for (size_t g = 0; g < q.w4a16.scale.size(); ++g) {
            ASSERT_TRUE(positive_half(q.w4a16.scale[g]));
            ASSERT_LE(q.w4a16.zero[g], 15);
          }
          break;
      }
    }
  }
}

TEST(DummyWeights, SeededAndOfTheIntendedMagnitude) {
  for (WeightFormat f : kFormats) {
    SCOPED_TRACE(quant::weight_format_name(f));
    const int64_t n = 64, k = 512;
    const std::vector<float> a = quant::dequantize_linear(random_quantized_linear(f, n, k, 128, 7));
    EXPECT_EQ(a, quant::dequantize_linear(random_quantized_linear(f, n, k, 128, 7)));
    EXPECT_NE(a, quant::dequantize_linear(random_quantized_linear(f, n, k, 128, 8)));
    // RMS near 0.5 / sqrt(k) (a layer's output RMS ~ 0.5 x its input's); zero points add a mean.
    const double ms = std::inner_product(a.begin(), a.end(), a.begin(), 0.0) / static_cast<double>(a.size());
    const double rms = std::sqrt(ms) * std::sqrt(static_cast<double>(k));
    EXPECT_GT(rms, 0.25);
    EXPECT_LT(rms, 1.5);
  }
  const Tensor t = random_f16_tensor({5, 9}, 1.0f, 0.1f, 3);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float v = half_to_float(t.data_as<uint16_t>()[i]);
    EXPECT_GE(v, 0.89f);
    EXPECT_LE(v, 1.11f);
  }
}

// A stacked layer made directly (the dummy model's q|k|v and gate|up) is,
// byte for byte, the concatenation of its parts made one by one.
TEST(DummyWeights, StackedLayersAreTheirPartsConcatenated) {
  for (WeightFormat f : kFormats) {
    SCOPED_TRACE(quant::weight_format_name(f));
    const std::vector<int64_t> ns = {200, 40, 24};
    const std::vector<uint64_t> seeds = {11, 12, 13};
    std::vector<quant::QuantizedLinear> parts;
    for (size_t p = 0; p < ns.size(); ++p) parts.push_back(random_quantized_linear(f, ns[p], 384, 128, seeds[p]));
    const quant::QuantizedLinear want = quant::concat_output_channels(std::move(parts));
    const quant::QuantizedLinear got = random_stacked_linear(f, ns, 384, 128, seeds);
    EXPECT_EQ(got.n, 264);
    test::expect_same_linear(got, want);
    EXPECT_EQ(stored_bytes(got), stored_bytes(want));
    EXPECT_GT(stored_bytes(got), 0);
  }
}

TEST(DummyWeights, TheWeightEstimateIsTheLayersRealSize) {
  for (const char* arch : {"tiny", "tiny-odd"}) {
    const ModelConfig c = dummy_arch_config(arch);
    for (WeightFormat f : kFormats) {
      SCOPED_TRACE(std::string(arch) + " " + quant::weight_format_name(f));
      const int64_t H = c.hidden_size, I = c.intermediate_size;
      int64_t layer = 0;
      for (auto [n, k] : {std::pair{c.q_dim(), H}, {c.kv_dim(), H}, {c.kv_dim(), H}, {H, c.q_dim()}, {I, H}, {I, H}, {H, I}})
        layer += stored_bytes(random_quantized_linear(f, n, k, 128, 1));
      const int64_t outer = 2 * c.vocab_size * H * 2 + H * 2;
      EXPECT_EQ(estimate_weight_bytes(c, f, 128), c.num_layers * (layer + 2 * H * 2) + outer);
    }
  }
}

TEST(DummyArch, RealConfigsOfTheNamedShapes) {
  const ModelConfig l3 = dummy_arch_config("llama-3-8b");
  EXPECT_EQ(l3.hidden_size, 4096);
  EXPECT_EQ(l3.num_layers, 32);
  EXPECT_EQ(l3.num_kv_heads, 8);
  EXPECT_EQ(l3.intermediate_size, 14336);
  EXPECT_EQ(l3.vocab_size, 128256);
  EXPECT_EQ(l3.rope_theta, 500000.0f);
  EXPECT_TRUE(l3.eos_token_ids.empty());  // EOS never stops dummy generation
  const ModelConfig l1 = dummy_arch_config("llama-3.2-1b"), l3b = dummy_arch_config("llama-3.2-3b");
  EXPECT_EQ(l1.head_dim, 64);
  EXPECT_EQ(l1.q_dim(), 2048);
  EXPECT_EQ(l1.kv_dim(), 512);
  EXPECT_EQ(l3b.head_dim, 128);
  EXPECT_EQ(l3b.q_dim() + 2 * l3b.kv_dim(), 5120);  // qkv 5120 x 3072
  EXPECT_EQ(l3b.num_layers, 28);
  const ModelConfig l70 = dummy_arch_config("llama-2-70b");
  EXPECT_EQ(l70.num_heads, 64);
  EXPECT_EQ(l70.num_kv_heads, 8);
  EXPECT_EQ(l70.head_dim, 128);
  // A 70B model fits a 48 GB card only at 4 bits.
  const double w4 = static_cast<double>(estimate_weight_bytes(l70, WeightFormat::kW4G128, 128));
  const double f16 = static_cast<double>(estimate_weight_bytes(l70, WeightFormat::kF16, 128));
  EXPECT_NEAR(f16 / 1e9, 137.9, 1.0);
  EXPECT_LT(w4, 0.9 * 48e9);
  EXPECT_GT(f16, 0.9 * 80e9);
  try {
    dummy_arch_config("llama-9");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("llama-2-7b"), std::string::npos) << e.what();
  }
}

std::vector<float> last_logits(LlamaModel& m, const std::vector<int32_t>& tokens) {
  Batch b;
  b.seqs.push_back({0, tokens, 0});
  Logits out;
  m.forward(b, out);
  b.seqs[0] = {0, {tokens[0]}, static_cast<int64_t>(tokens.size())};  // and one decode step
  m.forward(b, out);
  m.release(0);
  return out.last;
}

TEST(DummyModel, EveryPrecisionRunsWithFiniteSeededLogits) {
  const std::vector<int32_t> prompt = {1, 500, 7, 998, 33, 2, 64};
  for (const char* arch : {"tiny", "tiny-odd"}) {
    for (const char* p : {"fp16", "w8a8kv8", "w4a16", "w4a8kv8", "w4a8kv4", "w4a8kv8-chn", "w4a8kv4-chn"}) {
      SCOPED_TRACE(std::string(arch) + " " + p);
      DummyModelOptions o{arch, *parse_precision_choice(p), 5};
      auto m = load_dummy_model(o);
      const std::vector<float> a = last_logits(*m, prompt);
      ASSERT_EQ(static_cast<int64_t>(a.size()), m->config().vocab_size);
      float lo = a[0], hi = a[0];
      for (float v : a) {
        ASSERT_TRUE(std::isfinite(v));
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
      EXPECT_GT(hi - lo, 0.1f);  // not degenerate
      EXPECT_LT(hi - lo, 100.0f);
      EXPECT_EQ(a, last_logits(*load_dummy_model(o), prompt));
      o.seed = 6;
      EXPECT_NE(a, last_logits(*load_dummy_model(o), prompt));
    }
  }
}

// Quantized layers stacked into one q|k|v and one gate|up GEMM (made stacked:
// random_stacked_linear) give the separate layers' logits bit for bit in every
// precision, the KV-quantizing backend included.
TEST(DummyModel, FusedProjectionsEqualSeparateOnes) {
  const std::vector<int32_t> prompt = {1, 500, 7, 998, 33, 2, 64, 12, 400};
  for (const char* arch : {"tiny", "tiny-odd"}) {
    for (const char* p : {"fp16", "w8a8kv8", "w4a16", "w4a8kv8", "w4a8kv4", "w4a8kv8-chn", "w4a8kv4-chn"}) {
      SCOPED_TRACE(std::string(arch) + " " + p);
      const DummyModelOptions o{arch, *parse_precision_choice(p), 3};
      auto fused = load_dummy_model(o);
      auto separate = load_dummy_model(o, {.fuse_projections = false});
      EXPECT_EQ(fused->num_fused_projections(), 2 * fused->config().num_layers);
      EXPECT_EQ(separate->num_fused_projections(), 0);
      EXPECT_EQ(last_logits(*fused, prompt), last_logits(*separate, prompt));
    }
  }
}

TEST(PrecisionChoice, NamesRoundTrip) {
  for (const char* p : {"fp16", "w8a8kv8", "w4a16", "w4a8kv8", "w4a8kv4", "w4a8kv8-chn", "w4a8kv4-chn"})
    EXPECT_EQ(parse_precision_choice(p)->name(), p);
  EXPECT_EQ(parse_precision_choice("w4a8kv4-g128")->name(), "w4a8kv4");
  EXPECT_FALSE(parse_precision_choice("auto").has_value());
  EXPECT_EQ(parse_precision_choice("w4a8kv4-chn")->weight_format(), WeightFormat::kW4PerChannel);
  EXPECT_EQ(parse_precision_choice("w4a8kv4")->weight_format(), WeightFormat::kW4G128);
  for (const char* bad : {"w3a8", "fp16-chn", "w4a16-chn", ""}) EXPECT_THROW(parse_precision_choice(bad), Error) << bad;
}

}  // namespace
}  // namespace qserve
