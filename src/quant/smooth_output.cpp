#include "quant/smooth_output.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "quant/fold_norm.h"

namespace qserve::quant {

std::vector<float> smoothing_scales(const std::vector<float>& max_x, const std::vector<float>& max_w,
                                    double alpha) {
  QS_CHECK(max_x.size() == max_w.size()) << max_x.size() << " vs " << max_w.size();
  std::vector<float> l(max_x.size(), 1.0f);
  for (size_t i = 0; i < l.size(); ++i) {
    if (max_x[i] <= 0 || max_w[i] <= 0) continue;
    const double v = std::pow(static_cast<double>(max_x[i]), alpha) / std::pow(static_cast<double>(max_w[i]), 1.0 - alpha);
    l[i] = static_cast<float>(std::clamp(v, 1e-4, 1e4));
  }
  return l;
}

std::vector<float> column_abs_max(const std::vector<const Matrix*>& ws) {
  std::vector<float> m(ws.at(0)->cols, 0.0f);
  for (const Matrix* w : ws) {
    QS_CHECK(w->cols == static_cast<int64_t>(m.size())) << "column count";
    for (int64_t r = 0; r < w->rows; ++r)
      for (int64_t c = 0; c < w->cols; ++c) m[c] = std::max(m[c], std::fabs(w->at(r, c)));
  }
  return m;
}

std::vector<float> smooth_down(BlockWeights& w, const std::vector<float>& max_down_in, double alpha) {
  std::vector<float> l = smoothing_scales(max_down_in, column_abs_max({&w.down}), alpha);
  std::vector<float> inv(l.size());
  for (size_t i = 0; i < l.size(); ++i) inv[i] = 1.0f / l[i];
  scale_rows(w.up, inv);
  scale_columns(w.down, l);
  return l;
}

std::vector<float> smooth_o_v(const LlamaShape& s, BlockWeights& w, const std::vector<float>& max_o_in,
                              double alpha) {
  const int64_t d = s.head_dim, kvd = s.kv_dim();
  QS_CHECK(static_cast<int64_t>(max_o_in.size()) == s.q_dim()) << "max_o_in size";
  const std::vector<float> wmax_q = column_abs_max({&w.o});  // [q_dim]
  std::vector<float> mx(kvd, 0.0f), mw(kvd, 0.0f);
  for (int64_t h = 0; h < s.n_heads; ++h) {
    const int64_t kvh = h / s.group();
    for (int64_t c = 0; c < d; ++c) {
      mx[kvh * d + c] = std::max(mx[kvh * d + c], max_o_in[h * d + c]);
      mw[kvh * d + c] = std::max(mw[kvh * d + c], wmax_q[h * d + c]);
    }
  }
  std::vector<float> l = smoothing_scales(mx, mw, alpha);  // [kv_dim]
  std::vector<float> inv(kvd), o_scale(s.q_dim());
  for (int64_t i = 0; i < kvd; ++i) inv[i] = 1.0f / l[i];
  for (int64_t h = 0; h < s.n_heads; ++h)
    for (int64_t c = 0; c < d; ++c) o_scale[h * d + c] = l[(h / s.group()) * d + c];
  scale_rows(w.v, inv);
  scale_columns(w.o, o_scale);
  return l;
}

std::vector<float> smooth_norm_inputs(std::vector<float>& norm_gain, const std::vector<Matrix*>& consumers,
                                      const std::vector<float>& max_in, double alpha) {
  std::vector<const Matrix*> cs(consumers.begin(), consumers.end());
  std::vector<float> l = smoothing_scales(max_in, column_abs_max(cs), alpha);
  for (size_t i = 0; i < l.size(); ++i) norm_gain[i] /= l[i];
  for (Matrix* m : consumers) scale_columns(*m, l);
  return l;
}

}  // namespace qserve::quant
