// Engine::create with --load-format dummy in every precision on the CPU, the
// KV cache sized by --memory-budget (engine/kv_memory_plan.h), the precision
// of quantized checkpoints resolved and checked, clear errors for what cannot run.
#include <gtest/gtest.h>

#include "engine/dummy_arch.h"
#include "engine/engine_create.h"
#include "engine/kv_memory_plan.h"
#include "quant/quantizer.h"
#include "test_files.h"
#include "tiny_llama_files.h"

namespace qserve {
namespace {

EngineConfig dummy_config(const std::string& arch, const std::string& precision) {
  EngineConfig c;
  c.load_format = "dummy";
  c.arch = arch;
  c.precision = precision;
  c.max_num_seqs = 4;
  return c;
}

std::vector<int32_t> generate_ids(Engine& engine, std::vector<int32_t> prompt, int n) {
  Request r;
  r.prompt_token_ids = std::move(prompt);
  r.params.temperature = 0;
  r.params.max_tokens = n;
  r.params.detokenize = false;
  const RequestOutput out = engine.generate(r);
  EXPECT_EQ(out.finish_reason, FinishReason::kLength);
  return out.token_ids;
}

TEST(DummyEngine, EveryPrecisionGeneratesSeededTokensWithoutATokenizer) {
  for (const char* p : {"fp16", "w8a8kv8", "w4a16", "w4a8kv8", "w4a8kv4", "w4a8kv8-chn", "w4a8kv4-chn"}) {
    SCOPED_TRACE(p);
    auto engine = Engine::create(dummy_config("tiny", p));
    EXPECT_EQ(engine->model_info().precision, p);
    EXPECT_EQ(engine->model_info().name, "tiny");
    EXPECT_EQ(engine->config().precision, p);
    EXPECT_TRUE(engine->model_info().eos_token_ids.empty());
    const std::vector<int32_t> a = generate_ids(*engine, {3, 700, 12, 5}, 12);
    ASSERT_EQ(a.size(), 12u);  // EOS never stops dummy weights
    auto again = Engine::create(dummy_config("tiny", p));
    EXPECT_EQ(a, generate_ids(*again, {3, 700, 12, 5}, 12));
    EXPECT_THROW(engine->tokenize("hello", true), Error);  // token ids only
  }
  EXPECT_EQ(Engine::create(dummy_config("tiny", "auto"))->model_info().precision, "fp16");
}

TEST(DummyEngine, BadFlagsAreClearErrors) {
  auto code_of = [](const EngineConfig& c) {
    try {
      Engine::create(c);
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::kInternal;  // no error
  };
  EXPECT_EQ(code_of(dummy_config("", "fp16")), ErrorCode::kInvalidArgument);        // no --arch
  EXPECT_EQ(code_of(dummy_config("llama-9", "fp16")), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of(dummy_config("tiny", "w3a8")), ErrorCode::kInvalidArgument);
  EngineConfig c = dummy_config("tiny", "fp16");
  c.load_format = "pt";
  EXPECT_EQ(code_of(c), ErrorCode::kInvalidArgument);
  c = dummy_config("tiny", "fp16");
  c.device = "tpu";
  EXPECT_EQ(code_of(c), ErrorCode::kInvalidArgument);
  c = dummy_config("tiny", "fp16");
  c.gpu_memory_utilization = 1.5;
  EXPECT_EQ(code_of(c), ErrorCode::kInvalidArgument);
  // llama-2-70b in fp16 does not fit an 80 GB card: refused before any weight is made.
  c = dummy_config("llama-2-70b", "fp16");
  c.memory_budget = 80'000'000'000;
  EXPECT_EQ(code_of(c), ErrorCode::kResourceExhausted);
}

TEST(DummyEngine, CudaDeviceFailsClearlyWithoutTheBackend) {
  EngineConfig c = dummy_config("tiny", "w4a8kv4");
  c.device = "cuda";
  try {
    auto engine = Engine::create(c);
    GTEST_SKIP() << "skipped: this build runs the CUDA backend";
  } catch (const Error& e) {
    EXPECT_TRUE(e.code() == ErrorCode::kUnsupported || e.code() == ErrorCode::kResourceExhausted ||
                e.code() == ErrorCode::kInternal)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos) << e.what();
  }
}

TEST(KvMemoryPlan, PagesAreWhatTheBudgetLeaves) {
  KvMemoryInputs in;
  in.card_bytes = 1000;
  in.utilization = 0.9;
  in.used_bytes = 300;
  in.reserve_bytes = 100;
  in.kv_bytes_per_page = 64;
  KvMemoryPlan p = plan_kv_memory(in);
  EXPECT_EQ(p.budget_bytes, 900);
  EXPECT_EQ(p.kv_bytes, 500);
  EXPECT_EQ(p.num_pages, 7);
  in.free_bytes = 400;  // the device has less than the budget
  EXPECT_EQ(plan_kv_memory(in).num_pages, 4);
  in.free_bytes = 0;
  in.used_bytes = 790;
  try {
    plan_kv_memory(in);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kResourceExhausted);
    EXPECT_NE(std::string(e.what()).find("no room for the KV cache"), std::string::npos) << e.what();
  }
}

TEST(DummyEngine, TheDeviceReserveIsTheWorkspaceAndAFixedPart) {
  // The reserve is the activations' workspace and the logits, plus on a
  // device a fixed part for the backend's own buffers; no weight format adds
  // a dequantized weight copy (the g128 GEMM no longer makes one).
  const ModelConfig mc = dummy_arch_config("llama-3-8b");
  const int64_t cpu = estimate_workspace_bytes(mc, 8192, 256, 2, false);
  const int64_t dev = estimate_workspace_bytes(mc, 8192, 256, 2, true);
  EXPECT_EQ(dev - cpu, int64_t{512} << 20);  // the fixed part, whatever the weights
  // The workspace grows with the batched tokens.
  EXPECT_GT(estimate_workspace_bytes(mc, 16384, 256, 2, false), cpu);
}

TEST(DummyEngine, MemoryBudgetSizesTheKvCacheOnTheCpu) {
  // A budget with room for the weights (their device size), the workspace and ~40 pages.
  EngineConfig c = dummy_config("tiny", "w4a8kv4");
  c.max_num_seqs = 64;
  LoadedModel m = load_engine_model(c);
  const ModelConfig mc = dummy_arch_config("tiny");
  EXPECT_EQ(m.weight_format, quant::WeightFormat::kW4G128);
  EXPECT_EQ(m.weight_bytes, estimate_weight_bytes(mc, quant::WeightFormat::kW4G128, 128));
  const int64_t page = m.runner->kv_bytes_per_page(c.page_size);
  const int64_t reserve =
      estimate_workspace_bytes(mc, c.max_num_batched_tokens, c.max_num_seqs, 4, false);
  c.memory_budget = m.weight_bytes + reserve + 40 * page + page / 2;
  c.gpu_memory_utilization = 1.0;
  const KvCachePlan plan = plan_kv_cache(m, c);
  EXPECT_EQ(plan.source, "memory budget");
  EXPECT_EQ(plan.num_pages, 40);
  EXPECT_EQ(plan.card_bytes, c.memory_budget);
  auto engine = Engine::create(c);
  EXPECT_EQ(engine->config().num_kv_pages, 40);
  EXPECT_EQ(engine->stats().kv_pages_total, 40);
  // Half the utilization: the weights and workspace still fit, the pages do not.
  c.gpu_memory_utilization = 0.5;
  EXPECT_THROW(Engine::create(c), Error);
  // No budget on the CPU: at most 1 GiB of pages, at most max_num_seqs full contexts.
  EngineConfig d = dummy_config("tiny", "fp16");
  d.max_num_seqs = 3;
  auto small = Engine::create(d);
  EXPECT_EQ(small->config().num_kv_pages, 3 * ((mc.max_position_embeddings + 15) / 16));
}

TEST(DummyEngine, QuantizedCheckpointPrecisionIsResolvedAndChecked) {
  using namespace testing_files;
  TempDir tmp;
  write_tiny_model(tmp.path() / "in");
  fs::remove(tmp.path() / "in" / "tokenizer.json");  // a stub: token ids only
  auto in = open_checkpoint((tmp.path() / "in").string());
  quant::QuantizeOptions o;
  o.precision = quant::Precision::kW4A8KV4;
  o.group = -1;
  o.rotate = o.smooth_attention = o.smooth_output = o.reorder = o.clip = false;
  const std::string dir = (tmp.path() / "q").string();
  quant::quantize_checkpoint(*in, dir, o);
  EngineConfig c;
  c.model = dir;
  c.max_num_seqs = 2;
  EXPECT_EQ(Engine::create(c)->model_info().precision, "w4a8kv4-chn");  // auto
  c.precision = "w4a8kv4-chn";
  EXPECT_EQ(Engine::create(c)->model_info().precision, "w4a8kv4-chn");
  c.precision = "w4a8kv4";  // g128: not this checkpoint
  EXPECT_THROW(Engine::create(c), Error);
  // A float checkpoint runs fp16 only.
  c.model = (tmp.path() / "in").string();
  c.precision = "w8a8kv8";
  EXPECT_THROW(Engine::create(c), Error);
  c.precision = "auto";
  EXPECT_EQ(Engine::create(c)->model_info().precision, "fp16");
}

}  // namespace
}  // namespace qserve
