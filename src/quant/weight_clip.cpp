#include "quant/weight_clip.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "quant/f32_matmul.h"
#include "quant/quant_linear.h"

namespace qserve::quant {
namespace {

struct Range {
  float lo, hi;
};

}  // namespace

double clip_weights(WeightFormat format, int64_t group, Matrix& w, const Matrix& x, const ClipOptions& opt) {
  if (format == WeightFormat::kF16 || x.rows == 0) return 1.0;
  QS_CHECK(x.cols == w.cols) << "clip: inputs have " << x.cols << " channels, weight " << w.cols;
  const int64_t n = w.rows, k = w.cols;
  const bool grouped = format == WeightFormat::kW4G128 || format == WeightFormat::kW4A16;
  const int64_t gs = grouped ? group : k;
  const int64_t ng = (k + gs - 1) / gs;
  const bool symmetric = format == WeightFormat::kW8PerChannel;
  // Evenly spaced calibration rows.
  const int64_t rows = std::min(opt.max_rows, x.rows);
  // Per group: the original range, and the inputs restricted to the group ([rows, len]).
  std::vector<Range> range(static_cast<size_t>(n * ng));
  for (int64_t o = 0; o < n; ++o)
    for (int64_t g = 0; g < ng; ++g) {
      float lo = 0, hi = 0;
      for (int64_t i = g * gs; i < std::min(k, (g + 1) * gs); ++i) {
        lo = std::min(lo, w.at(o, i));
        hi = std::max(hi, w.at(o, i));
      }
      if (symmetric) hi = std::max(-lo, hi), lo = -hi;
      range[o * ng + g] = {lo, hi};
    }
  std::vector<std::vector<float>> xg(ng);
  for (int64_t g = 0; g < ng; ++g) {
    const int64_t i0 = g * gs, len = std::min(k, i0 + gs) - i0;
    xg[g].resize(rows * len);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t src = r * x.rows / rows;
      std::copy_n(x.row(src) + i0, len, xg[g].data() + r * len);
    }
  }
  std::vector<float> best_err(static_cast<size_t>(n * ng), std::numeric_limits<float>::infinity());
  std::vector<float> best_ratio(static_cast<size_t>(n * ng), 1.0f);
  Matrix clipped(n, k);
  std::vector<float> diff, out(static_cast<size_t>(rows * n));
  for (float r : opt.ratios) {
    for (int64_t o = 0; o < n; ++o)
      for (int64_t g = 0; g < ng; ++g) {
        const Range rg = range[o * ng + g];
        for (int64_t i = g * gs; i < std::min(k, (g + 1) * gs); ++i)
          clipped.at(o, i) = std::clamp(w.at(o, i), r * rg.lo, r * rg.hi);
      }
    const std::vector<float> deq = dequantize_linear(quantize_linear(format, clipped, group));
    for (int64_t g = 0; g < ng; ++g) {
      const int64_t i0 = g * gs, len = std::min(k, i0 + gs) - i0;
      diff.resize(n * len);
      for (int64_t o = 0; o < n; ++o)
        for (int64_t i = 0; i < len; ++i) diff[o * len + i] = w.at(o, i0 + i) - deq[o * k + i0 + i];
      matmul_nt(xg[g].data(), rows, len, diff.data(), n, out.data());  // [rows, n]
      for (int64_t o = 0; o < n; ++o) {
        double e = 0;
        for (int64_t t = 0; t < rows; ++t) e += static_cast<double>(out[t * n + o]) * out[t * n + o];
        if (e < best_err[o * ng + g]) {
          best_err[o * ng + g] = static_cast<float>(e);
          best_ratio[o * ng + g] = r;
        }
      }
    }
  }
  double sum = 0;
  for (int64_t o = 0; o < n; ++o)
    for (int64_t g = 0; g < ng; ++g) {
      const Range rg = range[o * ng + g];
      const float r = best_ratio[o * ng + g];
      sum += r;
      for (int64_t i = g * gs; i < std::min(k, (g + 1) * gs); ++i) w.at(o, i) = std::clamp(w.at(o, i), r * rg.lo, r * rg.hi);
    }
  return sum / static_cast<double>(n * ng);
}

void clip_to_ratio(WeightFormat format, int64_t group, Matrix& w, float ratio) {
  if (format == WeightFormat::kF16) return;
  const int64_t k = w.cols;
  const bool grouped = format == WeightFormat::kW4G128 || format == WeightFormat::kW4A16;
  const int64_t gs = grouped ? group : k;
  const bool symmetric = format == WeightFormat::kW8PerChannel;
  for (int64_t o = 0; o < w.rows; ++o)
    for (int64_t i0 = 0; i0 < k; i0 += gs) {
      const int64_t i1 = std::min(k, i0 + gs);
      float lo = 0, hi = 0;
      for (int64_t i = i0; i < i1; ++i) lo = std::min(lo, w.at(o, i)), hi = std::max(hi, w.at(o, i));
      if (symmetric) hi = std::max(-lo, hi), lo = -hi;
      for (int64_t i = i0; i < i1; ++i) w.at(o, i) = std::clamp(w.at(o, i), ratio * lo, ratio * hi);
    }
}

}  // namespace qserve::quant
