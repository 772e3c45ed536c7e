// TEST DOUBLE: a deterministic stand-in for a model, for scheduler and engine
// tests. It keeps a paged "KV cache" of one 64-bit value per token slot, and
// a shadow record of which (sequence, position) wrote each slot. The logits of
// position p are a hash of the values it reads back through the page table for
// positions 0..p, so a wrong page table, a page shared by two sequences or a
// stale page changes the tokens; the shadow turns any such read into a counted
// violation. Greedy output is a pure function of the token history, however the
// steps were batched or chunked, like a batch-invariant real model.
#pragma once

#include <chrono>
#include <cmath>
#include <thread>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/model_runner.h"

namespace qserve::fakes {

inline uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

class FakeModelRunner : public ModelRunner {
 public:
  explicit FakeModelRunner(int vocab_size = 64, int max_model_len = 4096)
      : vocab_size_(vocab_size), max_model_len_(max_model_len) {}

  std::string name() const override { return "fake"; }
  std::string architecture() const override { return "fake"; }
  int vocab_size() const override { return vocab_size_; }
  int max_model_len() const override { return max_model_len_; }
  int64_t kv_bytes_per_page(int page_size) const override { return 8LL * page_size; }

  void allocate_kv_cache(int64_t num_pages, int page_size) override {
    page_size_ = page_size;
    values_.assign(static_cast<size_t>(num_pages * page_size), 0xdeadbeefULL);  // "garbage" until zeroed
    writer_seq_.assign(values_.size(), kNobody);
    writer_pos_.assign(values_.size(), -1);
  }

  std::span<const float> execute(const RunnerBatch& batch) override {
    if (step_delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(step_delay_us));
    ++num_steps;
    max_batch_seqs = std::max<int>(max_batch_seqs, static_cast<int>(batch.seqs.size()));
    max_batch_tokens = std::max(max_batch_tokens, batch.num_tokens);
    for (int32_t page : batch.fresh_pages) {  // zero on allocation
      for (int s = 0; s < page_size_; ++s) {
        const size_t slot = static_cast<size_t>(page) * page_size_ + s;
        values_[slot] = 0;
        writer_seq_[slot] = kNobody;
        writer_pos_[slot] = -1;
      }
    }
    logits_.assign(static_cast<size_t>(batch.num_samples) * vocab_size_, 0.0f);
    int row = 0;
    int counted = 0;
    for (const RunnerSeq& rs : batch.seqs) {
      const int n = static_cast<int>(rs.token_ids.size());
      counted += n;
      if (static_cast<int64_t>(rs.page_table.size()) * page_size_ < rs.start + n) ++violations;
      for (int i = 0; i < n; ++i) {  // write K/V of the new tokens
        const size_t slot = slot_of(rs, rs.start + i);
        values_[slot] = mix64(static_cast<uint64_t>(rs.token_ids[i]) * 1000003ULL + (rs.start + i) + 1);
        writer_seq_[slot] = rs.seq;
        writer_pos_[slot] = rs.start + i;
      }
      if (!rs.sample) continue;
      // "Attention" of the last position over the whole context, read back.
      const int last = rs.start + n - 1;
      uint64_t h = 0x9e3779b97f4a7c15ULL;
      for (int p = 0; p <= last; ++p) {
        const size_t slot = slot_of(rs, p);
        if (writer_seq_[slot] != rs.seq || writer_pos_[slot] != p) ++violations;
        h = mix64(h ^ values_[slot]);
      }
      float* out = logits_.data() + static_cast<size_t>(row) * vocab_size_;
      for (int v = 0; v < vocab_size_; ++v) {
        out[v] = static_cast<float>(mix64(h + v) % 100000) / 10000.0f;  // [0, 10)
      }
      ++row;
    }
    if (row != batch.num_samples || counted != batch.num_tokens) ++violations;
    return logits_;
  }

  // Reads that returned something other than the sequence's own K/V, pages too
  // short for a chunk, or inconsistent batch counts. Must stay 0.
  int64_t violations = 0;
  int64_t num_steps = 0;
  int step_delay_us = 0;  // emulate a slower model (timing-dependent tests)
  int max_batch_seqs = 0;
  int max_batch_tokens = 0;

 private:
  static constexpr SeqId kNobody = ~SeqId{0};
  size_t slot_of(const RunnerSeq& rs, int pos) const {
    const size_t logical = static_cast<size_t>(pos / page_size_);
    if (logical >= rs.page_table.size()) return 0;  // counted as a violation by the caller
    return static_cast<size_t>(rs.page_table[logical]) * page_size_ + pos % page_size_;
  }

  int vocab_size_;
  int max_model_len_;
  int page_size_ = 1;
  std::vector<uint64_t> values_;      // [num_pages * page_size]
  std::vector<SeqId> writer_seq_;     // shadow: who wrote each slot
  std::vector<int> writer_pos_;
  std::vector<float> logits_;
};

}  // namespace qserve::fakes
