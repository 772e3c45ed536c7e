#include "engine/basic_sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace qserve {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Uniform in [0, 1) from (seed, step): 53 random bits.
double uniform01(uint64_t seed, int step) {
  const uint64_t bits = splitmix64(splitmix64(seed) ^ static_cast<uint64_t>(step));
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

int32_t argmax(const std::vector<float>& l) {
  // Lowest id on ties (std::max_element returns the first maximum).
  return static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
}

}  // namespace

int32_t choose_token(std::span<const float> logits, const GenerationParams& params, std::span<const int32_t> context,
                     uint64_t seed, int step, std::span<const int32_t> suppress) {
  const int vocab = static_cast<int>(logits.size());
  std::vector<float> l(logits.begin(), logits.end());
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  if (params.repetition_penalty != 1.0f) {
    std::vector<char> seen(vocab, 0);
    for (int32_t id : context) {
      if (id < 0 || id >= vocab || seen[id]) continue;
      seen[id] = 1;
      l[id] = l[id] > 0 ? l[id] / params.repetition_penalty : l[id] * params.repetition_penalty;
    }
  }
  for (int32_t id : suppress) {
    if (id >= 0 && id < vocab) l[id] = kNegInf;
  }
  if (params.temperature <= 0.0f || params.top_k == 1) return argmax(l);

  // Candidates sorted by logit, highest first (ties: lower id first).
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  auto higher = [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); };
  int keep = vocab;
  if (params.top_k > 0 && params.top_k < vocab) {
    keep = params.top_k;
    std::partial_sort(order.begin(), order.begin() + keep, order.end(), higher);
  } else {
    std::sort(order.begin(), order.end(), higher);
  }
  // Softmax at the temperature over the kept candidates.
  const double max_logit = l[order[0]];
  std::vector<double> p(keep);
  double total = 0;
  for (int i = 0; i < keep; ++i) {
    p[i] = std::exp((static_cast<double>(l[order[i]]) - max_logit) / params.temperature);
    total += p[i];
  }
  for (double& x : p) x /= total;
  // min-p: drop candidates below min_p * p_max.
  if (params.min_p > 0.0f) {
    const double floor = params.min_p * p[0];
    int k = 1;
    while (k < keep && p[k] >= floor) ++k;
    keep = k;
  }
  // top-p: the smallest prefix whose mass reaches top_p.
  if (params.top_p < 1.0f) {
    double mass = 0;
    int k = 0;
    while (k < keep) {
      mass += p[k++];
      if (mass >= params.top_p) break;
    }
    keep = std::max(k, 1);
  }
  double kept_mass = 0;
  for (int i = 0; i < keep; ++i) kept_mass += p[i];
  const double u = uniform01(seed, step) * kept_mass;
  double acc = 0;
  for (int i = 0; i < keep; ++i) {
    acc += p[i];
    if (u < acc) return order[i];
  }
  return order[keep - 1];
}

GeneratedTokenLogprobs token_logprobs(std::span<const float> logits, int32_t token, int n) {
  double max_logit = -std::numeric_limits<double>::infinity();
  for (float x : logits) max_logit = std::max(max_logit, static_cast<double>(x));
  double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - max_logit);
  const double log_z = max_logit + std::log(sum);
  GeneratedTokenLogprobs out;
  out.token_id = token;
  out.logprob = static_cast<float>(logits[token] - log_z);
  n = std::min<int>(n, static_cast<int>(logits.size()));
  if (n > 0) {
    std::vector<int32_t> order(logits.size());
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + n, order.end(), [&](int32_t a, int32_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    for (int i = 0; i < n; ++i) out.top.push_back({order[i], static_cast<float>(logits[order[i]] - log_z)});
  }
  return out;
}

}  // namespace qserve
