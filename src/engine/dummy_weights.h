// Random weights for `--load-format dummy`: valid quantized layers in the
// canonical layout of quant/weight_format.h, made directly (no FP32 matrix is
// ever built, so a 70B model at 4 bits needs only its packed bytes in host
// memory, one layer at a time), and random float tensors. Deterministic: the
// values depend only on (seed, tag, row), not on the thread count.
//
// Value ranges (chosen so that activations stay O(1) through any depth, so the
// forward pass and sampling see finite numbers, not so that text makes sense):
//  - W4 g128: s1 [n] fp16 > 0; s2 [n, groups] in 4..15 and zero in 5..10 such
//    that every code 0..15 dequantizes into INT8: -z*s2 >= -128 and
//    (15 - z)*s2 <= 127 (the bound the protective range 119 guarantees for
//    quantized weights); codes uniform.
//  - W4 per-channel / W4A16: scale fp16 > 0, zero in 6..9, codes uniform.
//  - W8 per-channel: q uniform in [-127, 127], scale fp16 > 0.
//  - f16: uniform in [-a, a]. Each layer's output RMS is about 0.5 x its input's.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "quant/quant_linear.h"

namespace qserve {

// A random [n, k] layer of `format` (group: the group size of the grouped
// formats). k must be even for the 4-bit formats.
quant::QuantizedLinear random_quantized_linear(quant::WeightFormat format, int64_t n, int64_t k, int64_t group,
                                               uint64_t seed);
// Parts of ns[p] rows each (k, group and format shared) stacked along the
// output channels, part p from seeds[p]: the same layer, bit for bit, as
// quant::concat_output_channels of the parts made by random_quantized_linear,
// without making the parts and copying them (q|k|v and gate|up of a dummy
// model with fused projections).
quant::QuantizedLinear random_stacked_linear(quant::WeightFormat format, const std::vector<int64_t>& ns, int64_t k,
                                             int64_t group, const std::vector<uint64_t>& seeds);
// A host F16 tensor of `shape` (rows = shape[0]), uniform in [center - spread, center + spread].
Tensor random_f16_tensor(std::vector<int64_t> shape, float center, float spread, uint64_t seed);
// A seed for one tensor: (base seed, layer, name) mixed.
uint64_t dummy_tensor_seed(uint64_t seed, int64_t layer, const char* name);

}  // namespace qserve
