// The serving engine's public API: submit requests from any thread, receive
// their tokens as they are made, cancel them, read statistics.
//
//   qserve::EngineConfig config;
//   config.model = "path/to/model";              // empty: the default model
//   auto engine = qserve::Engine::create(config);
//   qserve::Request req;
//   req.prompt = "Once upon a time";
//   req.params.max_tokens = 32;
//   auto stream = engine->submit(req);           // throws qserve::Error on a bad request
//   while (auto out = stream->next()) fputs(out->text.c_str(), stdout);
//
// A background thread steps the scheduler (continuous batching over a paged KV
// cache, docs/scheduler.md), the model runner, the sampler and the stop checks.
// Errors: submit() throws qserve::Error (src/core/error.h):
//   kInvalidArgument   a bad parameter (temperature < 0, top_p outside (0, 1], empty prompt, ...)
//   kOutOfRange        prompt + max_tokens beyond the context (or beyond the whole KV cache)
//   kResourceExhausted the waiting queue is full (EngineConfig::max_waiting_requests)
//   kUnsupported       after shutdown()
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "qserve/request.h"

namespace qserve {

class ModelRunner;  // src/engine/model_runner.h
class TextCodec;    // src/engine/text_codec.h (tokenizer adapter)

struct EngineConfig {
  // The model: a model directory or a .gguf file; empty: the default model
  // (${QSERVE_HOME:-~/.cache/qserve}/models/SmolLM2-135M-Instruct).
  std::string model;
  std::string tokenizer;               // empty: the model's own
  std::string device = "cpu";          // "cpu" | "cuda" (the backend, engine/backend_factory.h)
  // auto (the checkpoint's own; fp16 for dummy weights) | fp16 | w8a8kv8 | w4a16 | w4a8kv8 | w4a8kv4
  // | w4a8kv8-chn | w4a8kv4-chn (per-channel W4; the others are g128). A quantized
  // checkpoint must agree; a float checkpoint runs fp16 (the CPU computes in FP32).
  std::string precision = "auto";
  std::string load_format = "auto";    // "auto" (a checkpoint) | "dummy" (random weights of shape `arch`)
  // For dummy weights: llama-2-7b, llama-2-13b, llama-2-70b, llama-3-8b, llama-3-70b,
  // tiny, tiny-odd (engine/dummy_arch.h). No tokenizer: requests carry token ids, EOS never stops.
  std::string arch;

  int max_model_len = 0;               // 0: the model's context length
  int max_num_seqs = 64;               // sequences in one step (batch size limit)
  int max_num_batched_tokens = 512;    // tokens computed in one step (prefill chunks + decodes)
  int max_waiting_requests = 4096;     // submit() beyond this: kResourceExhausted
  int page_size = 16;                  // tokens per KV page
  int64_t num_kv_pages = 0;            // > 0: exactly this many pages (tests, forced preemption)
  int64_t kv_cache_bytes = 0;          // > 0: KV cache budget in bytes (when num_kv_pages == 0)
  // Otherwise the KV cache takes what the memory budget leaves (docs/serving-benchmark.md):
  // pages = (card x gpu_memory_utilization - weights - runtime - workspace) / page bytes,
  // card = memory_budget if > 0, else the device's memory. The CPU knows no card:
  // without memory_budget it takes at most 1 GiB; with it, the same formula with
  // the weights' device size (what the budget would give on a device).
  double gpu_memory_utilization = 0.9; // fraction of the card for weights + KV + workspace
  int64_t memory_budget = 0;           // > 0: emulate a card of this many bytes (e.g. 80e9, 48e9)
  int num_threads = 0;                 // CPU backend threads; 0: all cores
  uint64_t seed = 0;                   // seeds requests that have no seed of their own
};

// What the loaded model is; for validation and chat templates at the edge.
struct ModelInfo {
  std::string name;                    // served name (directory / file stem)
  std::string architecture;            // "llama"
  int vocab_size = 0;
  int max_model_len = 0;               // effective context length (after EngineConfig::max_model_len)
  std::vector<int32_t> eos_token_ids;
  int32_t bos_token_id = -1;           // -1: none
  std::string bos_token;               // text of the BOS token ("" if none)
  std::string eos_token;               // text of the first EOS token
  std::string chat_template;           // Jinja source from the checkpoint ("" if none)
  std::string precision;
  std::string device;
};

// Counters and gauges for /metrics. Counters are totals since start.
struct EngineStats {
  int num_running = 0;                 // sequences holding KV pages
  int num_waiting = 0;                 // accepted, not yet (or no longer, after preemption) running
  int64_t kv_pages_total = 0;
  int64_t kv_pages_free = 0;
  int64_t kv_pages_used = 0;           // total - free
  int page_size = 0;
  double kv_cache_usage = 0;           // used / total, [0, 1]

  uint64_t requests_submitted = 0;
  uint64_t requests_rejected = 0;      // submit() threw
  uint64_t requests_finished_stop = 0;
  uint64_t requests_finished_length = 0;
  uint64_t requests_cancelled = 0;
  uint64_t requests_failed = 0;        // FinishReason::kError
  uint64_t prompt_tokens = 0;          // of finished + running requests, counted once at admission
  uint64_t generation_tokens = 0;      // sampled tokens
  uint64_t computed_tokens = 0;        // tokens through the model (prefill + decode + recompute)
  uint64_t num_preemptions = 0;
  uint64_t num_steps = 0;
  int peak_num_running = 0;            // largest batch seen
  int64_t peak_kv_pages_used = 0;
  // Prefill = prompt tokens and recomputed ones; decode = one new token of a
  // sequence whose history is cached. A step is a decode step if it holds only decodes.
  uint64_t prefill_tokens = 0;         // computed as prefill
  uint64_t decode_tokens = 0;          // computed as decode
  uint64_t decode_steps = 0;
  double prefill_step_s = 0;           // model time of steps with any prefill
  double decode_step_s = 0;            // model time of decode-only steps
  double model_s = 0;                  // time in the model runner (steps)
  double kv_zero_s = 0;                // of which zeroing fresh KV pages (user-data guarantee)
};

// The per-request output queue returned by Engine::submit. Thread-safe; one
// consumer. Keeping it alive is not required for the request to run.
class RequestStream {
 public:
  explicit RequestStream(uint64_t id) : id_(id) {}
  uint64_t id() const { return id_; }

  // Blocks for the next output; std::nullopt once the final output was taken.
  std::optional<RequestOutput> next();
  // Like next() with a deadline; std::nullopt on timeout too (check finished()).
  std::optional<RequestOutput> next_for(std::chrono::milliseconds timeout);
  // True once the final output was taken by next()/next_for().
  bool finished() const;

  // Asks the engine to stop this request; its final output (kCancelled, or
  // whatever finished it first) still arrives. Safe to call repeatedly.
  void cancel();

  // Engine side.
  void push(RequestOutput output);
  void bind_cancel(std::function<void()> cancel_fn);

 private:
  uint64_t id_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<RequestOutput> queue_;
  bool final_pushed_ = false;
  bool final_taken_ = false;
  std::function<void()> cancel_fn_;
};

class Engine {
 public:
  // Loads the model named by config (a checkpoint or dummy weights) on
  // config.device, sizes the KV cache and starts the engine thread; config()
  // then holds the resolved precision and num_kv_pages. Throws qserve::Error
  // (kNotFound, kCorruptData, kUnsupported, kResourceExhausted: the weights do
  // not fit the memory budget, ...). The staged form is engine/engine_create.h.
  static std::unique_ptr<Engine> create(const EngineConfig& config);
  // With an explicit runner and text codec (tests, other backends). `codec` may be
  // null: then requests must carry token ids and outputs carry no text.
  static std::unique_ptr<Engine> create(const EngineConfig& config, std::unique_ptr<ModelRunner> runner,
                                        std::shared_ptr<TextCodec> codec);

  virtual ~Engine() = default;  // shutdown() then join

  // Validates and enqueues; outputs go to the returned stream. Any thread.
  virtual std::shared_ptr<RequestStream> submit(const Request& request) = 0;
  // Same, outputs go to `callback` on the engine thread instead; returns the request id.
  virtual uint64_t submit(const Request& request, OutputCallback callback) = 0;
  // Submits several requests at once: all are validated first (one bad request
  // throws and none is enqueued) and they reach the scheduler in one step
  // (offline batches, the `n` of a completion, benchmarks). The default (for
  // test doubles) submits one by one.
  virtual std::vector<std::shared_ptr<RequestStream>> submit_all(const std::vector<Request>& requests);
  // Cancels a request by id; false if it is unknown or already finished. Any thread.
  virtual bool cancel(uint64_t request_id) = 0;

  // Runs a request to completion (blocks the calling thread); the concatenated output.
  virtual RequestOutput generate(const Request& request);

  virtual EngineStats stats() const = 0;
  virtual const ModelInfo& model_info() const = 0;
  virtual const EngineConfig& config() const = 0;

  // Tokenizer access for the edge (chat templates, token counting).
  virtual std::vector<int32_t> tokenize(const std::string& text, bool add_special_tokens) const = 0;
  virtual std::string detokenize(const std::vector<int32_t>& token_ids, bool skip_special_tokens) const = 0;

  // Stops accepting requests. drain = true: finishes the accepted ones first;
  // false: cancels them (final output kCancelled). Blocks until the engine thread is idle.
  virtual void shutdown(bool drain) = 0;
};

}  // namespace qserve
