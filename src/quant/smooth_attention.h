// QoQ step 3 (spec section 6): SmoothAttention. Keys carry fixed outlier
// channels that 4-bit KV cannot hold; divide key channel i of each KV head by
//   lambda_i = max(max|K_i|, max|K_pair(i)|)^alpha        (alpha = 0.5)
// and multiply the matching query channel (of every query head reading that KV
// head) by it, so Q K^T is unchanged. pair(i) is the channel RoPE rotates with i
// (i +- d/2 for rotate-half, i ^ 1 for interleaved): equal lambdas in a pair
// commute with the rotation. Folded into the weights:
//   q_proj rows *= lambda,  k_proj rows /= lambda.
#pragma once

#include <vector>

#include "quant/llama_weights.h"

namespace qserve::quant {

// max_k: [kv_dim] max |K| per channel after RoPE (calibration). Returns lambda [kv_dim].
std::vector<float> smooth_attention_scales(const LlamaShape& shape, const std::vector<float>& max_k,
                                           double alpha = 0.5);
// Applies lambda [kv_dim] to q/k rows as above.
void apply_smooth_attention(const LlamaShape& shape, BlockWeights& w, const std::vector<float>& lambda);

// max |K| over median |K| across the channels of a layer (an outlier measure):
// takes per-channel max |K| [kv_dim] and returns max over channels / median over channels.
double key_outlier_ratio(const std::vector<float>& max_k);

}  // namespace qserve::quant
