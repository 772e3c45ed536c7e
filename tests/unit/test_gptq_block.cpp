// GPTQ's staged refinements (quant/gptq_block.h, quant/gptq.h gptq_ls_target):
// the least-squares target solves its ridge regression and is the FP weights
// when the two streams agree; "sequential" measures each stage's inputs on the
// quantized stages before it (q/k/v unchanged, the later stages' codes change);
// the FP target lowers the block's output error against the FP model's outputs
// on a calibration stream that carries upstream error; the GPTQ-aware clip
// search never loses to the searched grid, row by row.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "quant/calib_forward.h"
#include "quant/gptq.h"
#include "quant/gptq_block.h"
#include "quant/quantizer.h"
#include "quant/weight_clip.h"
#include "random_matrix.h"

namespace qserve::quant {
namespace {

// sum_t || a_t wa^T - b_t wb^T ||^2 / t
double output_gap(const Matrix& a, const Matrix& wa, const Matrix& b, const Matrix& wb) {
  double s = 0;
  for (int64_t r = 0; r < a.rows; ++r)
    for (int64_t o = 0; o < wa.rows; ++o) {
      double ya = 0, yb = 0;
      for (int64_t i = 0; i < a.cols; ++i) ya += static_cast<double>(a.at(r, i)) * wa.at(o, i), yb += static_cast<double>(b.at(r, i)) * wb.at(o, i);
      s += (ya - yb) * (ya - yb);
    }
  return s / static_cast<double>(a.rows);
}

TEST(GptqLsTarget, EqualStreamsGiveTheWeightsAndAShiftIsUndone) {
  std::mt19937 rng(7);
  const int64_t k = 48, n = 12, t = 400;
  Matrix xq = test::gaussian_matrix(rng, t, k);
  for (int64_t r = 0; r < t; ++r) xq.at(r, 5) *= 8.0f;  // an outlier channel: H far from identity
  const Matrix w = test::gaussian_matrix(rng, n, k, 0.2f);
  const GptqFactor f = gptq_factor(xq, {.damp = 1e-4, .act_order = true});
  // The same stream: W* = W.
  const Matrix same = gptq_ls_target(w, xq, xq, f);
  for (size_t i = 0; i < w.data.size(); ++i) ASSERT_NEAR(same.data[i], w.data[i], 1e-5);
  // A reference stream that is a linear function of the quantized one, x_ref = x_q A:
  // W* = W A^T reproduces x_ref W^T from x_q almost exactly (the damping aside).
  Matrix a = test::gaussian_matrix(rng, k, k, 0.1f / std::sqrt(static_cast<float>(k)));
  for (int64_t i = 0; i < k; ++i) a.at(i, i) += 1.0f;
  Matrix xr(t, k);
  for (int64_t r = 0; r < t; ++r)
    for (int64_t j = 0; j < k; ++j) {
      double s = 0;
      for (int64_t m = 0; m < k; ++m) s += static_cast<double>(xq.at(r, m)) * a.at(m, j);
      xr.at(r, j) = static_cast<float>(s);
    }
  const Matrix ws = gptq_ls_target(w, xq, xr, f);
  const double before = output_gap(xq, w, xr, w), after = output_gap(xq, ws, xr, w);
  EXPECT_GT(before, 0.01);
  EXPECT_LT(after, 1e-3 * before) << before << " -> " << after;
  // Damping is a ridge towards W: a huge one leaves W (almost) unchanged.
  const GptqFactor stiff = gptq_factor(xq, {.damp = 1e4, .act_order = false});
  const Matrix wr = gptq_ls_target(w, xq, xr, stiff);
  double moved = 0, ref = 0;
  for (size_t i = 0; i < w.data.size(); ++i) moved += std::fabs(wr.data[i] - w.data[i]), ref += std::fabs(ws.data[i] - w.data[i]);
  EXPECT_LT(moved, 0.01 * ref);
}

struct TinyBlock {
  LlamaShape s;
  BlockWeights w;
};

TinyBlock tiny_block(uint32_t seed) {
  std::mt19937 rng(seed);
  TinyBlock b;
  b.s.hidden = 128;
  b.s.intermediate = 256;
  b.s.n_heads = 4;
  b.s.n_kv_heads = 2;
  b.s.head_dim = 32;
  b.s.vocab = 10;
  b.s.n_layers = 1;
  const float ws = 1.0f / std::sqrt(128.0f);
  b.w.q = test::gaussian_matrix(rng, b.s.q_dim(), 128, ws);
  b.w.k = test::gaussian_matrix(rng, b.s.kv_dim(), 128, ws);
  b.w.v = test::gaussian_matrix(rng, b.s.kv_dim(), 128, ws);
  b.w.o = test::gaussian_matrix(rng, 128, b.s.q_dim(), 0.1f);
  b.w.gate = test::gaussian_matrix(rng, 256, 128, ws);
  b.w.up = test::gaussian_matrix(rng, 256, 128, ws);
  b.w.down = test::gaussian_matrix(rng, 128, 256, 0.06f);
  b.w.attn_norm.assign(128, 1.0f);
  b.w.mlp_norm.assign(128, 1.0f);
  return b;
}

std::vector<int> all_codes(const std::vector<QuantizedLinear>& ql, int i) {
  const QuantizedLinear& q = ql[i];
  std::vector<int> c(static_cast<size_t>(q.n * q.k));
  for (int64_t o = 0; o < q.n; ++o)
    for (int64_t j = 0; j < q.k; ++j) c[o * q.k + j] = int4_at(q.g128.qweight.data(), q.k, o, j);
  return c;
}

TEST(GptqBlock, SequentialAndFpTargetPickOtherCodesAndTheFpTargetTracksTheFpBlock) {
  const TinyBlock b = tiny_block(3);
  const int64_t n_seq = 4, seqlen = 48, hid = b.s.hidden;
  std::mt19937 rng(11);
  // The FP stream, and a "quantized" stream that carries upstream error (noise correlated
  // with the signal, as a quantized previous block's output would).
  Matrix h_fp = test::gaussian_matrix(rng, n_seq * seqlen, hid);
  for (int64_t r = 0; r < h_fp.rows; ++r) h_fp.at(r, 9) *= 6.0f;
  std::vector<float> h_q = h_fp.data;
  std::normal_distribution<float> noise(0.0f, 0.3f);
  for (float& v : h_q) v = 0.9f * v + noise(rng);
  const std::vector<float> h_in = h_q;

  QuantizeOptions opt;
  opt.precision = Precision::kW4A8KV4;
  opt.group = 128;
  opt.gptq = true;
  BlockTaps taps, fp_taps;
  taps.keep_every = fp_taps.keep_every = 1;
  std::vector<float> hq = h_q, hf = h_fp.data;
  block_forward(b.s, b.w, hq.data(), n_seq, seqlen, &taps);
  block_forward(b.s, b.w, hf.data(), n_seq, seqlen, &fp_taps);  // hf: the FP block's output on the FP stream

  auto run = [&](bool sequential, bool fp_target) {
    QuantizeOptions o = opt;
    o.gptq_sequential = sequential;
    o.gptq_fp_target = fp_target;
    LayerReport rep;
    auto ql = quantize_block_staged(b.s, b.w, b.w, taps, h_in, n_seq, seqlen, fp_target ? &fp_taps : nullptr, o, &rep);
    EXPECT_EQ(ql.size(), 7u);
    EXPECT_GT(rep.gptq_error_ratio, 0.0);
    return ql;
  };
  const auto plain = run(false, false), seq = run(true, false), fpt = run(true, true);
  // Plain staged GPTQ is quantize_block's GPTQ.
  const auto ref = quantize_block(b.w, b.w, taps, opt, nullptr);
  for (int i = 0; i < 7; ++i) EXPECT_EQ(all_codes(plain, i), all_codes(ref, i)) << "linear " << i;
  // Sequential: q/k/v see the block input either way; o, gate/up, down see quantized predecessors.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(all_codes(seq, i), all_codes(plain, i)) << "linear " << i;
  for (int i : {3, 4, 6}) EXPECT_NE(all_codes(seq, i), all_codes(plain, i)) << "linear " << i;
  for (int i = 0; i < 7; ++i) EXPECT_NE(all_codes(fpt, i), all_codes(seq, i)) << "linear " << i;

  // The quantized block's output on the quantized stream, against the FP block's on the FP stream.
  auto gap_to_fp = [&](const std::vector<QuantizedLinear>& ql) {
    BlockWeights wq = b.w;
    Matrix* ms[7] = {&wq.q, &wq.k, &wq.v, &wq.o, &wq.gate, &wq.up, &wq.down};
    for (int i = 0; i < 7; ++i) ms[i]->data = dequantize_linear(ql[i]);
    std::vector<float> h = h_in;
    block_forward(b.s, wq, h.data(), n_seq, seqlen, nullptr);
    double s = 0;
    for (size_t i = 0; i < h.size(); ++i) s += static_cast<double>(h[i] - hf[i]) * (h[i] - hf[i]);
    return s;
  };
  const double g_plain = gap_to_fp(plain), g_seq = gap_to_fp(seq), g_fpt = gap_to_fp(fpt);
  std::printf("  block output error against the FP block: plain %.4g, sequential %.4g, FP target %.4g\n", g_plain, g_seq,
              g_fpt);
  EXPECT_LT(g_fpt, 0.8 * g_seq);
  EXPECT_LT(g_fpt, 0.8 * g_plain);
}

TEST(GptqBlock, ClipSearchNeverLosesToTheSearchedGridAndWinsSomewhere) {
  // Per output row, the GPTQ result on the best of the searched clip and the uniform clips:
  // each row's output error is at most the searched grid's, some rows switch grid and
  // the layer error drops; the result is a valid g128 layer (scales and codes moved together).
  const TinyBlock b = tiny_block(5);
  const int64_t n_seq = 3, seqlen = 64;
  std::mt19937 rng(13);
  Matrix h = test::gaussian_matrix(rng, n_seq * seqlen, b.s.hidden);
  for (int64_t r = 0; r < h.rows; ++r) h.at(r, 17) *= 5.0f;
  QuantizeOptions opt;
  opt.precision = Precision::kW4A8KV4;
  opt.group = 128;
  opt.gptq = true;
  BlockTaps taps;
  taps.keep_every = 1;
  std::vector<float> hh = h.data;
  block_forward(b.s, b.w, hh.data(), n_seq, seqlen, &taps);
  // The grid of the searched clip (as transform_block sets it) and the unclipped targets.
  BlockWeights clipped = b.w;
  clip_weights(WeightFormat::kW4G128, 128, clipped.q, taps.attn_in);
  clip_weights(WeightFormat::kW4G128, 128, clipped.down, taps.down_in);
  const auto plain = quantize_block_staged(b.s, clipped, b.w, taps, h.data, n_seq, seqlen, nullptr, opt, nullptr);
  opt.gptq_clip_search = true;
  const auto searched = quantize_block_staged(b.s, clipped, b.w, taps, h.data, n_seq, seqlen, nullptr, opt, nullptr);
  const Matrix* xs[7] = {&taps.attn_in, &taps.attn_in, &taps.attn_in, &taps.o_in, &taps.mlp_in, &taps.mlp_in, &taps.down_in};
  const Matrix* ws[7] = {&b.w.q, &b.w.k, &b.w.v, &b.w.o, &b.w.gate, &b.w.up, &b.w.down};
  int switched = 0;
  double before = 0, after = 0;
  for (int i = 0; i < 7; ++i) {
    const std::vector<float> dp = dequantize_linear(plain[i]), ds = dequantize_linear(searched[i]);
    const Matrix& x = *xs[i];
    const Matrix& w = *ws[i];
    for (int64_t o = 0; o < w.rows; ++o) {
      double ep = 0, es = 0;
      for (int64_t t = 0; t < x.rows; ++t) {
        double yp = 0, ys = 0;
        for (int64_t j = 0; j < w.cols; ++j) {
          yp += static_cast<double>(x.at(t, j)) * (w.at(o, j) - dp[o * w.cols + j]);
          ys += static_cast<double>(x.at(t, j)) * (w.at(o, j) - ds[o * w.cols + j]);
        }
        ep += yp * yp, es += ys * ys;
      }
      EXPECT_LE(es, ep * (1 + 1e-4) + 1e-9) << "linear " << i << " row " << o;
      switched += es < ep * (1 - 1e-6);
      before += ep, after += es;
    }
    for (uint8_t s2 : searched[i].g128.s2) EXPECT_GE(s2, 1);
  }
  std::printf("  clip search: %d rows switched grid, layer error %.4g -> %.4g\n", switched, before, after);
  EXPECT_GT(switched, 10);
  EXPECT_LT(after, before);
}

}  // namespace
}  // namespace qserve::quant
