#include "quant/calib_forward.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/half.h"
#include "quant/kv_format.h"
#include "core/thread_pool.h"
#include "quant/f32_matmul.h"

namespace qserve::quant {
namespace {

void update_max(std::vector<float>& m, const float* x, int64_t rows, int64_t n) {
  if (m.empty()) m.assign(n, 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i) m[i] = std::max(m[i], std::fabs(x[r * n + i]));
}

void keep_rows(Matrix& dst, const float* x, int64_t rows, int64_t n, int64_t every, int64_t first_index) {
  if (dst.cols == 0) dst.cols = n;
  for (int64_t r = 0; r < rows; ++r)
    if ((first_index + r) % every == 0) {
      dst.data.insert(dst.data.end(), x + r * n, x + (r + 1) * n);
      ++dst.rows;
    }
}

float silu(float x) { return x / (1.0f + std::exp(-x)); }

}  // namespace

void fake_quantize_rows_int8(float* x, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) {
    float* v = x + r * n;
    float amax = 0.0f;
    for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(v[i]));
    const float s = half_to_float(float_to_half(amax / 127.0f));  // as quantize_activation_row
    for (int64_t i = 0; i < n; ++i)
      v[i] = s > 0.0f ? s * std::clamp(std::nearbyint(v[i] / s), -127.0f, 127.0f) : 0.0f;
  }
}

void fake_quantize_kv(float* x, int64_t rows, int64_t heads, int64_t head_dim, int bits) {
  QS_CHECK(bits == 4 || bits == 8) << "KV bits " << bits;
  const KvDtype dt = bits == 4 ? KvDtype::kInt4 : KvDtype::kInt8;
  for (int64_t r = 0; r < rows * heads; ++r) {
    float* v = x + r * head_dim;
    for (int64_t i = 0; i < head_dim; ++i) v[i] = half_to_float(float_to_half(v[i]));  // the cache stores fp16 inputs
    const auto [mn, mx] = std::minmax_element(v, v + head_dim);
    const KvTokenParams p = kv_token_params(*mn, *mx, dt);
    for (int64_t i = 0; i < head_dim; ++i) v[i] = kv_dequantize_value(kv_quantize_value(v[i], p.scale, p.zero, dt), p.scale, p.zero);
  }
}

void rms_norm_rows(const float* x, const float* gain, float* y, int64_t rows, int64_t n, double eps) {
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[r * n + i]) * x[r * n + i];
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / n + eps));
    for (int64_t i = 0; i < n; ++i) y[r * n + i] = x[r * n + i] * inv * gain[i];
  }
}

void apply_rope(const LlamaShape& s, float* x, int64_t seqlen, int64_t n_heads) {
  const int64_t d = s.head_dim, half = d / 2;
  std::vector<float> cos_t(half), sin_t(half);
  for (int64_t p = 0; p < seqlen; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const double freq = std::pow(s.rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(d));
      cos_t[i] = static_cast<float>(std::cos(p * freq));
      sin_t[i] = static_cast<float>(std::sin(p * freq));
    }
    for (int64_t h = 0; h < n_heads; ++h) {
      float* v = x + (p * n_heads + h) * d;
      for (int64_t i = 0; i < half; ++i) {
        const int64_t a = s.rope_interleaved ? 2 * i : i;
        const int64_t b = s.rope_interleaved ? 2 * i + 1 : i + half;
        const float x0 = v[a], x1 = v[b];
        v[a] = x0 * cos_t[i] - x1 * sin_t[i];
        v[b] = x0 * sin_t[i] + x1 * cos_t[i];
      }
    }
  }
}

void block_forward(const LlamaShape& s, const BlockWeights& w, float* h, int64_t n_seq, int64_t seqlen,
                   BlockTaps* taps, const ForwardNumerics& num, BlockStop stop) {
  const int64_t hid = s.hidden, qd = s.q_dim(), kvd = s.kv_dim(), inter = s.intermediate, d = s.head_dim;
  std::vector<float> xn(seqlen * hid), q(seqlen * qd), k(seqlen * kvd), v(seqlen * kvd), att(seqlen * qd),
      out(seqlen * hid), g(seqlen * inter), u(seqlen * inter);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  for (int64_t sq = 0; sq < n_seq; ++sq) {
    float* hs = h + sq * seqlen * hid;
    const int64_t first = sq * seqlen;
    // Attention.
    rms_norm_rows(hs, w.attn_norm.data(), xn.data(), seqlen, hid, s.rms_eps);
    if (num.a8) fake_quantize_rows_int8(xn.data(), seqlen, hid);
    matmul_nt(xn.data(), seqlen, hid, w.q.data.data(), qd, q.data());
    matmul_nt(xn.data(), seqlen, hid, w.k.data.data(), kvd, k.data());
    matmul_nt(xn.data(), seqlen, hid, w.v.data.data(), kvd, v.data());
    apply_rope(s, q.data(), seqlen, s.n_heads);
    apply_rope(s, k.data(), seqlen, s.n_kv_heads);
    if (num.kv_bits) {
      fake_quantize_kv(k.data(), seqlen, s.n_kv_heads, d, num.kv_bits);
      fake_quantize_kv(v.data(), seqlen, s.n_kv_heads, d, num.kv_bits);
    }
    if (taps) {
      update_max(taps->max_attn_in, xn.data(), seqlen, hid);
      update_max(taps->max_k, k.data(), seqlen, kvd);
      update_max(taps->max_q, q.data(), seqlen, qd);
      if (taps->k_abs_sum.empty()) taps->k_abs_sum.assign(kvd, 0.0f);
      for (int64_t t = 0; t < seqlen; ++t)
        for (int64_t i = 0; i < kvd; ++i) taps->k_abs_sum[i] += std::fabs(k[t * kvd + i]);
      keep_rows(taps->attn_in, xn.data(), seqlen, hid, taps->keep_every, first);
    }
    ThreadPool::global().parallel_for(s.n_heads, [&](int64_t h0, int64_t h1) {
      std::vector<float> p(seqlen);
      for (int64_t head = h0; head < h1; ++head) {
        const int64_t kvh = head / s.group();
        for (int64_t t = 0; t < seqlen; ++t) {
          const float* qt = &q[(t * s.n_heads + head) * d];
          float mx = -INFINITY;
          for (int64_t j = 0; j <= t; ++j) {
            const float* kj = &k[(j * s.n_kv_heads + kvh) * d];
            float dot = 0;
            for (int64_t i = 0; i < d; ++i) dot += qt[i] * kj[i];
            p[j] = dot * scale;
            mx = std::max(mx, p[j]);
          }
          double sum = 0;
          for (int64_t j = 0; j <= t; ++j) {
            p[j] = std::exp(p[j] - mx);
            sum += p[j];
          }
          float* o = &att[(t * s.n_heads + head) * d];
          std::fill(o, o + d, 0.0f);
          for (int64_t j = 0; j <= t; ++j) {
            const float pj = static_cast<float>(p[j] / sum);
            const float* vj = &v[(j * s.n_kv_heads + kvh) * d];
            for (int64_t i = 0; i < d; ++i) o[i] += pj * vj[i];
          }
        }
      }
    });
    if (taps) {
      update_max(taps->max_o_in, att.data(), seqlen, qd);
      keep_rows(taps->o_in, att.data(), seqlen, qd, taps->keep_every, first);
    }
    if (stop == BlockStop::kAfterOIn) continue;
    if (num.a8) fake_quantize_rows_int8(att.data(), seqlen, qd);
    matmul_nt(att.data(), seqlen, qd, w.o.data.data(), hid, out.data());
    for (int64_t i = 0; i < seqlen * hid; ++i) hs[i] += out[i];
    // MLP.
    rms_norm_rows(hs, w.mlp_norm.data(), xn.data(), seqlen, hid, s.rms_eps);
    if (num.a8) fake_quantize_rows_int8(xn.data(), seqlen, hid);
    if (taps) {
      update_max(taps->max_mlp_in, xn.data(), seqlen, hid);
      keep_rows(taps->mlp_in, xn.data(), seqlen, hid, taps->keep_every, first);
    }
    if (stop == BlockStop::kAfterMlpIn) continue;
    matmul_nt(xn.data(), seqlen, hid, w.gate.data.data(), inter, g.data());
    matmul_nt(xn.data(), seqlen, hid, w.up.data.data(), inter, u.data());
    for (int64_t i = 0; i < seqlen * inter; ++i) g[i] = silu(g[i]) * u[i];
    if (taps) {
      update_max(taps->max_down_in, g.data(), seqlen, inter);
      keep_rows(taps->down_in, g.data(), seqlen, inter, taps->keep_every, first);
      taps->tokens += seqlen;
    }
    if (stop == BlockStop::kAfterDownIn) continue;
    if (num.a8) fake_quantize_rows_int8(g.data(), seqlen, inter);
    matmul_nt(g.data(), seqlen, inter, w.down.data.data(), hid, out.data());
    for (int64_t i = 0; i < seqlen * hid; ++i) hs[i] += out[i];
  }
}

std::vector<float> model_logits(const LlamaShape& s, const OuterWeights& outer,
                                const std::vector<BlockWeights>& blocks, const std::vector<int32_t>& tokens) {
  const int64_t n = static_cast<int64_t>(tokens.size()), hid = s.hidden;
  std::vector<float> h(n * hid);
  for (int64_t t = 0; t < n; ++t) {
    QS_CHECK(tokens[t] >= 0 && tokens[t] < s.vocab) << "token " << tokens[t];
    std::copy_n(outer.embed.row(tokens[t]), hid, h.begin() + t * hid);
  }
  for (const auto& b : blocks) block_forward(s, b, h.data(), 1, n, nullptr);
  std::vector<float> xn(n * hid), logits(n * s.vocab);
  rms_norm_rows(h.data(), outer.final_norm.data(), xn.data(), n, hid, s.rms_eps);
  matmul_nt(xn.data(), n, hid, outer.lm_head.data.data(), s.vocab, logits.data());
  return logits;
}

}  // namespace qserve::quant
