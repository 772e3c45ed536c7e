// The CPU reference of RoPE + KV write and paged attention, checked against
// a dense attention written out independently, on scattered pages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "backend/cpu/fused_ops.h"
#include "backend/cpu/paged_attention.h"
#include "backend/cpu/rope.h"
#include "backend/cpu/sampling.h"
#include "core/half.h"

namespace qserve {
namespace {

struct Fixture {
  AttentionShape shape;
  KvPageLayout layout;
  std::vector<uint8_t> k_pool, v_pool;
  PagedKvCache cache;
  std::vector<int32_t> page_table;  // [batch, stride]
  int stride = 0;

  Fixture(AttentionShape s, KvDtype dtype, int page_size, const std::vector<int>& ctx, std::mt19937& rng)
      : shape(s) {
    layout = {.page_size = page_size, .num_kv_heads = s.num_kv_heads, .head_dim = s.head_dim, .dtype = dtype};
    int total = 0;
    for (int c : ctx) {
      stride = std::max(stride, (c + page_size - 1) / page_size);
      total += (c + page_size - 1) / page_size;
    }
    const int num_pages = total + 3;
    std::vector<int32_t> perm(num_pages);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);  // pages scattered
    page_table.assign(ctx.size() * stride, -1);
    int next = 0;
    for (size_t b = 0; b < ctx.size(); ++b)
      for (int j = 0; j < (ctx[b] + page_size - 1) / page_size; ++j) page_table[b * stride + j] = perm[next++];
    k_pool.assign(num_pages * layout.page_bytes(), 0x5A);
    v_pool.assign(num_pages * layout.page_bytes(), 0x5A);
    cache = {.k_pages = k_pool.data(), .v_pages = v_pool.data(), .num_pages = num_pages, .layout = layout};
  }
  int slot(int b, int pos) const { return page_table[b * stride + pos / layout.page_size] * layout.page_size + pos % layout.page_size; }
};

std::vector<uint16_t> random_f16(std::mt19937& rng, size_t n, float sd = 1.f) {
  std::normal_distribution<float> d(0.f, sd);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = float_to_half(d(rng));
  return v;
}

TEST(Rope, RotationKeepsNormAndConventionsArePermutations) {
  RopeConfig cfg;
  cfg.theta = 500000.f;
  const int d = 64;
  const auto table = build_rope_table(cfg, d, 100);
  std::mt19937 rng(1);
  std::normal_distribution<float> n;
  std::vector<float> x(d);
  for (auto& v : x) v = n(rng);
  for (RopeStyle style : {RopeStyle::kRotateHalf, RopeStyle::kInterleaved}) {
    std::vector<float> y = x;
    for (int i = 0; i < d / 2; ++i) {
      int a, b;
      rope_pair(style, d, i, a, b);
      rope_rotate(x[a], x[b], table[(37 * d / 2 + i) * 2], table[(37 * d / 2 + i) * 2 + 1], y[a], y[b]);
    }
    double nx = 0, ny = 0;
    for (int i = 0; i < d; ++i) nx += x[i] * x[i], ny += y[i] * y[i];
    EXPECT_NEAR(nx, ny, 1e-4 * nx);
  }
}

TEST(Rope, Llama3ScalingKeepsHighAndDividesLowFrequencies) {
  RopeConfig cfg{.theta = 500000.f, .llama3_factor = 8.f};
  const auto plain = rope_inv_freq(RopeConfig{.theta = 500000.f}, 128);
  const auto scaled = rope_inv_freq(cfg, 128);
  EXPECT_DOUBLE_EQ(scaled[0], plain[0]);
  EXPECT_NEAR(scaled[63], plain[63] / 8, 1e-12);
  for (int i = 0; i < 64; ++i) EXPECT_LE(scaled[i], plain[i] * (1 + 1e-12));
}

// Dense reference: fp16 K/V straight from the qkv input (what an FP16 cache holds).
TEST(PagedAttentionCpu, Fp16CacheMatchesDenseAttentionAndChunkingAgrees) {
  std::mt19937 rng(42);
  const AttentionShape shape{.num_q_heads = 8, .num_kv_heads = 2, .head_dim = 64};
  const std::vector<int> ctx{1, 40, 70};
  for (RopeStyle style : {RopeStyle::kRotateHalf, RopeStyle::kInterleaved}) {
    Fixture f(shape, KvDtype::kFp16, 16, ctx, rng);
    const int row = (8 + 4) * 64;
    const auto table = build_rope_table(RopeConfig{.style = style}, 64, 128);
    // Write every token of every sequence in one batch (a full prefill).
    std::vector<int32_t> pos, slots;
    for (size_t b = 0; b < ctx.size(); ++b)
      for (int p = 0; p < ctx[b]; ++p) pos.push_back(p), slots.push_back(f.slot(b, p));
    const int T = static_cast<int>(pos.size());
    const auto qkv = random_f16(rng, static_cast<size_t>(T) * row);
    const auto bias = random_f16(rng, row, 0.1f);
    std::vector<uint16_t> q(static_cast<size_t>(T) * 8 * 64);
    const QkvInput in{.q = qkv.data(), .k = qkv.data() + 8 * 64, .v = qkv.data() + 10 * 64, .q_stride = row, .k_stride = row,
                      .v_stride = row, .q_bias = bias.data(), .k_bias = bias.data() + 8 * 64, .v_bias = bias.data() + 10 * 64};
    rope_kv_write_cpu(in, {T, pos.data(), slots.data()}, shape, style, table.data(), q.data(), f.cache);
    std::vector<int32_t> starts{0};
    for (int c : ctx) starts.push_back(starts.back() + c);
    std::vector<uint16_t> out(q.size(), 0xFFFF);
    const float scale = 0.125f;
    paged_attention_cpu(q.data(), shape, f.cache, {3, starts.data(), ctx.data(), f.page_table.data(), f.stride}, scale, out.data());
    // dense: rotate k the same way
    int t0 = 0;
    for (size_t b = 0; b < ctx.size(); ++b) {
      for (int i = 0; i < ctx[b]; ++i) {
        for (int h = 0; h < 8; ++h) {
          const int kvh = h / 4;
          std::vector<double> s(i + 1);
          for (int j = 0; j <= i; ++j) {
            // k_j: rotate from qkv
            std::vector<float> k(64);
            for (int e = 0; e < 64; ++e)
              k[e] = half_to_float(qkv[(t0 + j) * row + (8 + kvh) * 64 + e]) + half_to_float(bias[(8 + kvh) * 64 + e]);
            std::vector<float> kr = k;
            for (int p = 0; p < 32; ++p) {
              int a, bb;
              rope_pair(style, 64, p, a, bb);
              const float c = table[(j * 32 + p) * 2], sn = table[(j * 32 + p) * 2 + 1];
              kr[a] = round_to_half(k[a] * c - k[bb] * sn);
              kr[bb] = round_to_half(k[bb] * c + k[a] * sn);
            }
            double dot = 0;
            for (int e = 0; e < 64; ++e) dot += half_to_float(q[((t0 + i) * 8 + h) * 64 + e]) * kr[e];
            s[j] = dot * scale;
          }
          const double mx = *std::max_element(s.begin(), s.end());
          double z = 0;
          for (auto& v : s) z += (v = std::exp(v - mx));
          for (int e = 0; e < 64; ++e) {
            double acc = 0;
            for (int j = 0; j <= i; ++j)
              acc += s[j] / z * round_to_half(half_to_float(qkv[(t0 + j) * row + (10 + kvh) * 64 + e]) +
                                              half_to_float(bias[(10 + kvh) * 64 + e]));
            ASSERT_NEAR(half_to_float(out[((t0 + i) * 8 + h) * 64 + e]), acc, 2e-3 + 2e-3 * std::fabs(acc))
                << "b=" << b << " i=" << i << " h=" << h << " e=" << e;
          }
        }
      }
      t0 += ctx[b];
    }
    // Decode of the last token of each sequence = the last prefill row.
    std::vector<uint16_t> qd, od(3 * 8 * 64);
    std::vector<int32_t> dstarts{0, 1, 2, 3};
    for (size_t b = 0; b < 3; ++b) {
      const int t = starts[b + 1] - 1;
      qd.insert(qd.end(), q.begin() + t * 512, q.begin() + (t + 1) * 512);
    }
    paged_attention_cpu(qd.data(), shape, f.cache, {3, dstarts.data(), ctx.data(), f.page_table.data(), f.stride}, scale, od.data());
    for (size_t b = 0; b < 3; ++b)
      for (int e = 0; e < 512; ++e) ASSERT_EQ(od[b * 512 + e], out[(starts[b + 1] - 1) * 512 + e]);
  }
}

TEST(FusedOpsCpu, ResidualAddUpdatesTheStream) {
  std::mt19937 rng(5);
  const int rows = 3, cols = 256;
  auto x = random_f16(rng, rows * cols), res = random_f16(rng, rows * cols), gamma = random_f16(rng, cols);
  const auto res0 = res;
  std::vector<int8_t> q(rows * cols);
  std::vector<uint16_t> s(rows), sum(rows), y(rows * cols);
  rmsnorm_quant_cpu(x.data(), res.data(), gamma.data(), rows, cols, 1e-5f, {q.data(), s.data(), sum.data()});
  for (int i = 0; i < rows * cols; ++i)
    ASSERT_EQ(res[i], float_to_half(half_to_float(x[i]) + half_to_float(res0[i])));
  auto res2 = res0;
  rmsnorm_cpu(x.data(), res2.data(), gamma.data(), rows, cols, 1e-5f, y.data());
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < cols; ++i)
      ASSERT_NEAR(q[r * cols + i] * half_to_float(s[r]), half_to_float(y[r * cols + i]),
                  0.51f * half_to_float(s[r]) + 2e-3f * std::fabs(half_to_float(y[r * cols + i])));
}

TEST(SamplingCpu, GreedyTopKAndFrequencies) {
  std::vector<float> logits{0.1f, 2.0f, 1.0f, 2.0f, -5.f, 1.5f};
  EXPECT_EQ(sample_token_cpu(logits.data(), 6, {}, 0), 1);  // ties: lowest index
  SamplingParams p{.temperature = 1.f, .top_k = 3, .seed = 9};
  std::vector<int> counts(6, 0);
  for (int step = 0; step < 20000; ++step) counts[sample_token_cpu(logits.data(), 6, p, step)]++;
  EXPECT_EQ(counts[0] + counts[2] + counts[4], 0);  // outside the top 3
  const double z = 2 * std::exp(2.0) + std::exp(1.5);
  EXPECT_NEAR(counts[1] / 20000.0, std::exp(2.0) / z, 0.02);
  EXPECT_NEAR(counts[5] / 20000.0, std::exp(1.5) / z, 0.02);
  SamplingParams tp{.temperature = 1.f, .top_p = 0.5f, .seed = 3};
  for (int step = 0; step < 100; ++step) {
    const int t = sample_token_cpu(logits.data(), 6, tp, step);
    EXPECT_TRUE(t == 1 || t == 3) << t;  // the two 2.0 logits hold > 50%
  }
  EXPECT_EQ(sample_token_cpu(logits.data(), 6, p, 77), sample_token_cpu(logits.data(), 6, p, 77));
}

}  // namespace
}  // namespace qserve
