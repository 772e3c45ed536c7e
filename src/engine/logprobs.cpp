#include "engine/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace qserve {
double log_partition(std::span<const float> logits) {
  double max_logit = -std::numeric_limits<double>::infinity();
  for (float x : logits) max_logit = std::max(max_logit, static_cast<double>(x));
  double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - max_logit);
  return max_logit + std::log(sum);
}

GeneratedTokenLogprobs token_logprobs(std::span<const float> logits, int32_t token, int n) {
  const double log_z = log_partition(logits);
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
