#include "engine/basic_sampler.h"

#include "backend/cpu/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace qserve {
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
  // min-p as a logit mask: p_i < min_p * p_max  <=>  l_i < l_max + T * ln(min_p).
  if (params.min_p > 0.0f && params.temperature > 0.0f) {
    const float mx = *std::max_element(l.begin(), l.end());
    const float floor = mx + params.temperature * std::log(params.min_p);
    for (float& x : l) {
      if (x < floor) x = kNegInf;
    }
  }
  SamplingParams sp;
  sp.temperature = params.temperature;
  sp.top_k = params.top_k;
  sp.top_p = params.top_p;
  sp.seed = seed;
  return sample_token_cpu(l.data(), vocab, sp, static_cast<uint64_t>(step));
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
