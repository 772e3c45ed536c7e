// The scheduler: continuous (in-flight) batching over the paged KV cache.
// Each step it picks, first come first served, which sequences compute how many
// tokens: decode tokens and prefill chunks mixed in one batch, under a token
// budget and a batch-size limit, admitting new sequences only while KV pages
// last and preempting (by recompute) the latest arrivals when they run out.
// The contract is docs/scheduler.md. Host-only; no locking: one thread (the
// engine's) calls every method.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/kv_block_manager.h"

namespace qserve {

struct SchedulerConfig {
  int max_num_seqs = 64;              // sequences holding KV pages (the running batch)
  int max_num_batched_tokens = 512;   // tokens computed in one step
  bool enable_chunked_prefill = true; // false: a prompt is admitted only if it fits the budget whole
};

enum class SeqStatus { kWaiting, kRunning, kFinished };

// The scheduler's view of one sequence.
struct Sequence {
  SeqId id = 0;
  uint64_t arrival = 0;               // admission order key (FCFS); assigned by add()
  std::vector<int32_t> token_ids;     // prompt + generated so far
  int num_prompt_tokens = 0;
  int num_computed_tokens = 0;        // prefix whose K/V is in the cache
  SeqStatus status = SeqStatus::kWaiting;
  int num_preemptions = 0;

  int num_tokens() const { return static_cast<int>(token_ids.size()); }
  int num_generated() const { return num_tokens() - num_prompt_tokens; }
};

// One sequence's share of a step: compute tokens [start, start + num_tokens).
struct ScheduledChunk {
  SeqId seq = 0;
  int start = 0;          // == num_computed_tokens before the step
  int num_tokens = 0;     // >= 1
  bool sample = false;    // the chunk reaches the end of token_ids: sample the next token
};

struct StepPlan {
  std::vector<ScheduledChunk> chunks;  // running order (FCFS)
  std::vector<int32_t> fresh_pages;    // pages newly handed out this step: zero before use
  std::vector<SeqId> preempted;        // sequences moved back to waiting this step
  int num_tokens = 0;                  // sum of chunk num_tokens
  bool empty() const { return chunks.empty(); }
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, KvBlockManager& kv);

  // Queues a new sequence (at the back: FCFS). The length it may reach (prompt
  // + max new tokens) must fit the whole KV cache, which the caller checks
  // (fits()) so that the oldest running sequence can always make progress.
  void add(SeqId id, std::vector<int32_t> prompt_token_ids);
  // Whether a sequence of this many tokens can ever hold its K/V.
  bool fits(int64_t max_total_tokens) const;

  // Plans the next step. Does not change num_computed_tokens (complete_step does).
  StepPlan schedule();
  // After the model ran `plan`: advances num_computed_tokens of its chunks.
  void complete_step(const StepPlan& plan);
  // Appends a sampled token to a sequence (after complete_step).
  void append_token(SeqId id, int32_t token);
  // Removes a sequence wherever it is (finished or cancelled); frees its pages.
  void finish(SeqId id);

  const Sequence* find(SeqId id) const;
  int num_running() const { return static_cast<int>(running_.size()); }
  int num_waiting() const { return static_cast<int>(waiting_.size()); }
  bool has_work() const { return !running_.empty() || !waiting_.empty(); }
  uint64_t num_preemptions() const { return num_preemptions_; }
  const SchedulerConfig& config() const { return config_; }

  // Aborts unless: running ++ waiting is in arrival order; running sequences own
  // pages covering their computed tokens; waiting ones own none; the block
  // manager is consistent. For tests.
  void check_invariants() const;

 private:
  void preempt(Sequence* seq, StepPlan* plan);

  SchedulerConfig config_;
  KvBlockManager& kv_;
  uint64_t next_arrival_ = 0;
  uint64_t num_preemptions_ = 0;
  std::unordered_map<SeqId, std::unique_ptr<Sequence>> seqs_;
  std::vector<Sequence*> running_;  // arrival order
  std::deque<Sequence*> waiting_;   // arrival order
};

}  // namespace qserve
