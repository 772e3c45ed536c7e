#include "backend/cpu/cpu_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/half.h"
#include "core/thread_pool.h"

namespace qserve::cpu {

void rms_norm_rows(const float* x, const float* weight, float eps, int64_t T, int64_t H, float* out) {
  ThreadPool::global().parallel_for(T, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* xr = x + t * H;
      double ss = 0.0;
      for (int64_t i = 0; i < H; ++i) ss += static_cast<double>(xr[i]) * xr[i];
      const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(H) + eps));
      float* o = out + t * H;
      for (int64_t i = 0; i < H; ++i) o[i] = weight[i] * (xr[i] * inv);
    }
  });
}

void write_activation_row(const float* row, int64_t dim, int64_t t, Activations& out) {
  if (out.format == ActFormat::kFloat) {
    std::memcpy(out.values.data_as<float>() + t * dim, row, dim * sizeof(float));
    return;
  }
  float amax = 0.0f;
  for (int64_t i = 0; i < dim; ++i) amax = std::max(amax, std::fabs(row[i]));
  const float s = half_to_float(float_to_half(amax / 127.0f));
  int8_t* q = out.values.data_as<int8_t>() + t * dim;
  int64_t qsum = 0;
  for (int64_t i = 0; i < dim; ++i) {
    const float v = s > 0.0f ? std::nearbyint(row[i] / s) : 0.0f;
    q[i] = static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));
    qsum += q[i];
  }
  out.scales.data_as<float>()[t] = s;
  if (out.format == ActFormat::kInt8PerTokenSum) out.sums.data_as<float>()[t] = s * static_cast<float>(qsum);
  if (out.format == ActFormat::kInt8PerTokenCodeSum) out.sums.data_as<int32_t>()[t] = static_cast<int32_t>(qsum);
}

void read_activation_row(const Activations& in, int64_t t, float* out) {
  const int64_t dim = in.dim();
  if (in.format == ActFormat::kFloat) {
    std::memcpy(out, in.values.data_as<float>() + t * dim, dim * sizeof(float));
    return;
  }
  const int8_t* q = in.values.data_as<int8_t>() + t * dim;
  const float s = in.scales.data_as<float>()[t];
  for (int64_t i = 0; i < dim; ++i) out[i] = static_cast<float>(q[i]) * s;
}

void rope(float* x, int64_t T, int64_t heads, const RopeParams& rope, const int32_t* positions) {
  const int64_t D = rope.head_dim;
  const int64_t half = D / 2;
  ThreadPool::global().parallel_for(T, [&](int64_t t0, int64_t t1) {
    std::vector<float> cos_v(half), sin_v(half);
    for (int64_t t = t0; t < t1; ++t) {
      // float32 angle, as transformers computes it (inv_freq * position in f32)
      for (int64_t j = 0; j < half; ++j) {
        const float angle = rope.inv_freq[j] * static_cast<float>(positions[t]);
        cos_v[j] = std::cos(angle);
        sin_v[j] = std::sin(angle);
      }
      for (int64_t h = 0; h < heads; ++h) {
        float* v = x + (t * heads + h) * D;
        for (int64_t j = 0; j < half; ++j) {
          const int64_t a = rope.style == RopeParams::Style::kRotateHalf ? j : 2 * j;
          const int64_t b = rope.style == RopeParams::Style::kRotateHalf ? j + half : 2 * j + 1;
          const float xa = v[a], xb = v[b];
          v[a] = xa * cos_v[j] - xb * sin_v[j];
          v[b] = xb * cos_v[j] + xa * sin_v[j];
        }
      }
    }
  });
}

KvRows split_qkv(const Tensor& qkv, Tensor& q_out, int64_t T, int64_t kv_dim) {
  const int64_t q_dim = T > 0 ? q_out.numel() / T : 0, width = q_dim + 2 * kv_dim;
  QS_CHECK(qkv.dtype() == DType::kF32 && q_out.dtype() == DType::kF32 && qkv.rank() == 2 && qkv.dim(0) == T &&
           qkv.dim(1) == width && q_out.numel() == T * q_dim)
      << "qkv " << qkv.describe() << ", q_out " << q_out.describe() << ", T " << T << ", kv_dim " << kv_dim;
  KvRows kv{Tensor::zeros(DType::kF32, {T, kv_dim}), Tensor::zeros(DType::kF32, {T, kv_dim})};
  const float* x = qkv.data_as<float>();
  for (int64_t t = 0; t < T; ++t) {
    const float* row = x + t * width;
    std::memcpy(q_out.data_as<float>() + t * q_dim, row, q_dim * sizeof(float));
    std::memcpy(kv.k.data_as<float>() + t * kv_dim, row + q_dim, kv_dim * sizeof(float));
    std::memcpy(kv.v.data_as<float>() + t * kv_dim, row + q_dim + kv_dim, kv_dim * sizeof(float));
  }
  return kv;
}

void kv_write(const float* k, const float* v, int64_t T, int64_t kv_heads, int64_t head_dim, const AttentionBatch& batch,
              float* k_pages, float* v_pages) {
  const int64_t P = batch.page_size;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t page = batch.slots[t] / P, slot = batch.slots[t] % P;
    for (int64_t h = 0; h < kv_heads; ++h) {
      const int64_t dst = ((page * kv_heads + h) * P + slot) * head_dim;
      const int64_t src = (t * kv_heads + h) * head_dim;
      std::memcpy(k_pages + dst, k + src, head_dim * sizeof(float));
      std::memcpy(v_pages + dst, v + src, head_dim * sizeof(float));
    }
  }
}

void attention(const float* q, const float* k_pages, const float* v_pages, int64_t heads, int64_t kv_heads, int64_t head_dim,
               const AttentionBatch& batch, float scale, float* out) {
  const int64_t T = batch.num_tokens();
  const int64_t D = head_dim, P = batch.page_size, group = heads / kv_heads;
  std::vector<int32_t> seq_of_token(T);
  for (int64_t s = 0; s < batch.num_seqs(); ++s)
    for (int32_t t = batch.token_offsets[s]; t < batch.token_offsets[s + 1]; ++t) seq_of_token[t] = static_cast<int32_t>(s);
  ThreadPool::global().parallel_for(T * heads, [&](int64_t i0, int64_t i1) {
    std::vector<float> scores;
    std::vector<double> acc(D);
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t t = i / heads, h = i % heads, kvh = h / group;
      const int64_t s = seq_of_token[t];
      const int32_t* pages = batch.page_table.data() + batch.page_table_offsets[s];
      const int64_t p = batch.positions[t];
      const int64_t lo = batch.sliding_window ? std::max<int64_t>(0, p - *batch.sliding_window + 1) : 0;
      const float* qv = q + (t * heads + h) * D;
      auto key_offset = [&](int64_t j) { return ((pages[j / P] * kv_heads + kvh) * P + j % P) * D; };
      scores.resize(p - lo + 1);
      float smax = -INFINITY;
      for (int64_t j = lo; j <= p; ++j) {
        const float* kv = k_pages + key_offset(j);
        double dot = 0.0;
        for (int64_t d = 0; d < D; ++d) dot += static_cast<double>(qv[d]) * kv[d];
        scores[j - lo] = static_cast<float>(dot) * scale;
        smax = std::max(smax, scores[j - lo]);
      }
      double denom = 0.0;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = lo; j <= p; ++j) {
        const double e = std::exp(static_cast<double>(scores[j - lo] - smax));
        denom += e;
        const float* vv = v_pages + key_offset(j);
        for (int64_t d = 0; d < D; ++d) acc[d] += e * vv[d];
      }
      float* o = out + t * heads * D + h * D;
      for (int64_t d = 0; d < D; ++d) o[d] = static_cast<float>(acc[d] / denom);
    }
  });
}

}  // namespace qserve::cpu
