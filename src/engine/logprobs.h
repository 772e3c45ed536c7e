// Log-probabilities of a generated token and of the top candidates, from the
// raw logits (before temperature, penalties and masks), as OpenAI reports them.
#pragma once

#include <cstdint>
#include <span>

#include "qserve/request.h"

namespace qserve {

// log-softmax of the raw logits for `token` and the top `n` tokens (highest first).
GeneratedTokenLogprobs token_logprobs(std::span<const float> logits, int32_t token, int n);

}  // namespace qserve
