// QoQ step 4 (spec section 6): smoothing of the block-output modules. For an
// input channel i of down_proj (or of o_proj), with X its calibration input,
//   lambda_i = max|X_i|^alpha / max|W[:, i]|^(1 - alpha)      (alpha near 0)
// X_i /= lambda_i is folded into the producer of channel i, W[:, i] *= lambda_i:
//  - down_proj: the producer is silu(gate) * up, linear in up: up row i /= lambda_i;
//  - o_proj: the producer is attention, linear in V per channel: v_proj row
//    (kv head j, dim c) /= lambda, and o_proj column (query head h, dim c) *= lambda
//    for every query head h reading KV head j (one lambda per KV channel: the
//    max over those query heads' activations and weight columns).
// Also the SmoothQuant input smoothing used for W8A8 (alpha 0.5): the producer is
// the RMSNorm, whose gain takes 1 / lambda.
#pragma once

#include <vector>

#include "quant/llama_weights.h"

namespace qserve::quant {

// lambda_i = max_x[i]^alpha / max_w[i]^(1-alpha), clamped to [1e-4, 1e4]; 1 for dead channels.
std::vector<float> smoothing_scales(const std::vector<float>& max_x, const std::vector<float>& max_w,
                                    double alpha);
// max over rows of |W[:, i]| for each column i of each matrix, [cols].
std::vector<float> column_abs_max(const std::vector<const Matrix*>& ws);

// The three smoothings; each returns lambda over the smoothed input channels
// ([intermediate], [kv_dim], [hidden]) so the caller can rescale its activation samples.
std::vector<float> smooth_down(BlockWeights& w, const std::vector<float>& max_down_in, double alpha);
std::vector<float> smooth_o_v(const LlamaShape& shape, BlockWeights& w, const std::vector<float>& max_o_in,
                              double alpha);
std::vector<float> smooth_norm_inputs(std::vector<float>& norm_gain, const std::vector<Matrix*>& consumers,
                                      const std::vector<float>& max_in, double alpha);

}  // namespace qserve::quant
