// KV page allocation: a fixed pool of pages of `page_size` token slots each,
// a page table per sequence (logical page i of the sequence -> physical page),
// and usage accounting. The block manager owns no KV memory; the model runner
// does (docs/scheduler.md, "KV pages").
//
// User data: a page handed to a sequence may still hold another request's K/V.
// reserve() reports every page it newly hands out ("fresh" pages); the model
// runner zeroes them before the step that first writes them (zero on
// allocation), so no request can read another's data.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace qserve {

using SeqId = uint64_t;

class KvBlockManager {
 public:
  KvBlockManager(int64_t num_pages, int page_size);

  int page_size() const { return page_size_; }
  int64_t num_pages() const { return static_cast<int64_t>(owner_.size()); }
  int64_t num_free_pages() const { return static_cast<int64_t>(free_.size()); }
  int64_t num_used_pages() const { return num_pages() - num_free_pages(); }
  int64_t num_sequences() const { return static_cast<int64_t>(tables_.size()); }

  // ceil(num_tokens / page_size)
  int64_t pages_for_tokens(int64_t num_tokens) const;
  // Extra pages `seq` needs so that its table covers `num_tokens` token slots.
  int64_t pages_needed(SeqId seq, int64_t num_tokens) const;

  // Grows the page table of `seq` (created on first use) to cover slots
  // [0, num_tokens). All or nothing: false, and nothing changes, when the free
  // pages do not suffice. The newly assigned pages are appended to *fresh.
  bool reserve(SeqId seq, int64_t num_tokens, std::vector<int32_t>* fresh);

  // Returns all pages of `seq` to the free list; no-op for an unknown sequence.
  void release(SeqId seq);

  bool has(SeqId seq) const { return tables_.count(seq) != 0; }
  // [num logical pages] physical page ids; empty for an unknown sequence.
  const std::vector<int32_t>& page_table(SeqId seq) const;

  // Aborts (QS_CHECK) unless every page is either free (once) or in exactly
  // one page table, at the place the table says. O(num_pages); for tests.
  void check_invariants() const;

 private:
  static constexpr SeqId kFree = ~SeqId{0};
  int page_size_;
  std::vector<SeqId> owner_;    // [num_pages] owning sequence, or kFree
  std::vector<int32_t> free_;   // free page ids, a stack (recently freed pages reused first)
  std::unordered_map<SeqId, std::vector<int32_t>> tables_;
};

}  // namespace qserve
