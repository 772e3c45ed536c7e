// The precisions the quantizer writes and the CPU backend runs (spec section 1).
#pragma once

#include <cstdint>
#include <string>

namespace qserve::quant {

enum class Precision { kFP16, kW8A8KV8, kW4A16, kW4A8KV8, kW4A8KV4 };

// Storage format of one linear layer's weights.
enum class WeightFormat {
  kF16,           // unquantized
  kW4G128,        // progressive: s1 (per channel) + s2/zero per group (W4A8 g128)
  kW4PerChannel,  // asymmetric UINT4 per output channel (W4A8 per-channel)
  kW8PerChannel,  // symmetric INT8 per output channel (W8A8)
  kW4A16,         // asymmetric UINT4 per group, fp16 scales (weight-only)
};

Precision parse_precision(const std::string& name);  // Error(kInvalidArgument) listing the choices
std::string precision_name(Precision p);             // "w4a8kv4", ...
int weight_bits(Precision p);                         // 16, 8, 4
int activation_bits(Precision p);                     // 16 or 8
int kv_bits(Precision p);                             // 16, 8 or 4
// The weight format of the block linears for (precision, group size); group -1 = per channel.
WeightFormat weight_format_for(Precision p, int64_t group);
std::string weight_format_name(WeightFormat f);  // "w4_g128", ...
WeightFormat parse_weight_format(const std::string& name);

}  // namespace qserve::quant
