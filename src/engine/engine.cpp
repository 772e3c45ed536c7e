// The engine loop: a background thread that takes new requests and
// cancellations, then steps scheduler -> model runner -> sampler -> stop
// checks -> per-request outputs, until shut down.
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "engine/logprobs.h"
#include "engine/kv_block_manager.h"
#include "engine/model_runner.h"
#include "engine/output_processor.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/text_codec.h"
#include "qserve/engine.h"

namespace qserve {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

constexpr int kMaxLogprobs = 20;

struct Incoming {
  uint64_t id = 0;
  std::vector<int32_t> prompt_ids;
  GenerationParams params;
  int max_new_tokens = 0;
  std::shared_ptr<RequestStream> stream;  // one of stream / callback
  OutputCallback callback;
  Clock::time_point arrival;
};

// Engine-thread state of an accepted request.
struct Active {
  Incoming in;
  std::unique_ptr<OutputProcessor> output;
  std::unique_ptr<Sampler> sampler;
  std::vector<float> masked;  // logits with suppressed ids removed (min_tokens)
  int num_prompt_tokens = 0;
  bool scheduled = false;
  Clock::time_point first_scheduled, first_token;
};

class EngineImpl final : public Engine {
 public:
  EngineImpl(const EngineConfig& config, std::unique_ptr<ModelRunner> runner, std::shared_ptr<TextCodec> codec)
      : config_(config), runner_(std::move(runner)), codec_(std::move(codec)) {
    QS_CHECK(runner_ != nullptr) << "no model runner";
    if (config.page_size <= 0) fail(ErrorCode::kInvalidArgument, "page_size must be > 0 (got {})", config.page_size);
    if (config.max_num_seqs <= 0) fail(ErrorCode::kInvalidArgument, "max_num_seqs must be > 0");
    if (config.max_num_batched_tokens <= 0) fail(ErrorCode::kInvalidArgument, "max_num_batched_tokens must be > 0");
    int64_t num_pages = config.num_kv_pages;
    if (num_pages <= 0) {
      const int64_t page_bytes = runner_->kv_bytes_per_page(config.page_size);
      if (config.kv_cache_bytes <= 0) {
        fail(ErrorCode::kInvalidArgument, "the KV cache needs a size: num_kv_pages or kv_cache_bytes");
      }
      num_pages = config.kv_cache_bytes / page_bytes;
    }
    if (num_pages <= 0) fail(ErrorCode::kInvalidArgument, "the KV cache budget holds no page");
    kv_ = std::make_unique<KvBlockManager>(num_pages, config.page_size);
    scheduler_ = std::make_unique<Scheduler>(
        SchedulerConfig{config.max_num_seqs, config.max_num_batched_tokens, /*enable_chunked_prefill=*/true}, *kv_);
    runner_->allocate_kv_cache(num_pages, config.page_size);
    runner_->reserve_workspace(config.max_num_batched_tokens, config.max_num_seqs);

    // The context length: the model's, the config's, and what the whole cache holds.
    int64_t max_len = runner_->max_model_len();
    if (config.max_model_len > 0) max_len = std::min<int64_t>(max_len, config.max_model_len);
    max_len = std::min<int64_t>(max_len, num_pages * config.page_size);
    info_.name = runner_->name();
    info_.architecture = runner_->architecture();
    info_.vocab_size = runner_->vocab_size();
    info_.max_model_len = static_cast<int>(max_len);
    info_.precision = config.precision;
    info_.device = config.device;
    if (codec_) {
      info_.eos_token_ids = codec_->eos_ids();
      info_.bos_token_id = codec_->bos_id();
      if (info_.bos_token_id >= 0) info_.bos_token = codec_->token_text(info_.bos_token_id);
      if (!info_.eos_token_ids.empty()) info_.eos_token = codec_->token_text(info_.eos_token_ids[0]);
      info_.chat_template = codec_->chat_template();
    } else {
      info_.eos_token_ids = runner_->eos_token_ids();
    }
    stats_.kv_pages_total = num_pages;
    stats_.kv_pages_free = num_pages;
    stats_.page_size = config.page_size;
    thread_ = std::thread([this] { loop(); });
  }

  ~EngineImpl() override { shutdown(false); }

  std::shared_ptr<RequestStream> submit(const Request& request) override {
    Incoming in = validate(request);
    auto stream = std::make_shared<RequestStream>(in.id);
    const uint64_t id = in.id;
    stream->bind_cancel([this, id] { cancel(id); });
    in.stream = stream;
    enqueue(std::move(in));
    return stream;
  }

  std::vector<std::shared_ptr<RequestStream>> submit_all(const std::vector<Request>& requests) override {
    std::vector<Incoming> ins;
    ins.reserve(requests.size());
    for (const Request& r : requests) ins.push_back(validate(r));
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (Incoming& in : ins) {
      auto stream = std::make_shared<RequestStream>(in.id);
      const uint64_t id = in.id;
      stream->bind_cancel([this, id] { cancel(id); });
      in.stream = stream;
      streams.push_back(std::move(stream));
    }
    enqueue(std::move(ins));
    return streams;
  }

  uint64_t submit(const Request& request, OutputCallback callback) override {
    Incoming in = validate(request);
    QS_CHECK(callback != nullptr) << "null output callback";
    in.callback = std::move(callback);
    const uint64_t id = in.id;
    enqueue(std::move(in));
    return id;
  }

  bool cancel(uint64_t request_id) override {
    std::lock_guard lock(mutex_);
    if (!live_ids_.count(request_id)) return false;
    cancels_.push_back(request_id);
    cv_.notify_all();
    return true;
  }

  EngineStats stats() const override {
    std::lock_guard lock(stats_mutex_);
    return stats_;
  }
  const ModelInfo& model_info() const override { return info_; }
  const EngineConfig& config() const override { return config_; }

  std::vector<int32_t> tokenize(const std::string& text, bool add_special_tokens) const override {
    if (!codec_) fail(ErrorCode::kUnsupported, "this engine has no tokenizer");
    return codec_->encode(text, add_special_tokens);
  }
  std::string detokenize(const std::vector<int32_t>& ids, bool skip_special_tokens) const override {
    if (!codec_) fail(ErrorCode::kUnsupported, "this engine has no tokenizer");
    return codec_->decode(ids, skip_special_tokens);
  }

  void shutdown(bool drain) override {
    {
      std::lock_guard lock(mutex_);
      if (!stopping_) {
        stopping_ = true;
        drain_ = drain;
      } else if (!drain) {
        drain_ = false;  // a second, harder shutdown
      }
      cv_.notify_all();
    }
    std::lock_guard join_lock(join_mutex_);
    if (thread_.joinable()) thread_.join();
  }

 private:
  Incoming validate(const Request& request) {
    try {
      return validate_or_throw(request);
    } catch (const Error&) {
      std::lock_guard lock(stats_mutex_);
      ++stats_.requests_rejected;
      throw;
    }
  }

  Incoming validate_or_throw(const Request& request) {
    const GenerationParams& p = request.params;
    if (!std::isfinite(p.temperature) || p.temperature < 0) fail(ErrorCode::kInvalidArgument, "temperature must be >= 0 (got {})", p.temperature);
    if (!(p.top_p > 0 && p.top_p <= 1)) fail(ErrorCode::kInvalidArgument, "top_p must be in (0, 1] (got {})", p.top_p);
    if (!(p.min_p >= 0 && p.min_p <= 1)) fail(ErrorCode::kInvalidArgument, "min_p must be in [0, 1] (got {})", p.min_p);
    if (p.top_k < -1) fail(ErrorCode::kInvalidArgument, "top_k must be >= -1 (got {})", p.top_k);
    if (!(p.repetition_penalty > 0) || !std::isfinite(p.repetition_penalty)) {
      fail(ErrorCode::kInvalidArgument, "repetition_penalty must be > 0 (got {})", p.repetition_penalty);
    }
    if (p.max_tokens == 0) fail(ErrorCode::kInvalidArgument, "max_tokens must be >= 1 (got 0)");
    if (p.min_tokens < 0) fail(ErrorCode::kInvalidArgument, "min_tokens must be >= 0 (got {})", p.min_tokens);
    if (p.max_tokens > 0 && p.min_tokens > p.max_tokens) fail(ErrorCode::kInvalidArgument, "min_tokens ({}) exceeds max_tokens ({})", p.min_tokens, p.max_tokens);
    if (p.logprobs > kMaxLogprobs) fail(ErrorCode::kInvalidArgument, "logprobs must be <= {} (got {})", kMaxLogprobs, p.logprobs);
    for (const auto& s : p.stop) {
      if (s.empty()) fail(ErrorCode::kInvalidArgument, "stop strings must not be empty");
    }
    for (int32_t id : p.stop_token_ids) {
      if (id < 0 || id >= info_.vocab_size) fail(ErrorCode::kInvalidArgument, "stop token id {} outside the vocabulary [0, {})", id, info_.vocab_size);
    }
    if (!p.stop.empty() && (!codec_ || !p.detokenize)) fail(ErrorCode::kInvalidArgument, "stop strings need detokenized output");

    Incoming in;
    if (!request.prompt_token_ids.empty()) {
      in.prompt_ids = request.prompt_token_ids;
    } else {
      if (request.prompt.empty()) fail(ErrorCode::kInvalidArgument, "the prompt is empty");
      if (!codec_) fail(ErrorCode::kInvalidArgument, "a text prompt needs a tokenizer; this engine takes token ids only");
      in.prompt_ids = codec_->encode(request.prompt, request.add_special_tokens);
      if (in.prompt_ids.empty()) fail(ErrorCode::kInvalidArgument, "the prompt encodes to no tokens");
    }
    for (int32_t id : in.prompt_ids) {
      if (id < 0 || id >= info_.vocab_size) fail(ErrorCode::kInvalidArgument, "prompt token id {} outside the vocabulary [0, {})", id, info_.vocab_size);
    }
    const int prompt_len = static_cast<int>(in.prompt_ids.size());
    const int max_len = info_.max_model_len;
    if (prompt_len >= max_len) {
      fail(ErrorCode::kOutOfRange, "the prompt has {} tokens; the context holds {} (prompt + at least 1 new token)",
           prompt_len, max_len);
    }
    if (p.max_tokens > 0 && prompt_len + p.max_tokens > max_len) {
      fail(ErrorCode::kOutOfRange, "prompt ({} tokens) + max_tokens ({}) = {} exceeds the context length {}", prompt_len,
           p.max_tokens, prompt_len + p.max_tokens, max_len);
    }
    in.max_new_tokens = p.max_tokens > 0 ? p.max_tokens : max_len - prompt_len;
    in.params = p;
    if (!codec_) in.params.detokenize = false;
    in.arrival = Clock::now();
    in.id = next_id_.fetch_add(1);
    return in;
  }

  void enqueue(Incoming in) {
    std::vector<Incoming> one;
    one.push_back(std::move(in));
    enqueue(std::move(one));
  }

  // All or none.
  void enqueue(std::vector<Incoming> ins) {
    const int n = static_cast<int>(ins.size());
    {
      std::lock_guard lock(mutex_);
      if (stopping_) fail(ErrorCode::kUnsupported, "the engine is shutting down");
      const int waiting = static_cast<int>(incoming_.size()) + sched_waiting_.load();
      if (waiting + n > config_.max_waiting_requests) {
        std::lock_guard stats_lock(stats_mutex_);
        stats_.requests_rejected += n;
        fail(ErrorCode::kResourceExhausted, "the queue is full ({} requests waiting, limit {})", waiting,
             config_.max_waiting_requests);
      }
      for (Incoming& in : ins) {
        live_ids_.insert(in.id);
        incoming_.push_back(std::move(in));
      }
      cv_.notify_all();
    }
    std::lock_guard stats_lock(stats_mutex_);
    stats_.requests_submitted += n;
  }

  void deliver(Active& a, RequestOutput& out) {
    out.request_id = a.in.id;
    out.usage.prompt_tokens = a.num_prompt_tokens;
    out.usage.completion_tokens = a.output->num_generated();
    if (a.in.stream) {
      a.in.stream->push(out);
    } else {
      try {
        a.in.callback(out);
      } catch (const std::exception& e) {
        spdlog::error("output callback of request {} threw: {}", a.in.id, e.what());
      }
    }
  }

  // Final output for a request that ends now; removes it everywhere.
  void finish_request(uint64_t id, RequestOutput& out) {
    auto it = active_.find(id);
    QS_CHECK(it != active_.end()) << "finishing unknown request " << id;
    Active& a = it->second;
    const auto now = Clock::now();
    out.finished = true;
    RequestTimings& t = out.timings;
    t.e2e_s = seconds_between(a.in.arrival, now);
    t.queue_s = a.scheduled ? seconds_between(a.in.arrival, a.first_scheduled) : t.e2e_s;
    const int n = a.output->num_generated();
    if (n > 0) t.ttft_s = seconds_between(a.in.arrival, a.first_token);
    if (n > 1) t.mean_tpot_s = (t.e2e_s - t.ttft_s) / (n - 1);
    scheduler_->finish(id);
    {
      std::lock_guard lock(mutex_);
      live_ids_.erase(id);
    }
    publish_stats();  // before the caller sees the end: its pages are back
    {
      std::lock_guard lock(stats_mutex_);
      switch (out.finish_reason) {
        case FinishReason::kStop: ++stats_.requests_finished_stop; break;
        case FinishReason::kLength: ++stats_.requests_finished_length; break;
        case FinishReason::kCancelled: ++stats_.requests_cancelled; break;
        default: ++stats_.requests_failed; break;
      }
    }
    deliver(a, out);
    active_.erase(it);
  }

  void end_request(uint64_t id, FinishReason reason, const std::string& error = {}) {
    auto it = active_.find(id);
    if (it == active_.end()) return;
    RequestOutput out;
    it->second.output->finish(reason, out);
    out.finish_reason = reason;
    out.error = error;
    finish_request(id, out);
  }

  void accept(Incoming in) {
    Active a;
    a.num_prompt_tokens = static_cast<int>(in.prompt_ids.size());
    // An unseeded request gets a seed derived from the engine's and its id: runs repeat.
    GenerationParams sampling = in.params;
    if (!sampling.seed) sampling.seed = config_.seed ^ (0x9e3779b97f4a7c15ULL * (in.id + 1));
    a.sampler = std::make_unique<Sampler>(sampling);
    std::unique_ptr<TextStream> text;
    if (in.params.detokenize && codec_) text = codec_->start_stream(in.prompt_ids, in.params.skip_special_tokens);
    a.output = std::make_unique<OutputProcessor>(in.params, in.max_new_tokens, info_.eos_token_ids, std::move(text));
    scheduler_->add(in.id, in.prompt_ids);
    {
      std::lock_guard lock(stats_mutex_);
      stats_.prompt_tokens += in.prompt_ids.size();
    }
    const uint64_t id = in.id;
    a.in = std::move(in);
    active_.emplace(id, std::move(a));
  }

  void step() {
    StepPlan plan = scheduler_->schedule();
    QS_CHECK(!plan.empty()) << "the scheduler found no work although requests wait (KV cache too small?)";
    publish_stats();
    RunnerBatch batch;
    batch.seqs.reserve(plan.chunks.size());
    const auto now = Clock::now();
    uint64_t decode_tokens = 0;
    for (const ScheduledChunk& c : plan.chunks) {
      const Sequence* seq = scheduler_->find(c.seq);
      if (c.num_tokens == 1 && c.sample && c.start >= seq->num_prompt_tokens) ++decode_tokens;
      Active& a = active_.at(c.seq);
      if (!a.scheduled) {
        a.scheduled = true;
        a.first_scheduled = now;
      }
      RunnerSeq rs;
      rs.seq = c.seq;
      rs.token_ids = std::span<const int32_t>(seq->token_ids).subspan(c.start, c.num_tokens);
      rs.start = c.start;
      rs.page_table = kv_->page_table(c.seq);
      rs.sample = c.sample;
      batch.seqs.push_back(rs);
      batch.num_samples += c.sample;
    }
    batch.num_tokens = plan.num_tokens;
    batch.fresh_pages = plan.fresh_pages;

    // Sampling on the device when the runner can and every sampled request's
    // parameters are ones the device rules express (model_runner.h): then
    // only token ids come back from the step.
    bool on_device = batch.num_samples > 0 && runner_->can_sample_on_device();
    device_params_.clear();
    device_steps_.clear();
    for (const ScheduledChunk& c : plan.chunks) {
      if (!on_device) break;
      if (!c.sample) continue;
      const Active& a = active_.at(c.seq);
      const GenerationParams& p = a.in.params;
      const bool masks_agree = p.temperature <= 0 || p.top_k <= 0 || p.top_p >= 1;
      if (p.repetition_penalty != 1.0f || p.min_p > 0 || p.logprobs >= 0 || !masks_agree ||
          !a.output->suppressed_ids().empty()) {
        on_device = false;
        break;
      }
      device_params_.push_back({p.temperature, p.top_k, p.top_p, a.sampler->seed()});
      // The draw's counter: the tokens sampled so far (host sampling counts the same way).
      device_steps_.push_back(static_cast<uint64_t>(a.output->num_generated()));
    }

    std::span<const float> logits;
    std::span<const int32_t> device_tokens;
    try {
      const auto t0 = Clock::now();
      if (on_device) device_tokens = runner_->execute_and_sample(batch, device_params_, device_steps_);
      else logits = runner_->execute(batch);
      const double dt = seconds_between(t0, Clock::now());
      model_seconds_ += dt;
      std::lock_guard lock(stats_mutex_);
      stats_.decode_tokens += decode_tokens;
      stats_.prefill_tokens += static_cast<uint64_t>(plan.num_tokens) - decode_tokens;
      if (decode_tokens == static_cast<uint64_t>(plan.num_tokens)) {
        ++stats_.decode_steps;
        stats_.decode_step_s += dt;
      } else {
        stats_.prefill_step_s += dt;
      }
    } catch (const std::exception& e) {
      // The step failed: its requests fail, the engine keeps serving the rest.
      spdlog::error("model step failed: {}", e.what());
      for (const ScheduledChunk& c : plan.chunks) end_request(c.seq, FinishReason::kError, e.what());
      return;
    }
    const int vocab = info_.vocab_size;
    if (on_device) {
      QS_CHECK(static_cast<int64_t>(device_tokens.size()) == batch.num_samples)
          << "runner returned " << device_tokens.size() << " tokens for " << batch.num_samples << " samples";
    } else {
      QS_CHECK(static_cast<int64_t>(logits.size()) == static_cast<int64_t>(batch.num_samples) * vocab)
          << "runner returned " << logits.size() << " logits for " << batch.num_samples << " samples";
    }
    scheduler_->complete_step(plan);

    int row = 0;
    const auto after = Clock::now();
    for (const ScheduledChunk& c : plan.chunks) {
      if (!c.sample) continue;
      const int r = row++;
      Active& a = active_.at(c.seq);
      const Sequence* seq = scheduler_->find(c.seq);
      const int index = a.output->num_generated();
      std::span<const float> row_logits;
      int32_t token = 0;
      if (on_device) {
        token = device_tokens[r];
      } else {
        row_logits = logits.subspan(static_cast<size_t>(r) * vocab, vocab);
        std::span<const float> to_sample = row_logits;
        if (const auto& suppress = a.output->suppressed_ids(); !suppress.empty()) {
          a.masked.assign(row_logits.begin(), row_logits.end());
          for (int32_t id : suppress) a.masked[id] = -std::numeric_limits<float>::infinity();
          to_sample = a.masked;
        }
        token = a.sampler->sample(to_sample, seq->token_ids);
      }
      scheduler_->append_token(c.seq, token);
      {
        std::lock_guard lock(stats_mutex_);
        ++stats_.generation_tokens;
      }
      if (index == 0) a.first_token = after;
      RequestOutput out;
      if (a.in.params.logprobs >= 0) out.logprobs.push_back(token_logprobs(row_logits, token, a.in.params.logprobs));
      if (a.output->on_token(token, out)) {
        finish_request(c.seq, out);
      } else {
        deliver(a, out);
      }
    }
    std::lock_guard lock(stats_mutex_);
    ++stats_.num_steps;
    stats_.computed_tokens += static_cast<uint64_t>(plan.num_tokens);
  }

  void publish_stats() {
    sched_waiting_.store(scheduler_->num_waiting());
    int queued = 0;  // submitted, not yet taken by the engine thread
    {
      std::lock_guard lock(mutex_);  // released before stats_mutex_ (enqueue nests mutex_ -> stats_mutex_)
      queued = static_cast<int>(incoming_.size());
    }
    std::lock_guard lock(stats_mutex_);
    stats_.num_running = scheduler_->num_running();
    stats_.num_waiting = scheduler_->num_waiting() + queued;
    stats_.kv_pages_free = kv_->num_free_pages();
    stats_.kv_pages_used = kv_->num_used_pages();
    stats_.kv_cache_usage = static_cast<double>(stats_.kv_pages_used) / static_cast<double>(stats_.kv_pages_total);
    stats_.num_preemptions = scheduler_->num_preemptions();
    stats_.kv_zero_s = runner_->kv_zero_seconds();
    stats_.model_s = model_seconds_;
    stats_.peak_num_running = std::max(stats_.peak_num_running, stats_.num_running);
    stats_.peak_kv_pages_used = std::max(stats_.peak_kv_pages_used, stats_.kv_pages_used);
  }

  void loop() {
    while (true) {
      std::vector<Incoming> incoming;
      std::vector<uint64_t> cancels;
      bool stopping = false, drain = true;
      {
        std::unique_lock lock(mutex_);
        const bool busy = scheduler_->has_work();
        cv_.wait(lock, [&] { return busy || stopping_ || !incoming_.empty() || !cancels_.empty(); });
        incoming.swap(incoming_);
        cancels.swap(cancels_);
        stopping = stopping_;
        drain = drain_;
      }
      for (Incoming& in : incoming) accept(std::move(in));
      for (uint64_t id : cancels) end_request(id, FinishReason::kCancelled);
      if (stopping && !drain) {
        std::vector<uint64_t> ids;
        for (const auto& [id, a] : active_) ids.push_back(id);
        for (uint64_t id : ids) end_request(id, FinishReason::kCancelled);
      }
      // Admission counters before the step, so the queue check sees them.
      sched_waiting_.store(scheduler_->num_waiting());
      if (scheduler_->has_work()) {
        try {
          step();
        } catch (const Error& e) {
          // A bug surfaced as an Error: fail everything rather than spin.
          spdlog::error("engine step failed: {}", e.what());
          std::vector<uint64_t> ids;
          for (const auto& [id, a] : active_) ids.push_back(id);
          for (uint64_t id : ids) end_request(id, FinishReason::kError, e.what());
        }
      }
      publish_stats();
      if (stopping && !scheduler_->has_work()) {
        std::lock_guard lock(mutex_);
        if (incoming_.empty()) break;
      }
    }
  }

  EngineConfig config_;
  std::unique_ptr<ModelRunner> runner_;
  std::vector<SamplingParams> device_params_;  // per step, device sampling
  std::vector<uint64_t> device_steps_;
  std::shared_ptr<TextCodec> codec_;
  ModelInfo info_;
  std::unique_ptr<KvBlockManager> kv_;   // engine thread only
  std::unique_ptr<Scheduler> scheduler_; // engine thread only
  std::unordered_map<uint64_t, Active> active_;  // engine thread only
  double model_seconds_ = 0;                     // engine thread only

  std::atomic<uint64_t> next_id_{1};
  std::atomic<int> sched_waiting_{0};
  std::mutex mutex_;  // guards the fields below
  std::condition_variable cv_;
  std::vector<Incoming> incoming_;
  std::vector<uint64_t> cancels_;
  std::unordered_set<uint64_t> live_ids_;
  bool stopping_ = false;
  bool drain_ = true;

  mutable std::mutex stats_mutex_;
  EngineStats stats_;
  std::mutex join_mutex_;
  std::thread thread_;
};

}  // namespace

std::unique_ptr<Engine> Engine::create(const EngineConfig& config, std::unique_ptr<ModelRunner> runner,
                                       std::shared_ptr<TextCodec> codec) {
  return std::make_unique<EngineImpl>(config, std::move(runner), std::move(codec));
}

std::vector<std::shared_ptr<RequestStream>> Engine::submit_all(const std::vector<Request>& requests) {
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const Request& r : requests) streams.push_back(submit(r));
  return streams;
}

RequestOutput Engine::generate(const Request& request) {
  auto stream = submit(request);
  RequestOutput all;
  while (auto out = stream->next()) {
    all.request_id = out->request_id;
    all.token_ids.insert(all.token_ids.end(), out->token_ids.begin(), out->token_ids.end());
    all.text += out->text;
    all.logprobs.insert(all.logprobs.end(), out->logprobs.begin(), out->logprobs.end());
    all.finished = out->finished;
    all.finish_reason = out->finish_reason;
    all.stop_reason = out->stop_reason;
    all.error = out->error;
    all.usage = out->usage;
    all.timings = out->timings;
  }
  return all;
}

}  // namespace qserve
