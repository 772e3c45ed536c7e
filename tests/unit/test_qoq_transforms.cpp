// QoQ transforms (spec section 6) leave the FP32 model's logits unchanged
// before quantization: norm folding, rotation, SmoothAttention, output
// smoothing, SmoothQuant input smoothing and the channel reorder.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "quant/calib_forward.h"
#include "quant/channel_reorder.h"
#include "quant/fold_norm.h"
#include "quant/hadamard.h"
#include "quant/quantizer.h"
#include "quant/rotate.h"
#include "quant/rotate_value.h"
#include "quant/smooth_attention.h"
#include "quant/smooth_output.h"

#include "random_matrix.h"

namespace qserve::quant {
namespace {

struct TinyModel {
  LlamaShape shape;
  OuterWeights outer;
  std::vector<BlockWeights> blocks;
};

std::vector<float> random_gain(std::mt19937& rng, int64_t n) {
  std::uniform_real_distribution<float> u(0.5f, 1.5f);
  std::vector<float> g(n);
  for (auto& v : g) v = u(rng);
  return g;
}

TinyModel make_model(int64_t hidden, bool interleaved, uint32_t seed) {
  std::mt19937 rng(seed);
  TinyModel m;
  LlamaShape& s = m.shape;
  s.hidden = hidden;
  s.intermediate = 160;
  s.n_heads = 4;
  s.n_kv_heads = 2;
  s.head_dim = 16;
  s.vocab = 50;
  s.n_layers = 2;
  s.rope_interleaved = interleaved;
  const float ws = 1.0f / std::sqrt(static_cast<float>(hidden));
  m.outer.embed = test::gaussian_matrix(rng, s.vocab, hidden, 1.0f);
  // A few outlier channels in the stream, as real models have.
  for (int64_t r = 0; r < s.vocab; ++r) m.outer.embed.at(r, 3) *= 8.0f;
  m.outer.final_norm = random_gain(rng, hidden);
  m.outer.lm_head = m.outer.embed;  // tied
  for (int l = 0; l < s.n_layers; ++l) {
    BlockWeights b;
    b.q = test::gaussian_matrix(rng, s.q_dim(), hidden, ws);
    b.k = test::gaussian_matrix(rng, s.kv_dim(), hidden, ws);
    for (int64_t c = 0; c < hidden; ++c) b.k.at(5, c) *= 6.0f;  // a key outlier channel
    b.v = test::gaussian_matrix(rng, s.kv_dim(), hidden, ws);
    b.o = test::gaussian_matrix(rng, hidden, s.q_dim(), 0.25f);
    b.gate = test::gaussian_matrix(rng, s.intermediate, hidden, ws);
    b.up = test::gaussian_matrix(rng, s.intermediate, hidden, ws);
    b.down = test::gaussian_matrix(rng, hidden, s.intermediate, 0.1f);
    b.attn_norm = random_gain(rng, hidden);
    b.mlp_norm = random_gain(rng, hidden);
    m.blocks.push_back(std::move(b));
  }
  return m;
}

std::vector<int32_t> tokens(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& v : t) v = static_cast<int32_t>(rng() % 50);
  return t;
}

// max |a - b| / max |a|
double rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, static_cast<double>(std::fabs(a[i] - b[i])));
    den = std::max(den, static_cast<double>(std::fabs(a[i])));
  }
  return num / den;
}

// Runs the calibration forward of each block of m on `seq` and returns the taps.
std::vector<BlockTaps> collect_taps(const TinyModel& m, const std::vector<int32_t>& seq) {
  const int64_t n = static_cast<int64_t>(seq.size());
  std::vector<float> h(n * m.shape.hidden);
  for (int64_t t = 0; t < n; ++t) std::copy_n(m.outer.embed.row(seq[t]), m.shape.hidden, h.begin() + t * m.shape.hidden);
  std::vector<BlockTaps> taps(m.blocks.size());
  for (size_t l = 0; l < m.blocks.size(); ++l) {
    taps[l].keep_every = 1;
    block_forward(m.shape, m.blocks[l], h.data(), 1, n, &taps[l]);
  }
  return taps;
}

TEST(Hadamard, PaleyAndSylvesterMatricesAreHadamard) {
  for (int m : {1, 2, 4, 8, 12, 20, 24, 28, 36, 44, 60, 64}) {
    const std::vector<int8_t> h = hadamard_matrix(m);
    ASSERT_EQ(h.size(), static_cast<size_t>(m * m)) << "order " << m;
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < m; ++j) {
        int dot = 0;
        for (int k = 0; k < m; ++k) dot += h[i * m + k] * h[j * m + k];
        ASSERT_EQ(dot, i == j ? m : 0) << "order " << m << " rows " << i << "," << j;
      }
  }
  EXPECT_TRUE(hadamard_matrix(6).empty());
}

TEST(Hadamard, RotationIsOrthogonalForOddSizes) {
  // 576 = 16 * 36 (the default model), 96 = 8 * 12, 30 has no Hadamard (dense fallback).
  for (int64_t n : {64, 96, 576, 30}) {
    Rotation r(n, 7);
    const std::vector<float> q = r.dense();
    double worst = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double dot = 0;
        for (int64_t k = 0; k < n; ++k) dot += static_cast<double>(q[i * n + k]) * q[j * n + k];
        worst = std::max(worst, std::fabs(dot - (i == j ? 1.0 : 0.0)));
      }
    EXPECT_LT(worst, 1e-5) << r.describe();
  }
  EXPECT_NE(Rotation(576).describe().find("paley hadamard 36"), std::string::npos);
  EXPECT_NE(Rotation(30).describe().find("dense"), std::string::npos);
}

TEST(Hadamard, LeftTransposedMatchesDense) {
  const int64_t n = 96, cols = 37;
  Rotation r(n, 3);
  const std::vector<float> q = r.dense();
  std::mt19937 rng(1);
  Matrix w = test::gaussian_matrix(rng, n, cols, 1.0f);
  Matrix want(n, cols);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < cols; ++c) {
      double acc = 0;
      for (int64_t k = 0; k < n; ++k) acc += static_cast<double>(q[k * n + i]) * w.at(k, c);  // Q^T W
      want.at(i, c) = static_cast<float>(acc);
    }
  r.apply_left_transposed(w.data.data(), cols);
  EXPECT_LT(rel_diff(want.data, w.data), 1e-5);
}

class TransformInvariance : public ::testing::TestWithParam<bool> {};

TEST_P(TransformInvariance, LogitsUnchangedByEachStep) {
  TinyModel m = make_model(96, GetParam(), 11);
  const std::vector<int32_t> seq = tokens(24, 5);
  const std::vector<float> ref = model_logits(m.shape, m.outer, m.blocks, seq);
  auto check = [&](const char* step) {
    const double d = rel_diff(ref, model_logits(m.shape, m.outer, m.blocks, seq));
    EXPECT_LT(d, 1e-4) << "after " << step;
  };
  for (auto& b : m.blocks) fold_block_norms(b);
  fold_final_norm(m.outer);
  check("norm folding");

  Rotation rot(m.shape.hidden, 0);
  rotate_embedding(rot, m.outer.embed);
  rotate_lm_head(rot, m.outer.lm_head);
  for (auto& b : m.blocks) rotate_block(rot, b);
  check("rotation");
  for (auto& b : m.blocks) rotate_value_heads(m.shape, b, 0);
  check("value rotation");

  std::vector<BlockTaps> taps = collect_taps(m, seq);
  for (size_t l = 0; l < m.blocks.size(); ++l) {
    const std::vector<float> lambda = smooth_attention_scales(m.shape, taps[l].max_k, 0.5);
    apply_smooth_attention(m.shape, m.blocks[l], lambda);
  }
  check("SmoothAttention");
  for (size_t l = 0; l < m.blocks.size(); ++l) {
    smooth_down(m.blocks[l], taps[l].max_down_in, 0.2);
    smooth_o_v(m.shape, m.blocks[l], taps[l].max_o_in, 0.2);
  }
  check("output smoothing");
  for (size_t l = 0; l < m.blocks.size(); ++l) {
    BlockWeights& b = m.blocks[l];
    smooth_norm_inputs(b.attn_norm, {&b.q, &b.k, &b.v}, taps[l].max_attn_in, 0.5);
    smooth_norm_inputs(b.mlp_norm, {&b.gate, &b.up}, taps[l].max_mlp_in, 0.5);
  }
  check("input smoothing");
  for (size_t l = 0; l < m.blocks.size(); ++l)
    reorder_mlp_channels(m.blocks[l], salience_order(taps[l].max_down_in));
  check("channel reorder");
}

INSTANTIATE_TEST_SUITE_P(RopeStyles, TransformInvariance, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "interleaved" : "rotate_half"; });

TEST(ValueRotation, SpreadsAValueOutlierChannel) {
  // Value channel 3 of KV head 0 is 10x the others; after the rotation inside the head no
  // channel of that head stands out, and the other head's rows are rotated too.
  TinyModel m = make_model(96, false, 8);
  const LlamaShape& s = m.shape;
  BlockWeights& b = m.blocks[0];
  for (int64_t c = 0; c < s.hidden; ++c) b.v.at(3, c) *= 10.0f;
  const Matrix v0 = b.v;
  rotate_value_heads(s, b, 0);
  auto row_norm = [](const Matrix& w, int64_t r) {
    double n = 0;
    for (int64_t c = 0; c < w.cols; ++c) n += static_cast<double>(w.at(r, c)) * w.at(r, c);
    return std::sqrt(n);
  };
  const int64_t d = s.head_dim;
  double before = 0, after = 0, frob0 = 0, frob1 = 0;
  for (int64_t r = 0; r < d; ++r) {
    before = std::max(before, row_norm(v0, r));
    after = std::max(after, row_norm(b.v, r));
    frob0 += row_norm(v0, r) * row_norm(v0, r);
    frob1 += row_norm(b.v, r) * row_norm(b.v, r);
  }
  EXPECT_LT(after, 0.5 * before);
  EXPECT_NEAR(frob1, frob0, 1e-3 * frob0);  // orthogonal within the head
  EXPECT_GT(rel_diff(v0.data, b.v.data), 0.1);
}

TEST(SmoothAttention, ShrinksKeyOutliersAndKeepsPairsEqual) {
  TinyModel m = make_model(96, false, 3);
  std::vector<BlockTaps> taps = collect_taps(m, tokens(32, 9));
  const std::vector<float> lambda = smooth_attention_scales(m.shape, taps[0].max_k, 0.5);
  const int64_t d = m.shape.head_dim;
  for (int64_t h = 0; h < m.shape.n_kv_heads; ++h)
    for (int64_t i = 0; i < d / 2; ++i) EXPECT_EQ(lambda[h * d + i], lambda[h * d + i + d / 2]);
  std::vector<float> after = taps[0].max_k;
  for (size_t i = 0; i < after.size(); ++i) after[i] /= lambda[i];
  EXPECT_LT(key_outlier_ratio(after), key_outlier_ratio(taps[0].max_k));
}

TEST(SmoothAttention, TransformBlockReportsOutliers) {
  TinyModel m = make_model(96, false, 4);
  std::vector<BlockTaps> taps = collect_taps(m, tokens(32, 2));
  QuantizeOptions opt;
  opt.smooth_output = opt.reorder = opt.clip = false;
  const LayerReport rep = transform_block(m.shape, m.blocks[0], taps[0], opt);
  EXPECT_GT(rep.key_outlier_before, rep.key_outlier_after);
}

TEST(SmoothAttention, MeanStatisticScalesByMeanAbsKey) {
  // --smooth-attn-mean: lambda from mean |K| per channel (k_abs_sum / tokens), not max |K|.
  TinyModel m = make_model(96, false, 6);
  std::vector<BlockTaps> taps = collect_taps(m, tokens(32, 4));
  QuantizeOptions opt;
  opt.smooth_output = opt.reorder = opt.clip = false;
  opt.smooth_attention_mean = true;
  opt.smooth_attention_alpha = 1.0;
  BlockWeights got = m.blocks[0], want = m.blocks[0], by_max = m.blocks[0];
  BlockTaps t1 = taps[0], t2 = taps[0];
  transform_block(m.shape, got, t1, opt);
  std::vector<float> mean(taps[0].k_abs_sum.size());
  for (size_t i = 0; i < mean.size(); ++i) mean[i] = taps[0].k_abs_sum[i] / static_cast<float>(taps[0].tokens);
  apply_smooth_attention(m.shape, want, smooth_attention_scales(m.shape, mean, 1.0));
  EXPECT_LT(rel_diff(want.k.data, got.k.data), 1e-6);
  EXPECT_LT(rel_diff(want.q.data, got.q.data), 1e-6);
  opt.smooth_attention_mean = false;
  transform_block(m.shape, by_max, t2, opt);
  EXPECT_GT(rel_diff(by_max.k.data, got.k.data), 1e-3);
}

}  // namespace
}  // namespace qserve::quant
