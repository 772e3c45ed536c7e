// `qserve bench throughput` end to end on the CPU engine (the CI case:
// input 32 / output 16 / 4 prompts): the tiny model always, the default model
// when installed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/app.h"

namespace qserve {
namespace {

const std::string kSourceDir = QSERVE_SOURCE_DIR;

// `qserve bench throughput ARGS` in this process: its exit code, stdout and stderr.
struct CliRun {
  int rc = 0;
  std::string out, err;
};
CliRun run_cli(std::vector<std::string> args) {
  args.insert(args.begin(), {"qserve", "bench", "throughput"});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  CliRun r;
  r.rc = cli::run_main(static_cast<int>(argv.size()), argv.data());
  r.out = ::testing::internal::GetCapturedStdout();
  r.err = ::testing::internal::GetCapturedStderr();
  return r;
}

std::string run_bench_raw(std::vector<std::string> args) {
  args.push_back("--json");
  const CliRun r = run_cli(std::move(args));
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  return r.out;
}

nlohmann::json run_bench(std::vector<std::string> args) { return nlohmann::json::parse(run_bench_raw(std::move(args))); }

void check_line(const nlohmann::json& j, int prompts, int out_len) {
  EXPECT_EQ(j["output_tokens"].get<int>(), prompts * out_len);
  EXPECT_GT(j["output_tokens_per_s"].get<double>(), 0.0);
  EXPECT_GT(j["prefill_tokens_per_s"].get<double>(), 0.0);
  EXPECT_GT(j["decode_tokens_per_s"].get<double>(), 0.0);
  EXPECT_EQ(j["peak_batch"].get<int>(), prompts);
  EXPECT_GT(j["kv_pages_peak_used"].get<int>(), 0);
  EXPECT_LE(j["ttft_ms_p50"].get<double>(), j["ttft_ms_p99"].get<double>());
  EXPECT_LE(j["tpot_ms_p50"].get<double>(), j["tpot_ms_p99"].get<double>());
  EXPECT_GT(j["tpot_ms_p50"].get<double>(), 0.0);
}

TEST(BenchThroughput, TinyModelJsonLine) {
  const auto j = run_bench({"--model", kSourceDir + "/tests/data/models/tiny-llama", "--precision", "fp16",
                            "--input-len", "32", "--output-len", "16", "--num-prompts", "4"});
  check_line(j, 4, 16);
  EXPECT_EQ(j["model"], "tiny-llama");
}

TEST(BenchThroughput, TinyModelUnderPreemption) {
  // 10 pages of 4 tokens for 6 sequences of 40 tokens: preemption, same totals.
  const auto j = run_bench({"--model", kSourceDir + "/tests/data/models/tiny-llama", "--input-len", "24",
                            "--output-len", "16", "--num-prompts", "6", "--page-size", "4", "--num-kv-pages", "20",
                            "--max-num-batched-tokens", "32"});
  EXPECT_EQ(j["output_tokens"].get<int>(), 96);
  EXPECT_GT(j["preemptions"].get<int>(), 0);
}

TEST(BenchThroughput, SweepReportsEveryBatchSizeAndTheBest) {
  const std::string out = run_bench_raw({"--model", kSourceDir + "/tests/data/models/tiny-llama", "--input-len", "8",
                                         "--output-len", "4", "--num-prompts", "4", "--sweep"});
  std::vector<nlohmann::json> lines;
  size_t pos = 0;
  while (pos < out.size()) {
    const size_t end = out.find('\n', pos);
    lines.push_back(nlohmann::json::parse(out.substr(pos, end - pos)));
    pos = end + 1;
  }
  ASSERT_EQ(lines.size(), 4u);  // max_num_seqs 1, 2, 4, then the summary
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(lines[i]["max_num_seqs"].get<int>(), 1 << i);
    EXPECT_EQ(lines[i]["peak_batch"].get<int>(), 1 << i);
    EXPECT_EQ(lines[i]["output_tokens"].get<int>(), 16);
  }
  double best = 0;
  for (int i = 0; i < 3; ++i) best = std::max(best, lines[i]["output_tokens_per_s"].get<double>());
  EXPECT_EQ(lines[3]["bench"], "throughput_sweep");
  EXPECT_EQ(lines[3]["output_tokens_per_s"].get<double>(), best);
}

// The timed run comes after --warmup-runs untimed runs of the same shape (1
// by default); its counts are its own, not the warm-up's.
TEST(BenchThroughput, WarmupRunsAreUntimed) {
  const std::string model = kSourceDir + "/tests/data/models/tiny-llama";
  for (const char* runs : {"", "0", "2"}) {
    SCOPED_TRACE(std::string("--warmup-runs ") + runs);
    std::vector<std::string> args{"--model", model, "--input-len", "16", "--output-len", "8", "--num-prompts", "3"};
    if (*runs) args.insert(args.end(), {"--warmup-runs", runs});
    const auto j = run_bench(args);
    check_line(j, 3, 8);
    EXPECT_EQ(j["warmup_runs"].get<int>(), *runs ? std::atoi(runs) : 1);
    // The timed run's steps alone: at most one a generated position plus one
    // prefill step a prompt (how the prompts meet in steps depends on when
    // the engine's loop picks them up), where a warm-up's steps counted too
    // would make at least twice the generated positions.
    EXPECT_LE(j["steps"].get<int>(), 8 + 3);
  }
  const CliRun bad = run_cli({"--model", model, "--warmup-runs", "-1", "--json"});
  EXPECT_NE(bad.rc, 0);
  EXPECT_NE(bad.err.find("warmup-runs"), std::string::npos) << bad.err;
}

TEST(BenchThroughput, DefaultModel) {
  const char* home = std::getenv("QSERVE_HOME");
  const std::string base = home && *home ? home : std::string(std::getenv("HOME") ? std::getenv("HOME") : ".") + "/.cache/qserve";
  const std::string dir = base + "/models/SmolLM2-135M-Instruct";
  if (!std::filesystem::exists(dir + "/config.json")) GTEST_SKIP() << "skipped: default model not installed at " << dir;
  const auto j = run_bench({"--precision", "fp16", "--input-len", "32", "--output-len", "16", "--num-prompts", "4"});
  check_line(j, 4, 16);
}

}  // namespace
}  // namespace qserve
