#include "backend/cpu/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "core/thread_pool.h"

namespace qserve {

namespace {

void check_shape(const AttentionShape& shape, const KvPageLayout& layout) {
  QS_CHECK(shape.num_kv_heads > 0 && shape.num_q_heads % shape.num_kv_heads == 0)
      << "heads " << shape.num_q_heads << "/" << shape.num_kv_heads;
  QS_CHECK(layout.num_kv_heads == shape.num_kv_heads && layout.head_dim == shape.head_dim)
      << "cache layout does not match the attention shape";
  QS_CHECK(shape.head_dim % 32 == 0) << "head_dim " << shape.head_dim;
}

}  // namespace

void rope_kv_write_cpu(const QkvInput& in, const KvWriteBatch& batch, const AttentionShape& shape, RopeStyle style,
                       const float* rope_table, uint16_t* q_out, const PagedKvCache& cache) {
  check_shape(shape, cache.layout);
  const int d = shape.head_dim, hq = shape.num_q_heads, hkv = shape.num_kv_heads;
  const KvPageLayout& layout = cache.layout;
  std::vector<float> x(d);
  std::vector<uint16_t> h(d);
  for (int t = 0; t < batch.num_tokens; ++t) {
    const float* cs = rope_table + static_cast<int64_t>(batch.positions[t]) * d;  // [d/2][2]
    const int slot = batch.slot_mapping[t];
    for (int head = 0; head < hq + 2 * hkv; ++head) {
      const int kind = head < hq ? 0 : head < hq + hkv ? 1 : 2;  // q, k, v
      const int hh = kind == 0 ? head : kind == 1 ? head - hq : head - hq - hkv;
      const uint16_t* src = kind == 0 ? in.q + t * in.q_stride : kind == 1 ? in.k + t * in.k_stride : in.v + t * in.v_stride;
      const uint16_t* bias = kind == 0 ? in.q_bias : kind == 1 ? in.k_bias : in.v_bias;
      for (int i = 0; i < d; ++i) {
        x[i] = half_to_float(src[hh * d + i]);
        if (bias) x[i] = kv_add_rn(x[i], half_to_float(bias[hh * d + i]));
      }
      if (kind != 2) {
        for (int i = 0; i < d / 2; ++i) {
          int a, b;
          rope_pair(style, d, i, a, b);
          float y0, y1;
          rope_rotate(x[a], x[b], cs[2 * i], cs[2 * i + 1], y0, y1);
          x[a] = y0;
          x[b] = y1;
        }
      }
      for (int i = 0; i < d; ++i) h[i] = float_to_half(x[i]);
      if (kind == 0) {
        std::copy(h.begin(), h.end(), q_out + (static_cast<int64_t>(t) * hq + hh) * d);
      } else if (slot >= 0) {
        uint8_t* pool = kind == 2 ? cache.v_pages : cache.k_pages;
        const int64_t page = slot / layout.page_size;
        QS_CHECK(page < cache.num_pages) << "slot " << slot << " beyond the cache";
        kv_write_token(layout, pool + page * layout.page_bytes(), hh, slot % layout.page_size, h.data());
      }
    }
  }
}

void paged_attention_cpu(const uint16_t* q, const AttentionShape& shape, const PagedKvCache& cache,
                         const PagedAttentionBatch& batch, float softmax_scale, uint16_t* out) {
  check_shape(shape, cache.layout);
  const KvPageLayout& layout = cache.layout;
  const int d = shape.head_dim, hq = shape.num_q_heads, hkv = shape.num_kv_heads;
  const int group = hq / hkv;
  // One task per (sequence, KV head): dequantize its context once, then serve
  // every new token and query head of the group.
  ThreadPool::global().parallel_for(static_cast<int64_t>(batch.batch) * hkv, [&](int64_t begin, int64_t end) {
    std::vector<float> k, v, scores, acc(d), qf(d);
    for (int64_t task = begin; task < end; ++task) {
      const int b = static_cast<int>(task / hkv), kvh = static_cast<int>(task % hkv);
      const int ctx = batch.context_lens[b];
      const int q0 = batch.q_starts[b], num_new = batch.q_starts[b + 1] - q0;
      QS_CHECK(num_new <= ctx) << "sequence " << b << ": " << num_new << " new tokens, context " << ctx;
      k.assign(static_cast<size_t>(ctx) * d, 0.f);
      v.assign(static_cast<size_t>(ctx) * d, 0.f);
      for (int pos = 0; pos < ctx; ++pos) {
        const int64_t page = batch.page_table[static_cast<int64_t>(b) * batch.page_table_stride + pos / layout.page_size];
        QS_CHECK(page >= 0 && page < cache.num_pages) << "page " << page;
        const int slot = pos % layout.page_size;
        kv_read_token(layout, cache.k_pages + page * layout.page_bytes(), kvh, slot, &k[static_cast<size_t>(pos) * d]);
        kv_read_token(layout, cache.v_pages + page * layout.page_bytes(), kvh, slot, &v[static_cast<size_t>(pos) * d]);
      }
      for (int i = 0; i < num_new; ++i) {
        const int t = q0 + i;
        const int last = ctx - num_new + i;  // causal: keys 0..last
        for (int g = 0; g < group; ++g) {
          const int h = kvh * group + g;
          const uint16_t* qh = q + (static_cast<int64_t>(t) * hq + h) * d;
          for (int e = 0; e < d; ++e) qf[e] = half_to_float(qh[e]);
          scores.resize(last + 1);
          float mx = -INFINITY;
          for (int j = 0; j <= last; ++j) {
            double s = 0;
            for (int e = 0; e < d; ++e) s += static_cast<double>(qf[e]) * k[static_cast<size_t>(j) * d + e];
            scores[j] = static_cast<float>(s) * softmax_scale;
            mx = std::max(mx, scores[j]);
          }
          double sum = 0;
          for (int j = 0; j <= last; ++j) {
            scores[j] = std::exp(scores[j] - mx);
            sum += scores[j];
          }
          std::fill(acc.begin(), acc.end(), 0.f);
          for (int j = 0; j <= last; ++j) {
            const float p = static_cast<float>(scores[j] / sum);
            for (int e = 0; e < d; ++e) acc[e] += p * v[static_cast<size_t>(j) * d + e];
          }
          uint16_t* oh = out + (static_cast<int64_t>(t) * hq + h) * d;
          for (int e = 0; e < d; ++e) oh[e] = float_to_half(acc[e]);
        }
      }
    }
  });
}

}  // namespace qserve
