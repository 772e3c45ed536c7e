// The two halves of Engine::create(config), for callers that reuse one loaded
// model for several engines (the throughput sweep of `qserve bench`):
//  1. load_engine_model: the model of the config (a checkpoint, float or
//     quantized, or --load-format dummy) on config.device, its tokenizer, the
//     resolved precision;
//  2. plan_kv_cache: how many KV pages the config's memory settings give
//     (engine/kv_memory_plan.h), checked against what the device has.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/llama_runner.h"
#include "engine/text_codec.h"
#include "quant/precision.h"
#include "qserve/engine.h"

namespace qserve {

struct LoadedModel {
  std::unique_ptr<LlamaModelRunner> runner;
  std::shared_ptr<TextCodec> codec;  // null: token ids only (dummy weights, models without a tokenizer)
  EngineConfig config;               // as given, with `precision` resolved ("auto" -> the checkpoint's)
  int64_t weight_bytes = 0;          // device bytes of the weights (engine/kv_memory_plan.h estimate)
  quant::WeightFormat weight_format = quant::WeightFormat::kF16;  // of the block linears
  double load_s = 0;
};

// Errors: kNotFound (model), kInvalidArgument (flags), kUnsupported (device,
// precision), kResourceExhausted (the weights do not fit --memory-budget).
LoadedModel load_engine_model(const EngineConfig& config);

struct KvCachePlan {
  int64_t num_pages = 0;          // what the engine allocates
  int64_t kv_bytes_per_page = 0;
  std::string source;             // "num_kv_pages" | "kv_cache_bytes" | "memory budget" | "device memory" | "cpu default"
  int64_t card_bytes = 0;         // the (emulated) card, 0 if no budget applies
  int64_t budget_bytes = 0;       // card x gpu_memory_utilization
  int64_t used_bytes = 0;         // weights + runtime before the KV cache
  int64_t reserve_bytes = 0;      // workspace reserve
  int64_t budget_pages = 0;       // what the budget holds; num_pages = min(this, max_num_seqs full-length sequences)
};

// For `config` (usually m.config with other max_num_seqs / page_size).
KvCachePlan plan_kv_cache(const LoadedModel& m, const EngineConfig& config);

}  // namespace qserve
