#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "backend/cpu/sampling.h"
#include "core/error.h"

namespace qserve {

void apply_repetition_penalty(std::span<float> logits, std::span<const int32_t> context, float penalty) {
  if (penalty == 1.0f) return;
  const auto vocab = static_cast<int32_t>(logits.size());
  std::vector<char> seen(logits.size(), 0);
  for (int32_t id : context) {
    if (id < 0 || id >= vocab || seen[id]) continue;
    seen[id] = 1;
    logits[id] = logits[id] > 0 ? logits[id] / penalty : logits[id] * penalty;
  }
}

void temperature_weights(std::span<const float> logits, float temperature, std::span<double> weights) {
  QS_CHECK(temperature > 0 && logits.size() == weights.size());
  const float mx = *std::max_element(logits.begin(), logits.end());
  const double inv_t = 1.0 / temperature;
  for (size_t i = 0; i < logits.size(); ++i) weights[i] = std::exp((static_cast<double>(logits[i]) - mx) * inv_t);
}

void mask_top_k(std::span<double> w, int k) {
  if (k <= 0 || static_cast<size_t>(k) >= w.size()) return;
  std::vector<double> sorted(w.begin(), w.end());
  std::nth_element(sorted.begin(), sorted.begin() + (k - 1), sorted.end(), std::greater<double>());
  const double kth = sorted[k - 1];
  for (double& x : w)
    if (x < kth) x = 0;
}

void mask_top_p(std::span<double> w, double top_p) {
  if (top_p >= 1.0) return;
  std::vector<double> sorted;
  double total = 0;
  for (double x : w) {
    if (x > 0) sorted.push_back(x);
    total += x;
  }
  std::sort(sorted.begin(), sorted.end(), std::greater<double>());
  // The threshold is the weight at which the running mass first reaches top_p.
  double cum = 0, threshold = 0;
  for (double x : sorted) {
    cum += x;
    threshold = x;
    if (cum >= top_p * total) break;
  }
  for (double& x : w)
    if (x < threshold) x = 0;
}

void mask_min_p(std::span<double> w, double min_p) {
  if (min_p <= 0) return;
  const double floor = min_p * *std::max_element(w.begin(), w.end());
  for (double& x : w)
    if (x < floor) x = 0;
}

int32_t draw_from_weights(std::span<const double> w, float u) {
  double total = 0;
  for (double x : w) total += x;
  const double r = static_cast<double>(u) * total;
  double cum = 0;
  int32_t last = -1;
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] <= 0) continue;
    cum += w[i];
    last = static_cast<int32_t>(i);
    if (cum > r) return last;
  }
  QS_CHECK(last >= 0) << "no token left to sample";
  return last;
}

Sampler::Sampler(const GenerationParams& params) : params_(params) {
  if (params.seed) {
    seed_ = *params.seed;
  } else {
    std::random_device rd;
    seed_ = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> context) {
  QS_CHECK(!logits.empty());
  logits_.assign(logits.begin(), logits.end());
  apply_repetition_penalty(logits_, context, params_.repetition_penalty);
  const uint64_t step = step_++;
  if (params_.temperature <= 0 || params_.top_k == 1) {
    return static_cast<int32_t>(std::max_element(logits_.begin(), logits_.end()) - logits_.begin());
  }
  weights_.resize(logits_.size());
  temperature_weights(logits_, params_.temperature, weights_);
  mask_top_k(weights_, params_.top_k);
  mask_top_p(weights_, params_.top_p);
  mask_min_p(weights_, params_.min_p);
  return draw_from_weights(weights_, sampling_uniform(seed_, step));
}

}  // namespace qserve
