// RoPE frequencies of a model: f_j = theta^(-2j / D), j < D/2, with llama3
// scaling applied as Hugging Face transformers does (float32 arithmetic, same
// order of operations, so positions agree with the reference to rounding).
#pragma once

#include <vector>

#include "model/model_config.h"

namespace qserve {

// [head_dim / 2] inverse frequencies.
std::vector<float> rope_inv_freq(const ModelConfig& config);

}  // namespace qserve
