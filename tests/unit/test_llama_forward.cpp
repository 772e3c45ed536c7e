// The Llama-family forward pass against Hugging Face transformers (FP32, CPU):
// reference logits and greedy continuations dumped by
// scripts/dump_reference_logits.py into tests/data/forward/, for small random
// Llama (tied, llama3 rope scaling), Mistral and Qwen2 (q/k/v bias) models
// committed in tests/data/models/, and for the default model when installed.
// Then the KV cache and batching: several sequences of different lengths in
// one call give the logits they give alone; decode steps equal a prefill.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "core/error.h"
#include "engine/kv_memory_plan.h"
#include "engine/llama_model.h"
#include "model/checkpoint.h"
#include "model/llama_weights.h"

namespace qserve {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kSourceDir = QSERVE_SOURCE_DIR;

json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return json::parse(in);
}

std::unique_ptr<LlamaModel> load_model(const std::string& dir, bool fast, LlamaModelOptions options = {}) {
  auto ckpt = open_checkpoint(dir);
  const ModelConfig config = ModelConfig::from_json(ckpt->config());
  return LlamaModel::create(config, LlamaWeights::load(*ckpt, config), make_cpu_backend(fast), options);
}

int32_t argmax(std::span<const float> v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// Compares every prompt of a reference dump: all-position logits of a prefill
// (top-20 entries of the reference, tolerance 1e-3 x max|logit|), then 32
// greedy tokens decoded one by one through the KV cache.
void check_against_reference(LlamaModel& model, const json& ref) {
  int64_t seq = 0;
  for (const json& p : ref["prompts"]) {
    const std::vector<int32_t> prompt = p["prompt"].get<std::vector<int32_t>>();
    SCOPED_TRACE("prompt of " + std::to_string(prompt.size()) + " tokens");
    Batch batch;
    batch.seqs.push_back({seq, prompt, 0});
    batch.all_logits = true;
    Logits logits;
    model.forward(batch, logits);
    ASSERT_EQ(logits.all.size(), prompt.size() * model.config().vocab_size);
    double worst = 0.0;
    for (size_t i = 0; i < prompt.size(); ++i) {
      const json& pos = p["positions"][i];
      const double max_abs = pos["max_abs"].get<double>();
      const auto row = logits.all_row(static_cast<int64_t>(i));
      const auto ids = pos["ids"].get<std::vector<int>>();
      const auto vals = pos["logits"].get<std::vector<double>>();
      for (size_t j = 0; j < ids.size(); ++j) {
        const double diff = std::fabs(row[ids[j]] - vals[j]);
        worst = std::max(worst, diff / max_abs);
        ASSERT_LE(diff, 1e-3 * max_abs) << "position " << i << ", token " << ids[j];
      }
      float ours_max = 0.0f;
      for (float v : row) ours_max = std::max(ours_max, std::fabs(v));
      ASSERT_NEAR(ours_max, max_abs, 1e-3 * max_abs) << "position " << i;
    }
    ::testing::Test::RecordProperty("worst_relative_diff", std::to_string(worst));

    // Greedy continuation through the KV cache, one token per step.
    const auto greedy = p["greedy"].get<std::vector<int32_t>>();
    const auto gaps = p["greedy_gaps"].get<std::vector<double>>();
    int32_t next = argmax(logits.row(0));
    int64_t pos = static_cast<int64_t>(prompt.size());
    for (size_t step = 0; step < greedy.size(); ++step) {
      if (next != greedy[step]) {
        // Only a near tie (within float noise of the reference) may flip.
        ASSERT_LT(gaps[step], 1e-3) << "greedy token " << step << ": ours " << next << ", reference " << greedy[step];
        break;
      }
      Batch decode;
      decode.seqs.push_back({seq, {next}, pos++});
      model.forward(decode, logits);
      next = argmax(logits.row(0));
    }
    model.release(seq++);
  }
}

class TinyReference : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};

TEST_P(TinyReference, MatchesTransformers) {
  const auto& [name, fast] = GetParam();
  auto model = load_model(kSourceDir + "/tests/data/models/" + name, fast);
  check_against_reference(*model, read_json(kSourceDir + "/tests/data/forward/" + name + ".json"));
}

INSTANTIATE_TEST_SUITE_P(Forward, TinyReference,
                         ::testing::Combine(::testing::Values("tiny-llama", "tiny-mistral", "tiny-qwen2"), ::testing::Bool()),
                         [](const auto& info) {
                           std::string n = std::get<0>(info.param) + (std::get<1>(info.param) ? "_fast" : "_scalar");
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

std::string default_model_dir() {
  const char* home = std::getenv("QSERVE_HOME");
  std::string base = home ? home : std::string(std::getenv("HOME") ? std::getenv("HOME") : "") + "/.cache/qserve";
  return base + "/models/SmolLM2-135M-Instruct";
}

TEST(Forward, DefaultModelMatchesTransformers) {
  const std::string dir = default_model_dir();
  const std::string ref = kSourceDir + "/tests/data/forward/smollm2-135m-instruct.json";
  if (!fs::exists(dir + "/config.json")) GTEST_SKIP() << "skipped: default model not installed at " << dir << " (scripts/install_model.sh)";
  if (!fs::exists(ref)) GTEST_SKIP() << "skipped: no reference dump " << ref;
  auto model = load_model(dir, true);
  check_against_reference(*model, read_json(ref));
}

std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> v(n);
  for (auto& t : v) t = static_cast<int32_t>(rng() % vocab);
  return v;
}

// Sequences of different lengths, prefills mixed with decodes, in one call:
// the same logits (bit for bit) as each sequence alone.
TEST(Forward, BatchedEqualsOneAtATime) {
  for (const char* name : {"tiny-qwen2", "tiny-llama"}) {
    SCOPED_TRACE(name);
    const std::string dir = kSourceDir + "/tests/data/models/" + name;
    auto alone = load_model(dir, true);
    auto batched = load_model(dir, true, {.page_size = 5});
    const int64_t V = alone->config().vocab_size;
    const int64_t lens[] = {1, 17, 40, 6};
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < 4; ++i) prompts.push_back(random_tokens(lens[i], V, 50 + i));

    // Step 1: every prompt (different lengths) in one batch, all positions' logits.
    Batch all;
    all.all_logits = true;
    for (int i = 0; i < 4; ++i) all.seqs.push_back({i, prompts[i], 0});
    Logits together;
    batched->forward(all, together);
    int64_t row = 0;
    for (int i = 0; i < 4; ++i) {
      Batch one;
      one.all_logits = true;
      one.seqs.push_back({i, prompts[i], 0});
      Logits single;
      alone->forward(one, single);
      for (int64_t t = 0; t < lens[i]; ++t, ++row)
        for (int64_t v = 0; v < V; ++v) ASSERT_EQ(together.all_row(row)[v], single.all_row(t)[v]) << "seq " << i << " pos " << t;
      for (int64_t v = 0; v < V; ++v) ASSERT_EQ(together.row(i)[v], single.row(0)[v]);
    }

    // Step 2: seqs 0 and 2 decode one token, seq 1 prefills a chunk of 7, seq 3 is idle.
    const auto chunk = random_tokens(7, V, 99);
    Batch mixed;
    mixed.seqs.push_back({2, {5}, lens[2]});
    mixed.seqs.push_back({1, chunk, lens[1]});
    mixed.seqs.push_back({0, {7}, lens[0]});
    Logits mixed_out;
    batched->forward(mixed, mixed_out);
    ASSERT_EQ(mixed_out.last.size(), 3u * V);
    const std::vector<std::pair<int64_t, std::vector<int32_t>>> steps = {{2, {5}}, {1, chunk}, {0, {7}}};
    for (size_t k = 0; k < steps.size(); ++k) {
      const auto& [id, toks] = steps[k];
      Batch one;
      one.seqs.push_back({id, toks, lens[id]});
      Logits single;
      alone->forward(one, single);
      for (int64_t v = 0; v < V; ++v) ASSERT_EQ(mixed_out.row(static_cast<int64_t>(k))[v], single.row(0)[v]) << "seq " << id;
    }
  }
}

// Two models that must give the same logits, bit for bit: a prefill of
// `prompt` and of its first `prefix` tokens in one batch (all positions), then
// four greedy decode steps of both sequences through the KV cache.
void expect_same_logits(LlamaModel& a, LlamaModel& b, const std::vector<int32_t>& prompt, int64_t prefix) {
  const auto n = static_cast<int64_t>(prompt.size());
  Batch prefill;
  prefill.all_logits = true;
  prefill.seqs.push_back({0, prompt, 0});
  prefill.seqs.push_back({1, {prompt.begin(), prompt.begin() + prefix}, 0});
  Logits la, lb;
  a.forward(prefill, la);
  b.forward(prefill, lb);
  ASSERT_EQ(la.all.size(), lb.all.size());
  EXPECT_EQ(la.all, lb.all);
  int32_t next = argmax(la.row(0));
  for (int64_t step = 0; step < 4; ++step) {
    Batch decode;
    decode.seqs.push_back({0, {next}, n + step});
    decode.seqs.push_back({1, {next}, prefix + step});
    a.forward(decode, la);
    b.forward(decode, lb);
    ASSERT_EQ(la.last, lb.last) << "decode step " << step;
    next = argmax(la.row(1));
  }
}

// One q|k|v and one gate|up linear per layer (the float weights stacked)
// give the logits of the seven separate linears, bit for bit: every output
// element is the same dot product over k, whatever the matrix's height.
// Qwen2 brings q/k/v biases (stacked too).
TEST(Forward, FusedProjectionsEqualSeparateOnes) {
  for (const char* name : {"tiny-qwen2", "tiny-llama"}) {
    for (bool fast : {false, true}) {
      SCOPED_TRACE(std::string(name) + (fast ? " fast" : " scalar"));
      const std::string dir = kSourceDir + "/tests/data/models/" + name;
      auto fused = load_model(dir, fast);
      auto separate = load_model(dir, fast, {.fuse_projections = false});
      EXPECT_EQ(fused->num_fused_projections(), 2 * fused->config().num_layers);
      EXPECT_EQ(separate->num_fused_projections(), 0);
      expect_same_logits(*fused, *separate, random_tokens(29, fused->config().vocab_size, 7), 3);
    }
  }
}

// A GGUF's tensors as stored (Q4_0 embedding, Q8_0 / Q4_1 / Q5_0 MLP, F16 and
// BF16 projections: tests/data/gguf/tiny_llama.gguf) give the logits of the
// same checkpoint with every tensor widened to F32 first, bit for bit: the
// CPU matmul multiplies the blocks as the floats they dequantize to. The
// prefill takes the widened-panel path, the decode steps (two tokens) the
// in-register one on AVX-512 (one-token tiles; AVX2 widens them).
TEST(Forward, GgufBlocksEqualTheirF32Widening) {
  auto gguf = open_checkpoint(kSourceDir + "/tests/data/gguf/tiny_llama.gguf");
  std::map<std::string, Tensor> widened;
  int blocked = 0;
  for (const auto& [name, t] : gguf->tensors()) {
    blocked += dtype_is_blocked(t.dtype()) ? 1 : 0;
    widened.emplace(name, to_f32(t));
  }
  EXPECT_EQ(blocked, 7);  // the embedding and 2 x 3 MLP matrices
  const Checkpoint f32(gguf->path(), gguf->config(), std::move(widened), {}, /*is_directory=*/false);
  const ModelConfig config = ModelConfig::from_json(gguf->config());
  for (bool fast : {false, true}) {
    SCOPED_TRACE(fast ? "fast" : "scalar");
    auto a = LlamaModel::create(config, LlamaWeights::load(*gguf, config), make_cpu_backend(fast));
    auto b = LlamaModel::create(config, LlamaWeights::load(f32, config), make_cpu_backend(fast));
    expect_same_logits(*a, *b, random_tokens(23, config.vocab_size, 11), 9);
  }
}

// Prefill of n tokens == prefill of a prefix + decode steps + a chunk; a
// rewind (start < cached) recomputes; the scalar and SIMD backends agree.
TEST(Forward, CacheStepsEqualOnePrefill) {
  const std::string dir = kSourceDir + "/tests/data/models/tiny-mistral";
  auto model = load_model(dir, true, {.page_size = 3, .initial_kv_pages = 1});  // the pool grows many times
  auto scalar = load_model(dir, false);
  const int64_t V = model->config().vocab_size;
  const auto tokens = random_tokens(29, V, 3);

  Batch full;
  full.all_logits = true;
  full.seqs.push_back({0, tokens, 0});
  Logits ref;
  scalar->forward(full, ref);

  Logits out;
  auto expect_row = [&](int64_t pos) {
    for (int64_t v = 0; v < V; ++v) ASSERT_NEAR(out.row(0)[v], ref.all_row(pos)[v], 2e-5f * (1.0f + std::fabs(ref.all_row(pos)[v])));
  };
  Batch b;
  b.seqs.push_back({7, std::vector<int32_t>(tokens.begin(), tokens.begin() + 10), 0});
  model->forward(b, out);
  expect_row(9);
  for (int64_t p = 10; p < 20; ++p) {
    b.seqs[0] = {7, {tokens[p]}, p};
    model->forward(b, out);
    expect_row(p);
  }
  b.seqs[0] = {7, std::vector<int32_t>(tokens.begin() + 20, tokens.end()), 20};
  model->forward(b, out);
  expect_row(28);
  EXPECT_EQ(model->cached_tokens(7), 29);
  // Rewind to position 12 with different tokens, then back to the original ones.
  b.seqs[0] = {7, {1, 2, 3}, 12};
  model->forward(b, out);
  EXPECT_EQ(model->cached_tokens(7), 15);
  b.seqs[0] = {7, std::vector<int32_t>(tokens.begin() + 12, tokens.end()), 12};
  model->forward(b, out);
  expect_row(28);
  const int64_t free_before = model->num_free_pages();
  model->release(7);
  EXPECT_EQ(model->num_free_pages(), free_before + 10);  // ceil(29 / 3)
  EXPECT_EQ(model->cached_tokens(7), 0);
}

// The engine's up-front workspace: reserved once for its limits, steps within
// them never reallocate it; without it a longer step grows it.
TEST(Forward, ReservedWorkspaceServesEveryStepWithinTheLimits) {
  const std::string dir = kSourceDir + "/tests/data/models/tiny-qwen2";
  const auto a = random_tokens(10, 64, 1), b = random_tokens(30, 64, 2);
  for (bool reserve : {true, false}) {
    auto model = load_model(dir, true);
    model->allocate_kv_cache(32, 4);
    if (reserve) {
      model->reserve_workspace(40, 20);  // rows: max(40 tokens, 20 sequences padded to 32)
      EXPECT_EQ(model->workspace_capacity(), 40);
      model->reserve_workspace(24, 33);  // a smaller step budget: the 48 padded rows grow it once
      EXPECT_EQ(model->workspace_capacity(), 48);
    }
    const std::vector<int32_t> pages_a = {0, 1, 2}, pages_b = {3, 4, 5, 6, 7, 8, 9, 10};
    Logits out;
    PagedBatch pa, pb;
    pa.seqs.push_back({a, 0, pages_a, true});
    pb.seqs.push_back({b, 0, pages_b, true});
    model->forward_paged(pa, out);
    model->forward_paged(pb, out);
    EXPECT_EQ(model->workspace_capacity(), reserve ? 48 : 30);  // unreserved: 10, then max(30, 2 x 10)
  }
  EXPECT_EQ(workspace_rows(8192, 64), 8192);
  EXPECT_EQ(workspace_rows(24, 16), 24);
  EXPECT_EQ(workspace_rows(40, 64), 64);
  EXPECT_EQ(workspace_rows(4, 9), 16);
}

// The caller-owned page table API (the serving engine's) with scattered pages.
TEST(Forward, PagedApiWithScatteredPages) {
  const std::string dir = kSourceDir + "/tests/data/models/tiny-qwen2";
  auto by_id = load_model(dir, true);
  auto paged = load_model(dir, true);
  const int64_t V = by_id->config().vocab_size;
  paged->allocate_kv_cache(32, 4);
  EXPECT_EQ(paged->kv_bytes_per_page(4), 3 * 2 * 2 * 4 * 12 * 4);
  const std::vector<int32_t> pages_a = {30, 2, 17, 9}, pages_b = {5, 21, 0};
  paged->zero_kv_pages(pages_a);
  const auto a = random_tokens(13, V, 11), b = random_tokens(9, V, 12);
  PagedBatch pb;
  pb.seqs.push_back({a, 0, pages_a, true});
  pb.seqs.push_back({b, 0, pages_b, false});  // no logits wanted for b
  Logits out;
  paged->forward_paged(pb, out);
  ASSERT_EQ(out.last.size(), static_cast<size_t>(V));
  Batch ref;
  ref.seqs.push_back({0, a, 0});
  Logits expect;
  by_id->forward(ref, expect);
  for (int64_t v = 0; v < V; ++v) ASSERT_EQ(out.row(0)[v], expect.row(0)[v]);
  // Decode b through its pages: equals b's prefix + token computed by id.
  const std::vector<int32_t> next = {42};
  PagedBatch step;
  step.seqs.push_back({next, 9, pages_b, true});
  paged->forward_paged(step, out);
  Batch rb;
  auto b10 = b;
  b10.push_back(42);
  rb.seqs.push_back({1, b10, 0});
  by_id->forward(rb, expect);
  for (int64_t v = 0; v < V; ++v) ASSERT_EQ(out.row(0)[v], expect.row(0)[v]);
  // Too short a page table is an error.
  PagedBatch bad;
  bad.seqs.push_back({a, 0, std::span<const int32_t>(pages_a).first(2), true});
  EXPECT_THROW(paged->forward_paged(bad, out), Error);
}

ErrorCode error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.code();
  }
  return ErrorCode::kInternal;
}

TEST(Forward, BadBatchesAreErrorsAndLeaveTheCache) {
  auto model = load_model(kSourceDir + "/tests/data/models/tiny-llama", true);
  Logits out;
  Batch ok;
  ok.seqs.push_back({0, {5, 6, 7}, 0});
  model->forward(ok, out);
  auto run = [&](Batch b) { return error_of([&] { model->forward(b, out); }); };
  EXPECT_EQ(run({{{0, {300}, 3}}}), ErrorCode::kInvalidArgument);      // token id == vocab
  EXPECT_EQ(run({{{0, {-1}, 3}}}), ErrorCode::kInvalidArgument);       // negative id
  EXPECT_EQ(run({{{0, {1}, 4}}}), ErrorCode::kInvalidArgument);        // start past the cache
  EXPECT_EQ(run({{{0, {}, 3}}}), ErrorCode::kInvalidArgument);         // nothing to compute
  EXPECT_EQ(run({{{1, {1}, 0}, {1, {2}, 0}}}), ErrorCode::kInvalidArgument);  // a sequence twice
  EXPECT_EQ(run({{{2, std::vector<int32_t>(129, 1), 0}}}), ErrorCode::kOutOfRange);  // context is 128
  EXPECT_EQ(run({}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(model->cached_tokens(0), 3);
  EXPECT_EQ(model->cached_tokens(1), 0);
  EXPECT_EQ(model->cached_tokens(2), 0);
  auto limited = load_model(kSourceDir + "/tests/data/models/tiny-llama", true,
                            {.page_size = 4, .initial_kv_pages = 2, .max_kv_pages = 2});
  EXPECT_EQ(error_of([&] { limited->forward({{{0, std::vector<int32_t>(9, 1), 0}}}, out); }), ErrorCode::kResourceExhausted);
  limited->forward({{{0, std::vector<int32_t>(8, 1), 0}}}, out);  // exactly two pages fit
}

TEST(Forward, WeightErrorsNameTheTensor) {
  auto ckpt = open_checkpoint(kSourceDir + "/tests/data/models/tiny-qwen2");
  const ModelConfig config = ModelConfig::from_json(ckpt->config());
  auto expect_error = [&](std::map<std::string, Tensor> tensors, ErrorCode code, const std::string& needle) {
    Checkpoint c("mem", ckpt->config(), std::move(tensors));
    try {
      LlamaWeights::load(c, config);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  auto t = ckpt->tensors();
  t.erase("model.layers.1.self_attn.k_proj.bias");
  expect_error(t, ErrorCode::kNotFound, "model.layers.1.self_attn.k_proj.bias");
  t = ckpt->tensors();
  const Tensor& up = t.at("model.layers.2.mlp.up_proj.weight");
  t["model.layers.2.mlp.up_proj.weight"] = Tensor(up.dtype(), {72, 80}, const_cast<void*>(up.data()), up.owner());
  expect_error(t, ErrorCode::kCorruptData, "model.layers.2.mlp.up_proj.weight");
  t = ckpt->tensors();
  t["model.norm.weight"] = Tensor::zeros(DType::kI32, {72});
  expect_error(t, ErrorCode::kUnsupported, "model.norm.weight");
  t = ckpt->tensors();
  t["model.layers.0.self_attn.o_proj.bias"] = Tensor::zeros(DType::kF32, {72});  // Qwen2 has none
  expect_error(t, ErrorCode::kCorruptData, "o_proj.bias");
}

}  // namespace
}  // namespace qserve
