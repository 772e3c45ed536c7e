#include "backend/cpu/sampling.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

namespace qserve {

int32_t sample_token_cpu(const float* logits, int32_t vocab, const SamplingParams& params, uint64_t step) {
  int32_t best = 0;
  for (int32_t i = 1; i < vocab; ++i)
    if (logits[i] > logits[best]) best = i;
  if (params.temperature <= 0.f || params.top_k == 1) return best;
  const float mx = logits[best];
  const float inv_t = 1.f / params.temperature;
  std::vector<float> sorted(logits, logits + vocab);
  std::sort(sorted.begin(), sorted.end(), std::greater<float>());
  float tau = -INFINITY;
  if (params.top_k > 0 && params.top_k < vocab) tau = sorted[params.top_k - 1];
  if (params.top_p < 1.f) {
    double total = 0;
    for (int32_t i = 0; i < vocab; ++i) total += std::exp((logits[i] - mx) * inv_t);
    double cum = 0;
    for (int32_t i = 0; i < vocab; ++i) {
      cum += std::exp((sorted[i] - mx) * inv_t);
      if (cum >= params.top_p * total) {
        tau = std::max(tau, sorted[i]);
        break;
      }
    }
  }
  double kept = 0;
  for (int32_t i = 0; i < vocab; ++i)
    if (logits[i] >= tau) kept += std::exp((logits[i] - mx) * inv_t);
  const double r = sampling_uniform(params.seed, step) * kept;
  double cum = 0;
  int32_t last = best;
  for (int32_t i = 0; i < vocab; ++i) {
    if (logits[i] < tau) continue;
    cum += std::exp((logits[i] - mx) * inv_t);
    last = i;
    if (cum > r) return i;
  }
  return last;
}

}  // namespace qserve
