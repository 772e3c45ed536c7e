#include "backend/cpu/rope.h"

#include <numbers>

#include "core/error.h"

namespace qserve {

std::vector<double> rope_inv_freq(const RopeConfig& config, int head_dim) {
  QS_CHECK(head_dim % 2 == 0) << "head_dim " << head_dim;
  std::vector<double> inv(head_dim / 2);
  for (int i = 0; i < head_dim / 2; ++i)
    inv[i] = std::pow(static_cast<double>(config.theta), -2.0 * i / head_dim);
  if (config.llama3_factor > 0.f) {
    const double factor = config.llama3_factor, lo = config.llama3_low_freq_factor,
                 hi = config.llama3_high_freq_factor, old_ctx = config.llama3_original_max_position;
    const double low_freq_wavelen = old_ctx / lo, high_freq_wavelen = old_ctx / hi;
    for (double& f : inv) {
      const double wavelen = 2.0 * std::numbers::pi / f;
      if (wavelen < high_freq_wavelen) continue;
      if (wavelen > low_freq_wavelen) {
        f /= factor;
      } else {
        const double smooth = (old_ctx / wavelen - lo) / (hi - lo);
        f = (1.0 - smooth) * f / factor + smooth * f;
      }
    }
  }
  return inv;
}

std::vector<float> build_rope_table(const RopeConfig& config, int head_dim, int max_positions) {
  const std::vector<double> inv = rope_inv_freq(config, head_dim);
  const int half = head_dim / 2;
  std::vector<float> table(static_cast<size_t>(max_positions) * half * 2);
  for (int p = 0; p < max_positions; ++p) {
    for (int i = 0; i < half; ++i) {
      const double angle = static_cast<double>(p) * inv[i];
      table[(static_cast<size_t>(p) * half + i) * 2] = static_cast<float>(std::cos(angle));
      table[(static_cast<size_t>(p) * half + i) * 2 + 1] = static_cast<float>(std::sin(angle));
    }
  }
  return table;
}

}  // namespace qserve
