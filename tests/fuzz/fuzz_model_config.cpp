// libFuzzer target: a model's config.json (read on every load): any JSON
// document ends in a validated ModelConfig or qserve::Error, never a crash or
// another exception (a JSON type error included), and so does the QoQ
// "quantization_config" block of a quantized checkpoint.
//   scripts/fuzz.sh [seconds]      (seeds: corpus/model_config, tests/data/models/*/config.json)
#include <cstddef>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "fuzz_util.h"
#include "model/model_config.h"
#include "quant/qoq_checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  try {
    const qserve::ModelConfig c = qserve::ModelConfig::from_json(j);
    FUZZ_CHECK(c.num_heads > 0 && c.num_kv_heads > 0 && c.num_heads % c.num_kv_heads == 0);
    FUZZ_CHECK(c.head_dim > 0 && c.hidden_size > 0 && c.num_layers > 0 && c.vocab_size > 0);
    c.summary();
  } catch (const qserve::Error&) {
  }
  try {
    if (qserve::quant::is_qoq_checkpoint(j)) qserve::quant::qoq_config_from_json(j.at("quantization_config"));
    qserve::quant::qoq_config_from_json(j);
  } catch (const qserve::Error&) {
  }
  return 0;
}
