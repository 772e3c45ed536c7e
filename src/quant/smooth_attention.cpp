#include "quant/smooth_attention.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace qserve::quant {

std::vector<float> smooth_attention_scales(const LlamaShape& s, const std::vector<float>& max_k, double alpha) {
  QS_CHECK(static_cast<int64_t>(max_k.size()) == s.kv_dim()) << "max_k size " << max_k.size();
  const int64_t d = s.head_dim, half = d / 2;
  std::vector<float> lambda(max_k.size(), 1.0f);
  for (int64_t h = 0; h < s.n_kv_heads; ++h)
    for (int64_t i = 0; i < d; ++i) {
      const int64_t pair = s.rope_interleaved ? (i ^ 1) : (i < half ? i + half : i - half);
      const double m = std::max(max_k[h * d + i], max_k[h * d + pair]);
      // A dead channel (max 0) keeps lambda 1; clamp keeps q/k finite.
      lambda[h * d + i] = m > 0 ? static_cast<float>(std::clamp(std::pow(m, alpha), 1e-4, 1e4)) : 1.0f;
    }
  return lambda;
}

void apply_smooth_attention(const LlamaShape& s, BlockWeights& w, const std::vector<float>& lambda) {
  const int64_t d = s.head_dim;
  for (int64_t kvh = 0; kvh < s.n_kv_heads; ++kvh)
    for (int64_t i = 0; i < d; ++i) {
      const float l = lambda[kvh * d + i];
      float* krow = w.k.row(kvh * d + i);
      for (int64_t c = 0; c < w.k.cols; ++c) krow[c] /= l;
      for (int64_t g = 0; g < s.group(); ++g) {
        float* qrow = w.q.row((kvh * s.group() + g) * d + i);
        for (int64_t c = 0; c < w.q.cols; ++c) qrow[c] *= l;
      }
    }
}

double key_outlier_ratio(const std::vector<float>& max_k) {
  if (max_k.empty()) return 0;
  std::vector<float> v = max_k;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  const double median = v[v.size() / 2];
  const double mx = *std::max_element(max_k.begin(), max_k.end());
  return median > 0 ? mx / median : 0;
}

}  // namespace qserve::quant
