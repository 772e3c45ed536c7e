// The FP32 reference ops of the CPU backend, on plain row-major arrays: clear
// scalar code (reductions in double) that every other backend is tested
// against. Threads from core/thread_pool.h split independent rows / heads;
// results do not depend on the thread count.
#pragma once

#include <cstdint>

#include "backend/backend.h"

namespace qserve::cpu {

// out[t] = rms_norm(x[t]) * weight: x, out [T, H]; weight [H].
// out_row(t, values) receives each normalized row (f32, H values).
void rms_norm_rows(const float* x, const float* weight, float eps, int64_t T, int64_t H, float* out);

// One row of float values written into an Activations row in its format:
// kFloat copies; int8 formats quantize per token (docs/qoq-spec.md section 2:
// s = fp16(max|x| / 127), q = clamp(round_half_even(x / s), -127, 127),
// sum = s * sum(q)).
void write_activation_row(const float* row, int64_t dim, int64_t t, Activations& out);

// The inverse, for tests and for float layers fed quantized values: out = q * s.
void read_activation_row(const Activations& in, int64_t t, float* out);

// RoPE in place on x [T, heads, D] at positions [T] (see RopeParams).
void rope(float* x, int64_t T, int64_t heads, const RopeParams& rope, const int32_t* positions);

// One fused q|k|v projection's rows split for rope_kv_write: qkv [T, q_dim +
// 2 kv_dim] F32 (q_dim = q_out.numel() / T); q is copied into q_out [T, q_dim],
// k and v into the returned [T, kv_dim] tensors. Checks the shapes.
struct KvRows {
  Tensor k, v;
};
KvRows split_qkv(const Tensor& qkv, Tensor& q_out, int64_t T, int64_t kv_dim);

// K and V rows [T, Hkv, D] stored at batch.slots in the FP32 page layout of KvLayer.
void kv_write(const float* k, const float* v, int64_t T, int64_t kv_heads, int64_t head_dim, const AttentionBatch& batch,
              float* k_pages, float* v_pages);

// Causal paged attention (see Backend::attention): q [T, Hq, D], out [T, Hq * D].
void attention(const float* q, const float* k_pages, const float* v_pages, int64_t heads, int64_t kv_heads, int64_t head_dim,
               const AttentionBatch& batch, float scale, float* out);

// The same attention, fast: per (sequence, KV head), K and V of the context
// gathered once into contiguous buffers, then scores = Q K^T and out = P V as
// SIMD matmuls (matmul_f32_fast_serial), float softmax; blocks of query rows
// bound the score buffer. Equal to `attention` up to float rounding.
void attention_fast(const float* q, const float* k_pages, const float* v_pages, int64_t heads, int64_t kv_heads, int64_t head_dim,
                    const AttentionBatch& batch, float scale, float* out);

}  // namespace qserve::cpu
