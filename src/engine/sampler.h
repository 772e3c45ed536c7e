// Per-request token sampling with the Hugging Face / vLLM order of the logits
// processors:
//   repetition penalty (on the logits, over prompt + output)
//   -> temperature (0: greedy, argmax with ties to the lowest id)
//   -> top-k -> top-p (on the top-k renormalized distribution) -> min-p
//   -> a draw from what is left.
// The parameters are the sampling fields of GenerationParams (qserve/request.h);
// the name SamplingParams belongs to the kernel-level struct of
// backend/cpu/sampling.h.
//
// The draw uses the counter-based uniform of backend/cpu/sampling.h,
// u = sampling_uniform(seed, step), and returns the first kept token, in
// index order, whose running sum of probability exceeds u: a request's tokens
// depend only on its seed and its history (same seed, same text), and where
// the masks agree the choice is the kernel-level sample_token_cpu's.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "qserve/request.h"

namespace qserve {

// ---- the stages, on [vocab] arrays (exposed for tests) ----

// CTRL / Hugging Face: each distinct id of `context` has its logit divided by
// `penalty` when positive, multiplied when negative.
void apply_repetition_penalty(std::span<float> logits, std::span<const int32_t> context, float penalty);

// weights[i] = exp((logits[i] - max) / temperature): unnormalized
// probabilities, 1 for the most likely token. temperature > 0.
void temperature_weights(std::span<const float> logits, float temperature, std::span<double> weights);

// The masks zero the weights of removed tokens (no renormalization needed:
// each stage works on the mass that is left). Ties at a threshold are kept;
// the most likely token always stays.
void mask_top_k(std::span<double> weights, int k);           // k <= 0: off
void mask_top_p(std::span<double> weights, double top_p);    // keep the smallest top set with >= top_p of the mass
void mask_min_p(std::span<double> weights, double min_p);    // keep w >= min_p * max w

// Index of the first token whose running sum of weights exceeds u * total.
int32_t draw_from_weights(std::span<const double> weights, float u);

class Sampler {
 public:
  // Seeded by params.seed, or by a random seed when it is unset.
  explicit Sampler(const GenerationParams& params);

  // logits: [vocab] raw. context: prompt + generated ids (repetition penalty).
  int32_t sample(std::span<const float> logits, std::span<const int32_t> context);

  uint64_t seed() const { return seed_; }
  uint64_t steps() const { return step_; }

 private:
  GenerationParams params_;
  uint64_t seed_;
  uint64_t step_ = 0;  // tokens sampled so far: the draw's counter
  std::vector<float> logits_;
  std::vector<double> weights_;
};

}  // namespace qserve
