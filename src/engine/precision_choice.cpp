#include "engine/precision_choice.h"

#include "core/error.h"

namespace qserve {

std::string PrecisionChoice::name() const {
  std::string n = quant::precision_name(precision);
  if (weight_format() == quant::WeightFormat::kW4PerChannel) n += "-chn";
  return n;
}

std::optional<PrecisionChoice> parse_precision_choice(const std::string& name) {
  if (name == "auto") return std::nullopt;
  if (name == "fp32") return PrecisionChoice{quant::Precision::kFP16, 128};
  std::string base = name;
  int64_t group = 128;
  if (name.ends_with("-chn")) {
    base = name.substr(0, name.size() - 4);
    group = -1;
  } else if (name.ends_with("-g128")) {
    base = name.substr(0, name.size() - 5);
  }
  quant::Precision p;
  try {
    p = quant::parse_precision(base);
  } catch (const Error&) {
    fail(ErrorCode::kInvalidArgument,
         "unknown precision '{}' (choose fp16, w8a8kv8, w4a16, w4a8kv8, w4a8kv4, w4a8kv8-chn, w4a8kv4-chn or auto)", name);
  }
  if (group < 0 && p != quant::Precision::kW4A8KV8 && p != quant::Precision::kW4A8KV4)
    fail(ErrorCode::kInvalidArgument, "precision '{}': only the W4A8 precisions have a per-channel (-chn) variant", name);
  return PrecisionChoice{p, group};
}

std::optional<int> kv_quant_bits(const PrecisionChoice& p) {
  const int bits = quant::kv_bits(p.precision);
  if (bits == 4 || bits == 8) return bits;
  return std::nullopt;
}

}  // namespace qserve
