// The engine loop on the deterministic fake model (fake_model_runner.h) and a
// byte tokenizer: API behaviour, errors, cancellation, concurrency.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "core/error.h"
#include "engine/model_runner.h"
#include "fake_model_runner.h"
#include "fake_text_codec.h"
#include "qserve/engine.h"

namespace qserve {
namespace {

constexpr int kVocab = 258;

EngineConfig small_config(int64_t pages = 64, int page_size = 4) {
  EngineConfig c;
  c.num_kv_pages = pages;
  c.page_size = page_size;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 32;
  return c;
}

std::unique_ptr<Engine> make_engine(const EngineConfig& c, fakes::FakeModelRunner** runner_out = nullptr,
                                    bool with_codec = true) {
  auto runner = std::make_unique<fakes::FakeModelRunner>(kVocab, 1024);
  if (runner_out) *runner_out = runner.get();
  std::shared_ptr<TextCodec> codec;
  if (with_codec) codec = std::make_shared<fakes::FakeTextCodec>();
  return Engine::create(c, std::move(runner), codec);
}

Request greedy(std::vector<int32_t> prompt, int max_tokens) {
  Request r;
  r.prompt_token_ids = std::move(prompt);
  r.params.temperature = 0;
  r.params.max_tokens = max_tokens;
  r.params.ignore_eos = true;
  return r;
}

ErrorCode submit_error(Engine& engine, const Request& r) {
  try {
    engine.submit(r);
  } catch (const Error& e) {
    return e.code();
  }
  ADD_FAILURE() << "no error";
  return ErrorCode::kInternal;
}

TEST(Engine, GeneratesMaxTokensAndReportsUsage) {
  fakes::FakeModelRunner* runner = nullptr;
  auto engine = make_engine(small_config(), &runner);
  RequestOutput out = engine->generate(greedy({1, 2, 3, 4, 5}, 12));
  EXPECT_TRUE(out.finished);
  EXPECT_EQ(out.finish_reason, FinishReason::kLength);
  EXPECT_EQ(out.token_ids.size(), 12u);
  EXPECT_EQ(out.usage.prompt_tokens, 5);
  EXPECT_EQ(out.usage.completion_tokens, 12);
  EXPECT_GT(out.timings.e2e_s, 0);
  EXPECT_LE(out.timings.ttft_s, out.timings.e2e_s);
  EXPECT_EQ(runner->violations, 0);
  // The same request again: greedy is deterministic.
  EXPECT_EQ(engine->generate(greedy({1, 2, 3, 4, 5}, 12)).token_ids, out.token_ids);
  const EngineStats s = engine->stats();
  EXPECT_EQ(s.requests_finished_length, 2u);
  EXPECT_EQ(s.generation_tokens, 24u);
  EXPECT_EQ(s.kv_pages_free, s.kv_pages_total);
}

TEST(Engine, StreamsOneOutputPerTokenWithText) {
  auto engine = make_engine(small_config());
  Request r = greedy({}, 6);
  r.prompt = "hello";
  auto stream = engine->submit(r);
  int outputs = 0;
  std::vector<int32_t> ids;
  std::string text;
  while (auto out = stream->next()) {
    ++outputs;
    EXPECT_EQ(out->token_ids.size(), 1u);
    ids.insert(ids.end(), out->token_ids.begin(), out->token_ids.end());
    text += out->text;
    EXPECT_EQ(out->usage.prompt_tokens, 6);  // BOS + 5 bytes
    EXPECT_EQ(out->usage.completion_tokens, outputs);
    EXPECT_EQ(out->finished, outputs == 6);
  }
  EXPECT_EQ(outputs, 6);
  EXPECT_EQ(text, engine->detokenize(ids, true));
}

TEST(Engine, RejectsBadRequestsWithTypedErrors) {
  auto engine = make_engine(small_config(64, 4));  // context = min(1024, 256 slots) = 256
  EXPECT_EQ(engine->model_info().max_model_len, 256);
  EXPECT_EQ(submit_error(*engine, greedy({1, 2, 3}, 254)), ErrorCode::kOutOfRange);
  EXPECT_EQ(submit_error(*engine, greedy(std::vector<int32_t>(256, 1), -1)), ErrorCode::kOutOfRange);
  EXPECT_EQ(submit_error(*engine, greedy({}, 4)), ErrorCode::kInvalidArgument);           // empty prompt
  EXPECT_EQ(submit_error(*engine, greedy({1, kVocab}, 4)), ErrorCode::kInvalidArgument);  // id outside vocab
  EXPECT_EQ(submit_error(*engine, greedy({1}, 0)), ErrorCode::kInvalidArgument);
  Request r = greedy({1}, 4);
  r.params.temperature = -1;
  EXPECT_EQ(submit_error(*engine, r), ErrorCode::kInvalidArgument);
  r = greedy({1}, 4);
  r.params.top_p = 0;
  EXPECT_EQ(submit_error(*engine, r), ErrorCode::kInvalidArgument);
  r = greedy({1}, 4);
  r.params.stop = {""};
  EXPECT_EQ(submit_error(*engine, r), ErrorCode::kInvalidArgument);
  // Still serving, and the rejections are counted.
  EXPECT_EQ(engine->generate(greedy({1, 2}, 3)).token_ids.size(), 3u);
  EXPECT_EQ(engine->stats().requests_rejected, 8u);
  // max_tokens < 0: up to the context.
  EXPECT_EQ(engine->generate(greedy({1, 2}, -1)).token_ids.size(), 254u);
}

TEST(Engine, WithoutATokenizerTakesTokenIdsOnly) {
  auto engine = make_engine(small_config(), nullptr, /*with_codec=*/false);
  Request r = greedy({}, 3);
  r.prompt = "text";
  EXPECT_EQ(submit_error(*engine, r), ErrorCode::kInvalidArgument);
  RequestOutput out = engine->generate(greedy({5, 6}, 3));
  EXPECT_EQ(out.token_ids.size(), 3u);
  EXPECT_TRUE(out.text.empty());
}

// A runner that holds every step until released: makes the queue fill up.
class GatedRunner : public fakes::FakeModelRunner {
 public:
  GatedRunner() : FakeModelRunner(kVocab, 1024) {}
  std::span<const float> execute(const RunnerBatch& batch) override {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return open; });
    return FakeModelRunner::execute(batch);
  }
  void release() {
    std::lock_guard lock(mu);
    open = true;
    cv.notify_all();
  }
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
};

TEST(Engine, QueueFullIsResourceExhausted) {
  EngineConfig c = small_config();
  c.max_num_seqs = 1;
  c.max_waiting_requests = 3;
  auto gated = std::make_unique<GatedRunner>();
  GatedRunner* gate = gated.get();
  auto engine = Engine::create(c, std::move(gated), std::make_shared<fakes::FakeTextCodec>());
  std::vector<std::shared_ptr<RequestStream>> streams;
  streams.push_back(engine->submit(greedy({1, 2}, 2)));
  while (engine->stats().num_running == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  int rejected = 0;
  for (int i = 1; i < 10; ++i) {
    try {
      streams.push_back(engine->submit(greedy({1, 2}, 2)));
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kResourceExhausted);
      ++rejected;
    }
  }
  // One runs (blocked in the runner), three wait, the rest are turned away.
  EXPECT_EQ(rejected, 6);
  EXPECT_EQ(engine->stats().requests_rejected, 6u);
  gate->release();
  for (auto& s : streams) {
    RequestOutput last;
    while (auto out = s->next()) last = *out;
    EXPECT_EQ(last.finish_reason, FinishReason::kLength);
  }
}

TEST(Engine, CancelEndsARequestAndFreesItsPages) {
  fakes::FakeModelRunner* runner = nullptr;
  auto engine = make_engine(small_config(), &runner);
  runner->step_delay_us = 1000;  // 200 steps take 0.2 s: the cancel lands first
  auto stream = engine->submit(greedy({1, 2, 3}, 200));
  auto first = stream->next();
  ASSERT_TRUE(first.has_value());
  stream->cancel();
  RequestOutput last = *first;
  while (auto out = stream->next()) last = *out;
  EXPECT_TRUE(last.finished);
  EXPECT_EQ(last.finish_reason, FinishReason::kCancelled);
  EXPECT_LT(last.usage.completion_tokens, 200);
  EXPECT_FALSE(engine->cancel(stream->id()));  // already finished
  EXPECT_EQ(engine->stats().kv_pages_free, engine->stats().kv_pages_total);
  EXPECT_EQ(engine->stats().requests_cancelled, 1u);
}

TEST(Engine, StopStringsCutTheTextAndEosStops) {
  auto engine = make_engine(small_config());
  Request base = greedy({}, 40);
  base.prompt = "abc";
  const RequestOutput full = engine->generate(base);
  ASSERT_GE(full.text.size(), 10u);
  // A stop string taken from the middle of the greedy output.
  Request r = base;
  const std::string stop = full.text.substr(6, 2);
  r.params.stop = {stop};
  const RequestOutput cut = engine->generate(r);
  EXPECT_EQ(cut.finish_reason, FinishReason::kStop);
  EXPECT_EQ(cut.stop_reason, stop);
  EXPECT_EQ(cut.text, full.text.substr(0, full.text.find(stop)));
  r.params.include_stop_str_in_output = true;
  EXPECT_EQ(engine->generate(r).text, full.text.substr(0, full.text.find(stop)) + stop);
  // A stop token id: the output ends with it, its text is not emitted.
  r = base;
  r.params.stop_token_ids = {full.token_ids[4]};
  const RequestOutput by_id = engine->generate(r);
  EXPECT_EQ(by_id.finish_reason, FinishReason::kStop);
  const auto first = std::find(full.token_ids.begin(), full.token_ids.end(), full.token_ids[4]) - full.token_ids.begin();
  EXPECT_EQ(by_id.token_ids.size(), static_cast<size_t>(first + 1));
  EXPECT_EQ(by_id.stop_reason, std::to_string(full.token_ids[4]));
}

TEST(Engine, SeededSamplingIsReproducibleAndLogprobsAreReported) {
  auto engine = make_engine(small_config());
  Request r = greedy({7, 8, 9}, 16);
  r.params.temperature = 0.8f;
  r.params.top_p = 0.9f;
  r.params.seed = 1234;
  r.params.logprobs = 3;
  const RequestOutput a = engine->generate(r);
  // The same seed in a crowd of other requests.
  std::vector<std::shared_ptr<RequestStream>> others;
  for (int i = 0; i < 5; ++i) others.push_back(engine->submit(greedy({1, 2, 3, int32_t(i)}, 20)));
  const RequestOutput b = engine->generate(r);
  EXPECT_EQ(a.token_ids, b.token_ids);
  ASSERT_EQ(a.logprobs.size(), 16u);
  for (size_t i = 0; i < a.logprobs.size(); ++i) {
    const auto& lp = a.logprobs[i];
    EXPECT_EQ(lp.token_id, a.token_ids[i]);
    ASSERT_EQ(lp.top.size(), 3u);
    EXPECT_LE(lp.logprob, 0.0f);
    EXPECT_GE(lp.top[0].logprob, lp.top[1].logprob);
    EXPECT_GE(lp.top[0].logprob, lp.logprob);
  }
  r.params.seed = 99;
  EXPECT_NE(engine->generate(r).token_ids, a.token_ids);
  for (auto& s : others) while (s->next()) {}
}

TEST(Engine, ManyThreadsSubmitAndTheirGreedyOutputsMatchAlone) {
  auto engine = make_engine(small_config(24, 4));  // 96 slots: forces preemption
  std::vector<Request> reqs;
  std::mt19937 rng(3);
  for (int i = 0; i < 24; ++i) {
    std::vector<int32_t> p(1 + rng() % 20);
    for (auto& t : p) t = rng() % 256;
    reqs.push_back(greedy(p, 1 + rng() % 40));
  }
  std::vector<std::vector<int32_t>> alone;
  for (const auto& r : reqs) alone.push_back(engine->generate(r).token_ids);
  std::vector<std::vector<int32_t>> crowd(reqs.size());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = t; i < reqs.size(); i += 4) crowd[i] = engine->generate(reqs[i]).token_ids;
    });
  }
  for (auto& th : threads) th.join();
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(crowd[i], alone[i]) << "request " << i;
  const EngineStats s = engine->stats();
  EXPECT_EQ(s.kv_pages_free, s.kv_pages_total);
}

TEST(Engine, CallbacksRunOnTheEngineThreadAndShutdownDrains) {
  auto engine = make_engine(small_config());
  std::atomic<int> tokens{0}, finals{0};
  for (int i = 0; i < 5; ++i) {
    engine->submit(greedy({1, int32_t(i)}, 10), [&](const RequestOutput& out) {
      tokens += static_cast<int>(out.token_ids.size());
      finals += out.finished;
    });
  }
  engine->shutdown(/*drain=*/true);
  EXPECT_EQ(tokens.load(), 50);
  EXPECT_EQ(finals.load(), 5);
  EXPECT_EQ(submit_error(*engine, greedy({1}, 1)), ErrorCode::kUnsupported);
}

TEST(Engine, ShutdownWithoutDrainCancels) {
  auto engine = make_engine(small_config());
  auto s = engine->submit(greedy({1, 2}, 200));
  engine->shutdown(/*drain=*/false);
  RequestOutput last;
  while (auto out = s->next()) last = *out;
  EXPECT_TRUE(last.finished);
  EXPECT_TRUE(last.finish_reason == FinishReason::kCancelled || last.finish_reason == FinishReason::kLength);
}

}  // namespace
}  // namespace qserve

namespace qserve {
namespace {

TEST(Engine, SubmitAllIsAllOrNothingAndBatchesTogether) {
  auto engine = make_engine(small_config());
  std::vector<Request> reqs = {greedy({1, 2}, 5), greedy({3}, 5), greedy({}, 5)};  // the last is bad
  EXPECT_THROW(engine->submit_all(reqs), Error);
  EXPECT_EQ(engine->stats().requests_submitted, 0u);
  reqs.pop_back();
  reqs.push_back(greedy({4, 5, 6}, 5));
  auto streams = engine->submit_all(reqs);
  ASSERT_EQ(streams.size(), 3u);
  for (size_t i = 0; i < streams.size(); ++i) {
    std::vector<int32_t> got;
    while (auto out = streams[i]->next()) got.insert(got.end(), out->token_ids.begin(), out->token_ids.end());
    EXPECT_EQ(got, engine->generate(reqs[i]).token_ids);
  }
  EXPECT_EQ(engine->stats().peak_num_running, 3);
}

}  // namespace
}  // namespace qserve
