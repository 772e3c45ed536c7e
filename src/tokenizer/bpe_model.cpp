#include "tokenizer/bpe_model.h"

#include <fmt/format.h>

#include <limits>
#include <queue>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace qserve {
namespace {

using json = nlohmann::json;

std::string optional_string(const json& m, const char* key) {
  if (!m.contains(key) || m.at(key).is_null()) return "";
  return m.at(key).get<std::string>();
}

}  // namespace

BpeModel::BpeModel(const json& m) {
  const json& vocab = m.at("vocab");
  if (!vocab.is_object()) fail(ErrorCode::kCorruptData, "tokenizer.json: model.vocab is not an object");
  vocab_.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const int64_t id = it.value().get<int64_t>();
    if (id < 0 || id >= (int64_t{1} << 24))
      fail(ErrorCode::kCorruptData, "tokenizer.json: token id {} out of range", id);
    vocab_[it.key()] = static_cast<int32_t>(id);
    if (static_cast<size_t>(id) >= id_to_token_.size()) id_to_token_.resize(id + 1);
    id_to_token_[id] = it.key();
  }
  continuing_subword_prefix_ = optional_string(m, "continuing_subword_prefix");
  end_of_word_suffix_ = optional_string(m, "end_of_word_suffix");
  fuse_unk_ = m.value("fuse_unk", false);
  byte_fallback_ = m.value("byte_fallback", false);
  ignore_merges_ = m.value("ignore_merges", false);
  if (const std::string unk = optional_string(m, "unk_token"); !unk.empty()) {
    if (auto it = vocab_.find(unk); it != vocab_.end()) unk_id_ = it->second;
  }
  for (int b = 0; b < 256; ++b) {
    auto it = vocab_.find(fmt::format("<0x{:02X}>", b));
    byte_ids_[b] = it == vocab_.end() ? -1 : it->second;
  }

  const json& merges = m.at("merges");
  merges_.reserve(merges.size());
  int32_t rank = 0;
  for (const json& entry : merges) {
    std::string a, b;
    if (entry.is_string()) {
      const std::string s = entry.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        fail(ErrorCode::kCorruptData, "tokenizer.json: merge '{}' is not two tokens", s);
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (entry.is_array() && entry.size() == 2) {
      a = entry[0].get<std::string>();
      b = entry[1].get<std::string>();
    } else {
      fail(ErrorCode::kCorruptData, "tokenizer.json: merge {} is malformed", rank);
    }
    auto ia = vocab_.find(a), ib = vocab_.find(b);
    if (ia == vocab_.end() || ib == vocab_.end())
      fail(ErrorCode::kCorruptData, "tokenizer.json: merge '{} {}' uses a token not in vocab", a, b);
    const std::string& cp = continuing_subword_prefix_;
    const std::string merged = a + (!cp.empty() && b.starts_with(cp) ? b.substr(cp.size()) : b);
    auto ir = vocab_.find(merged);
    if (ir == vocab_.end())
      fail(ErrorCode::kCorruptData, "tokenizer.json: merge '{} {}' makes '{}', not in vocab", a, b, merged);
    merges_.insert_or_assign(pair_key(ia->second, ib->second), Merge{rank, ir->second});
    ++rank;
  }
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size()) return nullptr;
  return &id_to_token_[id];
}

std::optional<BpeModel::Merge> BpeModel::find_merge(int32_t a, int32_t b) const {
  auto it = merges_.find(pair_key(a, b));
  if (it == merges_.end()) return std::nullopt;
  return it->second;
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  const bool cacheable = word.size() <= kMaxCachedWord;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = cache_.find(std::string(word));
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t start = out.size();
  encode_uncached(word, out);
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kMaxCacheEntries) cache_.clear();
    cache_.emplace(std::string(word), std::vector<int32_t>(out.begin() + start, out.end()));
  }
}

// Hugging Face's Word::merge_all, step for step (the same queue order and the
// same test for stale entries, so ties and odd vocabularies merge alike):
// a queue of (rank, position) pairs, lowest rank first, then leftmost.
void BpeModel::merge_all(std::vector<int32_t>& ids) const {
  struct Symbol {
    int32_t id;
    int32_t prev, next;  // -1: none
    bool removed;
  };
  struct Entry {
    int32_t rank;
    int32_t pos;
    int32_t result;
    bool operator<(const Entry& o) const {  // priority_queue pops the largest
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  const auto n = static_cast<int32_t>(ids.size());
  if (n < 2) return;
  std::vector<Symbol> sym(n);
  for (int32_t i = 0; i < n; ++i) sym[i] = {ids[i], i - 1, i + 1 < n ? i + 1 : -1, false};
  std::vector<Entry> heap;
  heap.reserve(n);
  for (int32_t i = 0; i + 1 < n; ++i)
    if (auto m = find_merge(ids[i], ids[i + 1])) heap.push_back({m->rank, i, m->result});
  std::priority_queue<Entry> queue(std::less<Entry>(), std::move(heap));
  while (!queue.empty()) {
    const Entry top = queue.top();
    queue.pop();
    Symbol& cur = sym[top.pos];
    if (cur.removed || cur.next < 0) continue;
    const int32_t next_pos = cur.next;
    const Symbol right = sym[next_pos];
    const auto m = find_merge(cur.id, right.id);
    if (!m || m->result != top.result) continue;  // a stale entry
    cur.id = top.result;
    cur.next = right.next;
    sym[next_pos].removed = true;
    if (right.next >= 0) sym[right.next].prev = top.pos;
    if (cur.prev >= 0)
      if (auto p = find_merge(sym[cur.prev].id, cur.id)) queue.push({p->rank, cur.prev, p->result});
    if (cur.next >= 0)
      if (auto q = find_merge(cur.id, sym[cur.next].id)) queue.push({q->rank, top.pos, q->result});
  }
  ids.clear();
  for (int32_t i = 0; i < n; ++i)
    if (!sym[i].removed) ids.push_back(sym[i].id);
}

// Hugging Face's BPE::merge_word: characters to ids (byte
// fallback, unk), then the lowest-ranked adjacent pair merged, leftmost first,
// until no pair has a merge.
void BpeModel::encode_uncached(std::string_view word, std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    if (auto it = vocab_.find(std::string(word)); it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  std::vector<int32_t> ids;
  ids.reserve(word.size());
  int32_t pending_unk = -1;  // a (fused) unk not yet appended
  std::string s;
  size_t pos = 0;
  while (pos < word.size()) {
    const size_t b = pos;
    const bool is_first = b == 0;
    pos += std::min<size_t>(unicode::utf8_seq_len(static_cast<uint8_t>(word[b])), word.size() - b);
    const bool is_last = pos == word.size();
    s.assign(word.substr(b, pos - b));
    if (!is_first && !continuing_subword_prefix_.empty()) s.insert(0, continuing_subword_prefix_);
    if (is_last && !end_of_word_suffix_.empty()) s += end_of_word_suffix_;
    if (auto it = vocab_.find(s); it != vocab_.end()) {
      if (pending_unk >= 0) {
        ids.push_back(pending_unk);
        pending_unk = -1;
      }
      ids.push_back(it->second);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (char c : s) all = all && byte_ids_[static_cast<uint8_t>(c)] >= 0;
      if (all) {
        for (char c : s) ids.push_back(byte_ids_[static_cast<uint8_t>(c)]);
        continue;
      }
    }
    if (!unk_id_) continue;  // no unk token: the character is dropped, as Hugging Face's BPE does
    if (pending_unk >= 0 && !fuse_unk_) ids.push_back(pending_unk);
    pending_unk = *unk_id_;
  }
  if (pending_unk >= 0) ids.push_back(pending_unk);

  merge_all(ids);
  out.insert(out.end(), ids.begin(), ids.end());
}

}  // namespace qserve
