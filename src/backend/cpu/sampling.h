// Token sampling, defined so that the CPU reference and the CUDA kernel pick
// the same token from the same logits and seed:
//   temperature <= 0 or top_k == 1: argmax (lowest index among ties);
//   else p_i = exp((l_i - max l) / T); keep the tokens with l_i >= tau, where
//   tau = max(k-th largest logit (top_k > 0), top-p threshold: the largest
//   logit value whose tokens at or above it hold >= top_p of the mass);
//   draw u = sampling_uniform(seed, step) in [0, 1) and return the first kept
//   token, in index order, whose running sum of p exceeds u * (kept mass).
// Ties at a threshold are all kept.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace qserve {

struct SamplingParams {
  float temperature = 0.f;  // <= 0: greedy
  int32_t top_k = 0;        // <= 0: off
  float top_p = 1.f;        // >= 1: off
  uint64_t seed = 0;        // per request
};

QS_HOST_DEVICE uint64_t sampling_mix64(uint64_t x) {  // splitmix64 finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A counter-based uniform draw in [0, 1) with 24 bits: exact in f32.
QS_HOST_DEVICE float sampling_uniform(uint64_t seed, uint64_t step) {
  const uint64_t r = sampling_mix64(seed ^ sampling_mix64(step));
  return static_cast<float>(r >> 40) * (1.f / 16777216.f);
}

// logits: [vocab] f32. `step` = the request's number of generated tokens so far.
int32_t sample_token_cpu(const float* logits, int32_t vocab, const SamplingParams& params, uint64_t step);

}  // namespace qserve
