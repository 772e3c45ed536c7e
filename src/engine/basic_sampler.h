// Token choice for the engine loop: greedy, or temperature / top-k / top-p /
// min-p sampling with a repetition penalty, plus log-probabilities.
//
// The repetition penalty, suppressed ids and min-p are applied to a copy of
// the logits; temperature / top-k / top-p and the draw are sample_token_cpu
// (src/backend/cpu/sampling.h), the definition the CUDA sampler matches. The
// draw is counter-based, uniform = hash(seed, output index), so a request's
// tokens depend on its seed and history only, never on what else is in the
// batch nor on preemption and recompute.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "qserve/request.h"

namespace qserve {

// logits: [vocab] raw. context: prompt + generated ids (for the repetition
// penalty). step: index of the token being chosen among the generated ones.
// suppress: ids that must not be chosen (EOS before min_tokens); may be empty.
int32_t choose_token(std::span<const float> logits, const GenerationParams& params, std::span<const int32_t> context,
                     uint64_t seed, int step, std::span<const int32_t> suppress);

// log-softmax of the raw logits for `token` and the top `n` tokens (highest first).
GeneratedTokenLogprobs token_logprobs(std::span<const float> logits, int32_t token, int n);

}  // namespace qserve
