#include "model/rope.h"

#include <cmath>
#include <numbers>

namespace qserve {

std::vector<float> rope_inv_freq(const ModelConfig& config) {
  const int64_t half = config.head_dim / 2;
  std::vector<float> inv_freq(half);
  for (int64_t j = 0; j < half; ++j) {
    const float exponent = static_cast<float>(2 * j) / static_cast<float>(config.head_dim);
    inv_freq[j] = 1.0f / std::pow(config.rope_theta, exponent);
  }
  if (config.rope_scaling.type == RopeScaling::Type::kLlama3) {
    // Llama 3.1: long wavelengths divided by `factor`, short ones kept, a
    // linear blend in between (transformers _compute_llama3_parameters).
    const RopeScaling& s = config.rope_scaling;
    const float old_len = static_cast<float>(s.original_max_position_embeddings);
    const float low_freq_wavelen = old_len / s.low_freq_factor;
    const float high_freq_wavelen = old_len / s.high_freq_factor;
    for (float& f : inv_freq) {
      const float wavelen = 2.0f * std::numbers::pi_v<float> / f;
      if (wavelen > low_freq_wavelen) {
        f = f / s.factor;
      } else if (wavelen >= high_freq_wavelen) {
        const float smooth = (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        f = (1.0f - smooth) * f / s.factor + smooth * f;
      }
    }
  }
  return inv_freq;
}

}  // namespace qserve
