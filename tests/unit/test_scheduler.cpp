// Property tests of the scheduler contract (docs/scheduler.md), host-only,
// with a deterministic fake model (fake_model_runner.h) behind it.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "engine/scheduler.h"
#include "fake_model_runner.h"

namespace qserve {
namespace {

struct Job {
  std::vector<int32_t> prompt;
  int max_new = 1;
  int cancel_at_step = -1;  // >= 0: cancelled before that step
};

struct SimConfig {
  SchedulerConfig sched;
  int64_t num_pages = 64;
  int page_size = 4;
  int vocab = 32;
};

struct SimResult {
  std::map<SeqId, std::vector<int32_t>> outputs;  // generated tokens of completed jobs
  std::set<SeqId> cancelled;
  uint64_t preemptions = 0;
  int64_t steps = 0;
  int max_running = 0;
};

// Runs jobs through scheduler + fake runner with greedy sampling, checking the
// contract at every step. Job i has SeqId i and arrives at step arrive[i].
SimResult simulate(const SimConfig& cfg, const std::vector<Job>& jobs, const std::vector<int>& arrive) {
  KvBlockManager kv(cfg.num_pages, cfg.page_size);
  Scheduler sched(cfg.sched, kv);
  fakes::FakeModelRunner runner(cfg.vocab);
  runner.allocate_kv_cache(cfg.num_pages, cfg.page_size);
  SimResult result;
  size_t done = 0;
  for (int step = 0; done < jobs.size(); ++step) {
    EXPECT_LT(step, 100000) << "no progress";
    if (step >= 100000) break;
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (arrive[i] == step) sched.add(i, jobs[i].prompt);
      if (jobs[i].cancel_at_step == step && sched.find(i)) {
        sched.finish(i);
        result.cancelled.insert(i);
        ++done;
      }
    }
    sched.check_invariants();
    if (!sched.has_work()) continue;
    StepPlan plan = sched.schedule();
    ++result.steps;
    // The plan honours the limits and the computed prefix.
    EXPECT_FALSE(plan.empty()) << "a step with work scheduled nothing (step " << step << ")";
    EXPECT_LE(plan.num_tokens, cfg.sched.max_num_batched_tokens);
    EXPECT_LE(static_cast<int>(plan.chunks.size()), cfg.sched.max_num_seqs);
    std::set<SeqId> in_plan;
    std::set<int32_t> fresh(plan.fresh_pages.begin(), plan.fresh_pages.end());
    EXPECT_EQ(fresh.size(), plan.fresh_pages.size()) << "a page handed out twice";
    RunnerBatch batch;
    std::vector<std::vector<int32_t>> tokens(plan.chunks.size());
    for (size_t c = 0; c < plan.chunks.size(); ++c) {
      const auto& ch = plan.chunks[c];
      EXPECT_TRUE(in_plan.insert(ch.seq).second) << "seq twice in a step";
      const Sequence* seq = sched.find(ch.seq);
      if (seq == nullptr) { ADD_FAILURE() << "unknown seq in plan"; continue; }
      EXPECT_EQ(ch.start, seq->num_computed_tokens);
      EXPECT_GE(ch.num_tokens, 1);
      EXPECT_EQ(ch.sample, ch.start + ch.num_tokens == seq->num_tokens());
      tokens[c].assign(seq->token_ids.begin() + ch.start, seq->token_ids.begin() + ch.start + ch.num_tokens);
      batch.seqs.push_back({ch.seq, tokens[c], ch.start, kv.page_table(ch.seq), ch.sample});
      batch.num_samples += ch.sample;
    }
    for (SeqId p : plan.preempted) EXPECT_EQ(in_plan.count(p), 0u) << "preempted seq scheduled";
    batch.num_tokens = plan.num_tokens;
    batch.fresh_pages = plan.fresh_pages;
    auto logits = runner.execute(batch);
    sched.complete_step(plan);
    result.max_running = std::max(result.max_running, sched.num_running());
    int row = 0;
    for (const auto& ch : plan.chunks) {
      if (!ch.sample) continue;
      const float* l = logits.data() + static_cast<size_t>(row++) * cfg.vocab;
      const int32_t tok = static_cast<int32_t>(std::max_element(l, l + cfg.vocab) - l);
      sched.append_token(ch.seq, tok);
      const Sequence* seq = sched.find(ch.seq);
      if (seq->num_generated() >= jobs[ch.seq].max_new) {
        result.outputs[ch.seq].assign(seq->token_ids.begin() + seq->num_prompt_tokens, seq->token_ids.end());
        sched.finish(ch.seq);
        ++done;
      }
    }
    sched.check_invariants();
  }
  EXPECT_EQ(runner.violations, 0) << "a sequence read K/V it did not write";
  EXPECT_EQ(kv.num_free_pages(), cfg.num_pages) << "pages leaked";
  result.preemptions = sched.num_preemptions();
  return result;
}

std::vector<int32_t> make_prompt(std::mt19937& rng, int len, int vocab) {
  std::vector<int32_t> p(len);
  for (auto& t : p) t = static_cast<int32_t>(rng() % vocab);
  return p;
}

TEST(Scheduler, ChunksALongPromptAndSamplesOnlyAtItsEnd) {
  KvBlockManager kv(16, 4);
  Scheduler sched({.max_num_seqs = 4, .max_num_batched_tokens = 4}, kv);
  sched.add(1, std::vector<int32_t>(10, 3));
  std::vector<int> sizes;
  for (int step = 0; step < 3; ++step) {
    StepPlan plan = sched.schedule();
    ASSERT_EQ(plan.chunks.size(), 1u);
    sizes.push_back(plan.chunks[0].num_tokens);
    EXPECT_EQ(plan.chunks[0].sample, step == 2);
    sched.complete_step(plan);
  }
  EXPECT_EQ(sizes, (std::vector<int>{4, 4, 2}));
  sched.append_token(1, 5);
  StepPlan decode = sched.schedule();
  ASSERT_EQ(decode.chunks.size(), 1u);
  EXPECT_EQ(decode.chunks[0].start, 10);
  EXPECT_EQ(decode.chunks[0].num_tokens, 1);
  EXPECT_TRUE(decode.chunks[0].sample);
}

TEST(Scheduler, MixesDecodesWithAPrefillChunkUnderTheBudget) {
  KvBlockManager kv(64, 4);
  Scheduler sched({.max_num_seqs = 8, .max_num_batched_tokens = 8}, kv);
  sched.add(1, {1, 2, 3});
  sched.add(2, {4, 5});
  StepPlan first = sched.schedule();  // both prompts whole
  ASSERT_EQ(first.chunks.size(), 2u);
  sched.complete_step(first);
  sched.append_token(1, 7);
  sched.append_token(2, 7);
  sched.add(3, std::vector<int32_t>(20, 1));
  StepPlan mixed = sched.schedule();
  ASSERT_EQ(mixed.chunks.size(), 3u);
  EXPECT_EQ(mixed.chunks[0].num_tokens, 1);  // decode
  EXPECT_EQ(mixed.chunks[1].num_tokens, 1);  // decode
  EXPECT_EQ(mixed.chunks[2].seq, 3u);
  EXPECT_EQ(mixed.chunks[2].num_tokens, 6);  // the rest of the budget
  EXPECT_FALSE(mixed.chunks[2].sample);
  EXPECT_EQ(mixed.num_tokens, 8);
}

TEST(Scheduler, WithoutChunkedPrefillAPromptWaitsForAWholeBudget) {
  KvBlockManager kv(64, 4);
  Scheduler sched({.max_num_seqs = 8, .max_num_batched_tokens = 8, .enable_chunked_prefill = false}, kv);
  sched.add(1, {1, 2, 3});
  sched.add(2, std::vector<int32_t>(6, 1));
  StepPlan plan = sched.schedule();
  ASSERT_EQ(plan.chunks.size(), 1u);  // 3 + 6 > 8: the second waits (FCFS, not split)
  EXPECT_EQ(sched.num_waiting(), 1);
}

TEST(Scheduler, RespectsMaxNumSeqsAndAdmitsInArrivalOrder) {
  KvBlockManager kv(64, 4);
  Scheduler sched({.max_num_seqs = 2, .max_num_batched_tokens = 100}, kv);
  for (SeqId id = 10; id < 15; ++id) sched.add(id, {1, 2});
  StepPlan plan = sched.schedule();
  ASSERT_EQ(plan.chunks.size(), 2u);
  EXPECT_EQ(plan.chunks[0].seq, 10u);
  EXPECT_EQ(plan.chunks[1].seq, 11u);
  sched.complete_step(plan);
  sched.finish(10);
  sched.append_token(11, 3);
  plan = sched.schedule();
  ASSERT_EQ(plan.chunks.size(), 2u);
  EXPECT_EQ(plan.chunks[0].seq, 11u);
  EXPECT_EQ(plan.chunks[1].seq, 12u);
  sched.check_invariants();
}

TEST(Scheduler, AdmissionStopsWhenPagesRunOut) {
  KvBlockManager kv(4, 4);  // 16 slots
  Scheduler sched({.max_num_seqs = 8, .max_num_batched_tokens = 100}, kv);
  sched.add(1, std::vector<int32_t>(9, 1));  // 3 pages
  sched.add(2, std::vector<int32_t>(8, 1));  // 2 pages: must wait
  sched.add(3, std::vector<int32_t>(1, 1));  // would fit, but FCFS: behind seq 2
  StepPlan plan = sched.schedule();
  ASSERT_EQ(plan.chunks.size(), 1u);
  EXPECT_EQ(sched.num_waiting(), 2);
  EXPECT_EQ(plan.fresh_pages.size(), 3u);
}

TEST(Scheduler, PreemptsTheNewestSequenceWhenPagesRunOut) {
  KvBlockManager kv(4, 2);  // 8 slots
  Scheduler sched({.max_num_seqs = 8, .max_num_batched_tokens = 100}, kv);
  sched.add(1, {1, 2, 3});  // 2 pages
  sched.add(2, {4, 5, 6});  // 2 pages
  StepPlan plan = sched.schedule();
  ASSERT_EQ(plan.chunks.size(), 2u);
  sched.complete_step(plan);
  sched.append_token(1, 9);  // seq 1 now 4 tokens: still 2 pages
  sched.append_token(2, 9);
  plan = sched.schedule();    // decodes at position 3: fit
  EXPECT_TRUE(plan.preempted.empty());
  sched.complete_step(plan);
  sched.append_token(1, 9);   // 5 tokens -> needs a 3rd page; none free
  sched.append_token(2, 9);
  plan = sched.schedule();
  ASSERT_EQ(plan.preempted, (std::vector<SeqId>{2}));
  ASSERT_EQ(plan.chunks.size(), 1u);
  EXPECT_EQ(plan.chunks[0].seq, 1u);
  const Sequence* two = sched.find(2);
  EXPECT_EQ(two->status, SeqStatus::kWaiting);
  EXPECT_EQ(two->num_computed_tokens, 0);
  EXPECT_EQ(two->num_tokens(), 5);  // keeps its generated tokens, recomputed later
  EXPECT_EQ(sched.num_preemptions(), 1u);
  sched.check_invariants();
}

TEST(Scheduler, GreedyOutputsDoNotDependOnTheCrowd) {
  std::mt19937 rng(42);
  const int vocab = 32;
  std::vector<Job> jobs;
  for (int i = 0; i < 40; ++i) jobs.push_back({make_prompt(rng, 1 + rng() % 30, vocab), 1 + int(rng() % 25)});
  // Alone: each job in an empty engine with plenty of pages.
  std::map<SeqId, std::vector<int32_t>> alone;
  for (size_t i = 0; i < jobs.size(); ++i) {
    SimConfig cfg{.sched = {.max_num_seqs = 4, .max_num_batched_tokens = 64}, .num_pages = 64, .page_size = 4, .vocab = vocab};
    SimResult r = simulate(cfg, {jobs[i]}, {0});
    alone[i] = r.outputs.at(0);
  }
  // In a crowd: staggered arrivals, small budgets (chunking), few pages (preemption).
  for (int page_size : {1, 4, 16}) {
    SimConfig cfg{.sched = {.max_num_seqs = 6, .max_num_batched_tokens = 13},
                  .num_pages = (64 + page_size - 1) / page_size + 2, .page_size = page_size, .vocab = vocab};
    std::vector<int> arrive;
    for (size_t i = 0; i < jobs.size(); ++i) arrive.push_back(static_cast<int>(rng() % 60));
    SimResult r = simulate(cfg, jobs, arrive);
    EXPECT_GT(r.preemptions, 0u) << "page_size " << page_size << ": the budget should force preemption";
    EXPECT_LE(r.max_running, 6);
    for (size_t i = 0; i < jobs.size(); ++i) EXPECT_EQ(r.outputs.at(i), alone.at(i)) << "job " << i << " page_size " << page_size;
  }
}

TEST(Scheduler, RandomCancellationsFreeEverything) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<Job> jobs;
    std::vector<int> arrive;
    for (int i = 0; i < 30; ++i) {
      Job j{make_prompt(rng, 1 + rng() % 40, 32), 1 + int(rng() % 30)};
      arrive.push_back(static_cast<int>(rng() % 40));
      if (rng() % 3 == 0) j.cancel_at_step = arrive.back() + static_cast<int>(rng() % 30);
      jobs.push_back(j);
    }
    SimConfig cfg{.sched = {.max_num_seqs = 1 + int(rng() % 8), .max_num_batched_tokens = 8 + int(rng() % 40)},
                  .num_pages = 20, .page_size = 4, .vocab = 32};
    SimResult r = simulate(cfg, jobs, arrive);
    EXPECT_EQ(r.outputs.size() + r.cancelled.size(), jobs.size());
    for (const auto& [id, out] : r.outputs) EXPECT_EQ(static_cast<int>(out.size()), jobs[id].max_new);
  }
}

}  // namespace
}  // namespace qserve
