// The --precision names of the engine: a precision of quant/precision.h plus,
// for the W4A8 ones, the weight group size:
//   fp16, w8a8kv8, w4a16 (g128), w4a8kv8 (g128), w4a8kv4 (g128),
//   w4a8kv8-chn, w4a8kv4-chn (per-channel W4), and "auto" (the checkpoint's own).
// "fp32" is accepted as a float checkpoint on the CPU (which computes in FP32 anyway).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "quant/precision.h"

namespace qserve {

struct PrecisionChoice {
  quant::Precision precision = quant::Precision::kFP16;
  int64_t group = 128;  // -1: per channel (W4A8 only); ignored by fp16 and w8a8kv8

  quant::WeightFormat weight_format() const { return quant::weight_format_for(precision, group); }
  std::string name() const;  // "w4a8kv4", "w4a8kv4-chn", ...
  bool operator==(const PrecisionChoice& o) const { return name() == o.name(); }
};

// nullopt for "auto"; Error(kInvalidArgument) listing the choices.
std::optional<PrecisionChoice> parse_precision_choice(const std::string& name);
// The KV cache format of a precision (nullopt: the backend's float pages).
std::optional<int> kv_quant_bits(const PrecisionChoice& p);

}  // namespace qserve
