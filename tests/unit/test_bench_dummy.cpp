// `qserve bench throughput --load-format dummy` on the CPU in every precision
// (the CI case of the H200 table's command, tiny numbers), max_num_seqs auto
// from the memory budget, the sweep on one loaded model, and a budget the
// weights do not fit.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/app.h"
#include "cli/byte_size.h"
#include "core/error.h"

namespace qserve {
namespace {

struct BenchRun {
  int rc = 0;
  std::vector<nlohmann::json> lines;
};

BenchRun run_bench(std::vector<std::string> args) {
  args.insert(args.begin(), {"qserve", "bench", "throughput", "--load-format", "dummy", "--json"});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  ::testing::internal::CaptureStdout();
  BenchRun r;
  r.rc = cli::run_main(static_cast<int>(argv.size()), argv.data());
  const std::string out = ::testing::internal::GetCapturedStdout();
  size_t pos = 0;
  while (pos < out.size()) {
    const size_t end = out.find('\n', pos);
    r.lines.push_back(nlohmann::json::parse(out.substr(pos, end - pos)));
    pos = end == std::string::npos ? out.size() : end + 1;
  }
  return r;
}

// --ab-plans and --ab-switch switch the CUDA W4A8 GEMM's plans and kernel
// forms: refused elsewhere, before any model is loaded (the A/B itself runs
// on the GPU machine).
TEST(BenchDummy, AbPlansAreForTheCudaBackend) {
  const BenchRun r = run_bench({"--arch", "tiny", "--device", "cpu", "--ab-plans", "4096x4096@64:g128=wg128x32c-k256/2",
                                "--input-len", "8", "--output-len", "2", "--num-prompts", "1"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(r.lines.empty());
  const BenchRun s = run_bench({"--arch", "tiny", "--device", "cpu", "--ab-switch", "QSERVE_W4A8_CLUSTER_PUSH=1",
                                "--input-len", "8", "--output-len", "2", "--num-prompts", "1"});
  EXPECT_EQ(s.rc, 1);
  EXPECT_TRUE(s.lines.empty());
}

TEST(BenchDummy, EveryPrecisionOnTheTinyArch) {
  for (const char* p : {"fp16", "w8a8kv8", "w4a16", "w4a8kv8", "w4a8kv4", "w4a8kv8-chn", "w4a8kv4-chn"}) {
    SCOPED_TRACE(p);
    const BenchRun r = run_bench({"--arch", "tiny", "--precision", p, "--input-len", "24", "--output-len", "8",
                             "--num-prompts", "3", "--max-num-seqs", "0"});
    ASSERT_EQ(r.rc, 0);
    ASSERT_EQ(r.lines.size(), 1u);
    const nlohmann::json& j = r.lines[0];
    EXPECT_EQ(j["arch"], "tiny");
    EXPECT_EQ(j["precision"], p);
    EXPECT_EQ(j["device"], "cpu");
    EXPECT_EQ(j["load_format"], "dummy");
    EXPECT_EQ(j["input_len"], 24);
    EXPECT_EQ(j["output_len"], 8);
    EXPECT_EQ(j["num_prompts"], 3);
    EXPECT_EQ(j["output_tokens"].get<int>(), 24);  // EOS ignored: every request makes --output-len tokens
    EXPECT_GT(j["output_tokens_per_s"].get<double>(), 0.0);
    EXPECT_GT(j["prefill_tokens_per_s"].get<double>(), 0.0);
    EXPECT_GT(j["decode_tokens_per_s"].get<double>(), 0.0);
    EXPECT_EQ(j["peak_batch"].get<int>(), 3);
    EXPECT_EQ(j["max_num_seqs"].get<int>(), 3);  // auto: all prompts fit
    EXPECT_EQ(j["kv_pages_peak_used"].get<int>(), 3 * 2);  // 32 tokens = 2 pages of 16 each
    EXPECT_EQ(j["preemptions"].get<int>(), 0);
    EXPECT_LE(j["ttft_ms_p50"].get<double>(), j["ttft_ms_p99"].get<double>());
    EXPECT_LE(j["tpot_ms_p50"].get<double>(), j["tpot_ms_p99"].get<double>());
    EXPECT_GT(j["weight_bytes"].get<int64_t>(), 0);
  }
}

TEST(BenchDummy, OddShapes) {
  const BenchRun r = run_bench({"--arch", "tiny-odd", "--precision", "w4a8kv4", "--input-len", "19", "--output-len", "5",
                           "--num-prompts", "3", "--page-size", "7"});
  ASSERT_EQ(r.rc, 0);
  EXPECT_EQ(r.lines.at(0)["output_tokens"].get<int>(), 15);
}

TEST(BenchDummy, MemoryBudgetBoundsTheBatchAndTheSweepFindsTheBest) {
  // First the sizes (weights, workspace reserve, page) under a roomy budget,
  // then a budget of 5.5 pages more (planned for 6 sequences).
  std::vector<std::string> args = {"--arch", "tiny", "--precision", "w4a8kv4", "--input-len", "24", "--output-len", "8",
                                   "--num-prompts", "6", "--max-num-seqs", "0", "--max-num-batched-tokens", "64",
                                   "--gpu-memory-utilization", "1", "--memory-budget"};
  args.push_back("100MB");
  const BenchRun roomy = run_bench(args);
  ASSERT_EQ(roomy.rc, 0);
  const nlohmann::json& r = roomy.lines.at(0);
  EXPECT_EQ(r["kv_source"], "memory budget");
  EXPECT_EQ(r["memory_budget"].get<int64_t>(), 100'000'000);
  EXPECT_EQ(r["max_num_seqs"].get<int>(), 6);
  const int64_t page = r["kv_bytes_per_page"].get<int64_t>();
  const int64_t budget = r["weight_bytes"].get<int64_t>() + r["reserve_bytes"].get<int64_t>() + 5 * page + page / 2;
  // The same model under four budgets in one process, one full batch each (--num-prompts 0).
  args = {"--arch", "tiny", "--precision", "w4a8kv4", "--input-len", "24", "--output-len", "8", "--num-prompts", "0",
          "--max-num-seqs", "6", "--max-num-batched-tokens", "64", "--gpu-memory-utilization", "1",
          "--memory-budgets", "100MB,50MB," + std::to_string(budget) + ",1KB"};
  const BenchRun four = run_bench(args);
  ASSERT_EQ(four.rc, 0);
  ASSERT_EQ(four.lines.size(), 4u);
  EXPECT_EQ(four.lines[0]["output_tokens"].get<int>(), 6 * 8);  // roomy: the --max-num-seqs cap
  EXPECT_EQ(four.lines[0]["num_prompts"].get<int>(), 6);
  // 50 MB gives the same engine (6 sequences, the same pages): that run is not repeated.
  EXPECT_EQ(four.lines[1]["measured_with_budget"].get<int64_t>(), 100'000'000);
  EXPECT_EQ(four.lines[1]["memory_budget"].get<int64_t>(), 50'000'000);
  EXPECT_EQ(four.lines[1]["output_tokens_per_s"], four.lines[0]["output_tokens_per_s"]);
  EXPECT_LT(four.lines[1]["max_batch_fits"].get<int64_t>(), four.lines[0]["max_batch_fits"].get<int64_t>());
  const std::vector<nlohmann::json> three = {four.lines[0], four.lines[2], four.lines[3]};
  const nlohmann::json& j = three[1];
  EXPECT_EQ(j["memory_budget"].get<int64_t>(), budget);
  // Planned for 6 sequences the budget holds 5 pages (2 whole sequences); planned
  // again for those 2, the logits reserve of the other 4 rows goes back to the KV
  // cache: one page more here, so 3 sequences of 2 pages.
  EXPECT_LT(j["reserve_bytes"].get<int64_t>(), r["reserve_bytes"].get<int64_t>());
  const int64_t pages = (budget - r["weight_bytes"].get<int64_t>() - j["reserve_bytes"].get<int64_t>()) / page;
  EXPECT_EQ(pages, 6);
  EXPECT_EQ(j["kv_pages_total"].get<int64_t>(), pages);
  EXPECT_EQ(j["max_batch_fits"].get<int64_t>(), 3);
  EXPECT_EQ(j["max_num_seqs"].get<int64_t>(), 3);
  EXPECT_EQ(j["num_prompts"].get<int64_t>(), 3);
  EXPECT_EQ(j["peak_batch"].get<int64_t>(), 3);
  EXPECT_EQ(j["output_tokens"].get<int>(), 24);
  EXPECT_EQ(j["preemptions"].get<int>(), 0);
  EXPECT_FALSE(j.contains("measured_with_budget"));
  EXPECT_EQ(three[2]["memory_budget"].get<int64_t>(), 1000);
  EXPECT_NE(three[2]["error"].get<std::string>().find("no room for the KV cache"), std::string::npos);

  const BenchRun sweep = run_bench({"--arch", "tiny", "--precision", "w4a8kv4", "--input-len", "8", "--output-len", "4",
                               "--num-prompts", "4", "--max-num-seqs", "0", "--sweep"});
  ASSERT_EQ(sweep.rc, 0);
  ASSERT_EQ(sweep.lines.size(), 4u);  // 1, 2, 4, summary
  double best = 0;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(sweep.lines[i]["max_num_seqs"].get<int>(), 1 << i);
    EXPECT_EQ(sweep.lines[i]["peak_batch"].get<int>(), 1 << i);
    EXPECT_EQ(sweep.lines[i]["kv_pages_total"], sweep.lines[0]["kv_pages_total"]);  // one KV cache for every point
    best = std::max(best, sweep.lines[i]["output_tokens_per_s"].get<double>());
  }
  EXPECT_EQ(sweep.lines[3]["bench"], "throughput_sweep");
  EXPECT_EQ(sweep.lines[3]["output_tokens_per_s"].get<double>(), best);

  // --sweep-seqs: the given points in their order, capped (9 -> 4 prompts), each once.
  const BenchRun listed = run_bench({"--arch", "tiny", "--precision", "w4a8kv4", "--input-len", "8", "--output-len",
                                     "4", "--num-prompts", "4", "--max-num-seqs", "0", "--sweep-seqs", "3,9,4,1"});
  ASSERT_EQ(listed.rc, 0);
  ASSERT_EQ(listed.lines.size(), 4u);  // 3, 4, 1, summary
  EXPECT_EQ(listed.lines[0]["max_num_seqs"].get<int>(), 3);
  EXPECT_EQ(listed.lines[1]["max_num_seqs"].get<int>(), 4);
  EXPECT_EQ(listed.lines[2]["max_num_seqs"].get<int>(), 1);
  EXPECT_EQ(listed.lines[3]["bench"], "throughput_sweep");
  const BenchRun zero = run_bench({"--arch", "tiny", "--input-len", "8", "--output-len", "4", "--sweep-seqs", "2,0"});
  EXPECT_EQ(zero.rc, 1);
  EXPECT_TRUE(zero.lines.empty());
}

TEST(BenchDummy, WeightsThatDoNotFitAreAnError) {
  ::testing::internal::CaptureStderr();
  const BenchRun r = run_bench({"--arch", "llama-2-70b", "--precision", "fp16", "--memory-budget", "80GB"});
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(err.find("do not fit"), std::string::npos) << err;
  ::testing::internal::CaptureStderr();
  const BenchRun bad = run_bench({"--arch", "tiny", "--memory-budget", "lots"});
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(bad.rc, 2);
}

}  // namespace
}  // namespace qserve

namespace qserve {
namespace {

TEST(ModelFlags, GenerateTakesTheSameFlags) {
  // Dummy weights have no tokenizer: a text prompt is a clear error, not a crash.
  std::vector<std::string> args = {"qserve", "generate", "--load-format", "dummy", "--arch", "tiny", "--precision",
                                   "w4a8kv4", "--memory-budget", "1GiB", "--prompt", "hello", "--max-tokens", "2"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  ::testing::internal::CaptureStderr();
  const int rc = cli::run_main(static_cast<int>(argv.size()), argv.data());
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, 1);
  EXPECT_NE(err.find("needs a tokenizer"), std::string::npos) << err;
}

}  // namespace
}  // namespace qserve

namespace qserve {
namespace {

TEST(ByteSize, DecimalBinaryAndScientific) {
  EXPECT_EQ(cli::parse_byte_size("80000000000", "--x"), 80'000'000'000);
  EXPECT_EQ(cli::parse_byte_size("80e9", "--x"), 80'000'000'000);
  EXPECT_EQ(cli::parse_byte_size("48GB", "--x"), 48'000'000'000);
  EXPECT_EQ(cli::parse_byte_size("48g", "--x"), 48'000'000'000);
  EXPECT_EQ(cli::parse_byte_size("80GiB", "--x"), int64_t{80} << 30);
  EXPECT_EQ(cli::parse_byte_size("1.5MiB", "--x"), int64_t{3} << 19);
  EXPECT_EQ(cli::parse_byte_size("0", "--x"), 0);
  for (const char* bad : {"", "lots", "-1", "5XB", "1e30", "GB"}) EXPECT_THROW(cli::parse_byte_size(bad, "--x"), Error) << bad;
}

}  // namespace
}  // namespace qserve
