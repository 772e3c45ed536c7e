// Reliability: a soak of many requests with random prompt and output lengths,
// random cancellations and forced preemption under a tiny KV budget, on the
// deterministic fake model. Every request completes or is cancelled; outputs do
// not depend on what else is in the batch (alone == in a crowd, greedy and
// seeded sampling alike; a cancelled one is a prefix of its alone output); the
// free-page count returns to its initial value; no request reads another's K/V.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/model_runner.h"
#include "fake_model_runner.h"
#include "fake_text_codec.h"
#include "qserve/engine.h"
#include "soak_traffic.h"

namespace qserve {
namespace {

constexpr int kVocab = 258;

using test::CrowdRun;
using test::make_soak_cases;
using test::run_in_a_crowd;

TEST(EngineSoak, RandomTrafficCancellationsAndPreemptionUnderATinyKvBudget) {
  const int kRequests = 2000;
  const int kPageSize = 4;
  const int kPages = 40;  // 160 token slots for up to 16 sequences of up to 140 tokens
  const auto cases = make_soak_cases(kRequests, 256, kPages * kPageSize, 2024, /*eos_coin=*/true);

  // Alone: one at a time on a roomy engine.
  std::vector<std::vector<int32_t>> alone(kRequests);
  {
    EngineConfig c;
    c.num_kv_pages = 256;
    c.page_size = kPageSize;
    c.max_model_len = kPages * kPageSize;
    auto engine = Engine::create(c, std::make_unique<fakes::FakeModelRunner>(kVocab, 4096),
                                 std::make_shared<fakes::FakeTextCodec>());
    for (int i = 0; i < kRequests; ++i) alone[i] = engine->generate(cases[i].request).token_ids;
  }

  // In a crowd: 8 client threads, small steps, few pages.
  EngineConfig c;
  c.num_kv_pages = kPages;
  c.page_size = kPageSize;
  c.max_num_seqs = 16;
  c.max_num_batched_tokens = 24;
  auto runner = std::make_unique<fakes::FakeModelRunner>(kVocab, 4096);
  fakes::FakeModelRunner* fake = runner.get();
  auto engine = Engine::create(c, std::move(runner), std::make_shared<fakes::FakeTextCodec>());
  ASSERT_EQ(engine->model_info().max_model_len, kPages * kPageSize);

  const CrowdRun run = run_in_a_crowd(*engine, cases);
  const auto& crowd = run.tokens;
  const auto& reason = run.reason;
  const auto& finals = run.finals;

  int cancelled = 0;
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_EQ(finals[i], 1) << "request " << i << " did not end exactly once";
    if (reason[i] == FinishReason::kCancelled) {
      ++cancelled;
      ASSERT_LE(crowd[i].size(), alone[i].size());
      EXPECT_TRUE(std::equal(crowd[i].begin(), crowd[i].end(), alone[i].begin())) << "request " << i;
    } else {
      EXPECT_TRUE(reason[i] == FinishReason::kStop || reason[i] == FinishReason::kLength) << "request " << i;
      EXPECT_EQ(crowd[i], alone[i]) << "request " << i << " differs in a crowd";
    }
  }
  const EngineStats s = engine->stats();
  EXPECT_GT(cancelled, 0);
  EXPECT_GT(s.num_preemptions, 0u) << "the KV budget should have forced preemption";
  EXPECT_GT(s.peak_num_running, 4);
  EXPECT_EQ(s.requests_finished_stop + s.requests_finished_length + s.requests_cancelled,
            static_cast<uint64_t>(kRequests));
  EXPECT_EQ(s.requests_cancelled, static_cast<uint64_t>(cancelled));
  EXPECT_EQ(s.kv_pages_free, kPages) << "pages leaked";
  EXPECT_EQ(s.num_running + s.num_waiting, 0);
  EXPECT_EQ(fake->violations, 0) << "a request read K/V it did not write";
  std::printf("soak: %d requests, %d cancelled, %llu preemptions, %llu steps, peak batch %d\n", kRequests, cancelled,
              static_cast<unsigned long long>(s.num_preemptions), static_cast<unsigned long long>(s.num_steps),
              s.peak_num_running);
}

}  // namespace
}  // namespace qserve
