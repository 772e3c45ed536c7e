#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "engine/kv_block_manager.h"

namespace qserve {
namespace {

TEST(KvBlockManager, ReserveGrowsPageTablesAndReportsFreshPages) {
  KvBlockManager kv(8, 4);
  EXPECT_EQ(kv.num_free_pages(), 8);
  EXPECT_EQ(kv.pages_for_tokens(0), 0);
  EXPECT_EQ(kv.pages_for_tokens(1), 1);
  EXPECT_EQ(kv.pages_for_tokens(4), 1);
  EXPECT_EQ(kv.pages_for_tokens(5), 2);

  std::vector<int32_t> fresh;
  ASSERT_TRUE(kv.reserve(1, 5, &fresh));  // 2 pages
  EXPECT_EQ(fresh.size(), 2u);
  EXPECT_EQ(kv.page_table(1), fresh);
  fresh.clear();
  ASSERT_TRUE(kv.reserve(1, 8, &fresh));  // still 2 pages: nothing fresh
  EXPECT_TRUE(fresh.empty());
  ASSERT_TRUE(kv.reserve(1, 9, &fresh));
  EXPECT_EQ(fresh.size(), 1u);
  EXPECT_EQ(kv.page_table(1).size(), 3u);
  EXPECT_EQ(kv.num_used_pages(), 3);
  kv.check_invariants();
}

TEST(KvBlockManager, ReserveIsAllOrNothing) {
  KvBlockManager kv(4, 16);
  std::vector<int32_t> fresh;
  ASSERT_TRUE(kv.reserve(1, 40, &fresh));  // 3 pages
  EXPECT_EQ(kv.pages_needed(2, 32), 2);
  EXPECT_FALSE(kv.reserve(2, 32, &fresh));  // needs 2, 1 free
  EXPECT_FALSE(kv.has(2));
  EXPECT_EQ(kv.num_free_pages(), 1);
  EXPECT_EQ(fresh.size(), 3u);
  kv.release(1);
  EXPECT_EQ(kv.num_free_pages(), 4);
  EXPECT_FALSE(kv.has(1));
  EXPECT_TRUE(kv.page_table(1).empty());
  kv.release(1);  // unknown: no-op
  kv.check_invariants();
}

// Random reserve/release traffic: pages are never shared, every page a sequence
// gets was reported fresh to it, and all pages come back.
TEST(KvBlockManager, RandomTrafficKeepsOwnershipExclusive) {
  std::mt19937 rng(1234);
  for (int page_size : {1, 3, 16}) {
    KvBlockManager kv(37, page_size);
    std::map<SeqId, std::set<int32_t>> fresh_of;
    std::map<SeqId, int64_t> tokens_of;
    for (int it = 0; it < 5000; ++it) {
      const SeqId seq = rng() % 12;
      if (rng() % 4 == 0) {
        kv.release(seq);
        fresh_of.erase(seq);
        tokens_of.erase(seq);
      } else {
        const int64_t want = tokens_of[seq] + 1 + rng() % (3 * page_size);
        const int64_t free_before = kv.num_free_pages();
        const int64_t need = kv.pages_needed(seq, want);
        std::vector<int32_t> fresh;
        const bool ok = kv.reserve(seq, want, &fresh);
        EXPECT_EQ(ok, need <= free_before);
        if (ok) {
          tokens_of[seq] = want;
          EXPECT_EQ(static_cast<int64_t>(fresh.size()), need);
          fresh_of[seq].insert(fresh.begin(), fresh.end());
          EXPECT_EQ(kv.num_free_pages(), free_before - need);
          EXPECT_GE(static_cast<int64_t>(kv.page_table(seq).size()) * page_size, want);
        } else {
          EXPECT_TRUE(fresh.empty());
          EXPECT_EQ(kv.num_free_pages(), free_before);
        }
      }
      if (kv.has(seq)) {
        const auto& table = kv.page_table(seq);
        EXPECT_EQ(std::set<int32_t>(table.begin(), table.end()), fresh_of[seq]);
      }
      if (it % 97 == 0) kv.check_invariants();
    }
    for (SeqId s = 0; s < 12; ++s) kv.release(s);
    EXPECT_EQ(kv.num_free_pages(), 37);
    kv.check_invariants();
  }
}

}  // namespace
}  // namespace qserve
