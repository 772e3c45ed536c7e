#include "quant/precision.h"

#include "core/error.h"

namespace qserve::quant {

Precision parse_precision(const std::string& n) {
  if (n == "fp16") return Precision::kFP16;
  if (n == "w8a8kv8") return Precision::kW8A8KV8;
  if (n == "w4a16") return Precision::kW4A16;
  if (n == "w4a8kv8") return Precision::kW4A8KV8;
  if (n == "w4a8kv4") return Precision::kW4A8KV4;
  fail(ErrorCode::kInvalidArgument, "unknown precision '{}' (choose w4a8kv4, w4a8kv8, w8a8kv8, w4a16 or fp16)", n);
}

std::string precision_name(Precision p) {
  switch (p) {
    case Precision::kFP16: return "fp16";
    case Precision::kW8A8KV8: return "w8a8kv8";
    case Precision::kW4A16: return "w4a16";
    case Precision::kW4A8KV8: return "w4a8kv8";
    case Precision::kW4A8KV4: return "w4a8kv4";
  }
  return "?";
}

int weight_bits(Precision p) {
  switch (p) {
    case Precision::kFP16: return 16;
    case Precision::kW8A8KV8: return 8;
    default: return 4;
  }
}
int activation_bits(Precision p) { return (p == Precision::kFP16 || p == Precision::kW4A16) ? 16 : 8; }
int kv_bits(Precision p) {
  switch (p) {
    case Precision::kW8A8KV8:
    case Precision::kW4A8KV8: return 8;
    case Precision::kW4A8KV4: return 4;
    default: return 16;
  }
}

WeightFormat weight_format_for(Precision p, int64_t group) {
  switch (p) {
    case Precision::kFP16: return WeightFormat::kF16;
    case Precision::kW8A8KV8: return WeightFormat::kW8PerChannel;
    case Precision::kW4A16: return WeightFormat::kW4A16;
    default: return group > 0 ? WeightFormat::kW4G128 : WeightFormat::kW4PerChannel;
  }
}

std::string weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::kF16: return "f16";
    case WeightFormat::kW4G128: return "w4_g128";
    case WeightFormat::kW4PerChannel: return "w4_per_channel";
    case WeightFormat::kW8PerChannel: return "w8_per_channel";
    case WeightFormat::kW4A16: return "w4a16";
  }
  return "?";
}

WeightFormat parse_weight_format(const std::string& n) {
  for (WeightFormat f : {WeightFormat::kF16, WeightFormat::kW4G128, WeightFormat::kW4PerChannel,
                         WeightFormat::kW8PerChannel, WeightFormat::kW4A16})
    if (weight_format_name(f) == n) return f;
  fail(ErrorCode::kCorruptData, "unknown weight format '{}'", n);
}

}  // namespace qserve::quant
