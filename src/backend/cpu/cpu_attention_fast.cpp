// The fast CPU attention (see cpu_ops.h): the reference's math as matmuls.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/matmul.h"
#include "core/thread_pool.h"

namespace qserve::cpu {

void attention_fast(const float* q, const float* k_pages, const float* v_pages, int64_t heads, int64_t kv_heads, int64_t head_dim,
                    const AttentionBatch& batch, float scale, float* out) {
  const int64_t D = head_dim, P = batch.page_size, group = heads / kv_heads;
  const int64_t S = batch.num_seqs();
  constexpr int64_t kRowBlock = 96;  // query rows (token x head of the group) per score block
  ThreadPool::global().parallel_for(S * kv_heads, [&](int64_t i0, int64_t i1) {
    std::vector<float> kc, vt, qb, scores, ob;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t s = i / kv_heads, kvh = i % kv_heads;
      const int64_t t0 = batch.token_offsets[s], t1 = batch.token_offsets[s + 1];
      const int64_t ctx = batch.positions[t1 - 1] + 1;  // keys this sequence's new tokens can see
      const int32_t* pages = batch.page_table.data() + batch.page_table_offsets[s];
      // K [ctx, D] and V^T [D, ctx] of this head, contiguous.
      kc.resize(ctx * D);
      vt.resize(D * ctx);
      for (int64_t j = 0; j < ctx; ++j) {
        const int64_t off = ((pages[j / P] * kv_heads + kvh) * P + j % P) * D;
        std::memcpy(kc.data() + j * D, k_pages + off, D * sizeof(float));
        for (int64_t d = 0; d < D; ++d) vt[d * ctx + j] = v_pages[off + d];
      }
      // Rows r = (token t0 + r / group, head kvh * group + r % group).
      const int64_t rows = (t1 - t0) * group;
      for (int64_t r0 = 0; r0 < rows; r0 += kRowBlock) {
        const int64_t nr = std::min(kRowBlock, rows - r0);
        const int64_t last_pos = batch.positions[t0 + (r0 + nr - 1) / group];
        const int64_t first_pos = batch.positions[t0 + r0 / group];
        const int64_t lo = batch.sliding_window ? std::max<int64_t>(0, first_pos - *batch.sliding_window + 1) : 0;
        const int64_t hi = last_pos + 1;  // keys [lo, hi) cover the block
        const int64_t n = hi - lo;
        qb.resize(nr * D);
        for (int64_t r = 0; r < nr; ++r) {
          const int64_t t = t0 + (r0 + r) / group, h = kvh * group + (r0 + r) % group;
          std::memcpy(qb.data() + r * D, q + (t * heads + h) * D, D * sizeof(float));
        }
        scores.resize(nr * n);
        matmul_f32_fast_serial(qb.data(), kc.data() + lo * D, nullptr, scores.data(), nr, D, n);
        for (int64_t r = 0; r < nr; ++r) {
          const int64_t p = batch.positions[t0 + (r0 + r) / group];
          const int64_t rlo = batch.sliding_window ? std::max<int64_t>(0, p - *batch.sliding_window + 1) : 0;
          float* sr = scores.data() + r * n;
          float mx = -INFINITY;
          for (int64_t j = rlo; j <= p; ++j) mx = std::max(mx, sr[j - lo] * scale);
          float denom = 0.0f;
          for (int64_t j = 0; j < n; ++j) {
            const int64_t key = lo + j;
            const float e = (key < rlo || key > p) ? 0.0f : std::exp(sr[j] * scale - mx);
            sr[j] = e;
            denom += e;
          }
          const float inv = 1.0f / denom;
          for (int64_t j = 0; j < n; ++j) sr[j] *= inv;
        }
        // out rows = P [nr, n] . V [n, D]  (V^T rows [D, ctx], columns lo..hi)
        ob.resize(nr * D);
        if (lo == 0 && n == ctx) {
          matmul_f32_fast_serial(scores.data(), vt.data(), nullptr, ob.data(), nr, n, D);
        } else {  // a window: V^T columns [lo, hi) made contiguous
          std::vector<float> vw(D * n);
          for (int64_t d = 0; d < D; ++d) std::memcpy(vw.data() + d * n, vt.data() + d * ctx + lo, n * sizeof(float));
          matmul_f32_fast_serial(scores.data(), vw.data(), nullptr, ob.data(), nr, n, D);
        }
        for (int64_t r = 0; r < nr; ++r) {
          const int64_t t = t0 + (r0 + r) / group, h = kvh * group + (r0 + r) % group;
          std::memcpy(out + (t * heads + h) * D, ob.data() + r * D, D * sizeof(float));
        }
      }
    }
  });
}

}  // namespace qserve::cpu
