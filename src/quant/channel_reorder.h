// QoQ step 5 (spec section 6): activation-aware channel reorder for g128.
// Sorting the input channels of a layer by salience max|X_i| puts channels of
// similar range into the same group of 128. Applied where the permutation can
// be folded into the producer at no run-time cost: the input of down_proj
// (the producer silu(gate) * up is channel-wise: permute gate and up rows the
// same way). The residual-stream inputs (q/k/v, gate/up) are not reordered: a
// permutation there would have to be shared by every block, and the rotation
// already spreads their outliers evenly. o_proj's input is not reordered either:
// its channels are tied to attention heads (docs/qoq-quantizer.md).
#pragma once

#include <cstdint>
#include <vector>

#include "quant/llama_weights.h"

namespace qserve::quant {

// The permutation sorting channels by descending salience: perm[new] = old.
std::vector<int64_t> salience_order(const std::vector<float>& salience);

// Reorders the intermediate channels: gate/up rows and down columns by perm.
void reorder_mlp_channels(BlockWeights& w, const std::vector<int64_t>& perm);

// Helpers to keep calibration data in step: v_new[j] = v[perm[j]], and the same
// on each row's columns of m.
std::vector<float> permute(const std::vector<float>& v, const std::vector<int64_t>& perm);
void permute_columns(Matrix& m, const std::vector<int64_t>& perm);
void permute_rows(Matrix& m, const std::vector<int64_t>& perm);

}  // namespace qserve::quant
