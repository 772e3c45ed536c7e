// The BPE model of a Hugging Face tokenizer.json ("model": {"type": "BPE"}):
// vocab, ranked merges, byte fallback ("<0x41>" tokens), unk, and a
// word -> ids cache.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace qserve {

class BpeModel {
 public:
  // Parses vocab and merges ("a b" strings or ["a", "b"] lists). Throws
  // Error(kCorruptData) on a merge whose parts or result are not in vocab.
  explicit BpeModel(const nlohmann::json& model);

  // Appends the ids of one pre-tokenized piece.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  const std::unordered_map<std::string, int32_t>& vocab() const { return vocab_; }
  // Largest id + 1 in the model's vocab.
  int32_t size() const { return static_cast<int32_t>(id_to_token_.size()); }
  const std::string* id_to_token(int32_t id) const;

 private:
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  std::optional<Merge> find_merge(int32_t a, int32_t b) const;
  void encode_uncached(std::string_view word, std::vector<int32_t>& out) const;
  void merge_all(std::vector<int32_t>& ids) const;

  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::string> id_to_token_;  // [size()] ("" where no token has the id)
  std::unordered_map<uint64_t, Merge> merges_;
  std::optional<int32_t> unk_id_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
  int32_t byte_ids_[256];  // "<0xXX>" ids, -1 when absent

  // Word -> ids, for words up to kMaxCachedWord bytes.
  static constexpr size_t kMaxCachedWord = 256;
  static constexpr size_t kMaxCacheEntries = 1 << 17;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace qserve
