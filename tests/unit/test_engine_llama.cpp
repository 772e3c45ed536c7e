// The engine on the real CPU forward pass (LlamaModel, FP32): greedy output
// through the engine (scheduler, paged KV cache, chunked prefill) equals the
// Hugging Face transformers greedy continuations dumped in tests/data/forward/,
// and does not change in a crowd that forces chunking and preemption.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "engine/llama_model.h"
#include "engine/llama_runner.h"
#include "model/checkpoint.h"
#include "qserve/engine.h"

namespace qserve {
namespace {

namespace fs = std::filesystem;
const std::string kSourceDir = QSERVE_SOURCE_DIR;

std::unique_ptr<Engine> engine_on(const std::string& dir, const EngineConfig& c) {
  auto ckpt = open_checkpoint(dir);
  auto runner = std::make_unique<LlamaModelRunner>(LlamaModel::load(*ckpt), fs::path(dir).filename().string());
  return Engine::create(c, std::move(runner), nullptr);
}

Request greedy(const std::vector<int32_t>& prompt, int max_tokens) {
  Request r;
  r.prompt_token_ids = prompt;
  r.params.temperature = 0;
  r.params.max_tokens = max_tokens;
  r.params.ignore_eos = true;
  return r;
}

class EngineOnTinyModel : public ::testing::TestWithParam<std::string> {};

TEST_P(EngineOnTinyModel, GreedyMatchesTransformersAloneAndInACrowd) {
  const std::string name = GetParam();
  std::ifstream in(kSourceDir + "/tests/data/forward/" + name + ".json");
  ASSERT_TRUE(in.good());
  const auto ref = nlohmann::json::parse(in);
  std::vector<std::vector<int32_t>> prompts, expected;
  std::vector<std::vector<double>> gaps;
  for (const auto& p : ref["prompts"]) {
    prompts.push_back(p["prompt"].get<std::vector<int32_t>>());
    expected.push_back(p["greedy"].get<std::vector<int32_t>>());
    gaps.push_back(p["greedy_gaps"].get<std::vector<double>>());
  }
  // Small steps and pages: prompts are chunked, pages scattered, and the crowd preempts.
  EngineConfig c;
  c.page_size = 4;
  c.num_kv_pages = 40;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 7;
  auto engine = engine_on(kSourceDir + "/tests/data/models/" + name, c);

  std::vector<std::vector<int32_t>> alone;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const int n = static_cast<int>(expected[i].size());
    alone.push_back(engine->generate(greedy(prompts[i], n)).token_ids);
    // Equal to the reference up to the first near tie (a float-noise flip is allowed).
    for (int k = 0; k < n; ++k) {
      if (alone[i][k] != expected[i][k]) {
        EXPECT_LT(gaps[i][k], 1e-3) << name << " prompt " << i << " token " << k;
        break;
      }
    }
  }
  // The same prompts, several copies each, all at once from several threads.
  const int kCopies = 3;
  std::vector<std::vector<int32_t>> crowd(prompts.size() * kCopies);
  std::vector<std::thread> threads;
  for (size_t j = 0; j < crowd.size(); ++j) {
    threads.emplace_back([&, j] {
      const size_t i = j % prompts.size();
      crowd[j] = engine->generate(greedy(prompts[i], static_cast<int>(expected[i].size()))).token_ids;
    });
  }
  for (auto& t : threads) t.join();
  for (size_t j = 0; j < crowd.size(); ++j) EXPECT_EQ(crowd[j], alone[j % prompts.size()]) << name << " copy " << j;
  const EngineStats s = engine->stats();
  EXPECT_EQ(s.kv_pages_free, s.kv_pages_total);
  std::printf("%s: %llu steps, %llu preemptions, peak batch %d, zeroing %.3f ms of %.3f ms in the model\n", name.c_str(),
              static_cast<unsigned long long>(s.num_steps), static_cast<unsigned long long>(s.num_preemptions),
              s.peak_num_running, s.kv_zero_s * 1e3, s.model_s * 1e3);
}

INSTANTIATE_TEST_SUITE_P(Models, EngineOnTinyModel, ::testing::Values("tiny-llama", "tiny-mistral", "tiny-qwen2"));

TEST(EngineOnTinyLlama, RejectsPromptsBeyondTheContext) {
  EngineConfig c;
  c.num_kv_pages = 64;
  c.page_size = 16;
  auto engine = engine_on(kSourceDir + "/tests/data/models/tiny-llama", c);
  EXPECT_EQ(engine->model_info().max_model_len, 128);  // max_position_embeddings
  EXPECT_EQ(engine->model_info().vocab_size, 300);
  EXPECT_EQ(engine->model_info().eos_token_ids, std::vector<int32_t>{2});
  try {
    engine->submit(greedy(std::vector<int32_t>(100, 5), 29));
    ADD_FAILURE() << "accepted 129 tokens";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfRange);
  }
  EXPECT_EQ(engine->generate(greedy(std::vector<int32_t>(100, 5), 28)).token_ids.size(), 28u);
}

std::string default_model_dir() {
  const char* home = std::getenv("QSERVE_HOME");
  const std::string base = home && *home ? home : std::string(std::getenv("HOME") ? std::getenv("HOME") : ".") + "/.cache/qserve";
  return base + "/models/SmolLM2-135M-Instruct";
}

TEST(EngineOnDefaultModel, GreedyAloneEqualsInACrowd) {
  const std::string dir = default_model_dir();
  if (!fs::exists(dir + "/config.json")) GTEST_SKIP() << "skipped: default model not installed at " << dir << " (scripts/install_model.sh)";
  EngineConfig c;
  c.model = dir;
  c.page_size = 16;
  c.num_kv_pages = 9;  // 144 slots: 4 sequences of up to 56 tokens preempt
  c.max_num_batched_tokens = 48;
  auto engine = Engine::create(c);
  std::mt19937 rng(5);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 4; ++i) {
    std::vector<int32_t> p(20 + rng() % 20);
    for (auto& t : p) t = 100 + rng() % 10000;
    prompts.push_back(p);
  }
  std::vector<std::vector<int32_t>> alone;
  for (const auto& p : prompts) alone.push_back(engine->generate(greedy(p, 16)).token_ids);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& p : prompts) streams.push_back(engine->submit(greedy(p, 16)));
  for (size_t i = 0; i < streams.size(); ++i) {
    std::vector<int32_t> got;
    while (auto out = streams[i]->next()) got.insert(got.end(), out->token_ids.begin(), out->token_ids.end());
    EXPECT_EQ(got, alone[i]) << "prompt " << i;
  }
  EXPECT_GT(engine->stats().num_preemptions, 0u);
  EXPECT_EQ(engine->stats().kv_pages_free, engine->stats().kv_pages_total);
}

}  // namespace
}  // namespace qserve

namespace qserve {
namespace {

// Text in, streamed text out, through the model's own tokenizer: the pieces
// add up to the detokenized ids, and a stop string taken from the output cuts it.
TEST(EngineOnDefaultModel, StreamsTextAndStopsOnAStopString) {
  const std::string dir = default_model_dir();
  if (!fs::exists(dir + "/config.json")) GTEST_SKIP() << "skipped: default model not installed at " << dir << " (scripts/install_model.sh)";
  EngineConfig c;
  c.model = dir;
  c.num_kv_pages = 16;
  auto engine = Engine::create(c);
  ASSERT_FALSE(engine->model_info().eos_token_ids.empty());
  Request r;
  r.prompt = "The capital of France is";
  r.params.temperature = 0;
  r.params.max_tokens = 24;
  r.params.ignore_eos = true;
  auto stream = engine->submit(r);
  std::string text;
  std::vector<int32_t> ids;
  int outputs = 0;
  while (auto out = stream->next()) {
    ++outputs;
    text += out->text;
    ids.insert(ids.end(), out->token_ids.begin(), out->token_ids.end());
  }
  EXPECT_EQ(outputs, 24);
  EXPECT_EQ(text, engine->detokenize(ids, true));
  ASSERT_GT(text.size(), 12u);
  const std::string stop = text.substr(text.size() / 2, 3);
  r.params.stop = {stop};
  const RequestOutput cut = engine->generate(r);
  EXPECT_EQ(cut.finish_reason, FinishReason::kStop);
  EXPECT_EQ(cut.text, text.substr(0, text.find(stop)));
  std::printf("text: \"%s\"\n", text.c_str());
}

}  // namespace
}  // namespace qserve
