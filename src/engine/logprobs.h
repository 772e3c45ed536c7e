// Log-probabilities of a generated token and of the top candidates, from the
// raw logits (before temperature, penalties and masks), as OpenAI reports them.
#pragma once

#include <cstdint>
#include <span>

#include "qserve/request.h"

namespace qserve {

// log Z = log sum_v exp(logits[v]), in double (max-shifted): log-softmax(logits)[t] = logits[t] - log Z.
// The negative log-likelihood of perplexity evaluation is log_partition(logits) - logits[target].
double log_partition(std::span<const float> logits);
inline double token_nll(std::span<const float> logits, int32_t target) { return log_partition(logits) - logits[target]; }

// log-softmax of the raw logits for `token` and the top `n` tokens (highest first).
GeneratedTokenLogprobs token_logprobs(std::span<const float> logits, int32_t token, int n);

}  // namespace qserve
