// Engine::create(config): the model named by the config on its backend.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/llama_runner.h"
#include "engine/tokenizer_codec.h"
#include "model/checkpoint.h"
#include "model/default_model.h"
#include "qserve/engine.h"

namespace qserve {
namespace {

constexpr int64_t kDefaultCpuKvBytes = int64_t{1} << 30;  // 1 GiB of KV pages when no budget is given

}  // namespace

std::unique_ptr<Engine> Engine::create(const EngineConfig& config) {
  if (config.num_threads < 0) fail(ErrorCode::kInvalidArgument, "num_threads must be >= 0");
  if (!ThreadPool::set_global_threads(config.num_threads)) {
    spdlog::warn("engine: the CPU thread pool already runs {} threads; {} requested",
                 ThreadPool::global().num_threads(), config.num_threads);
  }
  if (config.device != "cpu") {
    fail(ErrorCode::kUnsupported, "device '{}': this build runs the engine on the CPU only", config.device);
  }
  if (config.precision != "fp16" && config.precision != "fp32") {
    fail(ErrorCode::kUnsupported, "precision '{}' on the CPU: the CPU engine computes in FP32 (use fp16 or fp32)",
         config.precision);
  }
  if (config.load_format != "auto") {
    fail(ErrorCode::kUnsupported, "--load-format {} is not available on the CPU engine", config.load_format);
  }
  // The flag, else $QSERVE_MODEL, else the installed default model (one rule for every subcommand).
  const std::string path = resolve_model_path(config.model);
  if (!std::filesystem::exists(path)) fail(ErrorCode::kNotFound, "model '{}' not found", path);
  auto checkpoint = open_checkpoint(path);
  auto model = LlamaModel::load(*checkpoint);
  spdlog::info("engine: {} from {}", model->config().summary(), path);
  std::string name = std::filesystem::path(path).filename().string();
  if (name.empty()) name = std::filesystem::path(path).parent_path().filename().string();
  if (name.size() > 5 && name.ends_with(".gguf")) name.resize(name.size() - 5);
  auto runner = std::make_unique<LlamaModelRunner>(std::move(model), name);

  EngineConfig effective = config;
  if (effective.num_kv_pages <= 0 && effective.kv_cache_bytes <= 0) {
    // Enough for max_num_seqs full-length sequences, at most kDefaultCpuKvBytes.
    int64_t len = runner->max_model_len();
    if (config.max_model_len > 0) len = std::min<int64_t>(len, config.max_model_len);
    const int64_t page_size = std::max(1, config.page_size);
    const int64_t want = int64_t{std::max(1, config.max_num_seqs)} * ((len + page_size - 1) / page_size);
    effective.num_kv_pages = std::max<int64_t>(1, std::min(want, kDefaultCpuKvBytes / runner->kv_bytes_per_page(config.page_size)));
  }
  // The model's own tokenizer (tokenizer.json or tokenizer.model next to the weights).
  // A model folder without one (random test models, dummy weights) serves token
  // ids only; an explicit --tokenizer must load.
  std::shared_ptr<TextCodec> codec;
  if (!config.tokenizer.empty()) {
    codec = TokenizerCodec::load(config.tokenizer);
  } else {
    try {
      codec = TokenizerCodec::load(path);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kNotFound) throw;
      spdlog::warn("engine: no tokenizer for {} ({}); requests must carry token ids", path, e.what());
    }
  }
  return create(effective, std::move(runner), std::move(codec));
}

}  // namespace qserve
