// A paged-cache scenario for the attention op tests: random q/k/v for every
// position of every sequence, written by the CPU reference into pages that
// are scattered over the pool (shuffled page ids, spare pages in between).
#pragma once

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "backend/cpu/paged_attention.h"
#include "backend/cpu/rope.h"
#include "core/half.h"
#include "cuda_test_util.h"

namespace qserve::test {

struct AttentionScenario {
  AttentionShape shape;
  KvPageLayout layout;
  RopeStyle style = RopeStyle::kRotateHalf;
  std::vector<int32_t> context_lens;  // [B]
  std::vector<int32_t> page_table;    // [B, stride]
  int32_t stride = 0, num_pages = 0;
  std::vector<uint8_t> k_pool, v_pool;
  std::vector<float> rope_table;
  // every position of every sequence, in sequence order
  std::vector<uint16_t> qkv;        // [T_all, (Hq + 2 Hkv) D]
  std::vector<uint16_t> q_all;      // [T_all, Hq, D] after RoPE
  std::vector<int32_t> seq_start;   // [B + 1] row of each sequence's position 0 in qkv / q_all
  std::vector<int32_t> positions, slots;

  PagedKvCache host_cache() {
    return {.k_pages = k_pool.data(), .v_pages = v_pool.data(), .num_pages = num_pages, .layout = layout};
  }
  int slot_of(int b, int pos) const {
    return page_table[b * stride + pos / layout.page_size] * layout.page_size + pos % layout.page_size;
  }
  int64_t row_elems() const { return static_cast<int64_t>(shape.num_q_heads + 2 * shape.num_kv_heads) * shape.head_dim; }
  QkvInput qkv_input(const uint16_t* base) const {
    const int64_t row = row_elems(), d = shape.head_dim;
    return {.q = base, .k = base + shape.num_q_heads * d, .v = base + (shape.num_q_heads + shape.num_kv_heads) * d,
            .q_stride = row, .k_stride = row, .v_stride = row};
  }
};

// Builds the scenario and writes every position into the (host) cache.
inline AttentionScenario make_scenario(AttentionShape shape, KvDtype dtype, int page_size, RopeStyle style,
                                       std::vector<int32_t> ctx, std::mt19937& rng) {
  AttentionScenario s;
  s.shape = shape;
  s.style = style;
  s.layout = {.page_size = page_size, .num_kv_heads = shape.num_kv_heads, .head_dim = shape.head_dim, .dtype = dtype};
  s.context_lens = ctx;
  int total_pages = 0, max_ctx = 1;
  for (int c : ctx) {
    s.stride = std::max(s.stride, (c + page_size - 1) / page_size);
    total_pages += (c + page_size - 1) / page_size;
    max_ctx = std::max(max_ctx, c);
  }
  s.stride = std::max(s.stride, 1);
  s.num_pages = total_pages + total_pages / 3 + 2;  // spare pages in between
  std::vector<int32_t> perm(s.num_pages);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  s.page_table.assign(ctx.size() * s.stride, 0);
  int next = 0;
  for (size_t b = 0; b < ctx.size(); ++b)
    for (int j = 0; j < (ctx[b] + page_size - 1) / page_size; ++j) s.page_table[b * s.stride + j] = perm[next++];
  s.k_pool.resize(static_cast<size_t>(s.num_pages) * s.layout.page_bytes());
  s.v_pool.resize(s.k_pool.size());
  for (auto& x : s.k_pool) x = static_cast<uint8_t>(rng());
  for (auto& x : s.v_pool) x = static_cast<uint8_t>(rng());
  RopeConfig rope{.theta = 500000.f, .style = style, .llama3_factor = 8.f};
  s.rope_table = build_rope_table(rope, shape.head_dim, max_ctx + 1);
  s.seq_start.push_back(0);
  for (size_t b = 0; b < ctx.size(); ++b) {
    for (int p = 0; p < ctx[b]; ++p) s.positions.push_back(p), s.slots.push_back(s.slot_of(b, p));
    s.seq_start.push_back(s.seq_start.back() + ctx[b]);
  }
  const int T = s.seq_start.back();
  s.qkv = random_half(rng, static_cast<size_t>(T) * s.row_elems());
  s.q_all.resize(static_cast<size_t>(T) * shape.num_q_heads * shape.head_dim);
  rope_kv_write_cpu(s.qkv_input(s.qkv.data()), {T, s.positions.data(), s.slots.data()}, shape, style,
                    s.rope_table.data(), s.q_all.data(), s.host_cache());
  return s;
}

}  // namespace qserve::test
