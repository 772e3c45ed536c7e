#include "engine/kv_block_manager.h"

#include "core/error.h"

namespace qserve {

KvBlockManager::KvBlockManager(int64_t num_pages, int page_size) : page_size_(page_size) {
  QS_CHECK(num_pages > 0 && num_pages <= INT32_MAX) << "num_pages " << num_pages;
  QS_CHECK(page_size > 0) << "page_size " << page_size;
  owner_.assign(static_cast<size_t>(num_pages), kFree);
  free_.reserve(static_cast<size_t>(num_pages));
  // Highest id at the bottom of the stack: a fresh manager hands out 0, 1, 2, ...
  for (int64_t p = num_pages - 1; p >= 0; --p) free_.push_back(static_cast<int32_t>(p));
}

int64_t KvBlockManager::pages_for_tokens(int64_t num_tokens) const {
  return num_tokens <= 0 ? 0 : (num_tokens + page_size_ - 1) / page_size_;
}

int64_t KvBlockManager::pages_needed(SeqId seq, int64_t num_tokens) const {
  const int64_t have = static_cast<int64_t>(page_table(seq).size());
  const int64_t want = pages_for_tokens(num_tokens);
  return want > have ? want - have : 0;
}

bool KvBlockManager::reserve(SeqId seq, int64_t num_tokens, std::vector<int32_t>* fresh) {
  QS_CHECK(seq != kFree) << "reserved sequence id";
  const int64_t need = pages_needed(seq, num_tokens);
  if (need > num_free_pages()) return false;
  auto& table = tables_[seq];
  for (int64_t i = 0; i < need; ++i) {
    const int32_t page = free_.back();
    free_.pop_back();
    QS_CHECK(owner_[page] == kFree) << "page " << page << " on the free list is owned";
    owner_[page] = seq;
    table.push_back(page);
    if (fresh) fresh->push_back(page);
  }
  return true;
}

void KvBlockManager::release(SeqId seq) {
  auto it = tables_.find(seq);
  if (it == tables_.end()) return;
  // Reverse order, so the stack hands them out again in the same order.
  for (auto p = it->second.rbegin(); p != it->second.rend(); ++p) {
    QS_CHECK(owner_[*p] == seq) << "page " << *p << " released by a sequence that does not own it";
    owner_[*p] = kFree;
    free_.push_back(*p);
  }
  tables_.erase(it);
}

const std::vector<int32_t>& KvBlockManager::page_table(SeqId seq) const {
  static const std::vector<int32_t> kEmpty;
  auto it = tables_.find(seq);
  return it == tables_.end() ? kEmpty : it->second;
}

void KvBlockManager::check_invariants() const {
  std::vector<int> seen(owner_.size(), 0);
  for (int32_t p : free_) {
    QS_CHECK(p >= 0 && p < num_pages()) << "free page id " << p;
    QS_CHECK(owner_[p] == kFree) << "free page " << p << " has an owner";
    ++seen[p];
  }
  for (const auto& [seq, table] : tables_) {
    for (int32_t p : table) {
      QS_CHECK(p >= 0 && p < num_pages()) << "page id " << p;
      QS_CHECK(owner_[p] == seq) << "page " << p << " in the table of seq " << seq << " owned by " << owner_[p];
      ++seen[p];
    }
  }
  for (size_t p = 0; p < seen.size(); ++p) QS_CHECK(seen[p] == 1) << "page " << p << " seen " << seen[p] << " times";
}

}  // namespace qserve
