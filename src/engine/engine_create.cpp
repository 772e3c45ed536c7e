// Engine::create(config): the model named by the config on its backend, the
// KV cache sized by the memory settings, the engine thread started.
#include "engine/engine_create.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/backend_factory.h"
#include "engine/dummy_arch.h"
#include "engine/dummy_model.h"
#include "engine/kv_memory_plan.h"
#include "engine/precision_choice.h"
#include "engine/tokenizer_codec.h"
#include "model/checkpoint.h"
#include "model/default_model.h"
#include "quant/qoq_checkpoint.h"

namespace qserve {
namespace {

constexpr int64_t kDefaultCpuKvBytes = int64_t{1} << 30;  // 1 GiB of KV pages when no budget is given

std::string model_name(const std::string& path) {
  std::string name = std::filesystem::path(path).filename().string();
  if (name.empty()) name = std::filesystem::path(path).parent_path().filename().string();
  if (name.size() > 5 && name.ends_with(".gguf")) name.resize(name.size() - 5);
  return name;
}

// Fails before loading when the weights alone exceed the budget; the card is
// --memory-budget, else (on a device) its total memory.
void check_fits_before_load(const EngineConfig& config, int64_t weight_bytes, const std::string& what) {
  int64_t card = config.memory_budget;
  if (card <= 0 && config.device != "cpu") card = make_backend(config.device)->memory_info().total_bytes;
  check_weights_fit(weight_bytes, card, config.gpu_memory_utilization, what);
}

// A checkpoint: its precision is the checkpoint's; --precision must agree (or be auto).
std::unique_ptr<LlamaModel> load_checkpoint_model(const EngineConfig& config, const std::optional<PrecisionChoice>& asked,
                                                  const std::string& path, LoadedModel& m) {
  auto checkpoint = open_checkpoint(path);
  const ModelConfig mc = ModelConfig::from_json(checkpoint->config());
  PrecisionChoice have;  // fp16 for a float checkpoint
  if (quant::is_qoq_checkpoint(checkpoint->config())) {
    const quant::QoqConfig qc = quant::qoq_config_from_json(checkpoint->config()["quantization_config"]);
    have = PrecisionChoice{qc.precision, qc.group};
    if (asked && !(*asked == have))
      fail(ErrorCode::kInvalidArgument, "--precision {}: {} is a {} checkpoint (use --precision auto or {})",
           asked->name(), path, have.name(), have.name());
    m.config.precision = have.name();
  } else {
    if (asked && asked->precision != quant::Precision::kFP16)
      fail(ErrorCode::kUnsupported,
           "--precision {}: {} holds float weights; quantize it first (qserve quantize --precision {}) or use "
           "--load-format dummy",
           asked->name(), path, asked->name());
    m.config.precision = config.precision == "fp32" ? "fp32" : "fp16";
  }
  m.weight_format = have.weight_format();
  m.weight_bytes = estimate_weight_bytes(mc, m.weight_format, have.group);
  check_fits_before_load(config, m.weight_bytes, fmt::format("{} {}", model_name(path), m.config.precision));
  LlamaModelOptions options;
  options.device = config.device;
  return LlamaModel::load(*checkpoint, options);
}

}  // namespace

LoadedModel load_engine_model(const EngineConfig& config) {
  if (config.num_threads < 0) fail(ErrorCode::kInvalidArgument, "num_threads must be >= 0");
  if (!ThreadPool::set_global_threads(config.num_threads)) {
    spdlog::warn("engine: the CPU thread pool already runs {} threads; {} requested",
                 ThreadPool::global().num_threads(), config.num_threads);
  }
  if (config.device != "cpu" && config.device != "cuda")
    fail(ErrorCode::kInvalidArgument, "unknown device '{}' (expected cpu or cuda)", config.device);
  if (config.memory_budget < 0) fail(ErrorCode::kInvalidArgument, "--memory-budget must be >= 0");
  if (!(config.gpu_memory_utilization > 0.0 && config.gpu_memory_utilization <= 1.0))
    fail(ErrorCode::kInvalidArgument, "--gpu-memory-utilization must be in (0, 1], got {}", config.gpu_memory_utilization);
  const std::optional<PrecisionChoice> asked = parse_precision_choice(config.precision);

  const auto start = std::chrono::steady_clock::now();
  LoadedModel m;
  m.config = config;
  std::unique_ptr<LlamaModel> model;
  std::string name;
  std::string path;
  if (config.load_format == "dummy") {
    if (config.arch.empty()) fail(ErrorCode::kInvalidArgument, "--load-format dummy needs --arch");
    DummyModelOptions dummy;
    dummy.arch = config.arch;
    dummy.precision = asked.value_or(PrecisionChoice{});
    dummy.seed = config.seed;
    m.config.precision = dummy.precision.name();
    m.weight_format = dummy.precision.weight_format();
    m.weight_bytes = estimate_weight_bytes(dummy_arch_config(config.arch), m.weight_format, dummy.precision.group);
    check_fits_before_load(config, m.weight_bytes, fmt::format("{} {}", config.arch, m.config.precision));
    LlamaModelOptions options;
    options.device = config.device;
    model = load_dummy_model(dummy, options);
    name = config.arch;
  } else if (config.load_format == "auto") {
    if (!config.arch.empty()) fail(ErrorCode::kInvalidArgument, "--arch is for --load-format dummy");
    // The flag, else $QSERVE_MODEL, else the installed default model (one rule for every subcommand).
    path = resolve_model_path(config.model);
    if (!std::filesystem::exists(path)) fail(ErrorCode::kNotFound, "model '{}' not found", path);
    model = load_checkpoint_model(config, asked, path, m);
    name = model_name(path);
  } else {
    fail(ErrorCode::kInvalidArgument, "unknown --load-format '{}' (expected auto or dummy)", config.load_format);
  }
  spdlog::info("engine: {} ({}, {}, weights {}) from {}", model->config().summary(), m.config.precision, config.device,
               format_gib(m.weight_bytes), path.empty() ? "random weights" : path);
  m.runner = std::make_unique<LlamaModelRunner>(std::move(model), name);

  // The model's own tokenizer (tokenizer.json or tokenizer.model next to the weights).
  // A model folder without one (random test models, dummy weights) serves token
  // ids only; an explicit --tokenizer must load.
  if (!config.tokenizer.empty()) {
    m.codec = TokenizerCodec::load(config.tokenizer);
  } else if (!path.empty()) {
    try {
      m.codec = TokenizerCodec::load(path);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kNotFound) throw;
      spdlog::warn("engine: no tokenizer for {} ({}); requests must carry token ids", path, e.what());
    }
  }
  m.load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return m;
}

KvCachePlan plan_kv_cache(const LoadedModel& m, const EngineConfig& config) {
  LlamaModel& model = m.runner->model();
  const ModelConfig& mc = model.config();
  KvCachePlan plan;
  const int64_t page_size = std::max(1, config.page_size);
  plan.kv_bytes_per_page = m.runner->kv_bytes_per_page(static_cast<int>(page_size));
  if (config.num_kv_pages > 0) {
    plan.source = "num_kv_pages";
    plan.num_pages = plan.budget_pages = config.num_kv_pages;
    return plan;
  }
  if (config.kv_cache_bytes > 0) {
    plan.source = "kv_cache_bytes";
    plan.num_pages = plan.budget_pages = config.kv_cache_bytes / plan.kv_bytes_per_page;
    return plan;
  }
  // Pages for max_num_seqs sequences of the full context: more would never be used.
  int64_t len = m.runner->max_model_len();
  if (config.max_model_len > 0) len = std::min<int64_t>(len, config.max_model_len);
  const int64_t want = int64_t{std::max(1, config.max_num_seqs)} * ((len + page_size - 1) / page_size);

  Backend& backend = model.backend();
  const BackendMemoryInfo mem = backend.memory_info();
  if (config.memory_budget <= 0 && mem.total_bytes <= 0) {
    plan.source = "cpu default";
    plan.budget_pages = kDefaultCpuKvBytes / plan.kv_bytes_per_page;
    plan.num_pages = std::max<int64_t>(1, std::min(want, plan.budget_pages));
    return plan;
  }
  const bool device = mem.total_bytes > 0;
  KvMemoryInputs in;
  in.card_bytes = config.memory_budget > 0 ? config.memory_budget : mem.total_bytes;
  in.utilization = config.gpu_memory_utilization;
  in.used_bytes = device ? mem.total_bytes - mem.free_bytes : m.weight_bytes;
  in.free_bytes = device ? mem.free_bytes : 0;
  in.reserve_bytes = estimate_workspace_bytes(mc, config.max_num_batched_tokens, config.max_num_seqs,
                                              static_cast<int64_t>(dtype_size(backend.float_dtype())), device);
  in.kv_bytes_per_page = plan.kv_bytes_per_page;
  in.what = fmt::format("{} {}", m.runner->name(), m.config.precision);
  const KvMemoryPlan p = plan_kv_memory(in);
  plan.source = config.memory_budget > 0 ? "memory budget" : "device memory";
  plan.card_bytes = in.card_bytes;
  plan.budget_bytes = p.budget_bytes;
  plan.used_bytes = in.used_bytes;
  plan.reserve_bytes = in.reserve_bytes;
  plan.budget_pages = p.num_pages;
  plan.num_pages = std::min(want, p.num_pages);
  return plan;
}

std::unique_ptr<Engine> Engine::create(const EngineConfig& config) {
  LoadedModel m = load_engine_model(config);
  const KvCachePlan plan = plan_kv_cache(m, m.config);
  EngineConfig effective = m.config;
  effective.num_kv_pages = plan.num_pages;
  spdlog::info("engine: KV cache {} pages of {} tokens ({} each, {}; budget holds {} pages)", plan.num_pages,
               effective.page_size, format_gib(plan.kv_bytes_per_page), plan.source, plan.budget_pages);
  return create(effective, std::move(m.runner), std::move(m.codec));
}

}  // namespace qserve
