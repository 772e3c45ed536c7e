#include "engine/scheduler.h"

#include <algorithm>

#include "core/error.h"

namespace qserve {

Scheduler::Scheduler(const SchedulerConfig& config, KvBlockManager& kv) : config_(config), kv_(kv) {
  QS_CHECK(config.max_num_seqs > 0) << "max_num_seqs " << config.max_num_seqs;
  QS_CHECK(config.max_num_batched_tokens > 0) << "max_num_batched_tokens " << config.max_num_batched_tokens;
}

bool Scheduler::fits(int64_t max_total_tokens) const {
  return kv_.pages_for_tokens(max_total_tokens) <= kv_.num_pages();
}

void Scheduler::add(SeqId id, std::vector<int32_t> prompt_token_ids) {
  QS_CHECK(!prompt_token_ids.empty()) << "empty prompt, seq " << id;
  QS_CHECK(seqs_.count(id) == 0) << "duplicate seq " << id;
  auto seq = std::make_unique<Sequence>();
  seq->id = id;
  seq->arrival = next_arrival_++;
  seq->num_prompt_tokens = static_cast<int>(prompt_token_ids.size());
  seq->token_ids = std::move(prompt_token_ids);
  waiting_.push_back(seq.get());
  seqs_.emplace(id, std::move(seq));
}

void Scheduler::preempt(Sequence* seq, StepPlan* plan) {
  // Recompute: drop the K/V, keep the tokens (prompt + generated); when it runs
  // again its whole history is prefilled and generation continues.
  kv_.release(seq->id);
  seq->num_computed_tokens = 0;
  seq->status = SeqStatus::kWaiting;
  ++seq->num_preemptions;
  ++num_preemptions_;
  running_.erase(std::find(running_.begin(), running_.end(), seq));
  // It arrived before everything waiting (running ++ waiting is in arrival order).
  waiting_.push_front(seq);
  plan->preempted.push_back(seq->id);
}

StepPlan Scheduler::schedule() {
  StepPlan plan;
  int budget = config_.max_num_batched_tokens;

  // 1. Running sequences, oldest first: decode tokens or the next prefill chunk.
  //    When pages run out, preempt the newest running sequence (possibly this one).
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* seq = running_[i];
    const int remaining = seq->num_tokens() - seq->num_computed_tokens;
    QS_CHECK(remaining >= 1) << "running seq " << seq->id << " has nothing to compute";
    const int n = std::min(remaining, budget);
    bool scheduled = false;
    while (true) {
      if (kv_.reserve(seq->id, seq->num_computed_tokens + n, &plan.fresh_pages)) {
        scheduled = true;
        break;
      }
      Sequence* victim = running_.back();
      preempt(victim, &plan);
      if (victim == seq) break;
    }
    if (!scheduled) break;  // it preempted itself: it was the last running one
    plan.chunks.push_back({seq->id, seq->num_computed_tokens, n, seq->num_computed_tokens + n == seq->num_tokens()});
    plan.num_tokens += n;
    budget -= n;
    ++i;
  }

  // 2. Admit waiting sequences in arrival order, unless this step preempted
  //    (pages are short: admitting would only thrash). The head blocks the queue.
  if (plan.preempted.empty()) {
    while (!waiting_.empty() && budget > 0 && static_cast<int>(running_.size()) < config_.max_num_seqs) {
      Sequence* seq = waiting_.front();
      const int remaining = seq->num_tokens() - seq->num_computed_tokens;
      if (!config_.enable_chunked_prefill && remaining > budget) break;
      const int n = std::min(remaining, budget);
      if (!kv_.reserve(seq->id, seq->num_computed_tokens + n, &plan.fresh_pages)) break;
      waiting_.pop_front();
      seq->status = SeqStatus::kRunning;
      running_.push_back(seq);
      plan.chunks.push_back({seq->id, seq->num_computed_tokens, n, seq->num_computed_tokens + n == seq->num_tokens()});
      plan.num_tokens += n;
      budget -= n;
    }
  }
  return plan;
}

void Scheduler::complete_step(const StepPlan& plan) {
  for (const auto& chunk : plan.chunks) {
    auto it = seqs_.find(chunk.seq);
    if (it == seqs_.end()) continue;  // finished meanwhile
    Sequence* seq = it->second.get();
    QS_CHECK(seq->status == SeqStatus::kRunning && seq->num_computed_tokens == chunk.start)
        << "step completed for seq " << seq->id << " out of order";
    seq->num_computed_tokens += chunk.num_tokens;
    QS_CHECK(seq->num_computed_tokens <= seq->num_tokens()) << "computed past the tokens of seq " << seq->id;
  }
}

void Scheduler::append_token(SeqId id, int32_t token) {
  auto it = seqs_.find(id);
  QS_CHECK(it != seqs_.end()) << "append to unknown seq " << id;
  Sequence* seq = it->second.get();
  QS_CHECK(seq->num_computed_tokens == seq->num_tokens()) << "append before the sequence was computed, seq " << id;
  seq->token_ids.push_back(token);
}

void Scheduler::finish(SeqId id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  Sequence* seq = it->second.get();
  if (seq->status == SeqStatus::kRunning) {
    running_.erase(std::find(running_.begin(), running_.end(), seq));
  } else {
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), seq));
  }
  kv_.release(id);
  seqs_.erase(it);
}

const Sequence* Scheduler::find(SeqId id) const {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? nullptr : it->second.get();
}

void Scheduler::check_invariants() const {
  kv_.check_invariants();
  QS_CHECK(running_.size() + waiting_.size() == seqs_.size()) << "a sequence is lost or duplicated";
  QS_CHECK(static_cast<int>(running_.size()) <= config_.max_num_seqs) << "batch above max_num_seqs";
  QS_CHECK(kv_.num_sequences() <= static_cast<int64_t>(running_.size())) << "a non-running sequence holds pages";
  const Sequence* prev = nullptr;
  auto check_order = [&](const Sequence* s) {
    QS_CHECK(prev == nullptr || prev->arrival < s->arrival) << "not FCFS: seq " << s->id << " after " << prev->id;
    prev = s;
  };
  for (const Sequence* s : running_) {
    check_order(s);
    QS_CHECK(s->status == SeqStatus::kRunning) << "seq " << s->id;
    QS_CHECK(kv_.pages_for_tokens(s->num_computed_tokens) <= static_cast<int64_t>(kv_.page_table(s->id).size()))
        << "computed tokens of seq " << s->id << " not covered by its pages";
    QS_CHECK(s->num_computed_tokens < s->num_tokens()) << "running seq " << s->id << " has nothing to compute";
  }
  for (const Sequence* s : waiting_) {
    check_order(s);
    QS_CHECK(s->status == SeqStatus::kWaiting && s->num_computed_tokens == 0 && !kv_.has(s->id))
        << "waiting seq " << s->id << " holds state";
  }
}

}  // namespace qserve
